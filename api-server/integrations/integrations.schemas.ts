import { z } from 'zod';
import { Timestamp } from '../core/schemas.js';

export const ApproverKeyAlgorithm = z.enum(['hmac-sha256', 'ed25519']);

export const ApproverKeySummary = z
  .object({
    object: z.literal('approver_key'),
    id: z.string(),
    tenant_id: z.string(),
    algorithm: ApproverKeyAlgorithm,
    created_at: Timestamp,
  })
  .meta({ id: 'ApproverKeySummary' });

export const Integration = z
  .object({
    object: z.literal('integration'),
    id: z.string(),
    name: z.string(),
    root_tenant_id: z.string(),
    approver_keys: z.array(ApproverKeySummary).describe('Active approver keys of the subtree; never their secrets'),
    created_at: Timestamp,
  })
  .meta({ id: 'Integration' });
