/**
 * The controller under test against the Kubernetes API test server and the simulated kubelet: the
 * cluster with our CRDs installed, runner images mapped to a tiny fixture that listens on the runner
 * port, and controllers started in process from the same kubeconfig a real one would use.
 */
import { connect } from 'node:net';
import path from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import type { KubeConfig } from '@kubernetes/client-node';
import { loadKubeConfig } from '../../kube/cluster-access.js';
import { pino } from 'pino';
import { afterAll, beforeAll } from 'vitest';
import { loadControllerConfig, type ControllerConfig } from '../../controller/config.js';
import { type RunningController, startController } from '../../controller/controller.js';
import type { Sandbox, SandboxSpec } from '../../controller/api/v1alpha1.js';
import { type KubeletImage, type KubeletOptions, startKubelet, type Kubelet } from '../../hack/k8s/kubelet.js';
import { startKubeTestServer, type KubeTestServer } from '../../hack/k8s/server.js';
import type { KubeObject } from '../../hack/k8s/store.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, '..', '..');
const RUNNER_FIXTURE = path.join(HERE, 'fixtures', 'runner.cjs');

export const RUNNER_IMAGE = 'acis-runner:test';
/** A runner that crashes (exit code 3) shortly after it is ready. */
export const CRASHING_IMAGE = 'acis-runner:crashing';
export const NAMESPACE = 'default';
const RUNNER_PORT = 20_000 + Math.floor(Math.random() * 40_000);

export interface Cluster {
  server: KubeTestServer;
  kubelet: Kubelet;
  kubeConfig: KubeConfig;
  /** The kubelet's images: one added here is pulled at the kubelet's next attempt (a registry that recovers). */
  images: Record<string, KubeletImage>;
  close(): Promise<void>;
}

export async function startCluster(
  options: {
    allocatable?: { cpu?: string; memory?: string; pods?: number };
    historyLimit?: number;
    images?: Record<string, KubeletImage>;
    network?: KubeletOptions['network'];
    /** How long the garbage collector takes to remove an owner's dependents (0: at once). */
    garbageCollectorDelayMs?: number;
  } = {},
): Promise<Cluster> {
  const server = await startKubeTestServer({
    crdDirectories: [path.join(ROOT, 'crds')],
    bookmarkIntervalMs: 200,
    historyLimit: options.historyLimit,
    garbageCollectorDelayMs: options.garbageCollectorDelayMs,
  });
  const runner = { command: process.execPath, args: [RUNNER_FIXTURE], binds: [path.dirname(RUNNER_FIXTURE)] };
  const images: Record<string, KubeletImage> = {
    [RUNNER_IMAGE]: runner,
    [CRASHING_IMAGE]: { ...runner, env: { RUNNER_EXIT_AFTER_MS: '300' } },
    ...options.images,
  };
  const kubelet = await startKubelet({
    server,
    images,
    probePeriodMs: 25,
    restartBackoffMs: 50,
    allocatable: options.allocatable ?? { cpu: '64', memory: '256Gi', pods: 500 },
    // ACIS's processes under test (API server, egress proxy, model stub) listen on the host's
    // 127.0.0.1, which loopback pods reach as it is; the netns mode, where a pod's 127.0.0.1 is its
    // own, is exercised on its own (pod-netns.test.ts, chart-network-policy.test.ts).
    network: options.network ?? 'loopback',
  });
  const kubeConfig = loadKubeConfig(server.kubeconfigPath);
  return {
    server,
    kubelet,
    kubeConfig,
    images,
    close: async () => {
      await kubelet.close();
      await server.close();
    },
  };
}

export function testConfig(overrides: Partial<ControllerConfig> = {}): ControllerConfig {
  return {
    ...loadControllerConfig({
      ACIS_K8S_NAMESPACE: NAMESPACE,
      ACIS_RUNNER_IMAGE: RUNNER_IMAGE,
      ACIS_RUNNER_CPU_REQUEST: '10m',
      ACIS_RUNNER_MEMORY_REQUEST: '16Mi',
      ACIS_RUNNER_CPU_LIMIT: '100m',
      ACIS_RUNNER_MEMORY_LIMIT: '64Mi',
      ACIS_CONTROLLER_METRICS_HOST: '127.0.0.1',
      ACIS_CONTROLLER_METRICS_PORT: '0',
      // Short for failover tests, yet long enough that the leader's renew deadline (two thirds of it)
      // outlasts a renewal's round trips when the machine is busy (the test server shares the process).
      ACIS_CONTROLLER_LEASE_SECONDS: '3',
      ACIS_CONTROLLER_RESYNC_SECONDS: '60',
      ACIS_SANDBOX_START_TIMEOUT_SECONDS: '20',
      // Pod IPs are unique within one kubelet only, and test files run side by side: a port of
      // this file's own keeps two files' runners from colliding on 127.0.0.x.
      ACIS_RUNNER_PORT: String(RUNNER_PORT),
      // The simulated kubelet's pods share the host's loopback, where the tests' proxies listen.
      ACIS_EGRESS_PROXY_HOST: '127.0.0.1',
      LOG_LEVEL: 'silent',
    }),
    ...overrides,
  };
}

/**
 * The cluster and controller one test file runs against: started before its tests, stopped after.
 * Read them through the handle (they exist once the file's tests run).
 */
export function clusterForFile(options: { cluster?: Parameters<typeof startCluster>[0]; controller?: Partial<ControllerConfig> } = {}) {
  let cluster: Cluster | undefined;
  let controller: RunningController | undefined;
  beforeAll(async () => {
    cluster = await startCluster(options.cluster);
    controller = await startTestController(cluster, options.controller);
  }, 60_000);
  afterAll(async () => {
    await controller?.stop();
    await cluster?.close();
  });
  return {
    get cluster(): Cluster {
      if (!cluster) throw new Error('the cluster is started before the tests of the file');
      return cluster;
    },
    get controller(): RunningController {
      if (!controller) throw new Error('the controller is started before the tests of the file');
      return controller;
    },
  };
}

/** `logs`: where the controller's log lines go (info and up), for tests that read them; otherwise it is silent. */
export async function startTestController(
  cluster: Cluster,
  overrides: Partial<ControllerConfig> = {},
  logs?: string[],
): Promise<RunningController> {
  const config = testConfig(overrides);
  const sink = logs
    ? new Writable({
        write(chunk, _encoding, done) {
          logs.push(String(chunk));
          done();
        },
      })
    : undefined;
  const logger = sink ? pino({ level: 'info' }, sink) : pino({ level: process.env.CONTROLLER_LOG_LEVEL ?? 'silent' });
  const controller = await startController({ config, kubeConfig: cluster.kubeConfig, logger });
  return controller;
}

let sequence = 0;
/** A conversation id of the API's shape, unique within the test run. */
export function conversationId(): string {
  sequence += 1;
  return `con_TEST${String(Date.now()).slice(-8)}${String(sequence).padStart(4, '0')}`;
}

export function sandboxManifest(name: string, spec: Partial<SandboxSpec> = {}): Sandbox {
  const full: SandboxSpec = {
    conversationId: conversationId(),
    tenantId: 'tnt_TESTTENANT1',
    agentType: 'vendor-agent-sdk',
    mode: 'warm',
    ...spec,
  };
  return {
    apiVersion: 'acis.dev/v1alpha1',
    kind: 'Sandbox',
    metadata: {
      name,
      namespace: NAMESPACE,
      labels: { 'acis.dev/tenant': full.tenantId, 'acis.dev/conversation': full.conversationId, 'acis.dev/agent-type': full.agentType },
    },
    spec: full,
  };
}

export function createSandbox(cluster: Cluster, name: string, spec: Partial<SandboxSpec> = {}): KubeObject {
  return cluster.server.store.create('sandboxes', NAMESPACE, sandboxManifest(name, spec) as unknown as KubeObject);
}

export function createPool(cluster: Cluster, name: string, replicas: number, agentType = 'vendor-agent-sdk'): KubeObject {
  return cluster.server.store.create('sandboxwarmpools', NAMESPACE, {
    apiVersion: 'acis.dev/v1alpha1',
    kind: 'SandboxWarmPool',
    metadata: { name, namespace: NAMESPACE },
    spec: { agentType, replicas },
  } as KubeObject);
}

export type SandboxObject = KubeObject & { status?: Sandbox['status']; spec: SandboxSpec };

export function phaseIs(phase: string) {
  return (object: KubeObject | undefined) => (object as SandboxObject | undefined)?.status?.phase === phase;
}

export function waitForSandbox(
  cluster: Cluster,
  name: string,
  predicate: (s: SandboxObject | undefined) => boolean,
  timeoutMs = 15_000,
): Promise<SandboxObject | undefined> {
  return cluster.server.store.waitFor(
    'sandboxes',
    NAMESPACE,
    name,
    predicate as (o: KubeObject | undefined) => boolean,
    timeoutMs,
  ) as Promise<SandboxObject | undefined>;
}

export function condition(sandbox: SandboxObject | undefined, type: string) {
  return sandbox?.status?.conditions?.find((c) => c.type === type);
}

/** Runner pods in the namespace, optionally by label selector. */
export function runnerPods(cluster: Cluster, labelSelector = 'app.kubernetes.io/managed-by=acis-controller'): KubeObject[] {
  return cluster.server.store.list('pods', NAMESPACE, { labelSelector }).items;
}

/** The pods serving Sandbox `name` (started for it, or adopted from a pool), by their `acis.dev/sandbox` label. */
export function sandboxPods(cluster: Cluster, name: string): KubeObject[] {
  return runnerPods(cluster, `acis.dev/sandbox=${name}`);
}

/** A pool's runner pods the kubelet reports ready. */
export function readyPoolPods(cluster: Cluster, pool: string): KubeObject[] {
  return runnerPods(cluster, `acis.dev/pool=${pool}`).filter((p: any) =>
    p.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True'),
  );
}

/**
 * A pool's ready runner pods once there are `count`, ready as the controller sees them too (it writes
 * the pool's `readyReplicas` from its own cache): a Sandbox created then adopts one instead of
 * starting cold while that cache catches up.
 */
export function untilPoolReady(cluster: Cluster, pool: string, count: number, timeoutMs = 60_000): Promise<KubeObject[]> {
  return eventually(
    cluster,
    () => {
      const pods = readyPoolPods(cluster, pool);
      const status = (cluster.server.store.get('sandboxwarmpools', NAMESPACE, pool) as { status?: { readyReplicas?: number } } | undefined)
        ?.status;
      return pods.length === count && status?.readyReplicas === count && pods;
    },
    timeoutMs,
  );
}

/** Polls `check` on every store change until it holds (for conditions over several objects). */
export function eventually<T>(cluster: Cluster, check: () => T | undefined | false, timeoutMs = 15_000): Promise<T> {
  return new Promise((resolve, reject) => {
    const attempt = () => {
      const value = check();
      if (value) {
        done();
        resolve(value);
      }
    };
    const unsubscribe = cluster.server.store.store.subscribe(attempt);
    const timer = setTimeout(() => {
      done();
      reject(new Error(`condition not met within ${timeoutMs} ms`));
    }, timeoutMs);
    const done = () => {
      unsubscribe();
      clearTimeout(timer);
    };
    attempt();
  });
}

/** What a runner pod at `host:port` says to a connection, up to its end (the tests' pods say who they are). */
export function readLine(endpoint: string): Promise<string> {
  const [host, port] = endpoint.split(':');
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), host!);
    let data = '';
    socket.on('data', (chunk) => (data += chunk));
    socket.on('end', () => resolve(data.trim()));
    socket.on('error', reject);
  });
}
