/**
 * How a Sandbox's status is read, the other half of what the controller writes: whether it runs,
 * waits for a place, starts or has ended (and why). Where its runner listens and which Secret holds
 * the runner's token are read off the pod the Sandbox controls, never off the status: whoever may
 * write a Sandbox's status (status subresource rights are granted more widely than pod or Secret
 * reads) must not be able to point the API server at another address or Secret (`untrustedStatus`
 * says when a status tries). Pure functions over the CRD types, so the API server and the controller
 * read a status the same way. Fail-safe direction: whatever is not plainly ready reads as not ready
 * (starting), and a Sandbox that has ended is served by nothing, whatever its pod shows.
 */
import type { V1Pod } from '@kubernetes/client-node';
import { isControlledBy } from '../../kube/owner-references.js';
import { podHealth } from './pod-health.js';
import {
  conditionOf,
  isTerminal,
  LABELS,
  MANAGED_BY,
  REASONS,
  RUNNER_COMPONENT,
  RUNNER_PORT_NAME,
  type Sandbox,
  tokenSecretName,
} from './v1alpha1.js';

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

/** Where a Sandbox's runner listens, and the Secret holding the token it wants, as the status claims it. */
export interface ClaimedAddress {
  podName: string;
  host: string;
  port: number;
  tokenSecretName: string;
}

/** Where a Sandbox's runner listens, read off the runner pod the Sandbox controls (see `servingPod`). */
export interface RunnerAddress extends ClaimedAddress {
  podUid: string;
  /** The Sandbox controlling the pod: the token Secret must belong to it or to the pod. */
  sandboxUid: string;
}

/** The address the controller's status claims for a Ready Sandbox: for comparison only, never dialed. */
export function statusAddress(sandbox: Sandbox): ClaimedAddress | undefined {
  const standing = standingOf(sandbox);
  if (standing.kind !== 'ready' || !sandbox.status?.podName) return undefined;
  return { podName: sandbox.status.podName, host: standing.host, port: standing.port, tokenSecretName: standing.tokenSecretName };
}

/**
 * The runner serving `sandbox`, read off its pods: the one it controls (made for it, or adopted from
 * a pool by a patch that made it the owner), a runner pod by its labels, not being deleted, running
 * and ready, with a control port; its address is the pod's own IP, its token Secret the one named
 * after it. The controller writes the same as the Sandbox's Ready status one write later.
 */
export function servingPod(sandbox: Sandbox, pods: readonly V1Pod[]): RunnerAddress | undefined {
  const sandboxUid = sandbox.metadata.uid;
  if (standingOf(sandbox).kind === 'ended' || !sandboxUid) return undefined;
  const pod = pods.find((p) => !p.metadata?.deletionTimestamp && isControlledBy(p, sandboxUid) && isRunnerPod(p));
  if (!pod?.metadata?.uid) return undefined;
  const health = podHealth(pod);
  const port = pod.spec?.containers[0]?.ports?.find((p) => p.name === RUNNER_PORT_NAME)?.containerPort;
  if (health.state !== 'ready' || !port) return undefined;
  const podName = pod.metadata.name!;
  return { podName, podUid: pod.metadata.uid, sandboxUid, host: health.podIP, port, tokenSecretName: tokenSecretName(podName) };
}

function isRunnerPod(pod: V1Pod): boolean {
  const labels = pod.metadata?.labels;
  return labels?.[LABELS.managedBy] === MANAGED_BY && labels?.[LABELS.component] === RUNNER_COMPONENT;
}

/**
 * Why the Sandbox's status cannot be taken at its word, when it claims a runner other than the one
 * `serving` (read off the pods) is: another pod, address, port or token Secret. Undefined when it
 * agrees, claims nothing, or names a pod not seen yet (the pods' watch may be behind the status).
 */
export function untrustedStatus(sandbox: Sandbox, serving: RunnerAddress | undefined): string | undefined {
  const claimed = statusAddress(sandbox);
  if (!claimed || !serving) return undefined;
  const differences = [
    claimed.podName !== serving.podName && `pod ${claimed.podName}`,
    (claimed.host !== serving.host || claimed.port !== serving.port) && `address ${claimed.host}:${claimed.port}`,
    claimed.tokenSecretName !== serving.tokenSecretName && `token Secret ${claimed.tokenSecretName}`,
  ].filter((difference) => difference !== false);
  if (differences.length === 0) return undefined;
  return (
    `its status names ${differences.join(', ')}, but the ready runner pod it controls is ${serving.podName} ` +
    `at ${serving.host}:${serving.port} with token Secret ${serving.tokenSecretName}: the status is ignored`
  );
}

/** `host:port` (IPv6 hosts in brackets) as the controller writes `status.endpoint`. */
export function parseEndpoint(endpoint: string): { host: string; port: number } | undefined {
  const match = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(endpoint);
  if (!match) return undefined;
  const port = Number(match[2]);
  return port > 0 && port < 65536 ? { host: match[1]!, port } : undefined;
}
