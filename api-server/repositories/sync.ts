/**
 * The repository sync worker: `pending` → `syncing` → `ready` | `error`.
 *
 * A sync is claimed with one conditional update (state <> 'syncing', a random claim and this node's
 * id), so two requests on any API nodes cannot both start one; the loser gets 409 `sync-in-progress`.
 * Its outcome is written only while that claim is still current: a PATCH of branch or credential
 * (back to `pending`) or a takeover makes an attempt stale and its result is dropped. Syncs left
 * `syncing` by a process that died are taken over and run again: at start (this node's own) and on
 * every heartbeat (nodes that stopped beating), as orphaned runs are. Attempts handed to the cluster
 * (a Job each) do not depend on the node that handed them: one whose Job died without writing its
 * outcome ends with the reason the cluster reports, and one still `syncing` past the Job deadline is
 * taken over, whichever node claimed it.
 *
 * An attempt fetches the branch head (depth 1) with real git and reads its skills (sync-attempt.ts),
 * here or in a sync Job that reports what it found (sync-report.ts); the worker then stores the
 * skill directories in the database every node shares (skill-content.ts) and reconciles the
 * repository's discovered skills: upserted by name, refreshed, pruned when gone. Manual skills are
 * never touched; a discovered skill whose name a manual one holds is reported, not cataloged. The
 * content, the catalog and the new `sync_commit` land in one transaction.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { type Db, json } from '../core/db/database.js';
import type { SyncWarning } from '../core/db/schema.js';
import type { IdGenerator } from '../core/ids.js';
import type { Metrics } from '../core/metrics.js';
import { NODE_STALE_MS } from '../runs/nodes.js';
import { deleteSkills, insertSkillIfAbsent, skillsByName, updateSkill } from '../skills/skills.repository.js';
import type { Catalog } from './catalog.js';
import type { RepositoryCheckouts } from './checkouts.js';
import type { GitCredentialSource } from './git-credentials.js';
import {
  claimSync,
  endSync,
  findRepositoryById,
  lockCurrentSync,
  orphanedSyncs,
  type RepositoryRow,
  type RepositoryView,
  requestedSyncs,
  requestSyncAfterCurrent,
  syncsInFlight,
  takeOverSync,
  takeSyncRequest,
} from './repositories.repository.js';
import type { SyncDispatch } from './sync-dispatch.js';
import { collectSkillContent, collectUnreferencedBlobs, type SkillFile, storeSkillContent } from './skill-content.js';
import { type AttemptResult, fetchAttempt } from './sync-attempt.js';
import type { RemotePolicy } from './remote-policy.js';

export interface SyncWorkerDeps {
  db: Db;
  /** What git authenticates with, resolved from the vault (a sync Job's pod is given its own: sync-job.ts). */
  gitCredential: GitCredentialSource;
  logger: Logger;
  now: () => Date;
  newId: IdGenerator;
  nodeId: string;
  checkouts: RepositoryCheckouts;
  /** Which remotes the deployment lets a sync fetch (checked again before every fetch: a name may resolve elsewhere now). */
  remotes: RemotePolicy;
  /** The longest one git command of a sync may take. */
  timeoutMs: number;
  metrics: Metrics;
  /**
   * Where a claimed attempt runs: absent, in this process; under Kubernetes, a RepositorySync the
   * controller runs as a Job (kubernetes-sync-dispatch.ts) whose result comes back through `settle`.
   */
  dispatch?: SyncDispatch;
}

/** How one attempt ended; `superseded` (a newer change made it stale) and `interrupted` (shutdown) write nothing. */
export interface SyncOutcome {
  state: 'ready' | 'error' | 'superseded' | 'interrupted' | 'missing';
  commit?: string;
  error?: string;
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
    if (claimed) await this.hand(claimed, claim);
    return claimed;
  }

  /**
   * A sync for a push: started now, or, when one is in flight (on any node), run once more after it
   * so the pushed commit is not missed. undefined when the repository is gone.
   */
  async requestSync(repositoryId: string): Promise<'started' | 'queued' | undefined> {
    // Bounded: each round either starts, queues, or saw the sync in flight end in between.
    for (let attempt = 0; attempt < 3; attempt++) {
      if (await this.start(repositoryId)) return 'started';
      if (await requestSyncAfterCurrent(this.deps.db, repositoryId)) return 'queued';
      if (!(await findRepositoryById(this.deps.db, repositoryId))) return undefined;
    }
    return 'queued';
  }

  /**
   * Starts the syncs a push asked for while one was in flight, once that one has ended: run on every
   * heartbeat, so it also covers attempts that ended elsewhere (another node, a sync Job).
   */
  async startRequested(): Promise<number> {
    let started = 0;
    for (const id of await requestedSyncs(this.deps.db)) {
      if ((await takeSyncRequest(this.deps.db, id)) && (await this.start(id))) started += 1;
    }
    return started;
  }

  /** Takes over and re-runs syncs whose process is gone (see `orphanedSyncs`); how many. */
  async recoverOrphans(includeOwn: boolean): Promise<number> {
    if (this.deps.dispatch) return this.recoverHandedOff(this.deps.dispatch);
    const staleBefore = new Date(this.deps.now().getTime() - NODE_STALE_MS);
    const orphans = await orphanedSyncs(this.deps.db, { nodeId: this.deps.nodeId, includeOwn, staleBefore });
    let taken = 0;
    for (const orphan of orphans) if (await this.takeOver(orphan.id, orphan.sync_claim)) taken += 1;
    return taken;
  }

  /** Moves a sync in flight to this node under a new claim and hands it on, unless someone else took it first. */
  private async takeOver(repositoryId: string, previousClaim: string | null): Promise<boolean> {
    const claim = newClaim();
    if (!(await takeOverSync(this.deps.db, repositoryId, previousClaim, { claim, nodeId: this.deps.nodeId, now: this.deps.now() })))
      return false;
    const repository = await findRepositoryById(this.deps.db, repositoryId);
    if (!repository) return false;
    await this.hand(repository, claim);
    return true;
  }

  /**
   * Attempts handed to the cluster outlive the node that handed them, so a node's restart or death
   * says nothing about them: each ends when its Job reports a death it could not write itself, or is
   * taken over once it has been `syncing` longer than a Job may run. How many were taken over.
   */
  private async recoverHandedOff(dispatch: SyncDispatch): Promise<number> {
    const { db, logger } = this.deps;
    const now = this.deps.now().getTime();
    let taken = 0;
    for (const row of await syncsInFlight(db)) {
      if (!row.sync_claim) continue;
      const failure = await dispatch.failureOf(row.id, row.sync_claim).catch((error: unknown) => {
        logger.warn({ err: error, repository_id: row.id }, 'reading a handed-off sync failed');
        return undefined;
      });
      if (failure !== undefined) {
        if (await endSync(db, row.id, row.sync_claim, { sync_state: 'error', sync_error: failure })) {
          this.deps.metrics.syncEnded('error', row.sync_started_at ? (now - row.sync_started_at.getTime()) / 1000 : 0);
          logger.warn({ repository_id: row.id, reason: failure }, 'repository sync job ended without its outcome');
        }
        continue;
      }
      if (row.sync_started_at && now - row.sync_started_at.getTime() < dispatch.attemptDeadlineMs) continue;
      if (!(await this.takeOver(row.id, row.sync_claim))) continue;
      taken += 1;
      logger.warn({ repository_id: row.id }, 'repository sync still in flight past the job deadline; handed over again');
    }
    return taken;
  }

  /**
   * Forgets a deleted repository: its clone on this node, what the cluster keeps for its syncs, and
   * the stored content only it named (its files went with its row).
   */
  async forget(repositoryId: string): Promise<void> {
    await this.deps.checkouts.remove(repositoryId);
    await this.deps.dispatch?.forget(repositoryId).catch((error: unknown) => {
      this.deps.logger.warn({ err: error, repository_id: repositoryId }, 'removing the repository sync from the cluster failed');
    });
    await collectUnreferencedBlobs(this.deps.db);
  }

  /**
   * Stops git work in flight and waits for it. The interrupted syncs stay `syncing` under this node,
   * so a restart (or another node, once this one stops beating) runs them again.
   */
  async stop(): Promise<void> {
    this.stopping.abort();
    await Promise.allSettled([...this.running]);
  }

  /** A claimed attempt goes to the dispatcher, or runs in this process. */
  private async hand(repository: RepositoryRow, claim: string): Promise<void> {
    if (!this.deps.dispatch) return this.launch(repository.id, claim);
    try {
      await this.deps.dispatch.hand(repository, claim);
    } catch (error) {
      // Nothing will run it: the claim ends in error now rather than staying `syncing`.
      this.deps.logger.error({ err: error, repository_id: repository.id }, 'handing the sync to its runner failed');
      await endSync(this.deps.db, repository.id, claim, {
        sync_state: 'error',
        sync_error: 'the sync could not be started on the platform side',
      });
    }
  }

  private launch(repositoryId: string, claim: string): void {
    const done = this.run(repositoryId, claim)
      .then(async () => {
        // A push arrived while this sync ran: one more reads the new head.
        if (!this.stopping.signal.aborted && (await takeSyncRequest(this.deps.db, repositoryId))) await this.start(repositoryId);
      })
      .catch((error: unknown) => {
        this.deps.logger.error({ err: error, repository_id: repositoryId }, 'repository sync failed unexpectedly');
      });
    this.running.add(done);
    void done.finally(() => this.running.delete(done));
  }

  private async run(repositoryId: string, claim: string): Promise<SyncOutcome> {
    const repository = await findRepositoryById(this.deps.db, repositoryId);
    if (!repository) return { state: 'missing' };
    const log = this.deps.logger.child({ repository_id: repositoryId });
    log.info({ branch: repository.branch }, 'repository sync started');
    let result: AttemptResult;
    try {
      result = await fetchAttempt(
        {
          gitCredential: this.deps.gitCredential,
          checkouts: this.deps.checkouts,
          remotes: this.deps.remotes,
          timeoutMs: this.deps.timeoutMs,
          signal: this.stopping.signal,
          onUnexpected: (error) => log.error({ err: error }, 'repository sync failed'),
        },
        repository,
      );
    } catch (error) {
      // Interrupted by shutdown: left `syncing` for recovery.
      if (this.stopping.signal.aborted) return { state: 'interrupted' };
      throw error;
    }
    return this.settle(repositoryId, claim, result);
  }

  /**
   * Stores an attempt's result if its claim is still current: the error, or the content, catalog and
   * commit in one transaction. The same whether the attempt ran here or in a sync Job that reported
   * it (sync-report-server.ts). `superseded` when the claim had ended: nothing is written.
   */
  async settle(repositoryId: string, claim: string, result: AttemptResult): Promise<SyncOutcome> {
    const { db } = this.deps;
    const log = this.deps.logger.child({ repository_id: repositoryId });
    const repository = await findRepositoryById(db, repositoryId);
    const seconds = repository?.sync_started_at ? (this.deps.now().getTime() - repository.sync_started_at.getTime()) / 1000 : 0;
    if (result.state === 'error') {
      const ended = await endSync(db, repositoryId, claim, { sync_state: 'error', sync_error: result.error });
      if (!ended) return { state: 'superseded' };
      this.deps.metrics.syncEnded('error', seconds);
      log.warn({ reason: result.error }, 'repository sync failed');
      return { state: 'error', error: result.error };
    }
    const { commit, catalog, files } = result;
    if (repository && !repository.ssh_known_hosts && result.knownHosts) await pinSshHostKeys(db, repositoryId, result.knownHosts);
    const applied = repository && (await this.applyCatalog(repositoryId, claim, commit, catalog, files, repository.sync_commit));
    if (!applied) {
      this.deps.metrics.syncEnded('superseded', seconds);
      log.info({ commit }, 'repository sync outdated by a newer change; its result was dropped');
      // Deleted while we fetched: its clone must not outlive it.
      if (!(await findRepositoryById(db, repositoryId))) await this.deps.checkouts.remove(repositoryId);
      return { state: 'superseded' };
    }
    this.deps.metrics.syncEnded('ready', seconds);
    log.info(
      { commit, skills: catalog.skills.length, files: files.length, warnings: applied.warnings.length, collected: applied.collected },
      'repository sync ready',
    );
    return { state: 'ready', commit };
  }

  /**
   * Stores the content, reconciles the discovered skills, marks the repository ready and collects
   * the content of older commits, in one transaction, if the attempt is current.
   */
  private applyCatalog(
    repositoryId: string,
    claim: string,
    commit: string,
    catalog: Catalog,
    files: SkillFile[],
    previousCommit: string | null,
  ) {
    const { now, newId } = this.deps;
    return this.deps.db.transaction().execute(async (trx) => {
      if (!(await lockCurrentSync(trx, repositoryId, claim))) return undefined;
      await storeSkillContent(trx, repositoryId, commit, files);
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
            await updateSkill(trx, current.id, {
              description: skill.description,
              version: skill.version,
              path: skill.path,
              updated_at: at,
            });
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
      // The commit before stays: a run may have read it just before this one landed.
      const collected = await collectSkillContent(trx, repositoryId, previousCommit ? [commit, previousCommit] : [commit]);
      return { warnings, collected };
    });
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

/**
 * Records the host keys the SSH server presented at the repository's first sync: every later sync
 * requires them (trust on first use). Only a repository with none recorded takes them, so two first
 * syncs racing cannot replace one another's.
 */
async function pinSshHostKeys(db: Db, repositoryId: string, knownHosts: string): Promise<void> {
  await db
    .updateTable('repositories')
    .set({ ssh_known_hosts: knownHosts })
    .where('id', '=', repositoryId)
    .where('ssh_known_hosts', 'is', null)
    .execute();
}
