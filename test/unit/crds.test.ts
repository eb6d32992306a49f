import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Ajv, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';

const CRDS = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'crds');

interface Crd {
  spec: {
    group: string;
    names: { kind: string; plural: string; shortNames: string[] };
    versions: { name: string; schema: { openAPIV3Schema: Schema }; additionalPrinterColumns: { name: string; jsonPath: string }[] }[];
  };
}
interface Schema {
  type?: string;
  properties?: Record<string, Schema>;
  items?: Schema;
  additionalProperties?: unknown;
}

const crds = new Map<string, Crd>(
  ['sandbox.yaml', 'sandboxwarmpool.yaml', 'repositorysync.yaml'].map((file) => {
    const crd = parse(readFileSync(path.join(CRDS, file), 'utf8')) as Crd;
    return [crd.spec.names.kind, crd];
  }),
);

const ajv = new Ajv({ strict: false, allErrors: true });
addFormats.default(ajv);
const validators = new Map<string, ValidateFunction>(
  [...crds].map(([kind, crd]) => [kind, ajv.compile(crd.spec.versions[0]!.schema.openAPIV3Schema)]),
);

function validate(object: { kind: string }): string[] {
  const check = validators.get(object.kind);
  if (!check) throw new Error(`no CRD for ${object.kind}`);
  return check(object) ? [] : (check.errors ?? []).map((e) => `${e.instancePath} ${e.message}`);
}

const samples = readdirSync(path.join(CRDS, 'samples')).flatMap((file) =>
  parseAllDocuments(readFileSync(path.join(CRDS, 'samples', file), 'utf8')).map((doc) => [file, doc.toJS() as { kind: string }] as const),
);

const goodSandbox = () => structuredClone(samples.find(([, o]) => o.kind === 'Sandbox')![1]) as Record<string, any>;
const goodPool = () => structuredClone(samples.find(([, o]) => o.kind === 'SandboxWarmPool')![1]) as Record<string, any>;
const goodSync = () => structuredClone(samples.find(([, o]) => o.kind === 'RepositorySync')![1]) as Record<string, any>;

describe('crds/*.yaml', () => {
  it.each([...crds.keys()])('%s is structural: every field typed, no additionalProperties beside properties', (kind) => {
    const problems: string[] = [];
    const walk = (schema: Schema, at: string) => {
      if (!schema.type) problems.push(`${at}: no type`);
      if (schema.properties && schema.additionalProperties !== undefined) problems.push(`${at}: properties and additionalProperties`);
      for (const [name, child] of Object.entries(schema.properties ?? {})) walk(child, `${at}.${name}`);
      if (schema.items) walk(schema.items, `${at}[]`);
    };
    walk(crds.get(kind)!.spec.versions[0]!.schema.openAPIV3Schema, kind);
    expect(problems).toEqual([]);
  });

  it.each([...crds.keys()])('%s printer columns name fields of its schema', (kind) => {
    const version = crds.get(kind)!.spec.versions[0]!;
    for (const column of version.additionalPrinterColumns) {
      if (column.jsonPath === '.metadata.creationTimestamp') continue;
      let schema: Schema | undefined = version.schema.openAPIV3Schema;
      // A filter (`conditions[?(@.type=="Ready")]`) selects among a list's items: walk into `items`.
      const path = column.jsonPath.replace(/\[\?\(.*?\)\]/g, '[]');
      for (const part of path.split('.').slice(1)) {
        const field = part.replace(/\[\]$/, '');
        schema = schema?.properties?.[field];
        if (part.endsWith('[]')) schema = schema?.items;
      }
      expect(schema, `${kind} column ${column.name} (${column.jsonPath})`).toBeDefined();
    }
  });

  it('group acis.dev, version v1alpha1, short names sbx, sbxpool and reposync', () => {
    expect(crds.get('Sandbox')!.spec).toMatchObject({ group: 'acis.dev', names: { plural: 'sandboxes', shortNames: ['sbx'] } });
    expect(crds.get('SandboxWarmPool')!.spec).toMatchObject({
      group: 'acis.dev',
      names: { plural: 'sandboxwarmpools', shortNames: ['sbxpool'] },
    });
    expect(crds.get('RepositorySync')!.spec).toMatchObject({
      group: 'acis.dev',
      names: { plural: 'repositorysyncs', shortNames: ['reposync'] },
    });
    for (const crd of crds.values()) expect(crd.spec.versions.map((v) => v.name)).toEqual(['v1alpha1']);
  });
});

describe('crds/samples', () => {
  it.each(samples.map(([file, object]) => [file, object]))('%s is valid against its CRD', (_file, object) => {
    expect(validate(object)).toEqual([]);
  });

  it.each<[string, (o: Record<string, any>) => void, string]>([
    ['an unknown mode', (o) => (o.spec.mode = 'hot'), '/spec/mode must be equal to one of the allowed values'],
    ['a conversation id that is not one', (o) => (o.spec.conversationId = 'conversation-1'), '/spec/conversationId must match pattern'],
    ['a tenant id too long for a label', (o) => (o.spec.tenantId = `tnt_${'A'.repeat(59)}`), '/spec/tenantId must match pattern'],
    [
      'a shutdownTime that is not a time',
      (o) => (o.spec.shutdownTime = 'in five minutes'),
      '/spec/shutdownTime must match format "date-time"',
    ],
    ['a negative warm cap', (o) => (o.spec.maxConcurrentWarm = -1), '/spec/maxConcurrentWarm must be >= 0'],
    [
      'a malformed memory quantity',
      (o) => (o.spec.resources = { limits: { memory: 'lots' } }),
      '/spec/resources/limits/memory must match pattern',
    ],
    ['no agent type', (o) => delete o.spec.agentType, " must have required property 'agentType'"],
    ['a status phase nobody knows', (o) => (o.status = { phase: 'Sleeping' }), '/status/phase must be equal to one of the allowed values'],
    [
      'a condition of an unknown type',
      (o) => (o.status = { conditions: [{ type: 'Happy', status: 'True', reason: 'X', lastTransitionTime: '2026-01-01T00:00:00Z' }] }),
      '/status/conditions/0/type must be equal to one of the allowed values',
    ],
  ])('a Sandbox with %s is refused', (_name, spoil, error) => {
    const object = goodSandbox();
    spoil(object);
    expect(validate(object as { kind: string }).join('\n')).toContain(error);
  });

  it.each<[string, (o: Record<string, any>) => void, string]>([
    ['negative replicas', (o) => (o.spec.replicas = -1), '/spec/replicas must be >= 0'],
    ['replicas past the bound', (o) => (o.spec.replicas = 1001), '/spec/replicas must be <= 1000'],
    ['an agent type with capitals', (o) => (o.spec.agentType = 'Vendor'), '/spec/agentType must match pattern'],
    ['fractional replicas', (o) => (o.spec.replicas = 1.5), '/spec/replicas must be integer'],
  ])('a SandboxWarmPool with %s is refused', (_name, spoil, error) => {
    const object = goodPool();
    spoil(object);
    expect(validate(object as { kind: string }).join('\n')).toContain(error);
  });

  it.each<[string, (o: Record<string, any>) => void, string]>([
    ['a repository id that is not one', (o) => (o.spec.repositoryId = 'skills'), '/spec/repositoryId must match pattern'],
    ['no claim', (o) => delete o.spec.claim, " must have required property 'claim'"],
    ['a request generation of 0', (o) => (o.spec.requestGeneration = 0), '/spec/requestGeneration must be >= 1'],
    [
      'a credential Secret name that is not a DNS label',
      (o) => (o.spec.credentialSecretName = 'Repo_Credential'),
      '/spec/credentialSecretName must match pattern',
    ],
    ['a state nobody knows', (o) => (o.status = { state: 'pending' }), '/status/state must be equal to one of the allowed values'],
    ['a commit that is not a hash', (o) => (o.status = { commit: 'main' }), '/status/commit must match pattern'],
  ])('a RepositorySync with %s is refused', (_name, spoil, error) => {
    const object = goodSync();
    spoil(object);
    expect(validate(object as { kind: string }).join('\n')).toContain(error);
  });
});
