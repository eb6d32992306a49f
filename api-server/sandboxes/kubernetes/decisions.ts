/**
 * What the kubernetes provider decides about the Sandbox resources it writes, as pure functions of
 * the request and `now`: the one name a conversation's Sandbox has (so two API replicas can never
 * make two), and the spec it writes for a turn and for a warm hold. How a Sandbox's status is read
 * (ready, queued, ended, where its runner listens) is the controller's contract, in
 * controller/api/sandbox-status.ts. No client, no I/O.
 */
import { createHash } from 'node:crypto';
import { ANNOTATIONS, API_VERSION, LABELS, SANDBOX, type Sandbox, type SandboxSpec } from '../../../controller/api/v1alpha1.js';

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
  /** The REST request whose turn needs the Sandbox (`acis.dev/request-id`, for the controller's log lines). */
  requestId?: string | undefined;
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
      ...(request.requestId !== undefined && { annotations: { [ANNOTATIONS.requestId]: request.requestId } }),
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
