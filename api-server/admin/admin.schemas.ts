import { z } from 'zod';
import { IdParam, Name, Timestamp } from '../core/schemas.js';
import { ApproverKeyAlgorithm } from '../integrations/integrations.schemas.js';

export const CreateIntegrationBody = z.object({ name: Name });

export const CreatedIntegration = z
  .object({
    object: z.literal('integration'),
    id: z.string(),
    name: z.string(),
    root_tenant_id: z.string(),
    service_key: z.string().describe('Shown once; only its hash is stored'),
    service_key_id: z.string().describe('Id of that key, to revoke it after a rotation'),
    created_at: Timestamp,
  })
  .meta({ id: 'CreatedIntegration' });

export const CreatedServiceKey = z
  .object({
    object: z.literal('service_key'),
    id: z.string(),
    integration_id: z.string(),
    service_key: z.string().describe('Shown once; only its hash is stored'),
    created_at: Timestamp,
  })
  .meta({ id: 'CreatedServiceKey' });

export const CreateApproverKeyBody = z
  .object({
    algorithm: ApproverKeyAlgorithm,
    public_key: z.string().optional().describe('ed25519 only: base64url of the raw 32-byte public key'),
  })
  .superRefine((body, ctx) => {
    if (body.algorithm === 'ed25519' && body.public_key === undefined) {
      ctx.addIssue({ code: 'custom', path: ['public_key'], message: 'required for ed25519' });
    }
    if (body.algorithm === 'hmac-sha256' && body.public_key !== undefined) {
      ctx.addIssue({ code: 'custom', path: ['public_key'], message: 'not accepted for hmac-sha256' });
    }
  });

export const CreatedApproverKey = z
  .object({
    object: z.literal('approver_key'),
    id: z.string(),
    tenant_id: z.string(),
    algorithm: ApproverKeyAlgorithm,
    secret: z.string().optional().describe('hmac-sha256 only, shown once: base64url of the raw HMAC key'),
    created_at: Timestamp,
  })
  .meta({ id: 'CreatedApproverKey' });

export const IntegrationIdParams = z.object({ integration_id: IdParam });
export const TenantIdParams = z.object({ tenant_id: IdParam });
export const ApproverKeyIdParams = z.object({ approver_key_id: IdParam });
export const ServiceKeyIdParams = z.object({ service_key_id: IdParam });
