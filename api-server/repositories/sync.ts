/**
 * The repository sync worker: `pending` → `syncing` → `ready` | `error`.
 *
 * A sync is claimed with one conditional update (state <> 'syncing', a random claim and this node's
 * id), so two requests on any API nodes cannot both start one; the loser gets 409 `sync-in-progress`.
 * Its outcome is written only while that claim is still current: a PATCH of branch or credential
 * (back to `pending`) or a takeover makes an attempt stale and its result is dropped. Syncs left
 * `syncing` by a process that died are taken over and run again: at start (this node's own) and on
 * every heartbeat (nodes that stopped beating), as orphaned runs are.
 *
 * A sync fetches the branch head (depth 1) with real git and the vaulted credential (git.ts), keeps
 * the checkout per commit (content.ts), catalogs its SKILL.md manifests (catalog.ts) and reconciles
 * the repository's discovered skills: upserted by name, refreshed, pruned when gone. Manual skills are
 * never touched; a discovered skill whose name a manual one holds is reported, not cataloged.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Vault } from '../core/crypto.js';
import { type Db, json } from '../core/db/database.js';
import type { SyncWarning } from '../core/db/schema.js';
import type { IdGenerator } from '../core/ids.js';
import { type Metrics, secondsSince } from '../core/metrics.js';
import { findCredentialCiphertext } from '../credentials/credentials.repository.js';
import { credentialSecretContext } from '../credentials/credentials.service.js';
import { NODE_STALE_MS } from '../runs/nodes.js';
import { deleteSkills, insertSkillIfAbsent, skillsByName, updateSkill } from '../skills/skills.repository.js';
import { type Catalog, scanCatalog } from './catalog.js';
import type { RepositoryContentStore } from './content.js';
import { GitError, type GitRemote } from './git.js';
import {
  claimSync,
  endSync,
  findRepositoryById,
  lockCurrentSync,
  orphanedSyncs,
  type RepositoryRow,
  type RepositoryView,
  takeOverSync,
} from './repositories.repository.js';
import { classifyRepoUrl } from './repositories.schemas.js';

export interface SyncWorkerDeps {
  db: Db;
  vault: Vault;
  logger: Logger;
  now: () => Date;
  newId: IdGenerator;
  nodeId: string;
  content: RepositoryContentStore;
  allowFileRepos: boolean;
  /** The longest one git command of a sync may take. */
  timeoutMs: number;
  metrics: Metrics;
}

export class RepositorySyncWorker {
  private readonly running = new Set<Promise<void>>();
  private readonly stopping = new AbortController();

  constructor(private readonly deps: SyncWorkerDeps) {}

  /**
   * Claims the repository's sync and runs it in the background. The claimed repository (`syncing`),
   * or undefined when it is missing or a sync is already in flight.
   */
  async start(repositoryId: string): Promise<RepositoryView | undefined> {
    if (this.stopping.signal.aborted) return undefined;
    const claim = newClaim();
    const claimed = await claimSync(this.deps.db, repositoryId, { claim, nodeId: this.deps.nodeId, now: this.deps.now() });
    if (claimed) this.launch(repositoryId, claim);
    return claimed;
  }

  /** Takes over and re-runs syncs whose process is gone (see `orphanedSyncs`); how many. */
  async recoverOrphans(includeOwn: boolean): Promise<number> {
    const staleBefore = new Date(this.deps.now().getTime() - NODE_STALE_MS);
    const orphans = await orphanedSyncs(this.deps.db, { nodeId: this.deps.nodeId, includeOwn, staleBefore });
    let taken = 0;
    for (const orphan of orphans) {
      const claim = newClaim();
      if (await takeOverSync(this.deps.db, orphan.id, orphan.sync_claim, { claim, nodeId: this.deps.nodeId, now: this.deps.now() })) {
        taken += 1;
        this.launch(orphan.id, claim);
      }
    }
    return taken;
  }

  /**
   * The checkout of the repository's synced commit on this node, fetched on first use when another
   * node ran the sync. undefined when the repository has never synced or the commit cannot be had.
   */
  async contentOf(repository: RepositoryRow): Promise<string | undefined> {
    if (!repository.sync_commit) return undefined;
    try {
      return await this.deps.content.ensureCommit(repository.id, await this.remoteOf(repository), repository.sync_commit, {
        timeoutMs: this.deps.timeoutMs,
        signal: this.stopping.signal,
      });
    } catch (error) {
      const reason = error instanceof GitError ? error.reason : 'unexpected failure';
      this.deps.logger.warn(
        { repository_id: repository.id, commit: repository.sync_commit, reason, ...(!(error instanceof GitError) && { err: error }) },
        'fetching synced repository content failed',
      );
      return undefined;
    }
  }

  /** Forgets a deleted repository's content on this node. */
  async forget(repositoryId: string): Promise<void> {
    await this.deps.content.remove(repositoryId);
  }

  /**
   * Stops git work in flight and waits for it. The interrupted syncs stay `syncing` under this node,
   * so a restart (or another node, once this one stops beating) runs them again.
   */
  async stop(): Promise<void> {
    this.stopping.abort();
    await Promise.allSettled([...this.running]);
  }

  private launch(repositoryId: string, claim: string): void {
    const done = this.run(repositoryId, claim).catch((error: unknown) => {
      this.deps.logger.error({ err: error, repository_id: repositoryId }, 'repository sync failed unexpectedly');
    });
    this.running.add(done);
    void done.finally(() => this.running.delete(done));
  }

  private async run(repositoryId: string, claim: string): Promise<void> {
    const { db, logger } = this.deps;
    const repository = await findRepositoryById(db, repositoryId);
    if (!repository) return;
    const log = logger.child({ repository_id: repositoryId });
    log.info({ branch: repository.branch }, 'repository sync started');
    const startedMs = performance.now();
    let fetched: { commit: string; dir: string };
    let catalog: Catalog;
    try {
      const url = classifyRepoUrl(repository.repo_url);
      if ('kind' in url && url.kind === 'file' && !this.deps.allowFileRepos) {
        throw new GitError('file:// repositories are not enabled on this deployment');
      }
      fetched = await this.deps.content.fetchBranch(repositoryId, await this.remoteOf(repository), repository.branch, {
        timeoutMs: this.deps.timeoutMs,
        signal: this.stopping.signal,
      });
      catalog = await scanCatalog(fetched.dir);
    } catch (error) {
      // Interrupted by shutdown: left `syncing` for recovery.
      if (this.stopping.signal.aborted) return;
      const reason = error instanceof GitError ? error.reason : 'the sync failed on the platform side';
      if (!(error instanceof GitError)) log.error({ err: error }, 'repository sync failed');
      const ended = await endSync(db, repositoryId, claim, { sync_state: 'error', sync_error: reason });
      this.deps.metrics.syncEnded('error', secondsSince(startedMs));
      log.warn({ reason, current: ended }, 'repository sync failed');
      return;
    }
    const applied = await this.applyCatalog(repositoryId, claim, fetched.commit, catalog);
    if (!applied) {
      this.deps.metrics.syncEnded('superseded', secondsSince(startedMs));
      log.info({ commit: fetched.commit }, 'repository sync outdated by a newer change; its result was dropped');
      // Deleted while we fetched: its content must not outlive it.
      if (!(await findRepositoryById(db, repositoryId))) await this.deps.content.remove(repositoryId);
      return;
    }
    await this.deps.content.prune(repositoryId, [fetched.commit, ...(repository.sync_commit ? [repository.sync_commit] : [])]);
    this.deps.metrics.syncEnded('ready', secondsSince(startedMs));
    log.info({ commit: fetched.commit, skills: catalog.skills.length, warnings: applied.warnings.length }, 'repository sync ready');
  }

  /** Reconciles the discovered skills and marks the repository ready, in one transaction, if the attempt is current. */
  private applyCatalog(repositoryId: string, claim: string, commit: string, catalog: Catalog) {
    const { now, newId } = this.deps;
    return this.deps.db.transaction().execute(async (trx) => {
      if (!(await lockCurrentSync(trx, repositoryId, claim))) return undefined;
      const at = now();
      const existing = await skillsByName(trx, repositoryId);
      const warnings: SyncWarning[] = [...catalog.warnings];
      const kept = new Set<string>();
      for (const skill of catalog.skills) {
        const current = existing.get(skill.name);
        if (current?.source === 'manual') {
          warnings.push(manualConflict(skill.name, skill.path, current.id));
          continue;
        }
        if (current) {
          kept.add(current.id);
          if (current.description !== skill.description || current.version !== skill.version || current.path !== skill.path) {
            await updateSkill(trx, current.id, { description: skill.description, version: skill.version, path: skill.path, updated_at: at });
          }
          continue;
        }
        const inserted = await insertSkillIfAbsent(trx, {
          id: newId('skill'),
          repository_id: repositoryId,
          name: skill.name,
          description: skill.description,
          version: skill.version,
          path: skill.path,
          source: 'discovered',
          metadata: json({}),
          created_at: at,
          updated_at: at,
        });
        // A manual skill of that name was registered while we scanned.
        if (!inserted) warnings.push(manualConflict(skill.name, skill.path, undefined));
      }
      const gone = [...existing.values()].filter((row) => row.source === 'discovered' && !kept.has(row.id)).map((row) => row.id);
      await deleteSkills(trx, gone);
      await endSync(trx, repositoryId, claim, {
        sync_state: 'ready',
        sync_error: null,
        sync_last_synced_at: at,
        sync_commit: commit,
        sync_warnings: json(warnings),
      });
      return { warnings };
    });
  }

  private async remoteOf(repository: RepositoryRow): Promise<GitRemote> {
    return { url: repository.repo_url, provider: repository.provider, credential: await this.credentialOf(repository.credential_id) };
  }

  private async credentialOf(credentialId: string | null): Promise<GitRemote['credential']> {
    if (!credentialId) return undefined;
    const row = await findCredentialCiphertext(this.deps.db, credentialId);
    if (!row) throw new GitError('the repository credential no longer exists');
    return { type: row.type, secret: this.deps.vault.decrypt(row.secret_ciphertext, credentialSecretContext(credentialId)) };
  }
}

function manualConflict(name: string, manifestPath: string, manualId: string | undefined): SyncWarning {
  return {
    kind: 'manual_conflict',
    path: manifestPath,
    name,
    message: `a manual skill${manualId ? ` (${manualId})` : ''} holds this name; the discovered skill is not cataloged`,
  };
}

function newClaim(): string {
  return randomBytes(12).toString('hex');
}
