/**
 * `acis sync-repository <rep_id>`: one attempt of a repository sync, as a RepositorySync's Job pod
 * runs it under Kubernetes. The same worker code as the in-process sync (fetch, catalog, store the
 * skill content, apply), for the claim the API server took (ACIS_SYNC_CLAIM), with the credential
 * the API server resolved for this attempt, read from the Secret mounted for it alone
 * (ACIS_SYNC_CREDENTIAL_FILE): the pod holds the database URL but no master key and, for a GitHub
 * App, only an installation token, never the App's private key. The outcome is written to the database (if the claim is still
 * current) and, as one JSON line `{state, commit?, error?}`, to the container's termination message
 * (ACIS_TERMINATION_LOG, default /dev/termination-log), which is how the controller learns it without
 * reading the database. Exit code: 0 ready, 1 error, 2 nothing written (superseded, missing).
 */
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '../config.js';
import { openDatabase } from '../core/db/database.js';
import { createIdGenerator } from '../core/ids.js';
import { Metrics } from '../core/metrics.js';
import { createLogger } from '../server.js';
import { RepositoryCheckouts } from './checkouts.js';
import { mountedGitCredential } from './git-credentials.js';
import { remotePolicy } from './remote-policy.js';
import { RepositorySyncWorker } from './sync.js';

export async function runSyncJob(repositoryId: string | undefined, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  if (!repositoryId || !/^rep_[A-Za-z0-9]+$/.test(repositoryId)) throw new Error('usage: acis sync-repository <rep_id>');
  const claim = env.ACIS_SYNC_CLAIM;
  if (!claim) throw new Error('ACIS_SYNC_CLAIM must name the claim of the attempt to run');
  if (!env.DATABASE_URL) throw new Error('DATABASE_URL must be set: the attempt writes its outcome to the database');
  const config = loadConfig({ ...env, ACIS_DATA_DIR: env.ACIS_DATA_DIR ?? path.join(tmpdir(), 'acis-sync') });
  const logger = createLogger(config);
  const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, poolSize: 2 });
  try {
    const worker = new RepositorySyncWorker({
      db: database.db,
      gitCredential: mountedGitCredential(env.ACIS_SYNC_CREDENTIAL_FILE),
      logger,
      now: () => new Date(),
      newId: createIdGenerator(),
      nodeId: `sync-job-${repositoryId}`,
      checkouts: new RepositoryCheckouts(path.join(config.dataDir, 'repositories')),
      remotes: remotePolicy(config),
      timeoutMs: config.syncTimeoutSeconds * 1000,
      metrics: new Metrics(),
    });
    const outcome = await worker.runAttempt(repositoryId, claim);
    await writeFile(env.ACIS_TERMINATION_LOG ?? '/dev/termination-log', `${JSON.stringify(outcome)}\n`).catch((error: unknown) => {
      logger.warn({ err: error }, 'the termination message could not be written');
    });
    logger.info({ repository_id: repositoryId, state: outcome.state, commit: outcome.commit }, 'sync attempt ended');
    return outcome.state === 'ready' ? 0 : outcome.state === 'error' ? 1 : 2;
  } finally {
    await database.close();
  }
}
