/**
 * `acis sync-repository <rep_id>`: one attempt of a repository sync, as a RepositorySync's Job pod
 * runs it under Kubernetes. It fetches and parses as the in-process sync does (sync-attempt.ts) and
 * hands the result to the API server's sync report listener (ACIS_SYNC_REPORT_URL, sync-report.ts),
 * which stores it if the attempt's claim (ACIS_SYNC_CLAIM) is still current. The pod holds no
 * database credential and no master key: only the attempt's report token (ACIS_SYNC_TOKEN_FILE) and
 * what git authenticates with (ACIS_SYNC_CREDENTIAL_FILE; for a GitHub App an installation token,
 * never the App's key), both from the Secret the API server wrote for this attempt alone. The
 * listener is reached over HTTPS only and verified against the deployment CA (ACIS_SYNC_REPORT_CA_FILE,
 * the CA certificate the controller mounts) with its host name checked, before the token is sent.
 *
 * The outcome is also written, as one JSON line `{state, commit?, error?}`, to the container's
 * termination message (ACIS_TERMINATION_LOG, default /dev/termination-log), which is how the
 * controller learns it without asking the API server. Exit code: 0 ready, 1 error (including a
 * result the API server could not be given), 2 nothing written (superseded).
 */
import { readFile, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Logger } from 'pino';
import { z } from 'zod';
import { loadConfig } from '../config.js';
import { createLogger } from '../server.js';
import { RepositoryCheckouts } from './checkouts.js';
import { mountedGitCredential } from './git-credentials.js';
import type { SyncOutcome } from './sync.js';
import { type AttemptResult, fetchAttempt } from './sync-attempt.js';
import { encodeReport, reportPath } from './sync-report.js';
import { remotePolicy } from './remote-policy.js';
import { postReport, type ReportAnswer, ReportListenerUntrusted } from './sync-report-client.js';

/** Connection failures (an API node restarting) are retried this many times before the attempt fails. */
const REPORT_ATTEMPTS = 4;

const CA_FILE_NEEDED = 'must name the deployment CA certificate the sync report listener is verified with (none mounted?)';

const JobEnv = z.object({
  ACIS_SYNC_CLAIM: z.string().regex(/^[0-9a-f]{8,64}$/, 'must name the claim of the attempt to run'),
  ACIS_SYNC_REPORT_URL: z
    .string()
    .url('must be the URL of the sync report listener of the API server')
    .refine((url) => url.startsWith('https://'), 'must be an https URL: the sync report listener speaks TLS only'),
  ACIS_SYNC_REPORT_CA_FILE: z.string({ error: CA_FILE_NEEDED }).min(1, CA_FILE_NEEDED),
  ACIS_SYNC_TOKEN_FILE: z.string().min(1, 'must name the file holding the report token of the attempt'),
  ACIS_SYNC_CREDENTIAL_FILE: z.string().min(1).optional(),
  ACIS_SYNC_REPOSITORY_URL: z.string().min(1, 'must be the repository URL'),
  ACIS_SYNC_BRANCH: z.string().min(1, 'must be the branch'),
  ACIS_SYNC_PROVIDER: z.string().min(1).default('generic'),
  ACIS_SYNC_SSH_KNOWN_HOSTS: z.string().min(1).optional(),
});

export async function runSyncJob(repositoryId: string | undefined, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  if (!repositoryId || !/^rep_[A-Za-z0-9]+$/.test(repositoryId)) throw new Error('usage: acis sync-repository <rep_id>');
  const parsed = JobEnv.safeParse(env);
  if (!parsed.success) {
    throw new Error(`invalid environment:\n${parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`).join('\n')}`);
  }
  const job = parsed.data;
  const config = loadConfig({ ...env, ACIS_DATA_DIR: env.ACIS_DATA_DIR ?? path.join(tmpdir(), 'acis-sync') });
  const logger = createLogger(config);
  const token = (await readFile(job.ACIS_SYNC_TOKEN_FILE, 'utf8')).trim();
  const caPem = await readFile(job.ACIS_SYNC_REPORT_CA_FILE, 'utf8').catch((error: NodeJS.ErrnoException) => {
    throw new Error(`invalid environment:\n  ACIS_SYNC_REPORT_CA_FILE: cannot be read (${error.code ?? error.message})`);
  });
  const result = await fetchAttempt(
    {
      gitCredential: mountedGitCredential(job.ACIS_SYNC_CREDENTIAL_FILE),
      checkouts: new RepositoryCheckouts(path.join(config.dataDir, 'repositories')),
      remotes: remotePolicy(config),
      timeoutMs: config.syncTimeoutSeconds * 1000,
      signal: new AbortController().signal,
      onUnexpected: (error) => logger.error({ err: error }, 'repository sync failed'),
    },
    {
      id: repositoryId,
      repo_url: job.ACIS_SYNC_REPOSITORY_URL,
      branch: job.ACIS_SYNC_BRANCH,
      provider: job.ACIS_SYNC_PROVIDER,
      credential_id: null,
      ssh_known_hosts: job.ACIS_SYNC_SSH_KNOWN_HOSTS ?? null,
    },
  );
  const url = new URL(reportPath(repositoryId, job.ACIS_SYNC_CLAIM), job.ACIS_SYNC_REPORT_URL);
  const outcome = await report(url, token, caPem, result, logger);
  await writeFile(env.ACIS_TERMINATION_LOG ?? '/dev/termination-log', `${JSON.stringify(outcome)}\n`).catch((error: unknown) => {
    logger.warn({ err: error }, 'the termination message could not be written');
  });
  logger.info({ repository_id: repositoryId, state: outcome.state, commit: outcome.commit }, 'sync attempt ended');
  return outcome.state === 'ready' ? 0 : outcome.state === 'error' ? 1 : 2;
}

/** Hands the result to the API server; what it stored (or that the claim had ended). */
async function report(url: URL, token: string, caPem: string, result: AttemptResult, logger: Logger): Promise<SyncOutcome> {
  const body = JSON.stringify(encodeReport(result));
  for (let attempt = 1; ; attempt++) {
    let response: ReportAnswer;
    try {
      response = await postReport(url, token, body, caPem);
    } catch (error) {
      if (error instanceof ReportListenerUntrusted) {
        logger.error({ err: error }, 'the sync report listener could not be verified; the result was not sent');
        return { state: 'error', error: error.message };
      }
      logger.warn({ err: error, attempt }, 'the sync result could not be handed to the API server');
      if (attempt >= REPORT_ATTEMPTS) return { state: 'error', error: 'the sync result could not be handed to the platform' };
      await new Promise((resolve) => setTimeout(resolve, 500 * 2 ** attempt));
      continue;
    }
    const answer = response.body;
    if (response.status === 200 && (answer.state === 'ready' || answer.state === 'error')) return answer as SyncOutcome;
    if (response.status === 403 && answer.type?.endsWith('/problems/sync-superseded')) return { state: 'superseded' };
    logger.error({ status: response.status, problem: answer.type }, 'the API server refused the sync result');
    return { state: 'error', error: `the platform refused the sync result (HTTP ${response.status})` };
  }
}
