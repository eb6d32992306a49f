import { z } from 'zod';
import { listQuery } from '../core/pagination.js';
import { IdParam, ListOf, Timestamp } from '../core/schemas.js';
import { SecretAlias, SecretsMap } from '../secrets/secrets.schemas.js';

export const APPROVAL_REASON_MAX = 4_000;
export const APPROVAL_ITEM_DESCRIPTION_MAX = 2_000;
export const APPROVAL_ITEMS_MAX = 20;
export const APPROVAL_NOTE_MAX = 4_000;

export const ApprovalItem = z
  .object({
    kind: z.enum(['action', 'secret']),
    description: z.string().min(1).max(APPROVAL_ITEM_DESCRIPTION_MAX),
    alias: SecretAlias.optional(),
  })
  .refine((item) => item.kind !== 'secret' || item.alias !== undefined, {
    message: 'a secret item needs an alias',
    path: ['alias'],
  });

/** What the agent passes to the platform tool `request_approval`. */
export const RequestApprovalInput = z.object({
  reason: z.string().min(1).max(APPROVAL_REASON_MAX),
  requested_items: z.array(ApprovalItem).max(APPROVAL_ITEMS_MAX),
  expires_in_seconds: z.number().int().min(1).optional(),
});

export const ApprovalStatus = z.enum(['pending', 'approved', 'denied', 'expired']);

export const Approval = z
  .object({
    object: z.literal('approval'),
    id: z.string(),
    tenant_id: z.string(),
    conversation_id: z.string(),
    message_id: z.string().describe('The assistant message parked on this approval'),
    status: ApprovalStatus,
    reason: z.string(),
    requested_items: z.array(z.object({ kind: z.enum(['action', 'secret']), description: z.string(), alias: z.string().optional() })),
    expires_at: Timestamp,
    resolved_by: z.string().nullable().describe('`approver_key:<approver_key_id>`; null while pending or when expired'),
    resolved_at: Timestamp.nullable(),
    note: z.string().nullable().describe('The audit note given with the resolution'),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'Approval' });

export const ApprovalList = ListOf(Approval);

export const ApprovalSignatureBody = z.object({
  key_id: z.string().min(1).max(100),
  algorithm: z.string().min(1).max(32).describe('`hmac-sha256` or `ed25519`: the algorithm of that key'),
  exp: z.number().int().describe('Unix seconds; in the future, at most 5 minutes ahead'),
  value: z.string().min(1).max(512).describe('base64url of the MAC or signature over the canonical payload'),
});

export const ResolveApprovalBody = z.object({
  signature: ApprovalSignatureBody,
  secrets: SecretsMap.optional().describe(
    'Values (or `{value, allowed_hosts}`) for the requested secret items, by alias; vaulted at conversation scope; write-only',
  ),
  note: z.string().max(APPROVAL_NOTE_MAX).optional(),
});

export const ApprovalIdParams = z.object({ approval_id: IdParam });
export const ListApprovalsQuery = listQuery('approval', {});
