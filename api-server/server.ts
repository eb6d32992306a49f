import type { Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { type DestinationStream, type Logger, pino } from 'pino';
import type { EgressProxy } from '../egress-proxy/egress-proxy.js';
import { readResolveToken } from '../egress-proxy/resolve-protocol.js';
import { createApp } from './app.js';
import { ApprovalGate } from './approvals/approval-gate.js';
import type { Config } from './config.js';
import { createVault, loadMasterKey, parseMasterKey } from './core/crypto.js';
import { migrateToLatest, openDatabase } from './core/db/database.js';
import type { AppDeps } from './deps.js';
import { egressCredentials, egressSecrets, missingSecretAtEgress, startEgressProxy } from './egress/egress-wiring.js';
import { type EgressResolveServer, startEgressResolveServer } from './egress/resolve-server.js';
import { followRun } from './runs/follow.js';
import { answerClientErrors } from './core/http/client-error.js';
import { purgeExpiredIdempotencyKeys } from './core/idempotency.js';
import { createIdGenerator } from './core/ids.js';
import { Metrics } from './core/metrics.js';
import { ProblemError } from './core/problems.js';
import { RateLimiter } from './core/rate-limit.js';
import { ensureBootstrapIntegration } from './integrations/integrations.service.js';
import { RepositoryCheckouts } from './repositories/checkouts.js';
import { clusterNamespace, loadKubeConfig } from '../kube/cluster-access.js';
import { vaultGitCredentials } from './repositories/git-credentials.js';
import { kubernetesSyncDispatch } from './repositories/kubernetes-sync-dispatch.js';
import { RepositorySyncWorker } from './repositories/sync.js';
import { coolLapsedHolds, failOrphanedRuns, HEARTBEAT_MS, heartbeat, resolveNodeId } from './runs/nodes.js';
import { RunManager } from './runs/run-manager.js';
import { KubernetesSandboxProvider } from './sandboxes/kubernetes/provider.js';
import { publishEgressCa } from './egress/egress-ca-publication.js';
import { databaseRunnerRecords, type RunnerRecords } from './sandboxes/kubernetes/records.js';
import { RunAbortSignals } from './runs/run-aborts.js';
import { SandboxClient } from './sandboxes/kubernetes/sandboxes.js';
import { LocalSandboxProvider } from './sandboxes/local/provider.js';
import { connectRemoteRunner } from './sandboxes/remote-runner.js';
import type { SandboxStateListener } from './sandboxes/provider.js';
import { sweepEndedRunSecrets } from './secrets/secrets.repository.js';

const PURGE_INTERVAL_MS = 10 * 60 * 1000;
/** How often a node looks for approvals past their deadline (those of any node: a dead one's too). */
const APPROVAL_SWEEP_MS = 1_000;
/**
 * At shutdown, how long a response still being written may take once the runs have ended (a stream
 * writing out its last lines, a re-attach following a run on another node) before it is cut.
 */
const CLOSE_LINGER_MS = 5_000;

export interface RunningServer {
  url: string;
  port: number;
  deps: AppDeps;
  /**
   * Graceful shutdown: takes no new messages (503 `shutting-down`, /readyz too), lets the runs in
   * progress finish for up to `graceMs`, ends the rest `failed` with a stored `error` line, then
   * stops runners, background work, the egress proxy and the listener, and closes the database last.
   */
  shutdown(graceMs: number): Promise<void>;
  /** A shutdown without grace: runs in progress end `failed` at once. */
  stop(): Promise<void>;
}

export interface StartOptions {
  logger?: Logger;
  now?: () => Date;
  validateResponses?: boolean;
}

export function createLogger(config: Pick<Config, 'logLevel'>, destination?: DestinationStream): Logger {
  return pino(
    {
    level: config.logLevel,
    base: { service: 'acis' },
    // Belt and braces: nothing we log should carry these, but if an object ever does, it is cut.
      redact: {
        paths: ['*.authorization', '*.headers.authorization', '*.secret', '*.secrets', '*.service_key'],
        censor: '[redacted]',
      },
    },
    destination,
  );
}

/**
 * Opens the database, migrates it, bootstraps the configured integration and serves the API.
 * `shutdown()` ends runs, then runners and background work, then the listener, the database last.
 */
export async function startServer(config: Config, options: StartOptions = {}): Promise<RunningServer> {
  const logger = options.logger ?? createLogger(config);
  const database = await openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    poolSize: config.dbPoolSize,
  });
  let egress: EgressProxy | undefined;
  let egressResolve: EgressResolveServer | undefined;
  let approvals: ApprovalGate | undefined;
  let aborts: RunAbortSignals | undefined;
  try {
    const applied = await migrateToLatest(database.db);
    if (applied.length > 0) logger.info({ migrations: applied }, 'migrations applied');
    const now = options.now ?? (() => new Date());
    const newId = createIdGenerator();
    const nodeId = await resolveNodeId(config.dataDir);
    const metrics = new Metrics();
    const showSandboxState: SandboxStateListener = async (conversationId, state) => {
      await database.db
        .updateTable('conversations')
        .set({ sandbox_state: state.warm ? 'warm' : 'cold', sandbox_expires_at: state.expiresAt })
        .where('id', '=', conversationId)
        .execute();
    };
    // Hold expiry follows the same clock as the timestamps the API shows.
    const clock = () => now().getTime();
    const sandboxes =
      config.sandboxProvider === 'kubernetes'
        ? kubernetesProvider(config, logger, showSandboxState, clock, databaseRunnerRecords(database.db, nodeId, now))
        : undefined;
    const local = sandboxes ? undefined : new LocalSandboxProvider(config, logger, showSandboxState, clock);
    const provider = sandboxes ?? local!;
    metrics.watchRunners({
      runnerStates: () => provider.views().map((view) => view.state),
      queuedRuns: () => provider.queuedRuns(),
      ...(local && { local: { poolSize: config.poolSize, capacity: config.maxSandboxes } }),
    });
    const vault = createVault(await loadMasterKey(config.masterKey, config.dataDir), config.previousMasterKeys.map(parseMasterKey));
    approvals = new ApprovalGate({ db: database.db, logger, now, databaseUrl: config.databaseUrl, metrics });
    await approvals.start();
    const gitCredential = vaultGitCredentials({ db: database.db, vault, githubApiUrl: config.githubApiUrl });
    const repositorySync = new RepositorySyncWorker({
      db: database.db,
      gitCredential,
      logger,
      now,
      newId,
      nodeId,
      checkouts: new RepositoryCheckouts(path.join(config.dataDir, 'repositories')),
      allowFileRepos: config.allowFileRepos,
      timeoutMs: config.syncTimeoutSeconds * 1000,
      metrics,
      ...(config.repositorySyncRunner === 'kubernetes' && {
        dispatch: kubernetesSyncDispatch({
          db: database.db,
          namespace: clusterNamespace(config.k8sNamespace),
          kubeconfigPath: config.kubeconfigPath,
          gitCredential,
          logger,
          attemptDeadlineMs: (config.syncJobDeadlineSeconds + config.syncTimeoutSeconds) * 1000,
        }),
      }),
    });
    const runs = new RunManager({
      db: database.db,
      logger,
      now,
      newId,
      provider,
      nodeId,
      maxHoldSeconds: config.maxHoldSeconds,
      filler: { baseUrl: config.anthropicBaseUrl, apiKey: config.anthropicApiKey, model: config.fillerModel, logger },
      vault,
      approvals,
      approvalTtlSeconds: config.approvalTtlSeconds,
      metrics,
    });
    const deps: AppDeps = {
      db: database.db,
      config,
      logger,
      vault,
      newId,
      now,
      validateResponses: options.validateResponses ?? false,
      rateLimiter: new RateLimiter({
        db: database.db,
        logger,
        config: config.rateLimits,
        onRefused: (rateClass) => metrics.rateLimitRefused(rateClass),
      }),
      metrics,
      runtime: { nodeId, provider, runs, approvals },
      repositorySync,
      followRun: (messageId, after, signal) => followRun(deps, messageId, after, signal),
    };
    const baseUrl = config.publicUrl ?? `http://${config.host}:${config.port}`;
    await heartbeat(deps.db, nodeId, now());
    const failed = await failOrphanedRuns(deps.db, { nodeId, includeOwn: true, now: now(), baseUrl });
    if (failed > 0) logger.warn({ runs: failed }, 'runs left in progress by a stopped process were marked failed');
    await sweepEndedRunSecrets(deps.db);
    await coolLapsedHolds(deps.db, now());
    const resumed = await repositorySync.recoverOrphans(true);
    if (resumed > 0) logger.warn({ repositories: resumed }, 'repository syncs left in flight by a stopped process were started again');
    if (sandboxes && config.databaseUrl) {
      aborts = new RunAbortSignals({
        db: database.db,
        databaseUrl: config.databaseUrl,
        logger,
        onAbort: ({ runId, alias }) => runs.abortRun(runId, missingSecretAtEgress(alias)),
      });
      await aborts.start();
    }
    const credentials = egressCredentials(provider, runs, aborts);
    egress = await startEgressProxy(deps, credentials, logger);
    if (config.egressResolve) {
      egressResolve = await startEgressResolveServer({
        ...config.egressResolve.listen,
        token: await readResolveToken(config.egressResolve.token),
        resolve: (runnerId, token) => egressSecrets(deps, credentials, runnerId, token),
        standsForRun: async (runnerId, token) => (await credentials.egressRun(runnerId, token)) !== undefined,
        abortMissing: (runnerId, alias) => credentials.abortMissing(runnerId, alias),
        logger: logger.child({ component: 'egress-resolve' }),
      });
    }
    if (local) await local.start({ port: egress.port, caCertificatePem: egress.caCertificatePem });
    else {
      if (config.egressCaConfigMap) {
        await publishEgressCa({
          kubeConfig: loadKubeConfig(config.kubeconfigPath),
          namespace: clusterNamespace(config.k8sNamespace),
          name: config.egressCaConfigMap,
          certificatePem: egress.caCertificatePem,
          logger,
        });
      }
      await sandboxes!.start();
    }
    if (config.bootstrapServiceKey) {
      const { created } = await ensureBootstrapIntegration(deps, config.bootstrapServiceKey);
      if (created) logger.info('bootstrap integration created for ACIS_BOOTSTRAP_SERVICE_KEY');
    }

    const server = createApp(deps).listen(config.port, config.host);
    answerClientErrors(server, deps);
    await new Promise<void>((resolve, reject) => {
      server.once('listening', resolve);
      server.once('error', reject);
    });
    const port = (server.address() as AddressInfo).port;
    const closeServer = closerOf(server);
    const purge = setInterval(() => {
      purgeExpiredIdempotencyKeys(deps).catch((err: unknown) => logger.warn({ err }, 'idempotency purge failed'));
    }, PURGE_INTERVAL_MS);
    purge.unref();
    const beat = setInterval(() => {
      void (async () => {
        await heartbeat(deps.db, nodeId, now());
        await failOrphanedRuns(deps.db, { nodeId, includeOwn: false, now: now(), baseUrl });
        // A message's secrets live as long as its run; those of runs failed above go now.
        await sweepEndedRunSecrets(deps.db);
        // Our own lapsed holds first (a late timer), so the sweep below only cools other nodes' leftovers.
        await provider.expireLapsedHolds();
        await coolLapsedHolds(deps.db, now());
        await repositorySync.recoverOrphans(false);
        await repositorySync.startRequested();
      })().catch((err: unknown) => logger.warn({ err }, 'node heartbeat failed'));
    }, HEARTBEAT_MS);
    beat.unref();
    const gate = approvals;
    const sweep = setInterval(() => {
      gate.expireDue().catch((err: unknown) => logger.warn({ err }, 'approval expiry sweep failed'));
    }, APPROVAL_SWEEP_MS);
    sweep.unref();
    logger.info({ port, host: config.host, database: database.kind }, 'ACIS listening');

    let shuttingDown: Promise<void> | undefined;
    const shutdown = (graceMs: number) =>
      (shuttingDown ??= (async () => {
        // The listener stays open while runs finish: their streams and re-attaches are served, and a
        // new message gets a 503 it can retry elsewhere rather than a refused connection.
        runs.close();
        clearInterval(purge);
        clearInterval(sweep);
        if (!(await runs.drain(graceMs))) {
          logger.warn({ grace_seconds: graceMs / 1000 }, 'runs still in progress at the shutdown deadline are ended as failed');
          runs.endAll(
            new ProblemError('shutting-down', 503, {
              detail: `The server shut down before the run finished (it waited ${Math.round(graceMs / 1000)} s); send the message again.`,
            }),
          );
        }
        // Kills every runner (the ended runs' and the pooled and held ones) and ends the turns still queued for one.
        await provider.stop();
        await runs.drain();
        clearInterval(beat);
        await repositorySync.stop();
        await gate.stop();
        await aborts?.stop();
        await egressResolve?.close();
        await egress?.close();
        await closeServer(CLOSE_LINGER_MS);
        await database.close();
      })());
    return {
      url: `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`,
      port,
      deps,
      shutdown,
      stop: () => shutdown(0),
    };
  } catch (error) {
    await egressResolve?.close();
    await egress?.close();
    await aborts?.stop();
    await approvals?.stop();
    await database.close();
    throw error;
  }
}

function kubernetesProvider(
  config: Config,
  logger: Logger,
  onSandboxState: SandboxStateListener,
  now: () => number,
  records: RunnerRecords,
): KubernetesSandboxProvider {
  return new KubernetesSandboxProvider({
    records,
    client: new SandboxClient(loadKubeConfig(config.kubeconfigPath), clusterNamespace(config.k8sNamespace), logger),
    connect: (endpoint) => connectRemoteRunner({ ...endpoint, logger }),
    logger,
    onSandboxState,
    readyTimeoutMs: config.sandboxReadyTimeoutSeconds * 1000,
    now,
  });
}

/**
 * How the listener is closed at shutdown: stop listening and close every connection, idle ones at
 * once, the others as soon as their response is out (a keep-alive connection would otherwise stay
 * open), and any left after `lingerMs` regardless. Set up at start, so it sees every response.
 */
function closerOf(server: Server): (lingerMs: number) => Promise<void> {
  let closing = false;
  server.on('request', (_req, res: ServerResponse) => {
    res.once('finish', () => {
      if (closing) setImmediate(() => server.closeIdleConnections());
    });
  });
  return (lingerMs) =>
    new Promise((resolve, reject) => {
      closing = true;
      const cut = setTimeout(() => server.closeAllConnections(), lingerMs);
      server.close((err) => {
        clearTimeout(cut);
        if (err) reject(err);
        else resolve();
      });
      server.closeIdleConnections();
    });
}
