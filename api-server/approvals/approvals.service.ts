import type { z } from 'zod';
import { approverKeyContext } from '../admin/admin.service.js';
import { getConversationInScope } from '../conversations/conversations.service.js';
import type { AppDeps } from '../deps.js';
import { mapPage, type PageRequest, paginate } from '../core/pagination.js';
import type { ServicePrincipal, UserPrincipal } from '../core/principal.js';
import { ProblemError, problems } from '../core/problems.js';
import { upsertSecrets } from '../secrets/secrets.repository.js';
import { assertSecretsBound, sealSecrets } from '../secrets/secrets.service.js';
import { type ApprovalDecision, type ApproverKeyMaterial, verifyApprovalSignature } from './approval-signature.js';
import { presentApproval } from './approvals.presenter.js';
import {
  type ApprovalRow,
  findApproval,
  findApproverKey,
  resolvePendingApproval,
  selectConversationApprovals,
} from './approvals.repository.js';
import type { ResolveApprovalBody } from './approvals.schemas.js';

type Caller = ServicePrincipal | UserPrincipal;

/** An approval the caller may see: exactly when its conversation is (service key subtree, or the owning user's JWT). */
export async function getApprovalInScope(deps: AppDeps, caller: Caller, approvalId: string): Promise<ApprovalRow> {
  const approval = await findApproval(deps.db, approvalId);
  if (!approval) throw problems.notFound('approval');
  try {
    await getConversationInScope(deps, caller, approval.conversation_id);
  } catch (error) {
    if (error instanceof ProblemError && error.kind === 'not-found') throw problems.notFound('approval');
    throw error;
  }
  return approval;
}

export async function getApproval(deps: AppDeps, caller: Caller, approvalId: string) {
  return presentApproval(await getApprovalInScope(deps, caller, approvalId));
}

export async function listConversationApprovals(deps: AppDeps, caller: Caller, conversationId: string, page: PageRequest) {
  await getConversationInScope(deps, caller, conversationId);
  return mapPage(await paginate(selectConversationApprovals(deps.db, conversationId), 'id', page), presentApproval);
}

function signatureInvalid(): ProblemError {
  return new ProblemError('approval-signature-invalid', 403, {
    detail:
      'The signature does not verify for this approval and decision with an active approver key of its tenant, or its exp is not within the next 5 minutes.',
  });
}

function notPending(approval: ApprovalRow): ProblemError {
  const detail = approval.status === 'pending' ? 'The approval is past its expiry.' : `The approval is already ${approval.status}.`;
  return new ProblemError('approval-expired', 409, { detail });
}

async function approverKeyMaterial(deps: AppDeps, keyId: string): Promise<ApproverKeyMaterial | undefined> {
  const key = await findApproverKey(deps.db, keyId);
  if (!key) return undefined;
  return {
    id: key.id,
    tenantId: key.tenant_id,
    algorithm: key.algorithm,
    secret: key.secret_ciphertext ? deps.vault.decrypt(key.secret_ciphertext, approverKeyContext(key.id)) : null,
    publicKey: key.public_key,
    revoked: key.revoked_at !== null,
  };
}

/**
 * Approve or deny: the signature is checked first (whatever the approval's state, a bad assertion is
 * 403 and changes nothing), then the state (resolved or past expiry: 409). An approval's secrets are
 * vaulted at conversation scope in the same transaction that resolves it, so the resumed run finds
 * them; then every node hears of it and the one parking the run resumes it.
 */
export async function resolveApproval(
  deps: AppDeps,
  caller: Caller,
  approvalId: string,
  decision: ApprovalDecision,
  body: z.output<typeof ResolveApprovalBody>,
) {
  const approval = await getApprovalInScope(deps, caller, approvalId);
  const valid = verifyApprovalSignature({
    approvalId: approval.id,
    tenantId: approval.tenant_id,
    decision,
    signature: body.signature,
    key: await approverKeyMaterial(deps, body.signature.key_id),
    nowSeconds: Math.floor(deps.now().getTime() / 1000),
  });
  if (!valid) throw signatureInvalid();
  const now = deps.now();
  if (approval.status !== 'pending' || approval.expires_at <= now) throw notPending(approval);
  const secrets = decision === 'approve' ? (body.secrets ?? {}) : {};
  const requested = new Set(approval.requested_items.flatMap((item) => (item.kind === 'secret' && item.alias ? [item.alias] : [])));
  const unrequested = Object.keys(secrets).filter((alias) => !requested.has(alias));
  if (unrequested.length > 0) {
    throw problems.invalid(
      unrequested.map((alias) => ({ pointer: `/secrets/${alias}`, message: 'the approval did not request a secret under this alias' })),
    );
  }
  assertSecretsBound(deps, secrets, '/secrets');
  const owner = { scope: 'conversation' as const, id: approval.conversation_id };
  const resolved = await deps.db.transaction().execute(async (trx) => {
    const row = await resolvePendingApproval(trx, approval.id, {
      status: decision === 'approve' ? 'approved' : 'denied',
      resolvedBy: `approver_key:${body.signature.key_id}`,
      note: body.note ?? null,
      now,
    });
    if (row && Object.keys(secrets).length > 0) await upsertSecrets(trx, owner, sealSecrets(deps, owner, secrets), now);
    return row;
  });
  if (!resolved) throw notPending((await findApproval(deps.db, approval.id)) ?? approval);
  deps.metrics.approvalResolved(decision === 'approve' ? 'approved' : 'denied');
  // Under this request's id: it ties the approve or deny to the run (whose lines carry the id of the request that started it).
  deps.logger.info({ approval_id: resolved.id, message_id: resolved.message_id, status: resolved.status }, 'approval resolved');
  await deps.runtime.approvals.announce(resolved.id);
  return presentApproval(resolved);
}
