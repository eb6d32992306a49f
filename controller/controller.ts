/**
 * The controller process's parts put together: informers on Sandboxes, SandboxWarmPools,
 * RepositorySyncs, our runner pods and sync Jobs (caches kept warm on every replica), one work queue
 * per kind, and leader election:
 * only the leader's queues run. Losing the Lease stops the queues and forgets what this replica did
 * but had not seen (the next leader starts from the cluster as it is).
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { GROUP, MANAGED_BY, REPOSITORY_SYNC, requestIdOf, SANDBOX, SANDBOX_WARM_POOL, type Sandbox, VERSION } from './api/v1alpha1.js';
import { ClusterView } from './cluster-view.js';
import type { ControllerConfig } from './config.js';
import { KubeClient } from '../kube/kube-client.js';
import { httpStatus, statusMessage } from '../kube/kube-errors.js';
import { LeaderElection } from '../kube/leader-election.js';
import { KindQueues, type QueuedKind } from './kind-queues.js';
import { createMetrics, type ControllerMetrics, serveHealth } from './metrics.js';
import { reconcilePool } from './pool-reconciler.js';
import { reconcileRepositorySync } from './reposync-reconciler.js';
import { type ReconcileContext, reconcileSandbox } from './sandbox-reconciler.js';
import { ChangeRouting, type ClusterCaches, watchCluster } from './watches.js';
import { type ProcessResult, WorkQueue } from '../kube/work-queue.js';

export interface RunningController {
  readonly metricsPort: number;
  readonly metrics: ControllerMetrics;
  isLeader(): boolean;
  /** Resolves when no queue has anything waiting or in process (tests). */
  idle(): Promise<void>;
  /** `releaseLease: false` stops as a crash would (tests of failover). */
  stop(options?: { releaseLease?: boolean }): Promise<void>;
}

interface ControllerOptions {
  config: ControllerConfig;
  kubeConfig: KubeConfig;
  logger: Logger;
  now?: () => number;
}

export async function startController(options: ControllerOptions): Promise<RunningController> {
  const { kubeConfig, logger } = options;
  const config = await withProxyAddress(options.config, logger);
  const now = options.now ?? Date.now;
  const ns = config.sandboxNamespace;
  const client = new KubeClient(kubeConfig, { component: MANAGED_BY, instance: config.identity }, { group: GROUP, version: VERSION });
  const queues = new KindQueues(ns);
  // The informers' events reach the routing built from their caches below; none arrives before they start.
  const caches = watchCluster(
    { config, kubeConfig, client, logger },
    {
      sandbox: (event, sandbox) => routing.sandbox(event, sandbox),
      pool: (event, pool) => routing.pool(event, pool),
      sync: (event, sync) => routing.sync(event, sync),
      job: (event, job) => routing.job(event, job),
      pod: (event, pod) => routing.pod(event, pod),
    },
  );
  const view = new ClusterView(caches.sandboxes, caches.pools, caches.pods, ns, config.maxSandboxes, config.runnerImage);
  const routing = new ChangeRouting(ns, queues, view, caches);
  const metrics = createMetrics({
    sandboxPhases: () => sandboxPhaseCounts(caches.sandboxes.list(ns)),
    queueDepths: () => queues.depths(),
  });
  const ctx: ReconcileContext = { view, client, config, metrics, logger, now };
  const election = electLeader(ctx, queues, caches);

  const health = await serveHealth({
    host: config.metricsHost,
    port: config.metricsPort,
    registry: metrics.registry,
    ready: () => Object.values(caches).every((informer) => informer.synced),
  });
  await Promise.all([caches.sandboxes.start(), caches.pools.start(), caches.pods.start(), caches.syncs.start(), caches.jobs.start()]);
  election.start();
  logger.info(
    { namespace: config.namespace, sandbox_namespace: ns, identity: config.identity, metrics_port: health.port },
    'controller started',
  );

  return {
    metricsPort: health.port,
    metrics,
    isLeader: () => election.isLeader,
    idle: () => queues.idle(),
    stop: async (stopOptions = {}) => {
      await election.stop({ release: stopOptions.releaseLease ?? true });
      await Promise.all([caches.sandboxes.stop(), caches.pools.stop(), caches.pods.stop(), caches.syncs.stop(), caches.jobs.stop()]);
      await health.close();
    },
  };
}

/**
 * Leader election on the Lease: leading starts fresh queues and enqueues every object the caches
 * hold; losing the lead stops them and forgets what this replica expected of the cluster.
 */
function electLeader(ctx: ReconcileContext, queues: KindQueues, caches: ClusterCaches): LeaderElection {
  const { client, config, logger, metrics, view } = ctx;
  const ns = config.sandboxNamespace;
  return new LeaderElection({
    api: client.coordination,
    // The Lease stays beside the controller, away from the sandboxes' namespace.
    namespace: config.namespace,
    name: config.leaseName,
    identity: config.identity,
    leaseDurationMs: config.leaseDurationMs,
    onStartedLeading: () => {
      logger.info({ identity: config.identity }, 'leading');
      metrics.leader.set(1);
      view.reset();
      queues.start(reconcileQueues(ctx, caches));
      for (const r of caches.syncs.list(ns)) queues.add(REPOSITORY_SYNC.kind, r.metadata.name);
      for (const p of caches.pools.list(ns)) queues.add(SANDBOX_WARM_POOL.kind, p.metadata.name);
      for (const s of caches.sandboxes.list(ns)) queues.add(SANDBOX.kind, s.metadata.name);
    },
    onStoppedLeading: () => {
      logger.warn({ identity: config.identity }, 'lost the leader lease; reconciling stops');
      metrics.leader.set(0);
      queues.stop();
      view.reset();
    },
    onError: (error) => logger.warn({ error: statusMessage(error), code: httpStatus(error) }, 'leader election: lease call failed'),
    now: ctx.now,
  });
}

/** One queue per kind, each running its kind's reconciler (timed and counted), failures retried with backoff. */
function reconcileQueues(ctx: ReconcileContext, caches: ClusterCaches): Record<QueuedKind, WorkQueue> {
  const queue = (kind: QueuedKind, workers: number, reconcile: (namespace: string, name: string) => Promise<ProcessResult>) =>
    new WorkQueue(timed(ctx, kind, reconcile), {
      workers,
      onError: (key, error, retryInMs) =>
        failedKeyLogger(ctx.logger, caches, kind, key).warn(
          { error: statusMessage(error), code: httpStatus(error), kind, key, retry_in_ms: retryInMs },
          'reconcile failed; retrying',
        ),
    });
  return {
    [SANDBOX.kind]: queue(SANDBOX.kind, ctx.config.workers, (n, name) => reconcileSandbox(ctx, n, name)),
    [SANDBOX_WARM_POOL.kind]: queue(SANDBOX_WARM_POOL.kind, 1, (n, name) => reconcilePool(ctx, n, name)),
    [REPOSITORY_SYNC.kind]: queue(REPOSITORY_SYNC.kind, 2, (n, name) => reconcileRepositorySync(ctx, caches, n, name)),
  };
}

/** Where a failed reconcile of `key` is logged: a Sandbox's failure names its request too. */
function failedKeyLogger(logger: Logger, caches: ClusterCaches, kind: QueuedKind, key: string): Logger {
  if (kind !== SANDBOX.kind) return logger;
  const [namespace, name] = key.split('/') as [string, string];
  const sandbox = caches.sandboxes.get(name, namespace);
  const requestId = sandbox && requestIdOf(sandbox);
  return requestId === undefined ? logger : logger.child({ request_id: requestId });
}

/** A reconciler of `namespace/name` keys whose every call is timed and counted by outcome. */
function timed(ctx: ReconcileContext, kind: QueuedKind, reconcile: (namespace: string, name: string) => Promise<ProcessResult>) {
  return async (key: string): Promise<ProcessResult> => {
    const [namespace, name] = key.split('/') as [string, string];
    const end = ctx.metrics.reconcileDuration.startTimer({ kind });
    try {
      const result = await reconcile(namespace, name);
      ctx.metrics.reconciles.inc({ kind, result: result.conflict ? 'conflict' : 'ok' });
      return result;
    } catch (error) {
      ctx.metrics.reconciles.inc({ kind, result: 'error' });
      throw error;
    } finally {
      end();
    }
  };
}

function sandboxPhaseCounts(sandboxes: readonly Sandbox[]): Record<string, number> {
  const counts: Record<string, number> = { Pending: 0, Starting: 0, Ready: 0, Expired: 0, Failed: 0 };
  for (const s of sandboxes) counts[s.status?.phase ?? 'Pending'] = (counts[s.status?.phase ?? 'Pending'] ?? 0) + 1;
  return counts;
}

/**
 * Without sandbox DNS a runner pod cannot look the proxy's Service name up: it is given the address,
 * resolved here once (a Service keeps its ClusterIP for its life; a new one comes with a controller
 * restart in the same release). Failing to resolve fails the start, saying why.
 */
export async function withProxyAddress(config: ControllerConfig, logger: Logger): Promise<ControllerConfig> {
  if (config.sandboxDns) {
    logger.warn("ACIS_SANDBOX_DNS=1: runner pods may query the cluster DNS (a covert channel out, and a map of the cluster's Services)");
    return config;
  }
  if (isIP(config.egressProxyHost) !== 0) return config;
  const resolved = await lookup(config.egressProxyHost).catch((error: Error) => {
    throw new Error(
      `ACIS_EGRESS_PROXY_HOST=${config.egressProxyHost} does not resolve (${error.message}); runner pods, which have no DNS, need its address`,
    );
  });
  logger.info(
    { host: config.egressProxyHost, address: resolved.address },
    'runner pods reach the egress proxy by address (sandbox DNS is off)',
  );
  return { ...config, egressProxyHost: resolved.address };
}
