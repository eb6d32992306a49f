/**
 * What server-side apply needs to know of a kind's shape: how each list merges (a map keyed by some
 * of its items' fields, a set of scalars, or atomic: replaced whole) and which maps are atomic or
 * hold data keys rather than declared fields.
 *
 * Custom resources say it in their schema (`x-kubernetes-list-type: map | set | atomic`,
 * `x-kubernetes-list-map-keys`, `x-kubernetes-map-type`); a list without a list type is atomic.
 * Built-in kinds declare it in their Go types (`+listType=map`, `+listMapKey=name`): the lists ACIS
 * and its chart write are named here, every other built-in list is atomic, as in the types
 * structured-merge-diff deduces for what it has no schema of.
 * https://kubernetes.io/docs/reference/using-api/server-side-apply/#merge-strategy
 */
import type { JsonSchema } from './schema-validation.js';

export type ListType = { type: 'map'; keys: string[]; defaults: Record<string, unknown> } | { type: 'set' } | { type: 'atomic' };

export interface FieldType {
  list: ListType;
  /** `struct`: declared fields; `granular`: data keys (labels); `atomic`: replaced whole. */
  map: 'struct' | 'granular' | 'atomic';
  field(name: string): FieldType;
  item(): FieldType;
}

const ATOMIC: ListType = { type: 'atomic' };

function keyed(keys: string[], defaults: Record<string, unknown> = {}): ListType {
  return { type: 'map', keys, defaults };
}

/** The core/v1 and meta/v1 lists merged by key or as sets (k8s.io/api's `+listType` markers). */
function builtInList(names: string[]): ListType {
  const last = names[names.length - 1];
  switch (last) {
    case 'containers':
    case 'initContainers':
    case 'ephemeralContainers':
    case 'env':
    case 'volumes':
    case 'imagePullSecrets':
      return keyed(['name']);
    case 'volumeMounts':
      return keyed(['mountPath']);
    case 'conditions':
      return keyed(['type']);
    case 'ownerReferences':
      return keyed(['uid']);
    case 'finalizers':
      return { type: 'set' };
    case 'ports':
      // A container's ports by containerPort and protocol, a Service's by port and protocol; protocol defaults to TCP.
      return names.some((name) => name.endsWith('ontainers'))
        ? keyed(['containerPort', 'protocol'], { protocol: 'TCP' })
        : keyed(['port', 'protocol'], { protocol: 'TCP' });
    default:
      return ATOMIC;
  }
}

/** Maps whose keys are data, not fields. */
const DATA_MAPS = new Set([
  'labels',
  'annotations',
  'data',
  'binaryData',
  'stringData',
  'matchLabels',
  'nodeSelector',
  'limits',
  'requests',
]);

export function builtInType(names: string[] = []): FieldType {
  return {
    list: builtInList(names),
    map: DATA_MAPS.has(names[names.length - 1] ?? '') ? 'granular' : 'struct',
    field: (name) => builtInType([...names, name]),
    item: () => builtInType(names),
  };
}

/** What structured-merge-diff deduces with no schema: granular maps, atomic lists. */
function deducedType(): FieldType {
  return { list: ATOMIC, map: 'granular', field: () => deducedType(), item: () => deducedType() };
}

function schemaList(schema: JsonSchema): ListType {
  switch (schema['x-kubernetes-list-type']) {
    case 'map': {
      const keys = (schema['x-kubernetes-list-map-keys'] as string[] | undefined) ?? [];
      const defaults: Record<string, unknown> = {};
      for (const key of keys) {
        const fallback = schema.items?.properties?.[key]?.default;
        if (fallback !== undefined) defaults[key] = fallback;
      }
      return keyed(keys, defaults);
    }
    case 'set':
      return { type: 'set' };
    default:
      return ATOMIC;
  }
}

/** A custom resource's type from its structural schema; its metadata is ObjectMeta's. */
export function schemaType(schema: JsonSchema | undefined, root = true): FieldType {
  if (!schema) return deducedType();
  const additional = typeof schema.additionalProperties === 'object' ? schema.additionalProperties : undefined;
  return {
    list: schemaList(schema),
    map: schema['x-kubernetes-map-type'] === 'atomic' ? 'atomic' : schema.properties ? 'struct' : 'granular',
    field: (name) => {
      if (root && name === 'metadata') return builtInType(['metadata']);
      const declared = schema.properties?.[name];
      if (declared) return schemaType(declared, false);
      if (additional) return schemaType(additional, false);
      return deducedType();
    },
    item: () => schemaType(schema.items, false),
  };
}
