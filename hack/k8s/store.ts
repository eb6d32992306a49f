/**
 * The storage under the API: objects by storage key and namespace/name, one global revision
 * counter (every write takes the next number, which becomes the object's resourceVersion, as etcd's
 * revision does), and a bounded history of changes that watches replay from. A watch from a
 * revision older than the history (trimmed at `historyLimit` events, or dropped by `compact()`)
 * cannot be served: the caller gets 410 Gone and must list again.
 *
 * Objects are cloned on the way in and out, so no caller can change stored state by mutation.
 */

export interface ObjectMeta {
  name?: string;
  generateName?: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  deletionGracePeriodSeconds?: number;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  finalizers?: string[];
  ownerReferences?: OwnerReference[];
  managedFields?: unknown[];
  [field: string]: unknown;
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface KubeObject {
  apiVersion?: string;
  kind?: string;
  metadata: ObjectMeta;
  [field: string]: unknown;
}

export type ChangeType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface StoreChange {
  type: ChangeType;
  storageKey: string;
  revision: number;
  object: KubeObject;
  /** The object before a MODIFIED or DELETED change, for watches whose selector it left or entered. */
  previous?: KubeObject;
}

export type Expired = { expired: true; oldest: number };

function keyOf(namespace: string | undefined, name: string): string {
  return `${namespace ?? ''}/${name}`;
}

export class ObjectStore {
  private revision = 1;
  /** Changes with a revision above this are all in `history`. */
  private compactedRevision = 1;
  private readonly history: StoreChange[] = [];
  private readonly collections = new Map<string, Map<string, KubeObject>>();
  private readonly listeners = new Set<(change: StoreChange) => void>();
  /** uid → where the object is, for owner lookups. */
  private readonly byUid = new Map<string, { storageKey: string; key: string }>();
  /** owner uid → keys (`storageKey|namespace/name`) of objects naming it in ownerReferences. */
  private readonly byOwner = new Map<string, Set<string>>();

  constructor(private readonly historyLimit: number) {}

  get currentRevision(): number {
    return this.revision;
  }

  /** The oldest revision a watch or a list continuation may still start from. */
  get oldestRevision(): number {
    return this.compactedRevision;
  }

  get(storageKey: string, namespace: string | undefined, name: string): KubeObject | undefined {
    const stored = this.collections.get(storageKey)?.get(keyOf(namespace, name));
    return stored && structuredClone(stored);
  }

  /** All objects of a storage (in one namespace if given), in namespace/name order, with the revision they were read at. */
  list(storageKey: string, namespace?: string): { items: KubeObject[]; revision: number } {
    const collection = this.collections.get(storageKey) ?? new Map<string, KubeObject>();
    const items = [...collection.entries()]
      .filter(([, object]) => namespace === undefined || object.metadata.namespace === namespace)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([, object]) => structuredClone(object));
    return { items, revision: this.revision };
  }

  storageKeys(): string[] {
    return [...this.collections.keys()];
  }

  /**
   * The stored objects themselves, without copying, for the server's own read-only scans (the
   * scheduler's sums, quota usage). Callers must not change them.
   */
  scan(storageKey: string, namespace?: string): readonly KubeObject[] {
    const collection = this.collections.get(storageKey);
    if (!collection) return [];
    return [...collection.values()].filter((object) => namespace === undefined || object.metadata.namespace === namespace);
  }

  /** The object with this uid, wherever it is stored. */
  findUid(uid: string): { storageKey: string; object: KubeObject } | undefined {
    const location = this.byUid.get(uid);
    const object = location && this.collections.get(location.storageKey)?.get(location.key);
    return object && { storageKey: location.storageKey, object: structuredClone(object) };
  }

  /** The objects whose ownerReferences name this uid. */
  dependentsOf(uid: string): Array<{ storageKey: string; object: KubeObject }> {
    return [...(this.byOwner.get(uid) ?? [])].flatMap((entry) => {
      const [storageKey, key] = entry.split('|') as [string, string];
      const object = this.collections.get(storageKey)?.get(key);
      return object ? [{ storageKey, object: structuredClone(object) }] : [];
    });
  }

  private index(storageKey: string, key: string, previous: KubeObject | undefined, next: KubeObject | undefined): void {
    const entry = `${storageKey}|${key}`;
    for (const reference of previous?.metadata.ownerReferences ?? []) this.byOwner.get(reference.uid)?.delete(entry);
    if (previous?.metadata.uid) this.byUid.delete(previous.metadata.uid);
    if (!next) return;
    if (next.metadata.uid) this.byUid.set(next.metadata.uid, { storageKey, key });
    for (const reference of next.metadata.ownerReferences ?? []) {
      const dependents = this.byOwner.get(reference.uid) ?? new Set<string>();
      dependents.add(entry);
      this.byOwner.set(reference.uid, dependents);
    }
  }

  /** Stores a new or changed object under the next revision and returns the stored copy. */
  put(storageKey: string, object: KubeObject): KubeObject {
    const collection = this.collections.get(storageKey) ?? new Map<string, KubeObject>();
    this.collections.set(storageKey, collection);
    const key = keyOf(object.metadata.namespace, object.metadata.name!);
    const previous = collection.get(key);
    const revision = ++this.revision;
    const stored = structuredClone(object);
    stored.metadata.resourceVersion = String(revision);
    collection.set(key, stored);
    this.index(storageKey, key, previous, stored);
    this.record({ type: previous ? 'MODIFIED' : 'ADDED', storageKey, revision, object: stored, previous });
    return structuredClone(stored);
  }

  remove(storageKey: string, namespace: string | undefined, name: string): KubeObject | undefined {
    const collection = this.collections.get(storageKey);
    const key = keyOf(namespace, name);
    const previous = collection?.get(key);
    if (!collection || !previous) return undefined;
    collection.delete(key);
    this.index(storageKey, key, previous, undefined);
    const revision = ++this.revision;
    const removed = structuredClone(previous);
    removed.metadata.resourceVersion = String(revision);
    this.record({ type: 'DELETED', storageKey, revision, object: removed, previous });
    return structuredClone(removed);
  }

  /** Drops a whole storage silently (its CRD was deleted); watchers of it are closed by the caller. */
  dropStorage(storageKey: string): void {
    for (const [key, object] of this.collections.get(storageKey) ?? []) this.index(storageKey, key, object, undefined);
    this.collections.delete(storageKey);
  }

  /**
   * The changes after `revision` (exclusive) for a storage, or Expired when some of them are no
   * longer kept.
   */
  changesSince(revision: number, storageKey: string): StoreChange[] | Expired {
    if (revision < this.compactedRevision) return { expired: true, oldest: this.compactedRevision };
    return this.history.filter((change) => change.revision > revision && change.storageKey === storageKey);
  }

  /** Forgets all history: every watch from an earlier revision now gets 410 Gone. */
  compact(): void {
    this.history.length = 0;
    this.compactedRevision = this.revision;
  }

  subscribe(listener: (change: StoreChange) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private record(change: StoreChange): void {
    this.history.push(change);
    while (this.history.length > this.historyLimit) {
      const dropped = this.history.shift()!;
      this.compactedRevision = dropped.revision;
    }
    for (const listener of [...this.listeners]) listener(change);
  }
}
