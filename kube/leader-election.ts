/**
 * Leader election on a coordination.k8s.io/v1 Lease, as client-go does it: one candidate holds the
 * Lease and renews it; the others watch the record and take it over once it has not changed for a
 * whole lease duration (measured on their own clock, so clock skew between nodes does not matter).
 * Every write carries the resourceVersion it read, so two candidates never both win (409). A leader
 * that cannot renew within the lease duration steps down before anyone may take over; stopping
 * releases the Lease so a successor takes over at once.
 */
import { type CoordinationV1Api, V1MicroTime, type V1Lease } from '@kubernetes/client-node';
import { httpStatus } from './kube-errors.js';

export interface LeaderElectionOptions {
  api: CoordinationV1Api;
  namespace: string;
  name: string;
  identity: string;
  leaseDurationMs: number;
  onStartedLeading: () => void;
  onStoppedLeading: () => void;
  onError?: (error: unknown) => void;
  now?: () => number;
}

export class LeaderElection {
  private timer: NodeJS.Timeout | undefined;
  private leading = false;
  private stopped = false;
  private lastRenewed = 0;
  private observed: { record: string; at: number } | undefined;
  private readonly now: () => number;

  constructor(private readonly options: LeaderElectionOptions) {
    this.now = options.now ?? Date.now;
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
      await this.tryAcquireOrRenew();
    } catch (error) {
      this.options.onError?.(error);
    }
    if (this.leading && this.now() - this.lastRenewed > this.options.leaseDurationMs) this.setLeading(false);
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

  private renewed(at: number): void {
    this.lastRenewed = at;
    if (!this.leading && !this.stopped) this.setLeading(true);
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

function microTime(ms: number): V1MicroTime {
  return new V1MicroTime(ms);
}
