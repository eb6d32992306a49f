import { z } from 'zod';
import { ExternalId, Timestamp } from '../core/schemas.js';

export const DEFAULT_TOKEN_TTL_SECONDS = 900;
export const MIN_TOKEN_TTL_SECONDS = 60;
export const MAX_TOKEN_TTL_SECONDS = 3600;

export const TokenExchangeBody = z.object({
  tenant_external_id: ExternalId,
  user_external_id: ExternalId,
  ttl_seconds: z.number().int().min(MIN_TOKEN_TTL_SECONDS).max(MAX_TOKEN_TTL_SECONDS).default(DEFAULT_TOKEN_TTL_SECONDS),
});

export const Token = z
  .object({
    object: z.literal('token'),
    token: z.string(),
    token_type: z.literal('Bearer'),
    expires_at: Timestamp,
    tenant_id: z.string(),
    user_id: z.string(),
  })
  .meta({ id: 'Token' });
