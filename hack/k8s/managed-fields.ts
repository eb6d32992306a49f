/**
 * Field ownership, as kube-apiserver's field manager keeps it in `metadata.managedFields`
 * (https://kubernetes.io/docs/reference/using-api/server-side-apply/):
 *
 * - Every write names a manager: `?fieldManager=`, or else the user agent up to its first `/`
 *   (`kubectl/v1.35.2 (linux/amd64) …` → `kubectl`), as the API server derives it.
 * - A write other than apply (create, PUT, merge/JSON/strategic patch, `/status`, `/scale`) is an
 *   `Update`: the manager takes every field it changed or added, from whoever owned it, without
 *   conflict ("Field management", "Conflicts" of the doc). Update entries are kept per manager,
 *   apiVersion and subresource.
 * - An apply (`application/apply-patch+yaml`) makes its manager own exactly the fields of the
 *   applied configuration. Changing a field another manager owns is a 409 conflict naming each
 *   manager and field, unless `force=true`, which takes them over; applying the value already
 *   there shares ownership. A field the applier owned and no longer applies is removed, unless
 *   another manager owns it too ("Field management: ... removes fields").
 * - The server's own fields (name, uid, resourceVersion, …) are owned by no one; writes to the main
 *   resource do not own status, writes to `/status` own only status ("Reset fields").
 */
import { KubeStatusError, type StatusCause } from './errors.js';
import { decodeFieldsV1, encodeFieldsV1, type FieldPath, FieldSet, printPath } from './field-sets.js';
import type { FieldType } from './field-schema.js';
import { compare, merge, removeFields, toFieldSet } from './structured-merge.js';
import type { KubeObject } from './store.js';

export interface ManagedFieldsEntry {
  manager: string;
  operation: 'Apply' | 'Update';
  apiVersion: string;
  time?: string;
  fieldsType: 'FieldsV1';
  fieldsV1: unknown;
  subresource?: string;
}

/** Who writes and how: the request's field manager, apiVersion and subresource. */
export interface Writer {
  manager: string;
  apiVersion: string;
  subresource?: string;
  /** The kind's shape (list and map types). */
  type: FieldType;
  /** Whether the kind has a status subresource (then the main resource owns no status, `/status` nothing else). */
  statusSubresource: boolean;
  now: string;
}

interface Owner {
  entry: Omit<ManagedFieldsEntry, 'fieldsType' | 'fieldsV1'>;
  set: FieldSet;
  /** The stored encoding, kept while `set` is the one decoded from it. */
  stored?: { set: FieldSet; fieldsV1: unknown };
}

/** The manager of in-process writes that name none (the tests' `server.store` calls). */
export const IN_PROCESS_MANAGER = 'kube-test-server';

/** The default manager of a request without `fieldManager`: its user agent up to the first `/` (128 printable characters at most). */
export function managerFromUserAgent(userAgent: string | undefined): string {
  return [...(userAgent ?? '').split('/')[0]!]
    .filter((character) => /\P{C}/u.test(character))
    .slice(0, 128)
    .join('');
}

/** Appliers are one manager across versions; updaters are one per apiVersion (the server's manager identifier). */
function identity(entry: Owner['entry']): string {
  return JSON.stringify({
    manager: entry.manager,
    operation: entry.operation,
    ...(entry.operation === 'Update' ? { apiVersion: entry.apiVersion } : {}),
    ...(entry.subresource ? { subresource: entry.subresource } : {}),
  });
}

function decodeOwners(entries: unknown): Owner[] {
  if (!Array.isArray(entries)) return [];
  return (entries as Partial<ManagedFieldsEntry>[])
    .map((entry) => ({
      entry: {
        manager: entry.manager ?? '',
        operation: entry.operation ?? 'Update',
        apiVersion: entry.apiVersion ?? '',
        ...(entry.time ? { time: entry.time } : {}),
        ...(entry.subresource ? { subresource: entry.subresource } : {}),
      },
      set: decodeFieldsV1(entry.fieldsV1),
    }))
    .map((owner, index) => ({
      ...owner,
      stored: { set: owner.set, fieldsV1: (entries as Partial<ManagedFieldsEntry>[])[index]!.fieldsV1 },
    }));
}

/** Sorted as the server sorts them: operation, time, manager, apiVersion, subresource; empty ones dropped. */
function encodeOwners(owners: Owner[]): ManagedFieldsEntry[] {
  const key = (owner: Owner) => [
    owner.entry.operation,
    owner.entry.time ?? '',
    owner.entry.manager,
    owner.entry.apiVersion,
    owner.entry.subresource ?? '',
  ];
  return owners
    .filter((owner) => !owner.set.empty)
    .sort((left, right) => {
      const [a, b] = [key(left), key(right)];
      const index = a.findIndex((value, position) => value !== b[position]);
      return index < 0 ? 0 : a[index]! < b[index]! ? -1 : 1;
    })
    .map((owner) => ({
      manager: owner.entry.manager,
      operation: owner.entry.operation,
      apiVersion: owner.entry.apiVersion,
      ...(owner.entry.time ? { time: owner.entry.time } : {}),
      fieldsType: 'FieldsV1',
      fieldsV1: owner.stored?.set === owner.set ? owner.stored.fieldsV1 : encodeFieldsV1(owner.set),
      ...(owner.entry.subresource ? { subresource: owner.entry.subresource } : {}),
    }));
}

/** Fields the API server sets itself, which no manager owns. */
const SERVER_FIELDS: FieldPath[] = [
  ['f:apiVersion'],
  ['f:kind'],
  ...['name', 'namespace', 'creationTimestamp', 'selfLink', 'uid', 'generation', 'managedFields', 'resourceVersion'].map((field) => [
    'f:metadata',
    `f:${field}`,
  ]),
];

/**
 * The comparison of what a writer may change: only status through `/status`, all but status through
 * the main resource of a kind with a status subresource (the rest is the same by construction, and
 * walking it for every status write of every pod is what costs).
 */
function compareOwnable(previous: KubeObject, next: KubeObject, writer: Writer) {
  if (!writer.statusSubresource) return compare(previous, next, writer.type);
  if (writer.subresource === 'status') return compare({ status: previous.status }, { status: next.status }, writer.type);
  const { status: _previous, ...previousRest } = previous;
  const { status: _next, ...nextRest } = next;
  return compare(previousRest, nextRest, writer.type);
}

/** What a writer may own of `set`. */
function ownable(set: FieldSet, writer: Writer): FieldSet {
  let result = set.without(SERVER_FIELDS).difference(FieldSet.of([['f:metadata']]));
  if (writer.statusSubresource && writer.subresource === 'status') result = result.within(['f:status']);
  else if (writer.statusSubresource) result = result.without([['f:status']]);
  return result;
}

function ownerOf(owners: Owner[], entry: Owner['entry']): Owner {
  const found = owners.find((owner) => identity(owner.entry) === identity(entry));
  if (found) return found;
  const created: Owner = { entry, set: new FieldSet() };
  owners.push(created);
  return created;
}

function writerEntry(writer: Writer, operation: 'Apply' | 'Update'): Owner['entry'] {
  return {
    manager: writer.manager,
    operation,
    apiVersion: writer.apiVersion,
    ...(writer.subresource ? { subresource: writer.subresource } : {}),
  };
}

/**
 * The managed fields after a write other than apply turned `previous` (undefined on create) into
 * `next`. `current` are the entries to start from (the stored ones, or those the request set).
 */
export function recordUpdate(previous: KubeObject | undefined, next: KubeObject, current: unknown, writer: Writer): ManagedFieldsEntry[] {
  const owners = decodeOwners(current);
  const changes = compareOwnable(previous ?? { metadata: {} }, next, writer);
  const taken = ownable(changes.modified.union(changes.added), writer);
  const mine = ownerOf(owners, writerEntry(writer, 'Update'));
  for (const owner of owners) {
    if (owner !== mine) owner.set = owner.set.difference(taken).difference(changes.removed);
  }
  const set = mine.set.difference(changes.removed).union(taken);
  if (!taken.empty || !sameSet(set, mine.set)) mine.entry.time = writer.now;
  mine.set = set;
  return encodeOwners(owners);
}

/**
 * Server-side apply of `config` to `live` (undefined when the apply creates the object): the merged
 * object with its managed fields, or a 409 naming every conflict when `force` is not set.
 */
export function applyConfiguration(live: KubeObject | undefined, config: KubeObject, writer: Writer, force: boolean): KubeObject {
  const owners = decodeOwners(live?.metadata.managedFields);
  const mine = ownerOf(owners, writerEntry(writer, 'Apply'));
  const lastSet = mine.set;
  mine.set = ownable(toFieldSet(config, writer.type), writer);
  const base = live ?? { metadata: {} };
  let merged = merge(base, config, writer.type) as KubeObject;
  const owned = owners.reduce((all, owner) => all.union(owner.set), new FieldSet());
  const released = lastSet
    .difference(mine.set)
    .list()
    .filter((path) => !owned.touches(path));
  merged = removeFields(merged, released, writer.type, owned) as KubeObject;
  const changes = compare(base, merged, writer.type);
  const changed = changes.modified.union(changes.added);
  const conflicts = owners
    .filter((owner) => owner !== mine)
    .map((owner) => ({ owner, fields: owner.set.intersection(changed) }))
    .filter(({ fields }) => !fields.empty);
  if (conflicts.length > 0 && !force) throw applyConflict(conflicts);
  for (const owner of owners) {
    if (owner !== mine) owner.set = owner.set.difference(changed).difference(changes.removed);
  }
  // A no-op apply keeps the entry's time, so it changes nothing (no new resourceVersion).
  if (!mine.entry.time || !ownable(changed.union(changes.removed), writer).empty || !sameSet(lastSet, mine.set))
    mine.entry.time = writer.now;
  return { ...merged, metadata: { ...merged.metadata, managedFields: encodeOwners(owners) } };
}

function sameSet(left: FieldSet, right: FieldSet): boolean {
  return left.difference(right).empty && right.difference(left).empty;
}

/** How the server names a manager in a conflict: `"kubectl" with subresource "scale" using apps/v1`. */
function printManager(entry: Owner['entry']): string {
  const name = `${JSON.stringify(entry.manager)}${entry.subresource ? ` with subresource ${JSON.stringify(entry.subresource)}` : ''}`;
  return entry.operation === 'Update' ? `${name} using ${entry.apiVersion}` : name;
}

/** 409 Conflict as the API server words it, one FieldManagerConflict cause per field. */
function applyConflict(conflicts: Array<{ owner: Owner; fields: FieldSet }>): KubeStatusError {
  const sorted = [...conflicts].sort((left, right) => (identity(left.owner.entry) < identity(right.owner.entry) ? -1 : 1));
  const byManager = sorted.map(({ owner, fields }) => ({
    manager: printManager(owner.entry),
    paths: fields.list().map(printPath).sort(),
  }));
  const causes: StatusCause[] = byManager.flatMap(({ manager, paths }) =>
    paths.map((field) => ({ reason: 'FieldManagerConflict', message: `conflict with ${manager}`, field })),
  );
  const message =
    causes.length === 1
      ? `Apply failed with 1 conflict: conflict with ${byManager[0]!.manager}: ${byManager[0]!.paths[0]}`
      : `Apply failed with ${causes.length} conflicts: ${byManager
          .flatMap(({ manager, paths }) => [`conflicts with ${manager}:`, ...paths.map((path) => `- ${path}`)])
          .join('\n')}`;
  return new KubeStatusError(409, 'Conflict', message, { causes });
}
