/**
 * The controller process's parts put together: informers on Sandboxes, SandboxWarmPools,
 * RepositorySyncs, our runner pods and sync Jobs (caches kept warm on every replica), one work queue
 * per kind, and leader election:
 * only the leader's queues run. Losing the Lease stops the queues and forgets what this replica did
 * but had not seen (the next leader starts from the cluster as it is).
 */
import type { KubeConfig, V1Job, V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { observed } from '../sandbox-policy/expectations.js';
import {
  GROUP,
  isTerminal,
  LABELS,
  MANAGED_BY,
  REPOSITORY_SYNC,
  type RepositorySync,
  SANDBOX,
  SANDBOX_WARM_POOL,
  type Sandbox,
  type SandboxWarmPool,
  VERSION,
} from './api/v1alpha1.js';
import { ClusterView, objectKey } from './cluster-view.js';
import type { ControllerConfig } from './config.js';
import { Informer, type InformerEvent, warnOnRestart } from '../kube/informer.js';
import { KubeClient } from '../kube/kube-client.js';
import { httpStatus, statusMessage } from '../kube/kube-errors.js';
import { LeaderElection } from '../kube/leader-election.js';
import { createMetrics, type ControllerMetrics, type HealthEndpoint, serveHealth } from './metrics.js';
import { reconcilePool } from './pool-reconciler.js';
import { SYNC_COMPONENT, SYNC_LABEL } from './reposync-decisions.js';
import { reconcileRepositorySync } from './reposync-reconciler.js';
import { type ReconcileContext, reconcileSandbox } from './sandbox-reconciler.js';
import { type ProcessResult, WorkQueue } from '../kube/work-queue.js';

export interface RunningController {
  readonly metricsPort: number;
  readonly metrics: ControllerMetrics;
  isLeader(): boolean;
  /** Resolves when both queues have nothing waiting or in process (tests). */
  idle(): Promise<void>;
  /** `releaseLease: false` stops as a crash would (tests of failover). */
  stop(options?: { releaseLease?: boolean }): Promise<void>;
}

export async function startController(options: {
  config: ControllerConfig;
  kubeConfig: KubeConfig;
  logger: Logger;
  now?: () => number;
}): Promise<RunningController> {
  const { config, kubeConfig, logger } = options;
  const now = options.now ?? Date.now;
  const ns = config.namespace;
  const client = new KubeClient(kubeConfig, { component: MANAGED_BY, instance: config.identity }, { group: GROUP, version: VERSION });

  let sandboxQueue: WorkQueue | undefined;
  let poolQueue: WorkQueue | undefined;
  let syncQueue: WorkQueue | undefined;
  const enqueueSandbox = (name: string) => sandboxQueue?.add(`${ns}/${name}`);
  const enqueuePool = (name: string) => poolQueue?.add(`${ns}/${name}`);
  const enqueueSync = (name: string) => syncQueue?.add(`${ns}/${name}`);
  /** Capacity changed or a pool pod became adoptable: whoever waits for a place, and the pools, look again. */
  const enqueueWaitingAndPools = () => {
    for (const s of view.waiting()) enqueueSandbox(s.metadata.name);
    for (const p of pools.list(ns)) enqueuePool(p.metadata.name);
  };

  // What changes a Sandbox's neighbours: its place, its phase, the tenant's warm cap and LRU order.
  const sandboxSignatures = new Map<string, string>();
  const onSandbox = (event: InformerEvent, sandbox: Sandbox) => {
    const name = sandbox.metadata.name;
    enqueueSandbox(name);
    if (event === 'resync') return;
    const signature =
      event === 'delete'
        ? 'deleted'
        : [sandbox.status?.phase, view.holdsPlace(sandbox), sandbox.spec.lastActivityTime, sandbox.spec.maxConcurrentWarm, isTerminal(sandbox.status?.phase)].join('|');
    if (sandboxSignatures.get(name) === signature) return;
    if (event === 'delete') sandboxSignatures.delete(name);
    else sandboxSignatures.set(name, signature);
    enqueueWaitingAndPools();
    if (sandbox.spec.mode === 'warm') {
      for (const s of sandboxes.list(ns)) if (s.spec.tenantId === sandbox.spec.tenantId && s.spec.mode === 'warm') enqueueSandbox(s.metadata.name);
    }
  };

  // A pod's owner (and its previous one, after an adoption) looks again; expectations learn what the cache shows.
  const podOwners = new Map<string, string>();
  const onPod = (event: InformerEvent, pod: V1Pod) => {
    if (event === 'resync') return;
    // A sync Job's pod: its RepositorySync looks again (its outcome is in the pod's termination message).
    const syncName = pod.metadata?.labels?.[SYNC_LABEL];
    if (syncName) return void enqueueSync(syncName);
    const name = pod.metadata!.name!;
    const owner = pod.metadata?.ownerReferences?.find((r) => r.controller);
    const ownerKey = owner ? objectKey(owner.kind === SANDBOX.kind ? 'Sandbox' : 'SandboxWarmPool', ns, owner.name) : undefined;
    if (ownerKey) view.expectations = observed(view.expectations, ownerKey, name, event === 'delete' ? 'deleted' : 'created');
    // A picked pod the cache shows adopted (or gone) needs the pick no more.
    if (event === 'delete' || owner?.kind === SANDBOX.kind) view.picked.delete(name);
    const previous = podOwners.get(name);
    if (event === 'delete') podOwners.delete(name);
    else if (ownerKey) podOwners.set(name, ownerKey);
    for (const key of new Set([ownerKey, previous])) {
      if (!key) continue;
      const [kind, , ownerName] = key.split('/') as [string, string, string];
      if (kind === 'Sandbox') enqueueSandbox(ownerName);
      else enqueuePool(ownerName);
    }
    if (event === 'delete' || pod.metadata?.labels?.[LABELS.pool]) enqueueWaitingAndPools();
  };

  const sandboxes: Informer<Sandbox> = new Informer<Sandbox>({
    kubeConfig,
    path: `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${SANDBOX.plural}`,
    list: () => client.listCustom<Sandbox>(ns, SANDBOX.plural),
    resyncMs: config.resyncMs,
    onEvent: onSandbox,
    onError: warnOnRestart(logger, SANDBOX.plural),
  });
  const pools: Informer<SandboxWarmPool> = new Informer<SandboxWarmPool>({
    kubeConfig,
    path: `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${SANDBOX_WARM_POOL.plural}`,
    list: () => client.listCustom<SandboxWarmPool>(ns, SANDBOX_WARM_POOL.plural),
    resyncMs: config.resyncMs,
    onEvent: (_event, pool) => enqueuePool(pool.metadata.name),
    onError: warnOnRestart(logger, SANDBOX_WARM_POOL.plural),
  });
  const syncs: Informer<RepositorySync> = new Informer<RepositorySync>({
    kubeConfig,
    path: `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${REPOSITORY_SYNC.plural}`,
    list: () => client.listCustom<RepositorySync>(ns, REPOSITORY_SYNC.plural),
    resyncMs: config.resyncMs,
    onEvent: (_event, sync) => enqueueSync(sync.metadata.name),
    onError: warnOnRestart(logger, REPOSITORY_SYNC.plural),
  });
  const syncJobSelector = `${LABELS.managedBy}=${MANAGED_BY},${LABELS.component}=${SYNC_COMPONENT}`;
  const jobs: Informer<V1Job> = new Informer<V1Job>({
    kubeConfig,
    path: `/apis/batch/v1/namespaces/${ns}/jobs`,
    labelSelector: syncJobSelector,
    list: () => client.batch.listNamespacedJob({ namespace: ns, labelSelector: syncJobSelector }),
    resyncMs: config.resyncMs,
    onEvent: (event, job) => {
      const owner = job.metadata?.labels?.[SYNC_LABEL];
      if (owner && event !== 'resync') enqueueSync(owner);
    },
    onError: warnOnRestart(logger, 'jobs'),
  });
  const runnerSelector = `${LABELS.managedBy}=${MANAGED_BY}`;
  const pods: Informer<V1Pod> = new Informer<V1Pod>({
    kubeConfig,
    path: `/api/v1/namespaces/${ns}/pods`,
    labelSelector: runnerSelector,
    list: () => client.core.listNamespacedPod({ namespace: ns, labelSelector: runnerSelector }),
    resyncMs: config.resyncMs,
    onEvent: onPod,
    onError: warnOnRestart(logger, 'pods'),
  });
  const view = new ClusterView(sandboxes, pools, pods, ns, config.maxSandboxes, config.runnerImage);

  const metrics = createMetrics({
    sandboxPhases: () => {
      const counts: Record<string, number> = { Pending: 0, Starting: 0, Ready: 0, Expired: 0, Failed: 0 };
      for (const s of sandboxes.list(ns)) counts[s.status?.phase ?? 'Pending'] = (counts[s.status?.phase ?? 'Pending'] ?? 0) + 1;
      return counts;
    },
    queueDepths: () => ({
      [SANDBOX.kind]: sandboxQueue?.depth ?? 0,
      [SANDBOX_WARM_POOL.kind]: poolQueue?.depth ?? 0,
      [REPOSITORY_SYNC.kind]: syncQueue?.depth ?? 0,
    }),
  });
  const ctx: ReconcileContext = { view, client, config, metrics, logger, now };
  const timed = (kind: string, reconcile: (namespace: string, name: string) => Promise<ProcessResult>) => async (key: string) => {
    const [namespace, name] = key.split('/') as [string, string];
    const end = metrics.reconcileDuration.startTimer({ kind });
    try {
      const result = await reconcile(namespace, name);
      metrics.reconciles.inc({ kind, result: result.conflict ? 'conflict' : 'ok' });
      return result;
    } catch (error) {
      metrics.reconciles.inc({ kind, result: 'error' });
      throw error;
    } finally {
      end();
    }
  };
  const onReconcileError = (kind: string) => (key: string, error: unknown, retryInMs: number) =>
    logger.warn({ error: statusMessage(error), code: httpStatus(error), kind, key, retry_in_ms: retryInMs }, 'reconcile failed; retrying');
  const makeQueues = () => {
    sandboxQueue = new WorkQueue(timed(SANDBOX.kind, (n, name) => reconcileSandbox(ctx, n, name)), { workers: config.workers, onError: onReconcileError(SANDBOX.kind) });
    poolQueue = new WorkQueue(timed(SANDBOX_WARM_POOL.kind, (n, name) => reconcilePool(ctx, n, name)), { workers: 1, onError: onReconcileError(SANDBOX_WARM_POOL.kind) });
    syncQueue = new WorkQueue(timed(REPOSITORY_SYNC.kind, (n, name) => reconcileRepositorySync(ctx, { syncs, jobs, pods }, n, name)), {
      workers: 2,
      onError: onReconcileError(REPOSITORY_SYNC.kind),
    });
  };

  const election = new LeaderElection({
    api: client.coordination,
    namespace: ns,
    name: config.leaseName,
    identity: config.identity,
    leaseDurationMs: config.leaseDurationMs,
    onStartedLeading: () => {
      logger.info({ identity: config.identity }, 'leading');
      metrics.leader.set(1);
      view.reset();
      makeQueues();
      sandboxQueue!.start();
      poolQueue!.start();
      syncQueue!.start();
      for (const r of syncs.list(ns)) enqueueSync(r.metadata.name);
      for (const p of pools.list(ns)) enqueuePool(p.metadata.name);
      for (const s of sandboxes.list(ns)) enqueueSandbox(s.metadata.name);
    },
    onStoppedLeading: () => {
      logger.warn({ identity: config.identity }, 'lost the leader lease; reconciling stops');
      metrics.leader.set(0);
      sandboxQueue?.stop();
      poolQueue?.stop();
      syncQueue?.stop();
      sandboxQueue = poolQueue = syncQueue = undefined;
      view.reset();
    },
    onError: (error) => logger.warn({ error: statusMessage(error), code: httpStatus(error) }, 'leader election: lease call failed'),
    now,
  });

  const health: HealthEndpoint = await serveHealth({
    host: config.metricsHost,
    port: config.metricsPort,
    registry: metrics.registry,
    ready: () => sandboxes.synced && pools.synced && pods.synced && syncs.synced && jobs.synced,
  });
  await Promise.all([sandboxes.start(), pools.start(), pods.start(), syncs.start(), jobs.start()]);
  election.start();
  logger.info({ namespace: ns, identity: config.identity, metrics_port: health.port }, 'controller started');

  return {
    metricsPort: health.port,
    metrics,
    isLeader: () => election.isLeader,
    idle: async () => {
      await Promise.all([sandboxQueue?.idle(), poolQueue?.idle(), syncQueue?.idle()]);
    },
    stop: async (stopOptions = {}) => {
      await election.stop({ release: stopOptions.releaseLease ?? true });
      await Promise.all([sandboxes.stop(), pools.stop(), pods.stop(), syncs.stop(), jobs.stop()]);
      await health.close();
    },
  };
}
