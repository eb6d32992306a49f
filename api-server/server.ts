import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { type DestinationStream, type Logger, pino } from 'pino';
import { createEgressMetrics } from '../egress-proxy/egress-metrics.js';
import { createEgressProxy, type EgressProxy } from '../egress-proxy/egress-proxy.js';
import { createApp } from './app.js';
import { ApprovalGate } from './approvals/approval-gate.js';
import type { Config } from './config.js';
import { createVault, loadMasterKey, parseMasterKey } from './core/crypto.js';
import { migrateToLatest, openDatabase } from './core/db/database.js';
import type { AppDeps } from './core/deps.js';
import { purgeExpiredIdempotencyKeys } from './core/idempotency.js';
import { createIdGenerator } from './core/ids.js';
import { Metrics } from './core/metrics.js';
import { ProblemError } from './core/problems.js';
import { RateLimiter } from './core/rate-limit.js';
import { ensureBootstrapIntegration } from './integrations/integrations.service.js';
import { RepositoryContentStore } from './repositories/content.js';
import { RepositorySyncWorker } from './repositories/sync.js';
import { coolLapsedHolds, failOrphanedRuns, HEARTBEAT_MS, heartbeat, resolveNodeId } from './runs/nodes.js';
import { RunManager } from './runs/run-manager.js';
import { LocalSandboxProvider } from './sandboxes/local-provider.js';
import { sweepEndedRunSecrets } from './secrets/secrets.repository.js';
import { secretsForRun } from './secrets/secrets.service.js';

const PURGE_INTERVAL_MS = 10 * 60 * 1000;
/** How often a node looks for approvals past their deadline (those of any node: a dead one's too). */
const APPROVAL_SWEEP_MS = 1_000;

export interface RunningServer {
  url: string;
  port: number;
  deps: AppDeps;
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
 * `stop()` closes the listener first, then background work, then the database.
 */
export async function startServer(config: Config, options: StartOptions = {}): Promise<RunningServer> {
  const logger = options.logger ?? createLogger(config);
  const database = await openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    poolSize: config.dbPoolSize,
  });
  let egress: EgressProxy | undefined;
  let approvals: ApprovalGate | undefined;
  try {
    const applied = await migrateToLatest(database.db);
    if (applied.length > 0) logger.info({ migrations: applied }, 'migrations applied');
    const now = options.now ?? (() => new Date());
    const newId = createIdGenerator();
    const nodeId = await resolveNodeId(config.dataDir);
    const metrics = new Metrics();
    const provider = new LocalSandboxProvider(
      config,
      logger,
      async (conversationId, state) => {
        await database.db
          .updateTable('conversations')
          .set({ sandbox_state: state.warm ? 'warm' : 'cold', sandbox_expires_at: state.expiresAt })
          .where('id', '=', conversationId)
          .execute();
      },
      // Hold expiry follows the same clock as the timestamps the API shows.
      () => now().getTime(),
    );
    metrics.watchRunners({
      runnerStates: () => provider.views().map((view) => view.state),
      queuedRuns: () => provider.queuedRuns(),
      poolSize: config.poolSize,
      capacity: config.maxSandboxes,
    });
    const vault = createVault(await loadMasterKey(config.masterKey, config.dataDir), config.previousMasterKeys.map(parseMasterKey));
    approvals = new ApprovalGate({ db: database.db, logger, now, databaseUrl: config.databaseUrl, metrics });
    await approvals.start();
    const repositorySync = new RepositorySyncWorker({
      db: database.db,
      vault,
      logger,
      now,
      newId,
      nodeId,
      content: new RepositoryContentStore(path.join(config.dataDir, 'repositories')),
      allowFileRepos: config.allowFileRepos,
      timeoutMs: config.syncTimeoutSeconds * 1000,
      metrics,
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
      repositorySync,
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
    };
    const baseUrl = config.publicUrl ?? `http://${config.host}:${config.port}`;
    await heartbeat(deps.db, nodeId, now());
    const failed = await failOrphanedRuns(deps.db, { nodeId, includeOwn: true, now: now(), baseUrl });
    if (failed > 0) logger.warn({ runs: failed }, 'runs left in progress by a stopped process were marked failed');
    await sweepEndedRunSecrets(deps.db);
    await coolLapsedHolds(deps.db, now());
    const resumed = await repositorySync.recoverOrphans(true);
    if (resumed > 0) logger.warn({ repositories: resumed }, 'repository syncs left in flight by a stopped process were started again');
    egress = await startEgressProxy(deps, provider, runs, logger);
    await provider.start({ port: egress.port, caCertificatePem: egress.caCertificatePem });
    if (config.bootstrapServiceKey) {
      const { created } = await ensureBootstrapIntegration(deps, config.bootstrapServiceKey);
      if (created) logger.info('bootstrap integration created for ACIS_BOOTSTRAP_SERVICE_KEY');
    }

    const server = createApp(deps).listen(config.port, config.host);
    await new Promise<void>((resolve, reject) => {
      server.once('listening', resolve);
      server.once('error', reject);
    });
    const port = (server.address() as AddressInfo).port;
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
      })().catch((err: unknown) => logger.warn({ err }, 'node heartbeat failed'));
    }, HEARTBEAT_MS);
    beat.unref();
    const gate = approvals;
    const sweep = setInterval(() => {
      gate.expireDue().catch((err: unknown) => logger.warn({ err }, 'approval expiry sweep failed'));
    }, APPROVAL_SWEEP_MS);
    sweep.unref();
    logger.info({ port, host: config.host, database: database.kind }, 'ACIS listening');

    return {
      url: `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`,
      port,
      deps,
      stop: async () => {
        // Stop accepting first; open streams end when their runs do, which ending the runners forces.
        const closed = closeServer(server);
        clearInterval(purge);
        clearInterval(beat);
        clearInterval(sweep);
        await provider.stop();
        await runs.drain();
        await repositorySync.stop();
        await gate.stop();
        await egress?.close();
        await closed;
        await database.close();
      },
    };
  } catch (error) {
    await egress?.close();
    await approvals?.stop();
    await database.close();
    throw error;
  }
}

/**
 * The runners' only route out. A credential is a runner's (user: runner id, password: a token given at
 * spawn) and stands for the run whose turn is in progress on it, so exactly that run's values are
 * substituted; at any other time it gets 407.
 */
function startEgressProxy(deps: AppDeps, provider: LocalSandboxProvider, runs: RunManager, logger: Logger): Promise<EgressProxy> {
  return createEgressProxy({
    caDir: path.join(deps.config.dataDir, 'egress-ca'),
    allow: deps.config.egressAllow,
    extraCaPath: deps.config.egressExtraCaPath,
    logger: logger.child({ component: 'egress' }),
    // In-process, the proxy's metrics are served on the API server's /metrics.
    metrics: createEgressMetrics(deps.metrics.registry),
    resolveRun: async ({ runId: runnerId, token }) => {
      const runId = provider.egressRun(runnerId, token);
      return runId ? secretsForRun(deps, runId) : undefined;
    },
    onMissing: (runnerId, alias) => {
      const runId = provider.currentRun(runnerId);
      if (!runId) return;
      runs.abortRun(
        runId,
        new ProblemError('missing-secret', 422, {
          detail: `The run sent {{secret:${alias}}} to the network, but no secret is vaulted under ${alias} at any scope; re-send the message with the secret attached.`,
        }),
      );
    },
  });
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve, reject) => {
    server.close((err) => (err ? reject(err) : resolve()));
    server.closeIdleConnections();
  });
}
