import type { Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { type DestinationStream, type Logger, pino } from 'pino';
import { type DeploymentCa, loadOrCreateDeploymentCa } from '../egress-proxy/deployment-ca.js';
import type { EgressProxy } from '../egress-proxy/egress-proxy.js';
import { readResolveToken } from '../egress-proxy/resolve-protocol.js';
import { clusterNamespace } from '../kube/cluster-access.js';
import { createApp } from './app.js';
import { ApprovalGate } from './approvals/approval-gate.js';
import { type Config, sandboxWeakenings } from './config.js';
import { createVault, loadMasterKey, parseMasterKey, type Vault } from './core/crypto.js';
import { type DatabaseHandle, migrateToLatest, openDatabase } from './core/db/database.js';
import { answerClientErrors } from './core/http/client-error.js';
import { purgeExpiredIdempotencyKeys } from './core/idempotency.js';
import { createIdGenerator } from './core/ids.js';
import { Metrics } from './core/metrics.js';
import { ProblemError } from './core/problems.js';
import { RateLimiter } from './core/rate-limit.js';
import type { AppDeps } from './deps.js';
import { egressCredentials, egressRun, secretRefusedAtEgress, startEgressProxy } from './egress/egress-wiring.js';
import { type EgressResolveServer, startEgressResolveServer } from './egress/resolve-server.js';
import { type ApiIdentity, startApiIdentity } from './internal-tls/api-identity.js';
import { ensureBootstrapIntegration } from './integrations/integrations.service.js';
import { RepositoryCheckouts } from './repositories/checkouts.js';
import { type GitCredentialSource, vaultGitCredentials } from './repositories/git-credentials.js';
import { kubernetesSyncDispatch, syncAttemptSettings } from './repositories/kubernetes-sync-dispatch.js';
import { remotePolicy } from './repositories/remote-policy.js';
import { RepositorySyncWorker } from './repositories/sync.js';
import { SYNC_REPORT_KEY_PURPOSE } from './repositories/sync-report.js';
import { type SyncReportServer, startSyncReportServer } from './repositories/sync-report-server.js';
import { followRun } from './runs/follow.js';
import {
  claimOrphanedRun,
  coolLapsedHolds,
  failOrphanedRun,
  failOrphanedRuns,
  findOrphanedRuns,
  heartbeat,
  resolveNodeId,
} from './runs/nodes.js';
import { loadTakenOverRun } from './runs/takeover.js';
import type { OrphanedRun } from './runs/nodes.js';
import { RunAbortSignals } from './runs/run-aborts.js';
import { RunManager } from './runs/run-manager.js';
import type { EgressCredentials, SandboxProvider } from './sandboxes/provider.js';
import { type ChosenProvider, createSandboxProvider } from './sandboxes/provider-factory.js';
import { sweepEndedRunSecrets } from './secrets/secrets.repository.js';

const PURGE_INTERVAL_MS = 10 * 60 * 1000;
/** How often a node cools lapsed holds and looks for repository syncs to (re)start. */
const HOUSEKEEPING_MS = 10_000;
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
  /** The listener sync Jobs hand their results to (ACIS_SYNC_REPORT_LISTEN), when configured. */
  syncReport: SyncReportServer | undefined;
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

/** Stops what has started, should the start fail further on; run last started, first stopped. */
type Undo = () => Promise<void>;

/**
 * Opens the database, migrates it, bootstraps the configured integration and serves the API.
 * `shutdown()` ends runs, then runners and background work, then the listener, the database last.
 * A start that fails part-way stops what it had started (not the runners: none is taken yet), the
 * database last.
 */
export async function startServer(config: Config, options: StartOptions = {}): Promise<RunningServer> {
  const logger = options.logger ?? createLogger(config);
  const database = await openDatabase({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    poolSize: config.dbPoolSize,
  });
  const undo: Undo[] = [() => database.close()];
  try {
    return await assemble(config, options, logger, database, undo);
  } catch (error) {
    for (const step of undo.reverse()) await step();
    throw error;
  }
}

/** The start in its order: state first, then what reaches out (egress, runners), the listener last. */
async function assemble(
  config: Config,
  options: StartOptions,
  logger: Logger,
  database: DatabaseHandle,
  undo: Undo[],
): Promise<RunningServer> {
  const applied = await migrateToLatest(database.db);
  if (applied.length > 0) logger.info({ migrations: applied }, 'migrations applied');
  const now = options.now ?? (() => new Date());
  const nodeId = await resolveNodeId(config.dataDir);
  const metrics = new Metrics();
  const ca = await loadOrCreateDeploymentCa(config.deploymentCaDir);
  const identity = await startApiIdentity(ca, [...(config.egressResolve?.tlsNames ?? []), ...config.syncReportTlsNames], logger);
  undo.push(async () => identity.stop());
  const sandboxes = createSandboxProvider({ config, logger, db: database.db, nodeId, now, identity });
  metrics.watchRunners({
    runnerStates: () => sandboxes.provider.views().map((view) => view.state),
    queuedRuns: () => sandboxes.provider.queuedRuns(),
    ...(sandboxes.nodeCapacity && { local: sandboxes.nodeCapacity }),
  });
  const vault = createVault(await loadMasterKey(config.masterKey, config.dataDir), config.previousMasterKeys.map(parseMasterKey));
  const approvals = new ApprovalGate({ db: database.db, logger, now, databaseUrl: config.databaseUrl, metrics });
  undo.push(() => approvals.stop());
  await approvals.start();
  const { deps, runs } = createDeps({
    config,
    options,
    logger,
    database,
    now,
    nodeId,
    metrics,
    vault,
    approvals,
    provider: sandboxes.provider,
  });
  const baseUrl = config.publicUrl ?? `http://${config.host}:${config.port}`;
  await recoverFromStoppedProcesses(deps, baseUrl);
  const aborts = await startRunAborts(deps, runs, sandboxes, undo);
  const egress = await startEgress(deps, egressCredentials(sandboxes.provider, runs, aborts, deps.logger), { ca, identity }, undo);
  await sandboxes.start({ port: egress.proxy.port, caCertificatePem: egress.proxy.caCertificatePem });
  const syncReport = await startSyncReport(deps, identity, baseUrl, undo);
  if (config.bootstrapServiceKey) {
    const { created } = await ensureBootstrapIntegration(deps, config.bootstrapServiceKey);
    if (created) logger.info('bootstrap integration created for ACIS_BOOTSTRAP_SERVICE_KEY');
  }
  const listener = await listen(deps);
  const loops = startBackgroundLoops(deps, baseUrl);
  logger.info({ port: listener.port, host: config.host, database: database.kind }, 'ACIS listening');
  const weakenings = sandboxWeakenings(config);
  if (weakenings.length > 0) logger.warn({ weakenings }, 'THE SANDBOX IS WEAKENED by these settings; never in production');
  const shutdown = shutdownOnce({ deps, runs, loops, aborts, egress, syncReport, closeServer: listener.closeServer, database });
  return {
    url: `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${listener.port}`,
    port: listener.port,
    deps,
    syncReport,
    shutdown,
    stop: () => shutdown(0),
  };
}

interface DepsParts {
  config: Config;
  options: StartOptions;
  logger: Logger;
  database: DatabaseHandle;
  now: () => Date;
  nodeId: string;
  metrics: Metrics;
  vault: Vault;
  approvals: ApprovalGate;
  provider: SandboxProvider;
}

/**
 * What the routes and services are given (the runs as the routes see them, repository syncs, the rate
 * limiter), and the run manager itself, which only the server's start and stop steer.
 */
function createDeps(parts: DepsParts): { deps: AppDeps; runs: RunManager } {
  const { config, logger, database, now, nodeId, metrics, vault, approvals, provider } = parts;
  const newId = createIdGenerator();
  const gitCredential = vaultGitCredentials({ db: database.db, vault, githubApiUrl: config.githubApiUrl });
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
    turnTimeoutSeconds: config.turnTimeoutSeconds,
    metrics,
  });
  const deps: AppDeps = {
    db: database.db,
    config,
    logger,
    vault,
    newId,
    now,
    validateResponses: parts.options.validateResponses ?? false,
    rateLimiter: new RateLimiter({
      db: database.db,
      logger,
      config: config.rateLimits,
      onRefused: (rateClass) => metrics.rateLimitRefused(rateClass),
    }),
    metrics,
    runtime: { nodeId, provider, runs, approvals },
    repositorySync: createRepositorySync(parts, newId, gitCredential),
    followRun: (messageId, after, signal) => followRun(deps, messageId, after, signal),
  };
  return { deps, runs };
}

/** Syncs run in this process, or as Kubernetes Jobs (ACIS_REPOSITORY_SYNC_RUNNER=kubernetes). */
function createRepositorySync(parts: DepsParts, newId: AppDeps['newId'], gitCredential: GitCredentialSource): RepositorySyncWorker {
  const { config, logger, database } = parts;
  return new RepositorySyncWorker({
    db: database.db,
    gitCredential,
    logger,
    now: parts.now,
    newId,
    nodeId: parts.nodeId,
    checkouts: new RepositoryCheckouts(path.join(config.dataDir, 'repositories')),
    remotes: remotePolicy(config),
    timeoutMs: config.syncTimeoutSeconds * 1000,
    metrics: parts.metrics,
    ...(config.repositorySyncRunner === 'kubernetes' && {
      dispatch: kubernetesSyncDispatch({
        db: database.db,
        namespace: clusterNamespace(config.k8sSandboxNamespace),
        kubeconfigPath: config.kubeconfigPath,
        gitCredential,
        logger,
        attemptDeadlineMs: (config.syncJobDeadlineSeconds + config.syncTimeoutSeconds) * 1000,
        settings: syncAttemptSettings(config),
        reportTokenKey: parts.vault.deriveKey(SYNC_REPORT_KEY_PURPOSE),
      }),
    }),
  });
}

/** What a stopped process (this node's last life, or a dead node) left behind: failed, swept, cooled, resumed. */
async function recoverFromStoppedProcesses(deps: AppDeps, baseUrl: string): Promise<void> {
  const { nodeId } = deps.runtime;
  await heartbeat(deps.db, nodeId, deps.now());
  const failed = await failOrphanedRuns(deps.db, {
    nodeId,
    includeOwn: true,
    // Where runners outlive their replica, the heartbeat takes the runs of other nodes over instead.
    includeOthers: !deps.runtime.provider.resumeRunner,
    now: deps.now(),
    baseUrl,
    staleMs: deps.config.nodeStaleSeconds * 1000,
  });
  if (failed > 0) deps.logger.warn({ runs: failed }, 'runs left in progress by a stopped process were marked failed');
  await sweepEndedRunSecrets(deps.db);
  await coolLapsedHolds(deps.db, deps.now());
  const resumed = await deps.repositorySync.recoverOrphans(true);
  if (resumed > 0) deps.logger.warn({ repositories: resumed }, 'repository syncs left in flight by a stopped process were started again');
}

/** Run aborts signalled across replicas: only when runs span them and share a PostgreSQL server. */
async function startRunAborts(
  deps: AppDeps,
  runs: RunManager,
  sandboxes: ChosenProvider,
  undo: Undo[],
): Promise<RunAbortSignals | undefined> {
  const { databaseUrl } = deps.config;
  if (!sandboxes.runsSpanReplicas || !databaseUrl) return undefined;
  const aborts = new RunAbortSignals({
    db: deps.db,
    databaseUrl,
    logger: deps.logger,
    onAbort: ({ runId, alias, destination }) => runs.abortRun(runId, secretRefusedAtEgress(alias, destination)),
  });
  undo.push(() => aborts.stop());
  await aborts.start();
  return aborts;
}

interface StartedEgress {
  proxy: EgressProxy;
  /** The listener a standalone proxy resolves through (ACIS_EGRESS_RESOLVE_LISTEN), when configured. */
  resolve: EgressResolveServer | undefined;
}

/** The in-process egress proxy and, when configured, the resolve listener for standalone proxies. */
async function startEgress(
  deps: AppDeps,
  credentials: EgressCredentials,
  { ca, identity }: { ca: DeploymentCa; identity: ApiIdentity },
  undo: Undo[],
): Promise<StartedEgress> {
  const { config, logger } = deps;
  const proxy = await startEgressProxy(deps, credentials, ca, logger);
  undo.push(() => proxy.close());
  if (!config.egressResolve) return { proxy, resolve: undefined };
  const resolve = await startEgressResolveServer({
    ...config.egressResolve.listen,
    token: await readResolveToken(config.egressResolve.token),
    identity,
    resolve: (runnerId, token) => egressRun(deps, credentials, runnerId, token),
    standsForRun: async (runnerId, token) => (await credentials.egressRun(runnerId, token)) !== undefined,
    abortMissing: (runnerId, alias, destination) => credentials.abortMissing(runnerId, alias, destination),
    runnerRateLimit: config.egressRunnerRateLimit,
    refused: (runnerId, refusal) => credentials.refused?.(runnerId, refusal),
    logger: logger.child({ component: 'egress-resolve' }),
  });
  undo.push(() => resolve.close());
  return { proxy, resolve };
}

/** The listener sync Jobs hand their results to, when configured (ACIS_SYNC_REPORT_LISTEN). */
async function startSyncReport(deps: AppDeps, identity: ApiIdentity, baseUrl: string, undo: Undo[]): Promise<SyncReportServer | undefined> {
  const listen = deps.config.syncReportListen;
  if (!listen) return undefined;
  const server = await startSyncReportServer({
    ...listen,
    identity,
    db: deps.db,
    tokenKey: deps.vault.deriveKey(SYNC_REPORT_KEY_PURPOSE),
    worker: deps.repositorySync,
    baseUrl,
    logger: deps.logger.child({ component: 'sync-report' }),
  });
  undo.push(() => server.close());
  return server;
}

/** Serves the API on the configured host and port; resolves once it listens. */
async function listen(deps: AppDeps): Promise<{ port: number; closeServer: (lingerMs: number) => Promise<void> }> {
  const server = createApp(deps).listen(deps.config.port, deps.config.host);
  answerClientErrors(server, deps);
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve);
    server.once('error', reject);
  });
  return { port: (server.address() as AddressInfo).port, closeServer: closerOf(server) };
}

interface BackgroundLoops {
  purge: NodeJS.Timeout;
  beat: NodeJS.Timeout;
  housekeeping: NodeJS.Timeout;
  sweep: NodeJS.Timeout;
}

/**
 * The idempotency purge; the node heartbeat (this node's liveness row, and the runs of nodes whose
 * row went stale); housekeeping (holds, repository syncs); and the approval expiry sweep.
 */
function startBackgroundLoops(deps: AppDeps, baseUrl: string): BackgroundLoops {
  const { logger } = deps;
  const { approvals } = deps.runtime;
  const purge = setInterval(() => {
    purgeExpiredIdempotencyKeys(deps).catch((err: unknown) => logger.warn({ err }, 'idempotency purge failed'));
  }, PURGE_INTERVAL_MS);
  const beat = setInterval(
    serialised(() => beatOnce(deps, baseUrl), logger, 'node heartbeat failed'),
    deps.config.nodeHeartbeatSeconds * 1000,
  );
  const housekeeping = setInterval(
    serialised(() => houseKeep(deps), logger, 'node housekeeping failed'),
    HOUSEKEEPING_MS,
  );
  const sweep = setInterval(() => {
    approvals.expireDue().catch((err: unknown) => logger.warn({ err }, 'approval expiry sweep failed'));
  }, APPROVAL_SWEEP_MS);
  for (const timer of [purge, beat, housekeeping, sweep]) timer.unref();
  return { purge, beat, housekeeping, sweep };
}

/** `step` for a timer: a round still going when the next is due is not started twice. */
function serialised(step: () => Promise<void>, logger: AppDeps['logger'], failure: string): () => void {
  let going = false;
  return () => {
    if (going) return;
    going = true;
    step()
      .catch((err: unknown) => logger.warn({ err }, failure))
      .finally(() => {
        going = false;
      });
  };
}

/** Renews this node's liveness row, then takes over (or, where it cannot, ends) the runs of nodes whose row went stale. */
async function beatOnce(deps: AppDeps, baseUrl: string): Promise<void> {
  const { nodeId, provider } = deps.runtime;
  await heartbeat(deps.db, nodeId, deps.now());
  const staleMs = deps.config.nodeStaleSeconds * 1000;
  const orphans = await findOrphanedRuns(deps.db, { nodeId, includeOwn: false, includeOthers: true, now: deps.now(), staleMs });
  let failed = 0;
  for (const orphan of orphans) {
    if (provider.resumeRunner && orphan.node_id !== null) await takeOverOrphan(deps, orphan, baseUrl);
    else {
      await failOrphanedRun(deps.db, orphan, { now: deps.now(), baseUrl });
      failed++;
    }
  }
  // A message's secrets live as long as its run; those of runs failed above go now.
  if (failed > 0) await sweepEndedRunSecrets(deps.db);
}

/** Claims an orphaned run for this node (unless another survivor did first) and carries it on here. */
async function takeOverOrphan(deps: AppDeps, orphan: OrphanedRun, baseUrl: string): Promise<void> {
  if (!(await claimOrphanedRun(deps.db, orphan, deps.runtime.nodeId, deps.now()))) return;
  deps.logger.warn({ message_id: orphan.id, node_id: orphan.node_id }, 'taking over a run whose node stopped');
  const run = await loadTakenOverRun(deps, orphan, baseUrl);
  if (run) void deps.runtime.runs.takeOver(run);
}

/** Holds that lapsed, repository syncs a stopped node left in flight or someone asked for. */
async function houseKeep(deps: AppDeps): Promise<void> {
  // Our own lapsed holds first (a late timer), so the sweep below only cools other nodes' leftovers.
  await deps.runtime.provider.expireLapsedHolds();
  await coolLapsedHolds(deps.db, deps.now());
  await deps.repositorySync.recoverOrphans(false);
  await deps.repositorySync.startRequested();
}

interface RunningParts {
  deps: AppDeps;
  runs: RunManager;
  loops: BackgroundLoops;
  aborts: RunAbortSignals | undefined;
  egress: StartedEgress;
  syncReport: SyncReportServer | undefined;
  closeServer: (lingerMs: number) => Promise<void>;
  database: DatabaseHandle;
}

/** `shutdown(graceMs)`, which runs once however often it is called. */
function shutdownOnce(parts: RunningParts): (graceMs: number) => Promise<void> {
  let shuttingDown: Promise<void> | undefined;
  return (graceMs) => (shuttingDown ??= stopInOrder(parts, graceMs));
}

/** Runs first, then the runners, background work, egress, the listener, and the database last. */
async function stopInOrder(
  { deps, runs, loops, aborts, egress, syncReport, closeServer, database }: RunningParts,
  graceMs: number,
): Promise<void> {
  const { provider, approvals } = deps.runtime;
  // The listener stays open while runs finish: their streams and re-attaches are served, and a
  // new message gets a 503 it can retry elsewhere rather than a refused connection.
  runs.close();
  clearInterval(loops.purge);
  clearInterval(loops.housekeeping);
  clearInterval(loops.sweep);
  if (!(await runs.drain(graceMs))) {
    deps.logger.warn({ grace_seconds: graceMs / 1000 }, 'runs still in progress at the shutdown deadline are ended as failed');
    runs.endAll(
      new ProblemError('shutting-down', 503, {
        detail: `The server shut down before the run finished (it waited ${Math.round(graceMs / 1000)} s); send the message again.`,
      }),
    );
  }
  // Kills every runner (the ended runs' and the pooled and held ones) and ends the turns still queued for one.
  await provider.stop();
  await runs.drain();
  clearInterval(loops.beat);
  await deps.repositorySync.stop();
  await syncReport?.close();
  await approvals.stop();
  await aborts?.stop();
  await egress.resolve?.close();
  await egress.proxy.close();
  await closeServer(CLOSE_LINGER_MS);
  await database.close();
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
