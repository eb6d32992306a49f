import { z } from 'zod';
import { listQuery } from '../core/pagination.js';
import { IdParam, ListOf, Metadata, Name, Timestamp } from '../core/schemas.js';

export const DEFAULT_BRANCH = 'main';
export const MAX_REPO_URL_LENGTH = 2048;

export const RepositoryProvider = z.enum(['github', 'gitlab', 'bitbucket', 'azure_devops', 'generic']);

export const RepositorySync = z
  .object({
    state: z.enum(['pending', 'syncing', 'ready', 'error']),
    last_synced_at: Timestamp.nullable().describe('Completion of the last successful scan'),
    error: z.string().nullable().describe('The failure reason when state is error'),
  })
  .meta({ id: 'RepositorySync' });

export const Repository = z
  .object({
    object: z.literal('repository'),
    id: z.string(),
    name: z.string(),
    repo_url: z.string(),
    branch: z.string(),
    provider: RepositoryProvider,
    credential_id: z.string().nullable(),
    sync: RepositorySync,
    skill_count: z.number().int().min(0),
    metadata: Metadata,
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'Repository' });

export const RepositoryList = ListOf(Repository);

/** What the last scan of a repository skipped; the sync succeeds regardless. */
export const SyncWarning = z
  .object({
    kind: z.enum(['invalid_manifest', 'duplicate_name', 'manual_conflict', 'limit']),
    path: z.string().nullable().describe('The manifest concerned, if any'),
    name: z.string().nullable().describe('The skill name concerned, if known'),
    message: z.string(),
  })
  .meta({ id: 'RepositorySyncWarning' });

/**
 * The sync details of a repository (ours, beside the spec's `sync` object, which stays exactly
 * `{state, last_synced_at, error}`): the commit runs use and what the last scan skipped.
 */
export const RepositorySyncDetails = z
  .object({
    object: z.literal('repository.sync'),
    repository_id: z.string(),
    state: RepositorySync.shape.state,
    last_synced_at: Timestamp.nullable(),
    error: z.string().nullable(),
    commit: z.string().nullable().describe('The commit of the last successful scan; runs materialise skills from it'),
    started_at: Timestamp.nullable().describe('When the sync in flight started (null unless syncing)'),
    warnings: z
      .array(SyncWarning)
      .describe('Invalid manifests, duplicate names and names held by manual skills, from the last successful scan'),
  })
  .meta({ id: 'RepositorySyncDetails' });

/** The remote forms git accepts that we take; `file` is further gated by configuration. */
export type RepoUrlKind = 'network' | 'file';

const URL_SCHEMES = new Set(['https:', 'http:', 'ssh:', 'git:', 'file:']);
// user@host:path (git's scp-like syntax). The user is required, so that strings such as
// `javascript:x` or `C:/x` are not taken for remotes. The host must start with an alphanumeric so it
// can never be read as an ssh option, and `host::x` is refused since git reads `<helper>::<address>`
// as a remote helper (e.g. `ext::`, which runs commands).
const SCP_LIKE = /^[A-Za-z0-9._~-]+@(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\]):(?!:)(?!\/\/)(?!-)\S+$/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: matches control characters so a remote holding one is refused
const CONTROL = /[\u0000-\u001f\u007f]/;

/**
 * Classifies a git remote, or returns a reason it is refused. Credentials embedded in the URL are
 * refused: they would be stored and returned in plain text, so they belong in a credential.
 */
export function classifyRepoUrl(value: string): { kind: RepoUrlKind } | { reason: string } {
  if (CONTROL.test(value) || /\s/.test(value)) return { reason: 'must not contain whitespace or control characters' };
  if (!value.includes('://')) {
    return SCP_LIKE.test(value) ? { kind: 'network' } : { reason: 'must be an https, http, ssh or git URL, or scp-like user@host:path' };
  }
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return { reason: 'is not a valid URL' };
  }
  if (!URL_SCHEMES.has(url.protocol)) return { reason: 'must use https, http, ssh or git' };
  if (url.password || (url.username && url.protocol !== 'ssh:')) {
    return { reason: 'must not embed credentials; register a credential and pass credential_id' };
  }
  if (url.protocol === 'file:') {
    if (url.host !== '' || url.pathname.length <= 1) return { reason: 'must be file:///absolute/path' };
    return { kind: 'file' };
  }
  if (!url.hostname || url.hostname.startsWith('-')) return { reason: 'must name a host' };
  if (url.pathname.length <= 1) return { reason: 'must name a repository path' };
  return { kind: 'network' };
}

const RepoUrl = z
  .string()
  .trim()
  // One error per problem: an empty or oversized value is not classified as well.
  .min(1, { abort: true })
  .max(MAX_REPO_URL_LENGTH, { abort: true })
  .superRefine((value, ctx) => {
    const result = classifyRepoUrl(value);
    if ('reason' in result) ctx.addIssue({ code: 'custom', message: result.reason });
  })
  .describe('git remote: https, http, ssh or git URL, scp-like user@host:path, or file:// when the deployment allows it');

/**
 * A plausible branch name by git's own rules (git check-ref-format), plus no leading `-` so it can
 * never be taken for an option on a git command line.
 */
export function isPlausibleRefName(name: string): boolean {
  if (name === '@' || name.startsWith('-') || name.startsWith('/') || name.endsWith('/') || name.endsWith('.')) {
    return false;
  }
  // biome-ignore lint/suspicious/noControlCharactersInRegex: git refuses control characters in ref names; so does this check
  if (/[\u0000-\u0020\u007f~^:?*[\\]/.test(name) || name.includes('..') || name.includes('@{') || name.includes('//')) {
    return false;
  }
  return name.split('/').every((part) => !part.startsWith('.') && !part.endsWith('.lock'));
}

const Branch = z.string().trim().min(1).max(255).refine(isPlausibleRefName, { message: 'must be a valid git branch name' });

const CredentialRef = z.string().min(1).max(100);

export const CreateRepositoryBody = z.object({
  name: Name.describe('Unique across the integration registry'),
  repo_url: RepoUrl,
  branch: Branch.default(DEFAULT_BRANCH),
  provider: RepositoryProvider.default('generic'),
  credential_id: CredentialRef.nullable().optional().describe('Omit (or null) for a public repository'),
  metadata: Metadata.optional(),
});

export const PatchRepositoryBody = z.object({
  name: Name.optional(),
  branch: Branch.optional(),
  credential_id: CredentialRef.nullable().optional().describe('null clears it (public repository)'),
  metadata: Metadata.optional(),
});

export const ListRepositoriesQuery = listQuery('repository', {});

export const RepositoryIdParams = z.object({ repository_id: IdParam });
