/**
 * What the controller watches, and what each change makes it look at again. Informers on Sandboxes,
 * SandboxWarmPools, RepositorySyncs, our runner pods and sync Jobs keep their caches warm on every
 * replica. An event only enqueues keys, never carries the object to its reconciler (which re-reads
 * it from the cache, so reconciling stays level-triggered); a change that matters to other objects
 * (a place freed, a pool pod become adoptable, a tenant's warm set changed) enqueues those too.
 */
import type { KubeConfig, V1Job, V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { Informer, type InformerEvent, warnOnRestart } from '../kube/informer.js';
import type { KubeClient } from '../kube/kube-client.js';
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
import { type ClusterView, objectKey } from './cluster-view.js';
import type { ControllerConfig } from './config.js';
import type { KindQueues } from './kind-queues.js';
import { SYNC_COMPONENT, SYNC_LABEL } from './reposync-decisions.js';

export interface ClusterCaches {
  sandboxes: Informer<Sandbox>;
  pools: Informer<SandboxWarmPool>;
  syncs: Informer<RepositorySync>;
  jobs: Informer<V1Job>;
  pods: Informer<V1Pod>;
}

/** What each kind's events do; `ChangeRouting` is the controller's. */
export interface ClusterEvents {
  sandbox(event: InformerEvent, sandbox: Sandbox): void;
  pool(event: InformerEvent, pool: SandboxWarmPool): void;
  sync(event: InformerEvent, sync: RepositorySync): void;
  job(event: InformerEvent, job: V1Job): void;
  pod(event: InformerEvent, pod: V1Pod): void;
}

/** The informers, not started yet, in the sandboxes' namespace. */
export function watchCluster(
  options: { config: ControllerConfig; kubeConfig: KubeConfig; client: KubeClient; logger: Logger },
  events: ClusterEvents,
): ClusterCaches {
  const { config, kubeConfig, client, logger } = options;
  const ns = config.sandboxNamespace;
  const common = { kubeConfig, resyncMs: config.resyncMs };
  const custom = <T extends object>(plural: string, onEvent: (event: InformerEvent, object: T) => void) =>
    new Informer<T>({
      ...common,
      path: `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${plural}`,
      list: () => client.listCustom<T>(ns, plural),
      onEvent,
      onError: warnOnRestart(logger, plural),
    });
  const syncJobSelector = `${LABELS.managedBy}=${MANAGED_BY},${LABELS.component}=${SYNC_COMPONENT}`;
  const runnerSelector = `${LABELS.managedBy}=${MANAGED_BY}`;
  return {
    sandboxes: custom<Sandbox>(SANDBOX.plural, (event, sandbox) => events.sandbox(event, sandbox)),
    pools: custom<SandboxWarmPool>(SANDBOX_WARM_POOL.plural, (event, pool) => events.pool(event, pool)),
    syncs: custom<RepositorySync>(REPOSITORY_SYNC.plural, (event, sync) => events.sync(event, sync)),
    jobs: new Informer<V1Job>({
      ...common,
      path: `/apis/batch/v1/namespaces/${ns}/jobs`,
      labelSelector: syncJobSelector,
      list: () => client.batch.listNamespacedJob({ namespace: ns, labelSelector: syncJobSelector }),
      onEvent: (event, job) => events.job(event, job),
      onError: warnOnRestart(logger, 'jobs'),
    }),
    pods: new Informer<V1Pod>({
      ...common,
      path: `/api/v1/namespaces/${ns}/pods`,
      labelSelector: runnerSelector,
      list: () => client.core.listNamespacedPod({ namespace: ns, labelSelector: runnerSelector }),
      onEvent: (event, pod) => events.pod(event, pod),
      onError: warnOnRestart(logger, 'pods'),
    }),
  };
}

/** Which keys each change enqueues. */
export class ChangeRouting implements ClusterEvents {
  /** What changes a Sandbox's neighbours: its place, its phase, the tenant's warm cap and LRU order. */
  private readonly sandboxSignatures = new Map<string, string>();
  /** Each pod's owner as last seen, so that after an adoption the previous owner looks again too. */
  private readonly podOwners = new Map<string, string>();

  constructor(
    private readonly namespace: string,
    private readonly queues: KindQueues,
    private readonly view: ClusterView,
    private readonly caches: ClusterCaches,
  ) {}

  sandbox(event: InformerEvent, sandbox: Sandbox): void {
    const name = sandbox.metadata.name;
    this.queues.add(SANDBOX.kind, name);
    if (event === 'resync') return;
    const signature =
      event === 'delete'
        ? 'deleted'
        : [
            sandbox.status?.phase,
            this.view.holdsPlace(sandbox),
            sandbox.spec.lastActivityTime,
            sandbox.spec.maxConcurrentWarm,
            isTerminal(sandbox.status?.phase),
          ].join('|');
    if (this.sandboxSignatures.get(name) === signature) return;
    if (event === 'delete') this.sandboxSignatures.delete(name);
    else this.sandboxSignatures.set(name, signature);
    this.waitingAndPools();
    if (sandbox.spec.mode === 'warm') {
      for (const s of this.caches.sandboxes.list(this.namespace)) {
        if (s.spec.tenantId === sandbox.spec.tenantId && s.spec.mode === 'warm') this.queues.add(SANDBOX.kind, s.metadata.name);
      }
    }
  }

  pool(_event: InformerEvent, pool: SandboxWarmPool): void {
    this.queues.add(SANDBOX_WARM_POOL.kind, pool.metadata.name);
  }

  sync(_event: InformerEvent, sync: RepositorySync): void {
    this.queues.add(REPOSITORY_SYNC.kind, sync.metadata.name);
  }

  job(event: InformerEvent, job: V1Job): void {
    const owner = job.metadata?.labels?.[SYNC_LABEL];
    if (owner && event !== 'resync') this.queues.add(REPOSITORY_SYNC.kind, owner);
  }

  /** A pod's owner (and its previous one, after an adoption) looks again; expectations learn what the cache shows. */
  pod(event: InformerEvent, pod: V1Pod): void {
    if (event === 'resync') return;
    // A sync Job's pod: its RepositorySync looks again (its outcome is in the pod's termination message).
    const syncName = pod.metadata?.labels?.[SYNC_LABEL];
    if (syncName) {
      this.queues.add(REPOSITORY_SYNC.kind, syncName);
      return;
    }
    const name = pod.metadata!.name!;
    const owner = pod.metadata?.ownerReferences?.find((r) => r.controller);
    const ownerKey = owner ? objectKey(owner.kind === SANDBOX.kind ? 'Sandbox' : 'SandboxWarmPool', this.namespace, owner.name) : undefined;
    if (ownerKey) this.view.expectations = observed(this.view.expectations, ownerKey, name, event === 'delete' ? 'deleted' : 'created');
    // A picked pod the cache shows adopted (or gone) needs the pick no more.
    if (event === 'delete' || owner?.kind === SANDBOX.kind) this.view.picked.delete(name);
    const previous = this.podOwners.get(name);
    if (event === 'delete') this.podOwners.delete(name);
    else if (ownerKey) this.podOwners.set(name, ownerKey);
    for (const key of new Set([ownerKey, previous])) {
      if (!key) continue;
      const [kind, , ownerName] = key.split('/') as [string, string, string];
      this.queues.add(kind === 'Sandbox' ? SANDBOX.kind : SANDBOX_WARM_POOL.kind, ownerName);
    }
    if (event === 'delete' || pod.metadata?.labels?.[LABELS.pool]) this.waitingAndPools();
  }

  /** Capacity changed or a pool pod became adoptable: whoever waits for a place, and the pools, look again. */
  private waitingAndPools(): void {
    for (const s of this.view.waiting()) this.queues.add(SANDBOX.kind, s.metadata.name);
    for (const p of this.caches.pools.list(this.namespace)) this.queues.add(SANDBOX_WARM_POOL.kind, p.metadata.name);
  }
}
