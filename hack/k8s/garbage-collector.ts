/**
 * What kube-controller-manager's garbage collector and namespace controller do, reacting to store
 * changes on the next tick (so, like the real ones, a moment after the request that caused them):
 * - an object whose owners (by uid) are all gone is deleted in the background; a new object whose
 *   owners do not exist is deleted too;
 * - an owner deleted with propagationPolicy Orphan has its dependents' references to it removed;
 * - an owner deleted in the Foreground has its dependents deleted and keeps its
 *   `foregroundDeletion` finalizer until those with `ownerReferences[].blockOwnerDeletion: true`
 *   are gone (a pod's graceful termination included); the others do not hold it
 *   (https://kubernetes.io/docs/concepts/architecture/garbage-collection/#foreground-deletion);
 * - a deleted namespace (phase Terminating) loses its contents, then goes.
 *
 * `delayMs` (startKubeTestServer's `garbageCollectorDelayMs`) holds each reaction back, as a real
 * collector's queue does, so tests can see a dependent outlive its owner for a while.
 */
import { KubeStatusError } from './errors.js';
import type { KubeObjects } from './objects.js';
import type { KubeObject, StoreChange } from './store.js';

export class GarbageCollector {
  private readonly unsubscribe: () => void;
  private closed = false;

  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(
    private readonly objects: KubeObjects,
    delayMs = 0,
  ) {
    this.unsubscribe = objects.store.subscribe((change) => {
      if (delayMs <= 0) return void setImmediate(() => this.react(change));
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        this.react(change);
      }, delayMs);
      this.timers.add(timer);
    });
  }

  close(): void {
    this.closed = true;
    this.unsubscribe();
    for (const timer of this.timers) clearTimeout(timer);
  }

  private uidExists(uid: string): boolean {
    return this.objects.store.findUid(uid) !== undefined;
  }

  private react(change: StoreChange): void {
    if (this.closed) return;
    const { object } = change;
    try {
      if (change.type === 'DELETED') {
        this.handleOwnerGone(object);
        this.releaseForegroundOwners(object);
        const namespace = object.metadata.namespace
          ? this.objects.store.get('/namespaces', undefined, object.metadata.namespace)
          : undefined;
        if (namespace?.metadata.deletionTimestamp) this.emptyNamespace(namespace);
      } else {
        if (change.type === 'ADDED') this.collectIfOrphaned(change.storageKey, object);
        if (object.metadata.deletionTimestamp && (object.metadata.finalizers ?? []).includes('foregroundDeletion'))
          this.handleForeground(object);
        if (change.storageKey === '/namespaces' && object.metadata.deletionTimestamp) this.emptyNamespace(object);
      }
    } catch (error) {
      // A concurrent client already changed or removed the object: the next change brings us back.
      if (!(error instanceof KubeStatusError)) throw error;
    }
  }

  private dependentsOf(uid: string): Array<{ storageKey: string; object: KubeObject }> {
    return this.objects.store.dependentsOf(uid);
  }

  private deleteDependent(storageKey: string, object: KubeObject): void {
    const type = this.objects.registry.byStorage(storageKey);
    if (!type || object.metadata.deletionTimestamp) return;
    this.objects.delete(type, object.metadata.namespace, object.metadata.name!, { propagationPolicy: 'Background' });
  }

  private handleOwnerGone(owner: KubeObject): void {
    const uid = owner.metadata.uid!;
    const policy = this.objects.pendingPropagation.get(uid) ?? 'Background';
    this.objects.pendingPropagation.delete(uid);
    for (const { storageKey, object } of this.dependentsOf(uid)) {
      const type = this.objects.registry.byStorage(storageKey);
      if (!type) continue;
      if (policy === 'Orphan') {
        const references = (object.metadata.ownerReferences ?? []).filter((reference) => reference.uid !== uid);
        this.objects.patch(type, object.metadata.namespace, object.metadata.name!, 'application/merge-patch+json', {
          metadata: { ownerReferences: references.length ? references : null },
        });
        continue;
      }
      const others = (object.metadata.ownerReferences ?? []).filter((reference) => reference.uid !== uid);
      if (others.some((reference) => this.uidExists(reference.uid))) continue;
      this.deleteDependent(storageKey, object);
    }
  }

  private collectIfOrphaned(storageKey: string, object: KubeObject): void {
    const references = object.metadata.ownerReferences ?? [];
    if (references.length === 0) return;
    if (references.some((reference) => this.uidExists(reference.uid))) return;
    this.deleteDependent(storageKey, object);
  }

  private handleForeground(owner: KubeObject): void {
    const uid = owner.metadata.uid!;
    for (const { storageKey, object } of this.dependentsOf(uid)) this.deleteDependent(storageKey, object);
    if (!this.blocked(uid)) this.dropForegroundFinalizer(owner);
  }

  /** Whether a dependent that blocks its owner's deletion is still there. */
  private blocked(ownerUid: string): boolean {
    return this.dependentsOf(ownerUid).some(({ object }) =>
      (object.metadata.ownerReferences ?? []).some((reference) => reference.uid === ownerUid && reference.blockOwnerDeletion === true),
    );
  }

  private releaseForegroundOwners(dependent: KubeObject): void {
    for (const reference of dependent.metadata.ownerReferences ?? []) {
      const owner = this.objects.store.findUid(reference.uid);
      if (!owner || !(owner.object.metadata.finalizers ?? []).includes('foregroundDeletion')) continue;
      if (!this.blocked(reference.uid)) this.dropForegroundFinalizer(owner.object);
    }
  }

  private dropForegroundFinalizer(owner: KubeObject): void {
    const type = this.objects.registry.byKind(owner.apiVersion!, owner.kind!);
    if (!type) return;
    const finalizers = (owner.metadata.finalizers ?? []).filter((finalizer) => finalizer !== 'foregroundDeletion');
    this.objects.patch(type, owner.metadata.namespace, owner.metadata.name!, 'application/merge-patch+json', {
      metadata: { finalizers: finalizers.length ? finalizers : null },
    });
  }

  private emptyNamespace(namespace: KubeObject): void {
    const name = namespace.metadata.name!;
    const store = this.objects.store;
    const contents = store
      .storageKeys()
      .flatMap((storageKey) => store.scan(storageKey, name).map((object) => ({ storageKey, object: structuredClone(object) })));
    for (const { storageKey, object } of contents) this.deleteDependent(storageKey, object);
    if (contents.length === 0 && (namespace.metadata.finalizers ?? []).length === 0) {
      this.objects.store.remove('/namespaces', undefined, name);
    }
  }
}
