/**
 * What to do with one Sandbox, as a pure function of the object, what the controller observed
 * (its pod, its place in the admission line, the tenant's warm cap, a pool pod it may adopt) and
 * `now`. The reconciler executes the actions, writes the status once if it changed, and requeues at
 * `requeueAt`. Fail-safe direction: when unsure (a create in flight, a stale cache) do nothing and
 * wait for the cache, never start a second pod.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { conditionOf, isTerminal, REASONS, type Sandbox, type SandboxStatus, tokenSecretName } from './api/v1alpha1.js';
import { setCondition } from './conditions.js';
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
  /** The last pod create was refused by the API server (a ResourceQuota). */
  createRefused?: { reason: string; message: string } | undefined;
  startTimeoutMs: number;
  runnerPort: number;
}

export type SandboxAction =
  | { kind: 'create-pod' }
  | { kind: 'adopt-pod'; pod: V1Pod }
  | { kind: 'delete-pod'; podName: string };

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

export function decideSandbox(sandbox: Sandbox, observed: SandboxObservation): SandboxDecision {
  const { now } = observed;
  const generation = sandbox.metadata.generation;
  const before = sandbox.status ?? {};
  const events: SandboxEvent[] = [];
  const actions: SandboxAction[] = [];
  const pod = observed.pod && !observed.pod.metadata?.deletionTimestamp ? observed.pod : undefined;
  let status: SandboxStatus = { ...before, observedGeneration: generation };
  const iso = new Date(now).toISOString();
  const shutdownAt = sandbox.spec.shutdownTime ? Date.parse(sandbox.spec.shutdownTime) : undefined;

  const end = (phase: 'Expired' | 'Failed', reason: string, message: string): SandboxDecision => {
    if (pod && !(phase === 'Failed' && hasFinished(pod))) actions.push({ kind: 'delete-pod', podName: pod.metadata!.name! });
    if (before.phase !== phase) events.push({ type: phase === 'Failed' ? 'Warning' : 'Normal', reason, message });
    let conditions = setCondition(status.conditions, { type: 'Ready', status: 'False', reason, message }, now, generation);
    if (phase === 'Expired') {
      conditions = setCondition(conditions, { type: 'Expired', status: 'True', reason, message }, now, generation);
    }
    return {
      actions,
      events,
      status: { ...status, phase, conditions, endpoint: undefined, ...(phase === 'Expired' && { expiredTime: before.expiredTime ?? iso }) },
    };
  };

  /** Its pod (owned, or adopted by this decision's action) is ready: the runner serves. */
  const ready = (podIP: string): SandboxDecision => {
    const endpoint = `${podIP}:${observed.runnerPort}`;
    if (before.phase !== 'Ready') events.push({ type: 'Normal', reason: 'Ready', message: `runner ${status.podName} is ready at ${endpoint}` });
    status = {
      ...status,
      phase: 'Ready',
      endpoint,
      readyTime: before.readyTime ?? iso,
      conditions: setCondition(status.conditions, { type: 'Ready', status: 'True', reason: REASONS.runnerReady, message: `serving on ${endpoint}` }, now, generation),
    };
    return { actions, events, status, requeueAt: shutdownAt };
  };

  // Terminal: nothing runs again; a pod left over (a stale cache at the time) still goes, except a
  // finished one of a failed Sandbox, kept for `kubectl logs`.
  if (isTerminal(before.phase)) {
    if (pod && !(before.phase === 'Failed' && hasFinished(pod))) actions.push({ kind: 'delete-pod', podName: pod.metadata!.name! });
    return { actions, events, status };
  }
  if (shutdownAt !== undefined && shutdownAt <= now) {
    return end('Expired', REASONS.shutdownTimeReached, `the idle TTL lapsed at ${sandbox.spec.shutdownTime}; the runner was stopped`);
  }
  if (observed.releasedByWarmCap) {
    return end(
      'Expired',
      REASONS.tenantWarmCapReached,
      `tenant ${sandbox.spec.tenantId} holds more warm sandboxes than its max_concurrent_warm (${sandbox.spec.maxConcurrentWarm ?? '?'}); this was its least recently used`,
    );
  }
  status.conditions = setCondition(status.conditions, { type: 'Expired', status: 'False', reason: REASONS.notExpired, message: expiryMessage(sandbox) }, now, generation);

  // Admission: a place among the cluster's sandboxes, first come first served.
  if (!observed.admission.admitted) {
    const { position, used, max } = observed.admission;
    const message = `all ${max} sandbox places are in use (${used} taken); number ${position} in line, admitted in creation order as capacity frees`;
    if (conditionOf(before, 'Admitted')?.reason !== REASONS.capacityExhausted) {
      events.push({ type: 'Warning', reason: REASONS.capacityExhausted, message });
    }
    status = {
      ...status,
      phase: 'Pending',
      conditions: setCondition(
        setCondition(status.conditions, { type: 'Admitted', status: 'False', reason: REASONS.capacityExhausted, message }, now, generation),
        { type: 'Ready', status: 'False', reason: REASONS.capacityExhausted, message: 'waiting for a sandbox place' },
        now,
        generation,
      ),
    };
    return { actions, events, status, requeueAt: shutdownAt };
  }
  if (conditionOf(before, 'Admitted')?.status !== 'True') {
    status.admittedTime = iso;
    status.conditions = setCondition(status.conditions, { type: 'Admitted', status: 'True', reason: REASONS.admitted, message: 'a sandbox place is reserved' }, now, generation);
  }
  const startDeadline = Date.parse(status.admittedTime ?? sandbox.metadata.creationTimestamp ?? iso) + observed.startTimeoutMs;

  if (!pod) {
    if (observed.podInFlight) {
      // An adoption already made it Ready: it stays so while the cache catches up with the pod.
      const phase = before.phase === 'Ready' ? 'Ready' : 'Starting';
      return { actions, events, status: { ...status, phase }, requeueAt: earliest(shutdownAt, startDeadline) };
    }
    if (before.podName && before.readyTime) {
      return end('Failed', REASONS.podDeleted, `pod ${before.podName} went away while serving; create a new Sandbox (the conversation resumes from its transcript)`);
    }
    if (now >= startDeadline) {
      const last = observed.createRefused ?? { reason: REASONS.startTimeout, message: 'no runner pod could be started' };
      return end('Failed', last.reason, `not ready within ${Math.round(observed.startTimeoutMs / 1000)} s: ${last.message}`);
    }
    if (observed.createRefused) {
      // Retried with backoff by the queue; said so in the meantime.
      status = {
        ...status,
        phase: 'Starting',
        conditions: setCondition(status.conditions, { type: 'Ready', status: 'False', ...observed.createRefused }, now, generation),
      };
      return { actions: [{ kind: 'create-pod' }], events, status, requeueAt: earliest(shutdownAt, startDeadline) };
    }
    const candidate = observed.poolCandidate;
    actions.push(candidate ? { kind: 'adopt-pod', pod: candidate } : { kind: 'create-pod' });
    const podName = candidate ? candidate.metadata!.name! : sandbox.metadata.name;
    events.push(
      candidate
        ? { type: 'Normal', reason: 'Adopted', message: `claimed ready runner ${podName} from warm pool ${candidate.metadata?.labels?.['acis.dev/pool']}` }
        : { type: 'Normal', reason: 'Started', message: `no ready pool runner; starting pod ${podName}` },
    );
    status = { ...status, podName, tokenSecretName: tokenSecretName(podName), launch: candidate ? 'pool' : 'cold' };
    // The adoption's patch carries the resourceVersion the candidate was seen ready at: if it
    // succeeds, the pod is still as seen, so the Sandbox is Ready in this same status write (no
    // second reconcile on the pod's watch event). A lost adoption writes no status at all.
    const candidateHealth = candidate && podHealth(candidate);
    if (candidateHealth?.state === 'ready') return ready(candidateHealth.podIP);
    status = {
      ...status,
      phase: 'Starting',
      conditions: setCondition(status.conditions, { type: 'Ready', status: 'False', reason: REASONS.starting, message: 'starting a runner' }, now, generation),
    };
    return { actions, events, status, requeueAt: earliest(shutdownAt, startDeadline) };
  }

  const health = podHealth(pod);
  status.podName = pod.metadata!.name;
  if (health.state === 'ready') return ready(health.podIP);
  if (health.state === 'failing' && (health.terminal || before.readyTime)) return end('Failed', health.reason, health.message);
  if (health.state === 'failing' && now >= startDeadline) {
    return end('Failed', health.reason, `not ready within ${Math.round(observed.startTimeoutMs / 1000)} s: ${health.message}`);
  }
  if (now >= startDeadline) {
    return end('Failed', REASONS.startTimeout, `not ready within ${Math.round(observed.startTimeoutMs / 1000)} s (${health.message})`);
  }
  status = {
    ...status,
    phase: 'Starting',
    conditions: setCondition(status.conditions, { type: 'Ready', status: 'False', reason: health.reason, message: health.message }, now, generation),
  };
  return { actions, events, status, requeueAt: earliest(shutdownAt, startDeadline) };
}

/** The Secret holding a runner pod's connection token (created with the pod, key `token`). */
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
