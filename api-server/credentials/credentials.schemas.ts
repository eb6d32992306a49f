import { z } from 'zod';
import { GITHUB_APP_CREDENTIAL, parseGitHubAppSecret } from '../repositories/github-app.js';
import { listQuery } from '../core/pagination.js';
import { IdParam, ListOf, Metadata, Name, Timestamp } from '../core/schemas.js';

export const DEFAULT_CREDENTIAL_TYPE = 'generic_secret';
/** The spec fixes no size; 64 KiB (UTF-8 bytes) holds any PAT, SSH private key or JSON service account. */
export const MAX_SECRET_BYTES = 64 * 1024;

export const Credential = z
  .object({
    object: z.literal('credential'),
    id: z.string(),
    name: z.string(),
    type: z.string(),
    metadata: Metadata,
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'Credential', description: 'A vault handle. The secret is write-only and never returned.' });

export const CredentialList = ListOf(Credential);

export const CreateCredentialBody = z
  .object({
    name: Name.describe('Unique across the integration registry'),
    type: z
      .string()
      .trim()
      .min(1)
      .max(64)
      .default(DEFAULT_CREDENTIAL_TYPE)
      .describe(
        'Open enum: git_pat, git_ssh_key, api_key, basic_auth, oauth_token, generic_secret, github_app, github_webhook_secret, ...',
      ),
    // Kept verbatim (no trimming): whitespace can be part of a secret. Messages never echo the value.
    secret: z
      .string()
      .min(1)
      .refine((value) => Buffer.byteLength(value, 'utf8') <= MAX_SECRET_BYTES, {
        message: `must be at most ${MAX_SECRET_BYTES} bytes`,
      })
      .meta({ writeOnly: true, description: 'Encrypted on arrival; never returned, logged or echoed in errors' }),
    metadata: Metadata.optional(),
  })
  .superRefine((body, ctx) => {
    // A GitHub App credential is only usable in its documented shape; say so now rather than at the first sync.
    if (body.type !== GITHUB_APP_CREDENTIAL) return;
    const parsed = parseGitHubAppSecret(body.secret);
    if (!parsed.ok) for (const message of parsed.problems) ctx.addIssue({ code: 'custom', path: ['secret'], message });
  });

export const ListCredentialsQuery = listQuery('credential', {});

export const CredentialIdParams = z.object({ credential_id: IdParam });
