/**
 * The least of /openapi/v3 that kubectl needs: per group/version, the patch operations of each
 * resource declaring the `fieldValidation` query parameter, so that kubectl leaves validation to the
 * server (`--validate=strict` becomes `fieldValidation=Strict`) instead of validating against schemas
 * this server does not publish; and the schemas of custom resources, for `kubectl explain`. Built-in
 * kinds have no schema here: kubectl falls back to its compiled-in types for strategic merge patches.
 */
import { createHash } from 'node:crypto';
import { apiVersionOf, type ResourceRegistry, type ResourceType } from './resources.js';

function groupVersionPath(group: string, version: string): string {
  return group ? `apis/${group}/${version}` : `api/${version}`;
}

function groupVersions(registry: ResourceRegistry): Array<{ group: string; version: string }> {
  const seen = new Map<string, { group: string; version: string }>();
  for (const type of registry.all()) seen.set(`${type.group}/${type.version}`, { group: type.group, version: type.version });
  return [...seen.values()];
}

export function openApiRoot(registry: ResourceRegistry): Record<string, unknown> {
  const paths: Record<string, { serverRelativeURL: string }> = {};
  for (const { group, version } of groupVersions(registry)) {
    const document = JSON.stringify(openApiGroupVersion(registry, group, version));
    const hash = createHash('sha512').update(document).digest('hex').slice(0, 64).toUpperCase();
    paths[groupVersionPath(group, version)] = { serverRelativeURL: `/openapi/v3/${groupVersionPath(group, version)}?hash=${hash}` };
  }
  return { paths };
}

function schemaName(type: ResourceType): string {
  const reversedGroup = (type.group || 'core').split('.').reverse().join('.');
  return `${reversedGroup}.${type.version}.${type.kind}`;
}

function operation(type: ResourceType, action: string): Record<string, unknown> {
  return {
    operationId: `${action}${type.kind}`,
    'x-kubernetes-action': action,
    'x-kubernetes-group-version-kind': { group: type.group, version: type.version, kind: type.kind },
    parameters: [
      { name: 'dryRun', in: 'query', schema: { type: 'string', uniqueItems: true } },
      { name: 'fieldManager', in: 'query', schema: { type: 'string', uniqueItems: true } },
      { name: 'fieldValidation', in: 'query', schema: { type: 'string', uniqueItems: true } },
    ],
    responses: { '200': { description: 'OK' } },
  };
}

export function openApiGroupVersion(registry: ResourceRegistry, group: string, version: string): Record<string, unknown> | undefined {
  const types = registry.all().filter((type) => type.group === group && type.version === version);
  if (types.length === 0) return undefined;
  const paths: Record<string, unknown> = {};
  const schemas: Record<string, unknown> = {};
  for (const type of types) {
    const base = `/${groupVersionPath(group, version)}${type.namespaced ? '/namespaces/{namespace}' : ''}/${type.resource}`;
    paths[base] = { post: operation(type, 'post') };
    paths[`${base}/{name}`] = { put: operation(type, 'put'), patch: operation(type, 'patch') };
    if (type.custom) {
      schemas[schemaName(type)] = {
        ...(type.schema ?? { type: 'object', 'x-kubernetes-preserve-unknown-fields': true }),
        'x-kubernetes-group-version-kind': [{ group: type.group, version: type.version, kind: type.kind }],
      };
    }
  }
  return {
    openapi: '3.0.0',
    info: { title: 'Kubernetes', version: 'v1.35.0' },
    paths,
    components: { schemas },
    'x-api-version': apiVersionOf({ group, version }),
  };
}
