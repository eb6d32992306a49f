/**
 * A sync's working files on the node that runs it: `<ACIS_DATA_DIR>/repositories/<rep_id>/`, with a
 * shallow bare clone (`git/`, kept so the next fetch of the branch is incremental) and the checkout of
 * the fetched commit (`content/<commit>/`), which the sync scans and stores in the database
 * (skill-content.ts) and then discards. Runs never read these files: another node may hold them.
 *
 * Checkouts are written with symlinks as plain files, so nothing in them points outside the tree.
 */
import { existsSync } from 'node:fs';
import { mkdir, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { type GitRemote, openGitSession, runGit } from './git.js';

export interface FetchOptions {
  timeoutMs: number;
  signal?: AbortSignal | undefined;
}

/** A fetched commit's checkout, and over SSH the host keys the server presented. */
export interface Fetched {
  commit: string;
  dir: string;
  knownHosts: string | undefined;
}

export class RepositoryCheckouts {
  /** Git work on one repository's directory is serialised within this process. */
  private readonly locks = new Map<string, Promise<unknown>>();

  constructor(private readonly root: string) {}

  private checkoutPath(repositoryId: string, commit: string): string {
    return path.join(this.root, repositoryId, 'content', commit);
  }

  /** Fetches the head of `branch` (depth 1) and checks it out; answers the commit and the checkout. */
  fetchBranch(repositoryId: string, remote: GitRemote, branch: string, options: FetchOptions): Promise<Fetched> {
    return this.locked(repositoryId, () => this.fetchAndCheckout(repositoryId, remote, `refs/heads/${branch}`, options));
  }

  /** Removes the checkouts (the clone stays, for the next fetch). */
  discardCheckouts(repositoryId: string): Promise<void> {
    return this.locked(repositoryId, () => rm(path.join(this.root, repositoryId, 'content'), { recursive: true, force: true }));
  }

  /** Forgets a deleted repository. */
  remove(repositoryId: string): Promise<void> {
    return this.locked(repositoryId, () => rm(path.join(this.root, repositoryId), { recursive: true, force: true }));
  }

  private async fetchAndCheckout(repositoryId: string, remote: GitRemote, ref: string, options: FetchOptions): Promise<Fetched> {
    const base = path.join(this.root, repositoryId);
    const gitDir = path.join(base, 'git');
    const session = await openGitSession(remote);
    const run = (args: string[], extra: { cwd?: string; env?: Record<string, string> } = {}) =>
      runGit(args, { session, timeoutMs: options.timeoutMs, signal: options.signal, cwd: extra.cwd, extraEnv: extra.env });
    try {
      if (!existsSync(path.join(gitDir, 'HEAD'))) {
        await mkdir(gitDir, { recursive: true });
        await run(['init', '--bare', '--quiet', gitDir]);
      }
      await run([
        `--git-dir=${gitDir}`,
        'fetch',
        '--quiet',
        '--depth=1',
        '--no-tags',
        '--no-write-fetch-head',
        '--end-of-options',
        remote.url,
        `+${ref}:refs/acis/fetched`,
      ]);
      const commit = (await run([`--git-dir=${gitDir}`, 'rev-parse', '--verify', 'refs/acis/fetched^{commit}'])).trim();
      const dir = this.checkoutPath(repositoryId, commit);
      if (!existsSync(dir)) {
        // Checked out beside, then renamed into place, so a reader never sees a half-written tree.
        const staging = path.join(base, 'staging');
        await rm(staging, { recursive: true, force: true });
        await mkdir(staging, { recursive: true });
        const index = { GIT_INDEX_FILE: path.join(base, 'staging.index') };
        const tree = [`--git-dir=${gitDir}`, `--work-tree=${staging}`, '-c', 'core.symlinks=false'];
        await run([...tree, 'read-tree', commit], { env: index });
        await run([...tree, 'checkout-index', '--all', '--force'], { cwd: staging, env: index });
        await rm(index.GIT_INDEX_FILE, { force: true });
        await mkdir(path.dirname(dir), { recursive: true });
        await rename(staging, dir);
      }
      return { commit, dir, knownHosts: await session.knownHosts() };
    } finally {
      await session.close();
    }
  }

  private locked<T>(repositoryId: string, work: () => Promise<T>): Promise<T> {
    const previous = this.locks.get(repositoryId) ?? Promise.resolve();
    const next = previous.catch(() => undefined).then(work);
    const settled = next.catch(() => undefined);
    this.locks.set(repositoryId, settled);
    void settled.then(() => {
      if (this.locks.get(repositoryId) === settled) this.locks.delete(repositoryId);
    });
    return next;
  }
}
