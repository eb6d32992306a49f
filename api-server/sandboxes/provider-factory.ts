/**
 * The one place that knows which providers exist: builds the one ACIS_SANDBOX_PROVIDER names, with
 * what it needs of this process, and says how it starts once the egress proxy listens (its runners'
 * only route out). Everything else sees the seam (provider.ts) and what this file reports of it.
 */
import type { Logger } from 'pino';
import { clusterNamespace, loadKubeConfig } from '../../kube/cluster-access.js';
import type { Config } from '../config.js';
import type { Db } from '../core/db/database.js';
import type { ApiIdentity } from '../internal-tls/api-identity.js';
import { publishEgressCa } from '../egress/egress-ca-publication.js';
import { KubernetesSandboxProvider } from './kubernetes/provider.js';
import { databaseRunnerRecords } from './kubernetes/records.js';
import { SandboxClient } from './kubernetes/sandboxes.js';
import { LocalSandboxProvider } from './local/provider.js';
import type { EgressEndpoint, SandboxProvider, SandboxStateListener } from './provider.js';
import { connectRemoteRunner } from './remote-runner.js';

export interface ProviderDeps {
  config: Config;
  logger: Logger;
  db: Db;
  nodeId: string;
  /** The clock of the timestamps the API shows: hold expiry follows it. */
  now: () => Date;
  /** The API server's certificate, presented to runners (they admit no other client). */
  identity: ApiIdentity;
}

export interface ChosenProvider {
  provider: SandboxProvider;
  /** Starts it once the egress proxy listens. */
  start(egress: EgressEndpoint): Promise<void>;
  /** This node's own bounds on runners, for the metrics; absent when a cluster's controller sets them. */
  nodeCapacity?: { poolSize: number; capacity: number };
  /** A runner's requests may reach another replica's egress proxy: a run is ended across replicas. */
  runsSpanReplicas: boolean;
}

export function createSandboxProvider(deps: ProviderDeps): ChosenProvider {
  const onSandboxState = conversationSandboxState(deps.db);
  const clock = () => deps.now().getTime();
  return deps.config.sandboxProvider === 'kubernetes'
    ? kubernetesProvider(deps, onSandboxState, clock)
    : localProvider(deps, onSandboxState, clock);
}

function localProvider({ config, logger }: ProviderDeps, onSandboxState: SandboxStateListener, clock: () => number): ChosenProvider {
  const provider = new LocalSandboxProvider(config, logger, onSandboxState, clock);
  return {
    provider,
    start: (egress) => provider.start(egress),
    nodeCapacity: { poolSize: config.poolSize, capacity: config.maxSandboxes },
    runsSpanReplicas: false,
  };
}

function kubernetesProvider(deps: ProviderDeps, onSandboxState: SandboxStateListener, clock: () => number): ChosenProvider {
  const { config, logger } = deps;
  const provider = new KubernetesSandboxProvider({
    records: databaseRunnerRecords(deps.db, deps.nodeId, deps.now),
    client: new SandboxClient(loadKubeConfig(config.kubeconfigPath), clusterNamespace(config.k8sSandboxNamespace), logger),
    connect: (endpoint) =>
      connectRemoteRunner({ ...endpoint, logger, bounds: config.runnerBounds, clientCertificate: deps.identity.current }),
    logger,
    onSandboxState,
    readyTimeoutMs: config.sandboxReadyTimeoutSeconds * 1000,
    now: clock,
  });
  const start = async (egress: EgressEndpoint) => {
    // Runner pods trust the proxy's CA from this ConfigMap (the controller mounts it).
    if (config.egressCaConfigMap) {
      await publishEgressCa({
        kubeConfig: loadKubeConfig(config.kubeconfigPath),
        namespace: clusterNamespace(config.k8sSandboxNamespace),
        name: config.egressCaConfigMap,
        certificatePem: egress.caCertificatePem,
        logger,
      });
    }
    await provider.start();
  };
  return { provider, start, runsSpanReplicas: true };
}

/** Sandbox state changes shown on the conversation record (`runtime.sandbox_state`, `expires_at`). */
function conversationSandboxState(db: Db): SandboxStateListener {
  return async (conversationId, state) => {
    await db
      .updateTable('conversations')
      .set({ sandbox_state: state.warm ? 'warm' : 'cold', sandbox_expires_at: state.expiresAt })
      .where('id', '=', conversationId)
      .execute();
  };
}
