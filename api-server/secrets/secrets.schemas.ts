import { z } from 'zod';
import { listQuery } from '../core/pagination.js';
import { ALIAS_PATTERN } from '../../egress-proxy/placeholder.js';
import { MAX_ALLOWED_HOSTS, MAX_HOST_PATTERN_LENGTH, hostPatternFault } from '../../egress-proxy/secret-binding.js';
import { IdParam, ListOf, Timestamp } from '../core/schemas.js';

/** The alias a secret is vaulted under and named by in placeholders (egress-proxy/placeholder.ts). */
export const SecretAlias = z.string().regex(ALIAS_PATTERN, `must match ${ALIAS_PATTERN.source}`);

/** A secret value: write-only, never in any response. 64 KiB (as characters) like a message's `secrets`. */
export const SecretValue = z.string().min(1).max(65_536);

/** One destination a bound value may be sent to (egress-proxy/secret-binding.ts says what matches). */
export const AllowedHost = z
  .string()
  .max(MAX_HOST_PATTERN_LENGTH)
  .superRefine((text, ctx) => {
    const fault = hostPatternFault(text);
    if (fault) ctx.addIssue({ code: 'custom', message: fault });
  })
  .meta({
    id: 'AllowedHost',
    description:
      '`[http://]host[:port]`: a DNS name, a `*.` suffix wildcard (one or more labels), an IPv4 literal or a bracketed IPv6 ' +
      'literal; any port when none is given; HTTPS only unless `http://` is written.',
    examples: ['api.example.com', '*.example.org', '10.0.0.5:8443', 'http://[2001:db8::1]:8080'],
  });

export const AllowedHosts = z.array(AllowedHost).min(1).max(MAX_ALLOWED_HOSTS);

/** A value bound to the hosts it is for: the egress proxy substitutes it toward those only. */
export const BoundSecretValue = z
  .object({ value: SecretValue, allowed_hosts: AllowedHosts })
  .strict()
  .meta({ id: 'BoundSecretValue', description: 'A value and the only destinations it may be sent to (the recommended form).' });

/** A secret as written: a plain value (unbound: substituted toward any destination) or a bound one. */
export const SecretInput = z.union([SecretValue, BoundSecretValue]).meta({ id: 'SecretEntry' });
export type SecretInput = z.infer<typeof SecretInput>;

/** Every `secrets` map a request writes (message, conversation, user, tenant, approval): alias to value. */
export const SecretsMap = z.record(SecretAlias, SecretInput);

export const PutSecretsBody = z.object({
  secrets: SecretsMap.refine((value) => Object.keys(value).length >= 1, { message: 'at least 1 property' }).describe(
    'Alias to value, or to `{value, allowed_hosts}`; merged per alias (existing aliases overwritten, others untouched); write-only',
  ),
});

/** A vaulted secret as listed: its alias, binding and timestamps; values are represented nowhere. */
function secretObject<K extends string>(kind: K, id: string) {
  return z
    .object({
      object: z.literal(kind),
      alias: SecretAlias,
      allowed_hosts: AllowedHosts.nullable().describe('The destinations the value may be sent to; null: unbound (any destination)'),
      created_at: Timestamp,
      updated_at: Timestamp,
    })
    .meta({ id });
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
