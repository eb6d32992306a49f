import { z } from 'zod';
import { listQuery } from '../core/pagination.js';
import { ALIAS_PATTERN } from '../../egress-proxy/placeholder.js';
import { IdParam, ListOf, Timestamp } from '../core/schemas.js';

/** The alias a secret is vaulted under and named by in placeholders (egress-proxy/placeholder.ts). */
export const SecretAlias = z.string().regex(ALIAS_PATTERN, `must match ${ALIAS_PATTERN.source}`);

/** A secret value: write-only, never in any response. 64 KiB (as characters) like a message's `secrets`. */
export const SecretValue = z.string().min(1).max(65_536);

export const PutSecretsBody = z.object({
  secrets: z
    .record(SecretAlias, SecretValue)
    .refine((value) => Object.keys(value).length >= 1, { message: 'at least 1 property' })
    .describe('Alias to value; merged per alias (existing aliases overwritten, others untouched); write-only'),
});

/** A vaulted secret as listed: its alias and timestamps only; values are represented nowhere. */
function secretObject<K extends string>(kind: K, id: string) {
  return z.object({ object: z.literal(kind), alias: SecretAlias, created_at: Timestamp, updated_at: Timestamp }).meta({ id });
}

export const ConversationSecret = secretObject('conversation.secret', 'ConversationSecret');
export const UserSecret = secretObject('user.secret', 'UserSecret');
export const TenantSecret = secretObject('tenant.secret', 'TenantSecret');

export const ConversationSecretList = ListOf(ConversationSecret);
export const UserSecretList = ListOf(UserSecret);
export const TenantSecretList = ListOf(TenantSecret);

/** Listings go by alias, A to Z; the cursors are aliases. */
export const ListSecretsQuery = listQuery(SecretAlias, {});

// An alias that breaks the pattern cannot exist, so it simply finds nothing (404), like a malformed id.
export const ConversationSecretParams = z.object({ conversation_id: IdParam, alias: z.string().max(100) });
export const UserSecretParams = z.object({ user_id: IdParam, alias: z.string().max(100) });
export const TenantSecretParams = z.object({ tenant_id: IdParam, alias: z.string().max(100) });
