/**
 * What the controller knows of the cluster at one moment: its caches (possibly behind its own
 * writes) corrected by what it did but has not seen yet (expectations, admissions, picks). Every
 * count that a cap depends on is taken here, synchronously, so two reconciles of different keys
 * never both take the last place.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { type Expectations, inFlight, NO_EXPECTATIONS } from '../sandbox-policy/expectations.js';
import { type RunnerView, warmCapReleases } from '../sandbox-policy/policy.js';
import { admitInOrder, compareAdmissionOrder } from '../sandbox-policy/admission.js';
import { ANNOTATIONS, LABELS, type Sandbox, type SandboxWarmPool } from './api/v1alpha1.js';
import type { Informer } from '../kube/informer.js';
import { isPodReady } from './api/pod-health.js';
import { hasEnded, isAdmitted } from './api/sandbox-status.js';
import { admissionCandidate, creationTime, inAdmissionOrder } from './api/admission-order.js';
import { isControlledBy } from '../kube/owner-references.js';
import type { SandboxObservation } from './sandbox-decisions.js';
import type { PoolRefusal } from './pool-decisions.js';

/** How long a create or delete may stay unseen before it is assumed lost (client-go uses 5 min). */
const EXPECTATION_TTL_MS = 60_000;

export function objectKey(kind: 'Sandbox' | 'SandboxWarmPool', namespace: string, name: string): string {
  return `${kind}/${namespace}/${name}`;
}

export class ClusterView {
  expectations: Expectations = NO_EXPECTATIONS;
  /** Sandboxes admitted by this leader whose status may not show it yet. */
  readonly admitted = new Set<string>();
  /** Pool pods a claim picked, whose adoption the cache may not show yet, by pod name. */
  readonly picked = new Map<string, PoolPick>();
  /**
   * Sandboxes as this replica last wrote them, with the resourceVersion they were written over: while
   * the cache still shows that older version, the written one is the truth (no 409 round trip to
   * learn what this replica itself just wrote).
   */
  readonly ownWrites = new Map<string, { over: string | undefined; object: Sandbox }>();
  /** Pod creates a ResourceQuota refused, per Sandbox key, so its condition says why it waits. */
  readonly createRefusals = new Map<string, { reason: string; message: string }>();
  /** A pool's last refused create, per pool key: its status says why it is short, and its creates back off. */
  readonly poolRefusals = new Map<string, PoolRefusal>();

  constructor(
    readonly sandboxes: Informer<Sandbox>,
    readonly pools: Informer<SandboxWarmPool>,
    readonly pods: Informer<V1Pod>,
    readonly namespace: string,
    private readonly maxSandboxes: number,
    private readonly defaultImage: string,
  ) {}

  /** Forgets what this replica did (leadership changes hands: the next leader starts from the cluster). */
  reset(): void {
    this.expectations = NO_EXPECTATIONS;
    this.admitted.clear();
    this.picked.clear();
    this.createRefusals.clear();
    this.poolRefusals.clear();
    this.ownWrites.clear();
  }

  /** The freshest known version of a Sandbox: the cache's, or this replica's own write the cache has not caught up with. */
  freshest(cached: Sandbox): Sandbox {
    const key = this.sandboxKey(cached);
    const written = this.ownWrites.get(key);
    if (!written) return cached;
    if (written.over === cached.metadata.resourceVersion) return written.object;
    this.ownWrites.delete(key);
    return cached;
  }

  sandboxKey(sandbox: Sandbox): string {
    return objectKey('Sandbox', sandbox.metadata.namespace ?? this.namespace, sandbox.metadata.name);
  }

  poolKey(pool: SandboxWarmPool): string {
    return objectKey('SandboxWarmPool', pool.metadata.namespace ?? this.namespace, pool.metadata.name);
  }

  /** Pods whose controller reference is the object with `uid` (ownership by UID, never by labels). */
  ownedPods(uid: string | undefined): V1Pod[] {
    if (!uid) return [];
    return this.pods.list(this.namespace).filter((p) => isControlledBy(p, uid));
  }

  pendingCreates(key: string, now: number): readonly string[] {
    return inFlight(this.expectations, key, now, EXPECTATION_TTL_MS)?.creates ?? [];
  }

  /** Whether a Sandbox holds one of the cluster's places. */
  holdsPlace(sandbox: Sandbox): boolean {
    if (hasEnded(sandbox)) return false;
    return isAdmitted(sandbox) || this.admitted.has(this.sandboxKey(sandbox));
  }

  /** Places taken: admitted sandboxes, warm-pool pods (and pool creates in flight). */
  placesUsed(now: number, exceptPool?: string): { sandboxes: number; poolPods: number } {
    const sandboxes = this.sandboxes.list(this.namespace).filter((s) => this.holdsPlace(s)).length;
    let poolPods = 0;
    for (const pool of this.pools.list(this.namespace)) {
      if (pool.metadata.uid === exceptPool) continue;
      poolPods += this.livePoolPods(pool).length + this.pendingCreates(this.poolKey(pool), now).length;
    }
    return { sandboxes, poolPods };
  }

  waiting(): Sandbox[] {
    return this.sandboxes.list(this.namespace).filter((s) => !hasEnded(s) && !this.holdsPlace(s));
  }

  /**
   * Whether `sandbox` is admitted now, in creation order. A ready pool pod it can adopt is a place
   * that moves rather than a new one, so the pool's idle pods do not keep claims out.
   */
  admission(sandbox: Sandbox, now: number): SandboxObservation['admission'] {
    if (this.holdsPlace(sandbox)) return { admitted: true };
    const used = this.placesUsed(now);
    const adoptable = this.pools.list(this.namespace).reduce((n, pool) => n + this.adoptablePods(pool).length, 0);
    // Names serve as ids: every Sandbox listed is of this namespace.
    const line = this.waiting().map(admissionCandidate).sort(compareAdmissionOrder);
    const admitted = admitInOrder(line, used.sandboxes + used.poolPods - adoptable, this.maxSandboxes);
    const name = sandbox.metadata.name;
    if (admitted.includes(name)) {
      this.admitted.add(this.sandboxKey(sandbox));
      return { admitted: true };
    }
    const position = line.findIndex((c) => c.id === name) + 1;
    return { admitted: false, position: position - admitted.length, used: used.sandboxes + used.poolPods, max: this.maxSandboxes };
  }

  /** The tenant is over its warm cap and `sandbox` is its least recently used warm one. */
  releasedByWarmCap(sandbox: Sandbox): boolean {
    if (sandbox.spec.mode !== 'warm') return false;
    const warm = this.sandboxes
      .list(this.namespace)
      .filter((s) => s.spec.mode === 'warm' && s.spec.tenantId === sandbox.spec.tenantId && !hasEnded(s));
    const newest = warm.reduce<Sandbox | undefined>((a, s) => (!a || creationTime(s) > creationTime(a) ? s : a), undefined);
    const cap = newest?.spec.maxConcurrentWarm;
    const views: RunnerView[] = warm.map((s) => ({
      id: this.sandboxKey(s),
      agentType: s.spec.agentType,
      state: 'held',
      tenantId: s.spec.tenantId,
      lastUsedAt: s.spec.lastActivityTime ? Date.parse(s.spec.lastActivityTime) : creationTime(s),
    }));
    return warmCapReleases(views, () => cap).includes(this.sandboxKey(sandbox));
  }

  /**
   * A ready, unclaimed pod of a pool `sandbox` may adopt from, oldest first: the pool it names (or
   * any of its agent type), running the image it asks for, and without resources of its own (a
   * Sandbox that sets resources gets a pod made to them).
   */
  poolCandidate(sandbox: Sandbox): V1Pod | undefined {
    const image = sandbox.spec.image ?? this.defaultImage;
    const pools = this.pools
      .list(this.namespace)
      .filter((p) => (sandbox.spec.poolRef ? p.metadata.name === sandbox.spec.poolRef.name : p.spec.agentType === sandbox.spec.agentType))
      .filter(
        (p) => p.spec.agentType === sandbox.spec.agentType && (p.spec.image ?? this.defaultImage) === image && !sandbox.spec.resources,
      );
    const candidates = pools.flatMap((pool) => this.adoptablePods(pool));
    return candidates.sort(inAdmissionOrder)[0];
  }

  livePoolPods(pool: SandboxWarmPool): V1Pod[] {
    return this.ownedPods(pool.metadata.uid).filter(
      (p) =>
        !p.metadata?.deletionTimestamp &&
        p.status?.phase !== 'Failed' &&
        p.status?.phase !== 'Succeeded' &&
        !this.picked.has(p.metadata!.name!),
    );
  }

  /**
   * When pods of `pool` were claimed since `since` (ms): picks the cache may not show yet, and the
   * adoption time every adopted pod carries (so a new leader knows it too). A pod is counted once.
   */
  claimedSince(pool: SandboxWarmPool, since: number): number[] {
    const name = pool.metadata.name;
    const times = new Map<string, number>();
    for (const pod of this.pods.list(this.namespace)) {
      const annotations = pod.metadata?.annotations;
      if (annotations?.[ANNOTATIONS.adoptedFrom] === name)
        times.set(pod.metadata!.name!, Date.parse(annotations[ANNOTATIONS.adoptedAt] ?? ''));
    }
    for (const [podName, pick] of this.picked) if (pick.pool === name) times.set(podName, pick.at);
    return [...times.values()].filter((at) => Number.isFinite(at) && at >= since);
  }

  adoptablePods(pool: SandboxWarmPool): V1Pod[] {
    return this.livePoolPods(pool).filter((p) => p.metadata?.labels?.[LABELS.pool] === pool.metadata.name && isPodReady(p));
  }
}

/** A pool pod a claim picked: the pool it belonged to, and when (ms). */
export interface PoolPick {
  pool: string;
  at: number;
}
