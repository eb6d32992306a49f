/**
 * Leader election on a coordination.k8s.io/v1 Lease, as client-go does it: one candidate holds the
 * Lease and renews it; the others watch the record and take it over once it has not changed for a
 * whole lease duration (measured on their own clock, so clock skew between nodes does not matter).
 * Every write carries the resourceVersion it read, so two candidates never both win (409). As in
 * client-go (tools/leaderelection: RenewDeadline < LeaseDuration), a leader that has not renewed
 * within the renew deadline of its last renewal stops acting (a timer of its own, so a request that
 * never answers cannot hold it up), and every round of requests is bounded by that deadline too: it
 * has stopped before any candidate, which waits a whole lease duration from when it saw that
 * renewal, may take over (the difference covers the answer's way back). Stopping releases the Lease so
 * a successor takes over at once.
 */
import { type CoordinationV1Api, V1MicroTime, type V1Lease } from '@kubernetes/client-node';
import { httpStatus } from './kube-errors.js';

export interface LeaderElectionOptions {
  api: CoordinationV1Api;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationMs: number;
  /** How long a leader keeps acting without a renewal; below leaseDurationMs (default two thirds of it, as client-go's 10 s of 15 s). */
  renewDeadlineMs?: number;
  onStartedLeading: () => void;
  onStoppedLeading: () => void;
  onError?: (error: unknown) => void;
  now?: () => number;
}

export class LeaderElection {
  private timer: NodeJS.Timeout | undefined;
  /** Fires at the renew deadline: a leader not renewed by then steps down. */
  private deadline: NodeJS.Timeout | undefined;
  private readonly renewDeadlineMs: number;
  private leading = false;
  private stopped = false;
  private lastRenewed = 0;
  private observed: { record: string; at: number } | undefined;
  private readonly now: () => number;

  constructor(private readonly options: LeaderElectionOptions) {
    this.now = options.now ?? Date.now;
    this.renewDeadlineMs = options.renewDeadlineMs ?? Math.floor((options.leaseDurationMs * 2) / 3);
    if (!(this.renewDeadlineMs > 0 && this.renewDeadlineMs < options.leaseDurationMs)) {
      throw new Error('the renew deadline must be positive and shorter than the lease duration');
    }
  }

  get isLeader(): boolean {
    return this.leading;
  }

  start(): void {
    this.stopped = false;
    void this.tick();
  }

  /**
   * Stops campaigning; a leader releases the Lease (an empty holder) so a successor need not wait.
   * `release: false` walks away as a crash would: the successor waits out the lease.
   */
  async stop(options: { release: boolean } = { release: true }): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    clearTimeout(this.deadline);
    if (!this.leading) return;
    this.setLeading(false);
    if (!options.release) return;
    try {
      const lease = await this.read();
      if (lease?.spec?.holderIdentity === this.options.identity) {
        await this.options.api.replaceNamespacedLease({
          name: this.options.name,
          namespace: this.options.namespace,
          body: { ...lease, spec: { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1 } },
        });
      }
    } catch (error) {
      this.options.onError?.(error);
    }
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    try {
      await withTimeout(this.tryAcquireOrRenew(), this.renewDeadlineMs);
    } catch (error) {
      this.options.onError?.(error);
    }
    this.stepDownIfLate();
    if (this.stopped) return;
    // Renew well within the lease; candidates look as often.
    this.timer = setTimeout(() => void this.tick(), Math.max(50, this.options.leaseDurationMs / 4));
    this.timer.unref();
  }

  private async tryAcquireOrRenew(): Promise<void> {
    const { api, namespace, name, identity } = this.options;
    const now = this.now();
    const spec = {
      holderIdentity: identity,
      leaseDurationSeconds: Math.max(1, Math.ceil(this.options.leaseDurationMs / 1000)),
      renewTime: microTime(now),
    };
    const lease = await this.read();
    if (!lease) {
      await api.createNamespacedLease({
        namespace,
        body: {
          apiVersion: 'coordination.k8s.io/v1',
          kind: 'Lease',
          metadata: { name, namespace },
          spec: { ...spec, acquireTime: microTime(now), leaseTransitions: 0 },
        },
      });
      return this.renewed(now);
    }
    const holder = lease.spec?.holderIdentity ?? '';
    const record = `${holder}@${String(lease.spec?.renewTime)}`;
    if (this.observed?.record !== record) this.observed = { record, at: now };
    const expired = holder === '' || now - this.observed.at > this.options.leaseDurationMs;
    if (holder !== identity && !expired) {
      if (this.leading) this.setLeading(false);
      return;
    }
    const takingOver = holder !== identity;
    try {
      await api.replaceNamespacedLease({
        name,
        namespace,
        body: {
          ...lease,
          spec: {
            ...lease.spec,
            ...spec,
            ...(takingOver && { acquireTime: microTime(now), leaseTransitions: (lease.spec?.leaseTransitions ?? 0) + 1 }),
          },
        },
      });
    } catch (error) {
      // Someone else wrote it first: theirs, this round.
      if (httpStatus(error) === 409) return;
      throw error;
    }
    this.renewed(now);
  }

  /**
   * Renewed now (counted from the answer, as client-go's observedTime is): the deadline starts again.
   * The answer to a round that outlived its deadline (`sentAt`) is ignored: that round was given up.
   */
  private renewed(sentAt: number): void {
    if (this.stopped || this.now() - sentAt >= this.renewDeadlineMs) return;
    this.lastRenewed = this.now();
    clearTimeout(this.deadline);
    this.deadline = setTimeout(() => this.stepDownIfLate(), this.renewDeadlineMs);
    this.deadline.unref();
    if (!this.leading) this.setLeading(true);
  }

  private stepDownIfLate(): void {
    if (this.leading && this.now() - this.lastRenewed >= this.renewDeadlineMs) this.setLeading(false);
  }

  private setLeading(leading: boolean): void {
    if (this.leading === leading) return;
    this.leading = leading;
    if (leading) this.options.onStartedLeading();
    else this.options.onStoppedLeading();
  }

  private async read(): Promise<V1Lease | undefined> {
    try {
      return await this.options.api.readNamespacedLease({ name: this.options.name, namespace: this.options.namespace });
    } catch (error) {
      if (httpStatus(error) === 404) return undefined;
      throw error;
    }
  }
}

/** The promise's outcome, or a rejection once `ms` have passed (the request itself is left to end on its own). */
function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer from the API server within ${ms} ms`)), ms);
  });
  promise.catch(() => undefined);
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function microTime(ms: number): V1MicroTime {
  return new V1MicroTime(ms);
}
