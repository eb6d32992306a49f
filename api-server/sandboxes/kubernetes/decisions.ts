/**
 * What the kubernetes provider decides about Sandbox resources, as pure functions of the objects it
 * sees and `now`: the one name a conversation's Sandbox has (so two API replicas can never make two),
 * the spec it writes, how far a Sandbox is (ready, starting, queued for a place, ended), and where a
 * queued one stands in the controller's admission line (creation order), and where its runner
 * listens. No client, no I/O.
 */
import { createHash } from 'node:crypto';
import type { V1Pod } from '@kubernetes/client-node';
import { API_VERSION, conditionOf, isTerminal, LABELS, REASONS, RUNNER_PORT_NAME, SANDBOX, type Sandbox, type SandboxSpec, tokenSecretName } from '../../../controller/api/v1alpha1.js';
import { podHealth } from '../../../controller/api/pod-health.js';
import { isControlledBy } from '../../../kube/owner-references.js';


/** Generated conversation ids: `con_` and upper-case Crockford base32 (see core/ids.ts). */
const GENERATED_SUFFIX = /^[0-9A-Z]{1,50}$/;

/**
 * The Sandbox name of a conversation: `con-` and its id's suffix in lower case (readable in kubectl),
 * or a hash of the id when lower-casing could make two ids one. Deterministic, so a create racing
 * another replica's answers 409 AlreadyExists instead of making a second Sandbox.
 */
export function sandboxName(conversationId: string): string {
  const suffix = conversationId.replace(/^con_/, '');
  if (GENERATED_SUFFIX.test(suffix)) return `con-${suffix.toLowerCase()}`;
  return `con-h-${createHash('sha256').update(conversationId).digest('hex').slice(0, 40)}`;
}

export interface SandboxRequest {
  conversationId: string;
  tenantId: string;
  agentType: string;
}

/** A new Sandbox for a conversation's turn; pool adoption and caps are the controller's business. */
export function newSandbox(request: SandboxRequest, namespace: string, now: number): Sandbox {
  return {
    apiVersion: API_VERSION,
    kind: SANDBOX.kind,
    metadata: {
      name: sandboxName(request.conversationId),
      namespace,
      labels: {
        [LABELS.tenant]: request.tenantId,
        [LABELS.conversation]: request.conversationId,
        [LABELS.agentType]: request.agentType,
      },
    },
    spec: {
      conversationId: request.conversationId,
      tenantId: request.tenantId,
      agentType: request.agentType,
      // Pooled until a turn ends held: the controller counts only warm sandboxes against a tenant's cap.
      mode: 'pooled',
      lastActivityTime: new Date(now).toISOString(),
    },
  };
}

/** The spec fields a release with a warm hold writes: the sliding deadline and the tenant's cap. */
export function holdSpec(now: number, idleTtlSeconds: number, maxConcurrentWarm: number): Partial<SandboxSpec> & { shutdownTime: string } {
  return {
    mode: 'warm',
    shutdownTime: new Date(now + idleTtlSeconds * 1000).toISOString(),
    lastActivityTime: new Date(now).toISOString(),
    maxConcurrentWarm,
  };
}

export type SandboxStanding =
  | { kind: 'ready'; host: string; port: number; tokenSecretName: string }
  | { kind: 'starting' }
  /** Not admitted: every place of the cluster is taken (Admitted=False, CapacityExhausted). */
  | { kind: 'queued' }
  /** Expired, failed or being deleted: never runs again; a new Sandbox is needed. */
  | { kind: 'ended'; reason: string; message: string };

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
 * port. The controller writes the same as the Sandbox's Ready status one write later; a Sandbox that
 * has ended is served by nothing, whatever its pod shows.
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

/** Whether the controller has given the Sandbox its place (Admitted=True): it will not be refused for capacity any more. */
export function isAdmitted(sandbox: Sandbox): boolean {
  return conditionOf(sandbox.status, 'Admitted')?.status === 'True';
}

/** `host:port` (IPv6 hosts in brackets) as the controller writes `status.endpoint`. */
export function parseEndpoint(endpoint: string): { host: string; port: number } | undefined {
  const match = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(endpoint);
  if (!match) return undefined;
  const port = Number(match[2]);
  return port > 0 && port < 65536 ? { host: match[1]!, port } : undefined;
}

/**
 * Where a queued Sandbox stands in the controller's admission line (1 = admitted next): the
 * controller admits waiting Sandboxes in creation order, so it is one plus the waiting ones created
 * before it. Ties in creation time (whole seconds) are broken by name, as the controller does.
 */
export function queuePosition(sandboxes: readonly Sandbox[], name: string): number {
  const own = sandboxes.find((s) => s.metadata.name === name);
  if (!own) return 1;
  const key = admissionKey(own);
  return 1 + sandboxes.filter((s) => s.metadata.name !== name && standingOf(s).kind === 'queued' && compareKeys(admissionKey(s), key) < 0).length;
}

function admissionKey(sandbox: Sandbox): [number, string] {
  return [Date.parse(sandbox.metadata.creationTimestamp ?? '') || 0, sandbox.metadata.name];
}

function compareKeys(a: [number, string], b: [number, string]): number {
  return a[0] - b[0] || a[1].localeCompare(b[1]);
}
