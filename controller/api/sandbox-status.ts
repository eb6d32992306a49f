/**
 * How a Sandbox's status is read, the other half of what the controller writes: whether it runs,
 * waits for a place, starts or has ended (and why), where its runner listens and which Secret holds
 * the runner's token, read off the status or, one write earlier, off the pod the Sandbox controls.
 * Pure functions over the CRD types, so the API server and the controller read a status the same
 * way. Fail-safe direction: whatever is not plainly ready reads as not ready (starting), and a
 * Sandbox that has ended is served by nothing, whatever its pod shows.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { isControlledBy } from '../../kube/owner-references.js';
import { podHealth } from './pod-health.js';
import { conditionOf, isTerminal, REASONS, RUNNER_PORT_NAME, type Sandbox, tokenSecretName } from './v1alpha1.js';

export type SandboxStanding =
  | { kind: 'ready'; host: string; port: number; tokenSecretName: string }
  | { kind: 'starting' }
  /** Not admitted: every place of the cluster is taken (Admitted=False, CapacityExhausted). */
  | { kind: 'queued' }
  /** Expired, failed or being deleted: never runs again; a new Sandbox is needed. */
  | { kind: 'ended'; reason: string; message: string };

/** Being deleted, or in a terminal phase: it never runs again. */
export function hasEnded(sandbox: Sandbox): boolean {
  return Boolean(sandbox.metadata.deletionTimestamp) || isTerminal(sandbox.status?.phase);
}

export function standingOf(sandbox: Sandbox): SandboxStanding {
  const status = sandbox.status;
  const ready = conditionOf(status, 'Ready');
  if (sandbox.metadata.deletionTimestamp) return { kind: 'ended', reason: 'Deleted', message: 'the Sandbox is being deleted' };
  if (isTerminal(status?.phase)) {
    return { kind: 'ended', reason: ready?.reason ?? status!.phase!, message: ready?.message ?? `the Sandbox is ${status!.phase}` };
  }
  const admitted = conditionOf(status, 'Admitted');
  if (admitted?.status === 'False' && admitted.reason === REASONS.capacityExhausted) return { kind: 'queued' };
  const endpoint = status?.endpoint ? parseEndpoint(status.endpoint) : undefined;
  if (status?.phase === 'Ready' && ready?.status === 'True' && endpoint && status.tokenSecretName) {
    return { kind: 'ready', ...endpoint, tokenSecretName: status.tokenSecretName };
  }
  return { kind: 'starting' };
}

/** Whether the controller has given the Sandbox its place (Admitted=True): it will not be refused for capacity any more. */
export function isAdmitted(sandbox: Sandbox): boolean {
  return conditionOf(sandbox.status, 'Admitted')?.status === 'True';
}

/** Where a Sandbox's runner listens, and the Secret holding the token it wants. */
export interface RunnerAddress {
  podName: string;
  /** Known when the address was read off the pod itself. */
  podUid?: string | undefined;
  host: string;
  port: number;
  tokenSecretName: string;
}

/** The address the controller's status gives a Ready Sandbox. */
export function statusAddress(sandbox: Sandbox): RunnerAddress | undefined {
  const standing = standingOf(sandbox);
  if (standing.kind !== 'ready' || !sandbox.status?.podName) return undefined;
  return { podName: sandbox.status.podName, host: standing.host, port: standing.port, tokenSecretName: standing.tokenSecretName };
}

/**
 * The runner serving `sandbox`, read off its pods: the one it controls (made for it, or adopted from
 * a pool by a patch that made it the owner), not being deleted, running and ready, with a control
 * port. The controller writes the same as the Sandbox's Ready status one write later.
 */
export function servingPod(sandbox: Sandbox, pods: readonly V1Pod[]): RunnerAddress | undefined {
  if (standingOf(sandbox).kind === 'ended') return undefined;
  const pod = pods.find((p) => !p.metadata?.deletionTimestamp && isControlledBy(p, sandbox.metadata.uid));
  if (!pod) return undefined;
  const health = podHealth(pod);
  const port = pod.spec?.containers[0]?.ports?.find((p) => p.name === RUNNER_PORT_NAME)?.containerPort;
  if (health.state !== 'ready' || !port) return undefined;
  const podName = pod.metadata!.name!;
  return { podName, podUid: pod.metadata?.uid, host: health.podIP, port, tokenSecretName: tokenSecretName(podName) };
}

/** `host:port` (IPv6 hosts in brackets) as the controller writes `status.endpoint`. */
export function parseEndpoint(endpoint: string): { host: string; port: number } | undefined {
  const match = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(endpoint);
  if (!match) return undefined;
  const port = Number(match[2]);
  return port > 0 && port < 65536 ? { host: match[1]!, port } : undefined;
}
