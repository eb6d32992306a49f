import { canonicalJson } from './canonical-json.js';

/**
 * Merge semantics of the spec, for partial updates and upserts: keys that are present in `patch`
 * (including explicit nulls, which clear) replace the stored value; absent keys stay as they are.
 * Returns only the keys whose value actually changes, so a no-op update writes nothing and keeps
 * `updated_at`. Object values (metadata, settings) are compared whole: they are replaced wholesale.
 */
export function changedFields<Row extends object, Patch extends object>(existing: Row, patch: Patch): Partial<Patch> {
  const changes: Partial<Patch> = {};
  for (const key of Object.keys(patch) as (keyof Patch & string)[]) {
    const next = patch[key];
    if (next === undefined) continue;
    const current = (existing as Record<string, unknown>)[key];
    if (canonicalJson(current ?? null) !== canonicalJson(next)) changes[key] = next;
  }
  return changes;
}

export function isEmpty(value: object): boolean {
  return Object.keys(value).length === 0;
}
