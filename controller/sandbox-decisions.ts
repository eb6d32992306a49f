/**
 * What to do with one Sandbox, as a pure function of the object, what the controller observed
 * (its pod, its place in the admission line, the tenant's warm cap, a pool pod it may adopt) and
 * `now`. The reconciler executes the actions, writes the status once if it changed, and requeues at
 * `requeueAt`. Fail-safe direction: when unsure (a create in flight, a stale cache) do nothing and
 * wait for the cache, never start a second pod.
 */
import type { V1Pod } from '@kubernetes/client-node';
import {
  coldPodName,
  type Condition,
  conditionOf,
  isTerminal,
  LABELS,
  REASONS,
  type Sandbox,
  type SandboxStatus,
  tokenSecretName,
} from './api/v1alpha1.js';
import { type ConditionInput, setCondition } from './conditions.js';
import { podHealth } from './api/pod-health.js';

export interface SandboxObservation {
  now: number;
  /** The pod whose controller reference is this Sandbox, from the cache. */
  pod?: V1Pod | undefined;
  /** A create or adoption for it was sent and the cache has not shown it yet. */
  podInFlight: boolean;
  /** Whether it holds (or now gets) one of the cluster's places, and if not, where it waits. */
  admission: { admitted: true } | { admitted: false; position: number; used: number; max: number };
  /** The tenant is over its max_concurrent_warm and this is its least recently used warm sandbox. */
  releasedByWarmCap: boolean;
  /** A ready, unclaimed pod of a matching warm pool. */
  poolCandidate?: V1Pod | undefined;
  /** The last pod create was refused by the API server (a ResourceQuota, an invalid spec, an admission webhook), with its message. */
  createRefused?: { reason: string; message: string } | undefined;
  /** Why no valid runner pod can be made of its spec (requests above limits), found before any create. */
  specProblem?: string | undefined;
  startTimeoutMs: number;
  runnerPort: number;
}

export type SandboxAction =
  | { kind: 'create-pod' }
  | { kind: 'adopt-pod'; pod: V1Pod }
  /**
   * `graceful`: with the pod's grace period, whose preStop hook waits for the API server to keep the
   * workspace (an expired hold); else at once (a failed start has nothing to keep).
   */
  | { kind: 'delete-pod'; podName: string; graceful: boolean };

export interface SandboxEvent {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

export interface SandboxDecision {
  actions: SandboxAction[];
  status: SandboxStatus;
  events: SandboxEvent[];
  /** When to look again even if nothing changes (the shutdown time, the start deadline). */
  requeueAt?: number | undefined;
}

/** A decision being made: the Sandbox and what was observed, and the status, actions and events so far. */
interface Draft {
  sandbox: Sandbox;
  observed: SandboxObservation;
  /** The status as the Sandbox has it. */
  before: SandboxStatus;
  /** The status to write, as far as decided. */
  status: SandboxStatus;
  actions: SandboxAction[];
  events: SandboxEvent[];
  /** Its pod, unless that is being deleted. */
  pod: V1Pod | undefined;
  /** `now` as RFC 3339, for the status's times. */
  iso: string;
  shutdownAt: number | undefined;
}

export function decideSandbox(sandbox: Sandbox, observed: SandboxObservation): SandboxDecision {
  const before = sandbox.status ?? {};
  const draft: Draft = {
    sandbox,
    observed,
    before,
    status: { ...before, observedGeneration: sandbox.metadata.generation },
    actions: [],
    events: [],
    pod: observed.pod && !observed.pod.metadata?.deletionTimestamp ? observed.pod : undefined,
    iso: new Date(observed.now).toISOString(),
    shutdownAt: sandbox.spec.shutdownTime ? Date.parse(sandbox.spec.shutdownTime) : undefined,
  };

  // Terminal: nothing runs again; a pod left over (a stale cache at the time) still goes, except a
  // finished one of a failed Sandbox, kept for `kubectl logs`.
  if (isTerminal(before.phase)) {
    const { pod } = draft;
    if (pod && !(before.phase === 'Failed' && hasFinished(pod)))
      draft.actions.push({ kind: 'delete-pod', podName: pod.metadata!.name!, graceful: before.phase === 'Expired' });
    return { actions: draft.actions, events: draft.events, status: draft.status };
  }
  const expired = expiry(draft);
  if (expired) return expired;
  draft.status.conditions = withCondition(draft, {
    type: 'Expired',
    status: 'False',
    reason: REASONS.notExpired,
    message: expiryMessage(sandbox),
  });

  // A spec no pod can be made of fails at once, holding no place (the API server would refuse each create).
  if (observed.specProblem) return end(draft, 'Failed', REASONS.invalidResources, observed.specProblem);

  // Admission: a place among the cluster's sandboxes, first come first served.
  if (!observed.admission.admitted) return waitForPlace(draft, observed.admission);
  if (conditionOf(before, 'Admitted')?.status !== 'True') {
    // Told when it waited for a place (CapacityExhausted before); an admission at once is told by Started or Adopted.
    if (conditionOf(before, 'Admitted')?.status === 'False')
      draft.events.push({ type: 'Normal', reason: REASONS.admitted, message: 'a sandbox place freed up and is reserved for it' });
    draft.status.admittedTime = draft.iso;
    draft.status.conditions = withCondition(draft, {
      type: 'Admitted',
      status: 'True',
      reason: REASONS.admitted,
      message: 'a sandbox place is reserved',
    });
  }
  const startDeadline = Date.parse(draft.status.admittedTime ?? sandbox.metadata.creationTimestamp ?? draft.iso) + observed.startTimeoutMs;
  return draft.pod ? followPod(draft, draft.pod, startDeadline) : startRunner(draft, startDeadline);
}

/** Expired by its idle TTL or by its tenant's warm cap, or undefined while neither. */
function expiry(draft: Draft): SandboxDecision | undefined {
  const { sandbox, observed, shutdownAt } = draft;
  if (shutdownAt !== undefined && shutdownAt <= observed.now) {
    return end(
      draft,
      'Expired',
      REASONS.shutdownTimeReached,
      `the idle TTL lapsed at ${sandbox.spec.shutdownTime}; the runner was stopped`,
    );
  }
  if (observed.releasedByWarmCap) {
    return end(
      draft,
      'Expired',
      REASONS.tenantWarmCapReached,
      `tenant ${sandbox.spec.tenantId} holds more warm sandboxes than its max_concurrent_warm (${sandbox.spec.maxConcurrentWarm ?? '?'}); this was its least recently used`,
    );
  }
  return undefined;
}

/** Not admitted: Pending, nothing started, its place in line said (and told as an event once). */
function waitForPlace(draft: Draft, admission: { position: number; used: number; max: number }): SandboxDecision {
  const { position, used, max } = admission;
  const message = `all ${max} sandbox places are in use (${used} taken); number ${position} in line, admitted in creation order as capacity frees`;
  if (conditionOf(draft.before, 'Admitted')?.reason !== REASONS.capacityExhausted) {
    draft.events.push({ type: 'Warning', reason: REASONS.capacityExhausted, message });
  }
  draft.status.conditions = withCondition(draft, { type: 'Admitted', status: 'False', reason: REASONS.capacityExhausted, message });
  draft.status.conditions = withCondition(draft, {
    type: 'Ready',
    status: 'False',
    reason: REASONS.capacityExhausted,
    message: 'waiting for a sandbox place',
  });
  return { actions: draft.actions, events: draft.events, status: { ...draft.status, phase: 'Pending' }, requeueAt: draft.shutdownAt };
}

/** Admitted and no pod of its own in the cache: wait for one in flight, or adopt a pool pod, or create one. */
function startRunner(draft: Draft, startDeadline: number): SandboxDecision {
  const { sandbox, observed, before } = draft;
  const requeueAt = earliest(draft.shutdownAt, startDeadline);
  if (observed.podInFlight) {
    // An adoption already made it Ready: it stays so while the cache catches up with the pod.
    const phase = before.phase === 'Ready' ? 'Ready' : 'Starting';
    return { actions: draft.actions, events: draft.events, status: { ...draft.status, phase }, requeueAt };
  }
  if (before.podName && before.readyTime) {
    return end(
      draft,
      'Failed',
      REASONS.podDeleted,
      `pod ${before.podName} went away while serving; create a new Sandbox (the conversation resumes from its transcript)`,
    );
  }
  if (observed.now >= startDeadline) {
    const last = observed.createRefused ?? { reason: REASONS.startTimeout, message: 'no runner pod could be started' };
    return end(draft, 'Failed', last.reason, `not ready within ${Math.round(observed.startTimeoutMs / 1000)} s: ${last.message}`);
  }
  if (observed.createRefused) {
    // Retried with backoff by the queue; said so in the meantime, told as an event once per refusal.
    const refused = observed.createRefused;
    const shown = conditionOf(before, 'Ready');
    if (shown?.reason !== refused.reason || shown.message !== refused.message)
      draft.events.push({ type: 'Warning', reason: refused.reason, message: refused.message });
    const conditions = withCondition(draft, { type: 'Ready', status: 'False', ...refused });
    return {
      actions: [{ kind: 'create-pod' }],
      events: draft.events,
      status: { ...draft.status, phase: 'Starting', conditions },
      requeueAt,
    };
  }
  const candidate = observed.poolCandidate;
  const podName = candidate ? candidate.metadata!.name! : coldPodName(sandbox);
  draft.actions.push(candidate ? { kind: 'adopt-pod', pod: candidate } : { kind: 'create-pod' });
  draft.events.push(
    candidate
      ? {
          type: 'Normal',
          reason: 'Adopted',
          message: `claimed ready runner ${podName} from warm pool ${candidate.metadata?.labels?.[LABELS.pool]}`,
        }
      : { type: 'Normal', reason: 'Started', message: `no ready pool runner; starting pod ${podName}` },
  );
  draft.status = { ...draft.status, podName, tokenSecretName: tokenSecretName(podName), launch: candidate ? 'pool' : 'cold' };
  // The adoption's patch carries the resourceVersion the candidate was seen ready at: if it
  // succeeds, the pod is still as seen, so the Sandbox is Ready in this same status write (no
  // second reconcile on the pod's watch event). A lost adoption writes no status at all.
  const candidateHealth = candidate && podHealth(candidate);
  if (candidateHealth?.state === 'ready') return ready(draft, candidateHealth.podIP);
  const conditions = withCondition(draft, { type: 'Ready', status: 'False', reason: REASONS.starting, message: 'starting a runner' });
  return { actions: draft.actions, events: draft.events, status: { ...draft.status, phase: 'Starting', conditions }, requeueAt };
}

/** Admitted with its pod: Ready when the pod is, Failed when it fails for good or misses the start deadline, else Starting. */
function followPod(draft: Draft, pod: V1Pod, startDeadline: number): SandboxDecision {
  const { observed } = draft;
  const health = podHealth(pod);
  const within = `not ready within ${Math.round(observed.startTimeoutMs / 1000)} s`;
  draft.status.podName = pod.metadata!.name;
  if (health.state === 'ready') return ready(draft, health.podIP);
  // Exit 0 after serving: the API server ended its use (the turn is over, the hold released) and
  // deletes the Sandbox next. A release, not a crash; exit 0 before it ever served stays a CrashLoop.
  if (pod.status?.phase === 'Succeeded' && draft.before.readyTime)
    return end(
      draft,
      'Expired',
      REASONS.runnerStopped,
      `the runner in pod ${pod.metadata?.name} stopped normally (exit code 0) after serving`,
    );
  if (health.state === 'failing' && (health.terminal || draft.before.readyTime)) return end(draft, 'Failed', health.reason, health.message);
  if (health.state === 'failing' && observed.now >= startDeadline)
    return end(draft, 'Failed', health.reason, `${within}: ${health.message}`);
  if (observed.now >= startDeadline) return end(draft, 'Failed', REASONS.startTimeout, `${within} (${health.message})`);
  const conditions = withCondition(draft, { type: 'Ready', status: 'False', reason: health.reason, message: health.message });
  return {
    actions: draft.actions,
    events: draft.events,
    status: { ...draft.status, phase: 'Starting', conditions },
    requeueAt: earliest(draft.shutdownAt, startDeadline),
  };
}

/** Its pod (owned, or adopted by this decision's action) is ready: the runner serves. */
function ready(draft: Draft, podIP: string): SandboxDecision {
  const { before, status, observed } = draft;
  const endpoint = `${podIP}:${observed.runnerPort}`;
  if (before.phase !== 'Ready')
    draft.events.push({ type: 'Normal', reason: 'Ready', message: `runner ${status.podName} is ready at ${endpoint}` });
  const conditions = withCondition(draft, {
    type: 'Ready',
    status: 'True',
    reason: REASONS.runnerReady,
    message: `serving on ${endpoint}`,
  });
  return {
    actions: draft.actions,
    events: draft.events,
    status: { ...status, phase: 'Ready', endpoint, readyTime: before.readyTime ?? draft.iso, conditions },
    requeueAt: draft.shutdownAt,
  };
}

/** Expired or Failed for good: its pod goes (a finished pod of a failed Sandbox stays, for `kubectl logs`). */
function end(draft: Draft, phase: 'Expired' | 'Failed', reason: string, message: string): SandboxDecision {
  const { pod, before, status } = draft;
  if (pod && !(phase === 'Failed' && hasFinished(pod)))
    draft.actions.push({ kind: 'delete-pod', podName: pod.metadata!.name!, graceful: phase === 'Expired' });
  if (before.phase !== phase) draft.events.push({ type: phase === 'Failed' ? 'Warning' : 'Normal', reason, message });
  let conditions = withCondition(draft, { type: 'Ready', status: 'False', reason, message });
  if (phase === 'Expired') {
    conditions = setCondition(
      conditions,
      { type: 'Expired', status: 'True', reason, message },
      draft.observed.now,
      draft.sandbox.metadata.generation,
    );
  }
  return {
    actions: draft.actions,
    events: draft.events,
    status: {
      ...status,
      phase,
      conditions,
      endpoint: undefined,
      ...(phase === 'Expired' && { expiredTime: before.expiredTime ?? draft.iso }),
    },
  };
}

/** The status's conditions as decided so far, with `next` set (at `now`, for the Sandbox's generation). */
function withCondition(draft: Draft, next: ConditionInput): Condition[] {
  return setCondition(draft.status.conditions, next, draft.observed.now, draft.sandbox.metadata.generation);
}

/** The pod ran to its end (failed or succeeded): a failed Sandbox keeps it for `kubectl logs`. */
function hasFinished(pod: V1Pod): boolean {
  return pod.status?.phase === 'Failed' || pod.status?.phase === 'Succeeded';
}

function expiryMessage(sandbox: Sandbox): string {
  return sandbox.spec.shutdownTime ? `runs until ${sandbox.spec.shutdownTime}` : 'no shutdown time set';
}

function earliest(...times: (number | undefined)[]): number | undefined {
  const defined = times.filter((t): t is number => t !== undefined && Number.isFinite(t));
  return defined.length ? Math.min(...defined) : undefined;
}
