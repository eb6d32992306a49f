/**
 * What to do with one SandboxWarmPool, as a pure function: keep `replicas` unclaimed runner pods,
 * never past the cluster's cap (claims waiting for a place come before refills), never counting a
 * pod twice (creates in flight count as present). Pods that failed are replaced; extra pods go,
 * those not ready first. After a lone claim, while it still has a ready pod to offer, the pool waits
 * `refillDelayMs` before it creates the replacement: a starting runner takes the node's CPU, and the
 * claimed pod's first turn is running there at that moment (the local provider's pool waits for the
 * claimed runner's first agent line). An empty pool, or one claimed again within the delay, refills at once.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { poolDeficit, type RunnerView } from '../sandbox-policy/policy.js';
import { LABELS, type SandboxWarmPool, type SandboxWarmPoolStatus } from './api/v1alpha1.js';
import { isPodReady } from './api/pod-health.js';
import { creationTime } from './api/admission-order.js';

export interface PoolObservation {
  /** Unclaimed pods whose controller reference is this pool. */
  pods: V1Pod[];
  /** Creates sent and not yet in the cache. */
  inFlight: number;
  /** Ready pods a claim has picked but whose adoption the cache does not show yet. */
  picked: ReadonlySet<string>;
  /** Places taken in the cluster by everything else (admitted sandboxes, other pools' pods). */
  usedElsewhere: number;
  /** Sandboxes waiting for a place: they get freed capacity before the pool does. */
  waitingClaims: number;
  maxSandboxes: number;
  /** When pods of this pool were claimed (ms), those within the last `refillDelayMs` at least. */
  claimedAt: readonly number[];
  refillDelayMs: number;
  now: number;
}

export interface PoolDecision {
  create: number;
  delete: string[];
  status: SandboxWarmPoolStatus;
  /** Creates held back after a claim: look again then. */
  requeueAt: number | undefined;
}

export function decidePool(pool: SandboxWarmPool, observed: PoolObservation): PoolDecision {
  const live = observed.pods.filter((p) => !p.metadata?.deletionTimestamp);
  const failed = live.filter((p) => p.status?.phase === 'Failed' || p.status?.phase === 'Succeeded');
  const healthy = live.filter((p) => !failed.includes(p));
  const desired = pool.spec.replicas ?? 1;

  const excess = Math.max(0, healthy.length + observed.inFlight - desired);
  const surplus = [...healthy]
    .sort((a, b) => Number(isPodReady(a)) - Number(isPodReady(b)) || creationTime(b) - creationTime(a))
    .filter((p) => !observed.picked.has(p.metadata!.name!))
    .slice(0, excess)
    .map((p) => p.metadata!.name!);

  // The same deficit rule as the local provider's pool, on a cluster-wide view: this pool's pods
  // as pool runners, everything else as places taken.
  const views: RunnerView[] = healthy.map((p) => ({
    id: p.metadata!.name!,
    agentType: pool.spec.agentType,
    state: isPodReady(p) ? 'pooled' : 'starting',
    lastUsedAt: creationTime(p),
  }));
  const capacity = observed.maxSandboxes - observed.usedElsewhere - observed.waitingClaims;
  const deficit = poolDeficit(views, pool.spec.agentType, { maxSandboxes: capacity, poolSize: desired }, observed.inFlight);
  const ready = healthy.filter(isPodReady);
  const available = ready.filter((p) => !observed.picked.has(p.metadata!.name!));
  // A lone recent claim holds its replacement back. An empty pool refills at once (the next claim
  // would start cold), and so does one claimed again within the delay (claims come in a burst).
  const recent = observed.claimedAt.filter((at) => observed.now - at < observed.refillDelayMs);
  const refillAt = recent.length === 1 ? recent[0]! + observed.refillDelayMs : undefined;
  const held = deficit > 0 && available.length > 0 && refillAt !== undefined;
  return {
    create: held ? 0 : deficit,
    requeueAt: held ? refillAt : undefined,
    delete: [...failed.map((p) => p.metadata!.name!), ...surplus],
    status: {
      replicas: healthy.length,
      desiredReplicas: desired,
      readyReplicas: ready.length,
      availableReplicas: available.length,
      selector: poolSelector(pool.metadata.name),
      observedGeneration: pool.metadata.generation,
    },
  };
}

/** The label selector of a pool's unclaimed pods (the scale subresource's and an HPA's). */
export function poolSelector(poolName: string): string {
  return `${LABELS.pool}=${poolName}`;
}
