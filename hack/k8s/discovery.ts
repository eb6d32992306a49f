/**
 * Discovery as kubectl and client libraries read it: /api, /apis, /api/v1, /apis/<group>[/<version>],
 * /version. Only the unaggregated form: kubectl asks for aggregated discovery first and falls back
 * when the response's content type says it did not get it. No /openapi: kubectl falls back to its
 * built-in types and merge patches for custom resources.
 */
import { apiVersionOf, type ResourceRegistry, type ResourceType } from './resources.js';

const VERBS = ['create', 'delete', 'deletecollection', 'get', 'list', 'patch', 'update', 'watch'];

export const SERVER_VERSION = {
  major: '1',
  minor: '35',
  gitVersion: 'v1.35.0-acis-test',
  gitCommit: '0000000000000000000000000000000000000000',
  gitTreeState: 'clean',
  buildDate: '2026-01-01T00:00:00Z',
  goVersion: 'go1.25.0',
  compiler: 'gc',
  platform: 'linux/amd64',
};

export function apiVersions(): Record<string, unknown> {
  return { kind: 'APIVersions', versions: ['v1'], serverAddressByClientCIDRs: [{ clientCIDR: '0.0.0.0/0', serverAddress: '127.0.0.1' }] };
}

function groupEntry(group: string, versions: string[]): Record<string, unknown> {
  const entries = versions.map((version) => ({ groupVersion: `${group}/${version}`, version }));
  return { name: group, versions: entries, preferredVersion: entries[0] };
}

export function apiGroupList(registry: ResourceRegistry): Record<string, unknown> {
  return { kind: 'APIGroupList', apiVersion: 'v1', groups: registry.groups().map(({ group, versions }) => groupEntry(group, versions)) };
}

export function apiGroup(registry: ResourceRegistry, group: string): Record<string, unknown> | undefined {
  const found = registry.groups().find((entry) => entry.group === group);
  return found && { kind: 'APIGroup', apiVersion: 'v1', ...groupEntry(group, found.versions) };
}

function resourceEntries(type: ResourceType): Record<string, unknown>[] {
  const main = {
    name: type.resource,
    singularName: type.singular,
    namespaced: type.namespaced,
    kind: type.kind,
    verbs: type.createOnly ? ['create'] : VERBS,
    ...(type.shortNames.length ? { shortNames: type.shortNames } : {}),
    ...(type.categories.length ? { categories: type.categories } : {}),
    storageVersionHash: '',
  };
  const entries: Record<string, unknown>[] = [main];
  const sub = (name: string, kind: string, verbs: string[], extra: Record<string, unknown> = {}) =>
    entries.push({ name: `${type.resource}/${name}`, singularName: '', namespaced: type.namespaced, kind, verbs, ...extra });
  if (type.status) sub('status', type.kind, ['get', 'patch', 'update']);
  if (type.scale) sub('scale', 'Scale', ['get', 'patch', 'update'], { group: 'autoscaling', version: 'v1' });
  if (type.token) sub('token', 'TokenRequest', ['create'], { group: 'authentication.k8s.io', version: 'v1' });
  if (type.log) {
    sub('log', 'Pod', ['get']);
    sub('binding', 'Binding', ['create']);
    sub('eviction', 'Eviction', ['create'], { group: 'policy', version: 'v1' });
  }
  return entries;
}

export function apiResourceList(registry: ResourceRegistry, group: string, version: string): Record<string, unknown> | undefined {
  const types = registry.all().filter((type) => type.group === group && type.version === version);
  if (types.length === 0) return undefined;
  return {
    kind: 'APIResourceList',
    apiVersion: 'v1',
    groupVersion: apiVersionOf({ group, version }),
    resources: types.flatMap(resourceEntries),
  };
}
