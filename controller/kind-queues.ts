/**
 * The leader's work queues, one per kind, keyed `namespace/name`. They exist only while this replica
 * leads: a key added while it does not is dropped (a new leader enqueues everything it sees when it
 * starts), and losing the lead drops whatever was waiting.
 */
import type { WorkQueue } from '../kube/work-queue.js';
import { REPOSITORY_SYNC, SANDBOX, SANDBOX_WARM_POOL } from './api/v1alpha1.js';

export type QueuedKind = typeof SANDBOX.kind | typeof SANDBOX_WARM_POOL.kind | typeof REPOSITORY_SYNC.kind;

const KINDS: readonly QueuedKind[] = [SANDBOX.kind, SANDBOX_WARM_POOL.kind, REPOSITORY_SYNC.kind];

export class KindQueues {
  private queues: Record<QueuedKind, WorkQueue> | undefined;

  constructor(private readonly namespace: string) {}

  add(kind: QueuedKind, name: string): void {
    this.queues?.[kind].add(`${this.namespace}/${name}`);
  }

  /** This replica leads from now on: these queues start taking keys. */
  start(queues: Record<QueuedKind, WorkQueue>): void {
    this.queues = queues;
    for (const kind of KINDS) queues[kind].start();
  }

  /** This replica leads no more: the queues stop and are dropped. */
  stop(): void {
    for (const kind of KINDS) this.queues?.[kind].stop();
    this.queues = undefined;
  }

  depths(): Record<QueuedKind, number> {
    return Object.fromEntries(KINDS.map((kind) => [kind, this.queues?.[kind].depth ?? 0])) as Record<QueuedKind, number>;
  }

  /** Resolves when no queue has anything waiting or in process (tests). */
  async idle(): Promise<void> {
    await Promise.all(KINDS.map((kind) => this.queues?.[kind].idle()));
  }
}
