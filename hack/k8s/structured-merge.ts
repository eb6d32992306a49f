/**
 * The operations of structured-merge-diff that server-side apply is made of, over plain JSON values
 * typed by field-schema.ts: the field set of an applied configuration, the comparison of two
 * objects (added, removed and modified fields), the merge of an applied configuration into a live
 * object, and the removal of fields an applier gave up.
 * https://kubernetes.io/docs/reference/using-api/server-side-apply/#merge-strategy
 */
import { type FieldPath, FieldSet } from './field-sets.js';
import type { FieldType } from './field-schema.js';

type Json = unknown;
type JsonMap = Record<string, Json>;

function isMap(value: Json): value is JsonMap {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function equal(left: Json, right: Json): boolean {
  return JSON.stringify(left) === JSON.stringify(right);
}

function granularList(type: FieldType): boolean {
  return type.list.type !== 'atomic';
}

/** The path element of a list item: `k:{"name":"main"}` (keys sorted, defaults filled) or `v:"x"`. */
export function itemElement(item: Json, type: FieldType, index: number): string {
  if (type.list.type === 'set') return `v:${JSON.stringify(item)}`;
  if (type.list.type === 'map' && isMap(item)) {
    const { keys, defaults } = type.list;
    const key: JsonMap = {};
    for (const field of [...keys].sort()) {
      const value = item[field] ?? defaults[field];
      if (value !== undefined) key[field] = value;
    }
    return `k:${JSON.stringify(key)}`;
  }
  return `i:${index}`;
}

function itemsByElement(list: Json[], type: FieldType): Map<string, Json> {
  return new Map(list.map((item, index) => [itemElement(item, type, index), item]));
}

/** The fields an applied configuration sets: leaves, list items, empty maps and data keys. */
export function toFieldSet(value: Json, type: FieldType, path: string[] = [], set = new FieldSet()): FieldSet {
  if (isMap(value) && type.map !== 'atomic') {
    for (const [name, child] of Object.entries(value)) {
      const childPath = [...path, `f:${name}`];
      toFieldSet(child, type.field(name), childPath, set);
      if (child === null || (isMap(child) && Object.keys(child).length === 0) || type.map === 'granular') set.insert(childPath);
    }
    return set;
  }
  if (Array.isArray(value) && granularList(type)) {
    value.forEach((item, index) => {
      const itemPath = [...path, itemElement(item, type, index)];
      toFieldSet(item, type.item(), itemPath, set);
      set.insert(itemPath);
    });
    return set;
  }
  if (path.length > 0) set.insert(path);
  return set;
}

export interface Comparison {
  added: FieldSet;
  removed: FieldSet;
  modified: FieldSet;
}

/** What changed from `lhs` to `rhs`: leaves compared by value, maps and items by presence. */
export function compare(lhs: Json, rhs: Json, type: FieldType): Comparison {
  const comparison: Comparison = { added: new FieldSet(), removed: new FieldSet(), modified: new FieldSet() };
  walkPair(lhs, rhs, type, [], comparison);
  return comparison;
}

function walkPair(lhs: Json, rhs: Json, type: FieldType, path: string[], comparison: Comparison): void {
  const present = (value: Json) => value !== undefined;
  const presence = () => {
    if (path.length === 0) return;
    if (!present(lhs)) comparison.added.insert(path);
    else if (!present(rhs)) comparison.removed.insert(path);
  };
  const bothMaps = (isMap(lhs) || !present(lhs)) && (isMap(rhs) || !present(rhs));
  const emptyMaps = Object.keys(isMap(lhs) ? lhs : {}).length === 0 && Object.keys(isMap(rhs) ? rhs : {}).length === 0;
  if (bothMaps && type.map !== 'atomic' && !emptyMaps) {
    const left = isMap(lhs) ? lhs : {};
    const right = isMap(rhs) ? rhs : {};
    for (const name of new Set([...Object.keys(left), ...Object.keys(right)])) {
      walkPair(left[name], right[name], type.field(name), [...path, `f:${name}`], comparison);
    }
    presence();
    return;
  }
  const bothLists = (Array.isArray(lhs) || !present(lhs)) && (Array.isArray(rhs) || !present(rhs));
  if (bothLists && granularList(type)) {
    const left = itemsByElement(Array.isArray(lhs) ? lhs : [], type);
    const right = itemsByElement(Array.isArray(rhs) ? rhs : [], type);
    for (const element of new Set([...left.keys(), ...right.keys()])) {
      walkPair(left.get(element), right.get(element), type.item(), [...path, element], comparison);
    }
    presence();
    return;
  }
  if (path.length === 0) return;
  if (!present(lhs)) comparison.added.insert(path);
  else if (!present(rhs)) comparison.removed.insert(path);
  else if (!equal(lhs, rhs)) comparison.modified.insert(path);
}

/** The live object with the applied configuration merged in: maps field by field, keyed lists item by item. */
export function merge(live: Json, config: Json, type: FieldType): Json {
  if (config === undefined) return structuredClone(live);
  if (isMap(config) && isMap(live) && type.map !== 'atomic') {
    const result: JsonMap = { ...live };
    for (const [name, value] of Object.entries(config)) {
      if (value === null) delete result[name];
      else result[name] = merge(live[name], value, type.field(name));
    }
    return result;
  }
  if (Array.isArray(config) && Array.isArray(live) && granularList(type)) {
    const applied = itemsByElement(config, type);
    const result = live.map((item, index) => {
      const element = itemElement(item, type, index);
      return applied.has(element) ? merge(item, applied.get(element), type.item()) : structuredClone(item);
    });
    const existing = new Set(live.map((item, index) => itemElement(item, type, index)));
    for (const [element, item] of applied) if (!existing.has(element)) result.push(merge(undefined, item, type.item()));
    return result;
  }
  if (isMap(config)) return merge({}, config, type);
  return structuredClone(config);
}

/**
 * `object` without the fields at `paths`. A map left empty by the removal goes too unless `kept`
 * (what some manager still owns) holds it, so an applier that drops its last field of a struct
 * does not leave `{}` behind.
 */
export function removeFields(object: Json, paths: FieldPath[], type: FieldType, kept: FieldSet): Json {
  let result = structuredClone(object);
  for (const path of paths) result = removeAt(result, path, type, [], kept);
  return result;
}

function removeAt(value: Json, path: FieldPath, type: FieldType, at: string[], kept: FieldSet): Json {
  const [element, ...rest] = path;
  if (element === undefined) return undefined;
  const descend = (child: Json, childType: FieldType, childPath: string[]) =>
    rest.length === 0 ? undefined : removeAt(child, rest, childType, childPath, kept);
  const emptied = (child: Json, childPath: string[]) =>
    child === undefined || (rest.length > 0 && isMap(child) && Object.keys(child).length === 0 && !kept.touches(childPath));
  if (isMap(value) && element.startsWith('f:')) {
    const name = element.slice(2);
    if (!(name in value)) return value;
    const childPath = [...at, element];
    const child = descend(value[name], type.field(name), childPath);
    const result = { ...value };
    if (emptied(child, childPath)) delete result[name];
    else result[name] = child;
    return result;
  }
  if (Array.isArray(value)) {
    const result: Json[] = [];
    value.forEach((item, index) => {
      const childPath = [...at, element];
      const child = itemElement(item, type, index) === element ? descend(item, type.item(), childPath) : item;
      if (child === item || !emptied(child, childPath)) result.push(child);
    });
    return result;
  }
  return value;
}
