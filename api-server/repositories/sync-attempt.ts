/**
 * The half of a sync attempt that touches no database: fetch the branch head with real git (git.ts)
 * into a checkout (checkouts.ts), catalog its SKILL.md manifests (catalog.ts) and read the skill
 * directories (skill-content.ts). The API server runs it in process; a sync Job's pod runs it and
 * reports the result (sync-report.ts), so the pod that runs git never holds a database credential.
 * The checkout is discarded either way: everything a run needs is in the result.
 */
import { type Catalog, scanCatalog } from './catalog.js';
import type { RepositoryCheckouts } from './checkouts.js';
import { GitError } from './git.js';
import type { GitCredentialSource } from './git-credentials.js';
import type { RepositoryRow } from './repositories.repository.js';
import { type RemotePolicy, vetRemoteForFetch } from './remote-policy.js';
import { readSkillDirectories, type SkillFile, SkillContentTooLarge } from './skill-content.js';

/** What one attempt found, or why it failed (a reason fit for the repository's `sync.error`). */
export type AttemptResult =
  | {
      state: 'fetched';
      commit: string;
      catalog: Catalog;
      files: SkillFile[];
      /** Over SSH: the host keys the server presented (known_hosts lines), for the repository to pin at its first sync. */
      knownHosts?: string | undefined;
    }
  | { state: 'error'; error: string };

/** What an attempt reads of its repository. */
export type AttemptRepository = Pick<RepositoryRow, 'id' | 'repo_url' | 'branch' | 'provider' | 'credential_id' | 'ssh_known_hosts'>;

export interface AttemptDeps {
  gitCredential: GitCredentialSource;
  checkouts: RepositoryCheckouts;
  /** Which remotes the deployment lets a sync fetch (checked again before every fetch: a name may resolve elsewhere now). */
  remotes: RemotePolicy;
  /** The longest one git command may take. */
  timeoutMs: number;
  /** Aborted: the attempt stops and `fetchAttempt` rejects. */
  signal: AbortSignal;
  /** Told of a failure that is the platform's, not the repository's (logged, never shown). */
  onUnexpected(error: unknown): void;
}

export async function fetchAttempt(deps: AttemptDeps, repository: AttemptRepository): Promise<AttemptResult> {
  try {
    const vetted = await vetRemoteForFetch(repository.repo_url, deps.remotes);
    if (vetted.refusal !== undefined) throw new GitError(vetted.refusal);
    const fetched = await deps.checkouts.fetchBranch(
      repository.id,
      {
        url: repository.repo_url,
        provider: repository.provider,
        credential: await deps.gitCredential(repository, deps.signal),
        knownHosts: repository.ssh_known_hosts ?? undefined,
        pin: vetted.pin,
      },
      repository.branch,
      { timeoutMs: deps.timeoutMs, signal: deps.signal },
    );
    const catalog = await scanCatalog(fetched.dir);
    const files = await readSkillDirectories(fetched.dir, catalog.manifests);
    return { state: 'fetched', commit: fetched.commit, catalog, files, knownHosts: fetched.knownHosts };
  } catch (error) {
    if (deps.signal.aborted) throw error;
    if (error instanceof GitError) return { state: 'error', error: error.reason };
    if (error instanceof SkillContentTooLarge) return { state: 'error', error: error.message };
    deps.onUnexpected(error);
    return { state: 'error', error: 'the sync failed on the platform side' };
  } finally {
    await deps.checkouts.discardCheckouts(repository.id);
  }
}
