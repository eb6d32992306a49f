/**
 * What git authenticates a sync with, wherever the sync runs. On the API server: the vaulted secret
 * of the repository's credential or, for a GitHub App, an installation token minted from it now. In
 * a sync Job's pod (Kubernetes): what the API server resolved for that attempt, delivered in a
 * Secret mounted for that pod alone, so the pod never sees a master key or an App's private key,
 * only the short-lived token.
 */
import { readFile } from 'node:fs/promises';
import type { Vault } from '../core/crypto.js';
import type { Db } from '../core/db/database.js';
import { findCredentialCiphertext } from '../credentials/credentials.repository.js';
import { credentialSecretContext } from '../credentials/credentials.service.js';
import { type GitCredential, GitError } from './git.js';
import { GITHUB_APP_CREDENTIAL, mintInstallationToken } from './github-app.js';
import type { RepositoryRow } from './repositories.repository.js';

/** The credential git uses for one attempt of the repository's sync; undefined when it has none. */
export type GitCredentialSource = (
  repository: Pick<RepositoryRow, 'credential_id' | 'provider' | 'repo_url'>,
  signal?: AbortSignal,
) => Promise<GitCredential | undefined>;

/** The API server's source: the vault, and GitHub's REST API for App installation tokens. */
export function vaultGitCredentials(deps: { db: Db; vault: Vault; githubApiUrl: string }): GitCredentialSource {
  return async (repository, signal) => {
    const credentialId = repository.credential_id;
    if (!credentialId) return undefined;
    const row = await findCredentialCiphertext(deps.db, credentialId);
    if (!row) throw new GitError('the repository credential no longer exists');
    const secret = deps.vault.decrypt(row.secret_ciphertext, credentialSecretContext(credentialId));
    if (row.type !== GITHUB_APP_CREDENTIAL) return { type: row.type, secret };
    if (repository.provider !== 'github') throw new GitError('a github_app credential needs a repository with provider github');
    return {
      type: 'oauth_token',
      secret: await mintInstallationToken(secret, { apiUrl: deps.githubApiUrl, repoUrl: repository.repo_url, signal }),
    };
  };
}

/** The form a resolved credential is delivered in to a sync Job (the Secret's `credential` key). */
export function deliveredCredential(credential: GitCredential): string {
  return JSON.stringify({ type: credential.type, secret: credential.secret });
}

/**
 * A sync Job's source: the credential delivered for its attempt (the `credential` key of the
 * attempt's Secret, mounted as a whole), or none when that Secret holds none (a public repository).
 */
export function mountedGitCredential(file: string | undefined): GitCredentialSource {
  return async () => {
    if (!file) return undefined;
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw new GitError('the repository credential could not be read in the sync job');
    }
    try {
      const parsed = JSON.parse(text) as Partial<GitCredential>;
      if (typeof parsed.type === 'string' && typeof parsed.secret === 'string') return { type: parsed.type, secret: parsed.secret };
    } catch {
      // Reported below, without the content.
    }
    throw new GitError('the credential delivered to the sync job is malformed');
  };
}
