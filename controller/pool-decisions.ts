/**
 * What to do with one SandboxWarmPool, as a pure function: keep `replicas` unclaimed runner pods,
 * never past the cluster's cap (claims waiting for a place come before refills), never counting a
 * pod twice (creates in flight count as present). Pods that failed are replaced; extra pods go,
 * those not ready first. After a lone claim, while it still has a ready pod to offer, the pool waits
 * `refillDelayMs` before it creates the replacement: a starting runner takes the node's CPU, and the
 * claimed pod's first turn is running there at that moment (the local provider's pool waits for the
 * claimed runner's first agent line). An empty pool, or one claimed again within the delay, refills at once.
 * Pods of an older pod template (the controller's runner settings changed) are replaced while idle:
 * new ones are made first, and an old ready pod goes as a new one is ready to stand in for it.
 * A refused create (a full ResourceQuota, an admission webhook) holds further creates back with an
 * exponential backoff of its own (a pod or Sandbox change must not retry it at once), and the status
 * says why: Ready=False and Degraded=True with the API server's reason and message, and an Event.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { poolDeficit, type RunnerView } from '../sandbox-policy/policy.js';
import { type Condition, conditionOf, LABELS, REASONS, type SandboxWarmPool, type SandboxWarmPoolStatus } from './api/v1alpha1.js';
import { isPodReady, podHealth } from './api/pod-health.js';
import { creationTime } from './api/admission-order.js';
import { type ConditionInput, setCondition } from './conditions.js';
import type { SandboxEvent } from './sandbox-decisions.js';

/** The last refused pod (or token Secret) create of a pool: the API server's reason and message, when, and how many in a row. */
export interface PoolRefusal {
  reason: string;
  message: string;
  at: number;
  attempts: number;
}

/** The wait after `attempts` refusals in a row before the next create: 0.5 s doubling, at most 30 s. */
export function refusalBackoffMs(attempts: number): number {
  return Math.min(30_000, 500 * 2 ** Math.max(0, attempts - 1));
}

export interface PoolObservation {
  /** Unclaimed pods whose controller reference is this pool. */
  pods: V1Pod[];
  /** Creates sent and not yet in the cache. */
  inFlight: number;
  /** Deletes sent and not yet in the cache. */
  deleting: number;
  /** The hash of the pod template the pool makes pods of now (see templateHash in pod-template.ts). */
  templateHash: string;
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
  /** The last create was refused (cleared once one succeeds or none is wanted). */
  refusal?: PoolRefusal | undefined;
  now: number;
}

export interface PoolDecision {
  create: number;
  /** Pods wanted before any hold (a refill delay, a refusal's backoff): 0 means a past refusal no longer matters. */
  wanted: number;
  events: SandboxEvent[];
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
  // Pods of an older template still serve claims until pods of the current one replace them.
  const current = healthy.filter((p) => p.metadata?.labels?.[LABELS.templateHash] === observed.templateHash);
  const outdated = healthy.filter((p) => !current.includes(p));

  const excess = Math.max(0, current.length + observed.inFlight - desired);
  const surplus = [...current]
    .sort((a, b) => Number(isPodReady(a)) - Number(isPodReady(b)) || creationTime(b) - creationTime(a))
    .filter((p) => !observed.picked.has(p.metadata!.name!))
    .slice(0, excess)
    .map((p) => p.metadata!.name!);

  // The same deficit rule as the local provider's pool, on a cluster-wide view: this pool's pods
  // of the current template as pool runners, everything else (its older pods too) as places taken.
  const views: RunnerView[] = current.map((p) => ({
    id: p.metadata!.name!,
    agentType: pool.spec.agentType,
    state: isPodReady(p) ? 'pooled' : 'starting',
    lastUsedAt: creationTime(p),
  }));
  const capacity = observed.maxSandboxes - observed.usedElsewhere - observed.waitingClaims - outdated.length;
  const deficit = poolDeficit(views, pool.spec.agentType, { maxSandboxes: capacity, poolSize: desired }, observed.inFlight);
  const capped = deficit === 0 && current.length + observed.inFlight < desired;
  const ready = healthy.filter(isPodReady);
  const available = ready.filter((p) => !observed.picked.has(p.metadata!.name!));
  // A lone recent claim holds its replacement back. An empty pool refills at once (the next claim
  // would start cold), and so does one claimed again within the delay (claims come in a burst).
  const recent = observed.claimedAt.filter((at) => observed.now - at < observed.refillDelayMs);
  const refillAt = recent.length === 1 ? recent[0]! + observed.refillDelayMs : undefined;
  const held = deficit > 0 && available.length > 0 && refillAt !== undefined;
  const { refusal } = observed;
  const retryAt = refusal ? refusal.at + refusalBackoffMs(refusal.attempts) : undefined;
  const backingOff = deficit > 0 && retryAt !== undefined && retryAt > observed.now;
  const conditions = poolConditions(pool, observed, {
    ready: ready.length,
    desired,
    capped: capped && outdated.length === 0,
    failing: healthy.map((p) => ({ name: p.metadata!.name!, health: podHealth(p) })),
  });
  return {
    create: held || backingOff ? 0 : deficit,
    wanted: deficit,
    requeueAt: backingOff ? retryAt : held ? refillAt : undefined,
    delete: [
      ...failed.map((p) => p.metadata!.name!),
      ...surplus,
      ...retired(outdated, { currentReady: current.filter(isPodReady).length, desired, capped, observed }),
    ],
    events: degradedEvents(pool, conditions),
    status: {
      conditions,
      replicas: healthy.length,
      desiredReplicas: desired,
      readyReplicas: ready.length,
      availableReplicas: available.length,
      updatedReplicas: current.length,
      templateHash: observed.templateHash,
      selector: poolSelector(pool.metadata.name),
      observedGeneration: pool.metadata.generation,
    },
  };
}

/**
 * Idle pods of an older template that go now: any not ready, and ready ones as far as ready pods of
 * the current template stand in for them (oldest first), so the pool never offers fewer ready pods
 * during a roll. Where the cluster's cap leaves no place for a new pod, one old pod goes at a time to
 * make one. A pod a claim has picked is never deleted (claimed pods are no longer the pool's at all).
 */
function retired(
  outdated: V1Pod[],
  counts: { currentReady: number; desired: number; capped: boolean; observed: PoolObservation },
): string[] {
  const idle = outdated.filter((p) => !counts.observed.picked.has(p.metadata!.name!)).sort((a, b) => creationTime(a) - creationTime(b));
  const starting = idle.filter((p) => !isPodReady(p));
  const ready = idle.filter(isPodReady);
  const stillNeeded = Math.max(0, counts.desired - counts.currentReady);
  const going = [...starting, ...ready.slice(0, Math.max(0, ready.length - stillNeeded))];
  if (going.length === 0 && counts.capped && counts.observed.deleting === 0 && idle.length > 0) going.push(idle[0]!);
  return going.map((p) => p.metadata!.name!);
}

/**
 * Ready: every desired pod is ready, else the first reason it is not (a refusal, the cluster's cap,
 * a failing pod, pods starting). Degraded: the pool cannot fill by itself (creates refused, a pod
 * failing), with the reason and message to act on.
 */
function poolConditions(
  pool: SandboxWarmPool,
  observed: PoolObservation,
  counts: { ready: number; desired: number; capped: boolean; failing: { name: string; health: ReturnType<typeof podHealth> }[] },
): Condition[] {
  const { refusal, now } = observed;
  const failing = counts.failing.find((p) => p.health.state === 'failing');
  const problem: Omit<ConditionInput, 'type' | 'status'> | undefined = refusal
    ? { reason: refusal.reason, message: refusal.message }
    : failing && failing.health.state === 'failing'
      ? { reason: failing.health.reason, message: `pod ${failing.name}: ${failing.health.message}` }
      : undefined;
  const ofDesired = `${counts.ready} of ${counts.desired} ready`;
  const ready: ConditionInput =
    counts.ready >= counts.desired
      ? { type: 'Ready', status: 'True', reason: REASONS.filled, message: ofDesired }
      : problem
        ? { type: 'Ready', status: 'False', ...problem, message: `${ofDesired}: ${problem.message}` }
        : counts.capped
          ? {
              type: 'Ready',
              status: 'False',
              reason: REASONS.capacityExhausted,
              message: `${ofDesired}: the cluster's sandbox places are in use`,
            }
          : { type: 'Ready', status: 'False', reason: REASONS.filling, message: `${ofDesired}; the others are starting` };
  const degraded: ConditionInput = problem
    ? { type: 'Degraded', status: 'True', ...problem }
    : { type: 'Degraded', status: 'False', reason: REASONS.asExpected, message: 'pod creates accepted; no pod failing' };
  const generation = pool.metadata.generation;
  return setCondition(setCondition(pool.status?.conditions, ready, now, generation), degraded, now, generation);
}

/** A Warning each time the pool becomes degraded, or degraded for another reason or message (not on every retry). */
function degradedEvents(pool: SandboxWarmPool, conditions: Condition[]): SandboxEvent[] {
  const next = conditions.find((c) => c.type === 'Degraded');
  const shown = conditionOf(pool.status, 'Degraded');
  if (next?.status !== 'True' || (shown?.status === 'True' && shown.reason === next.reason && shown.message === next.message)) return [];
  return [{ type: 'Warning', reason: next.reason, message: next.message ?? next.reason }];
}

/** The label selector of a pool's unclaimed pods (the scale subresource's and an HPA's). */
export function poolSelector(poolName: string): string {
  return `${LABELS.pool}=${poolName}`;
}
