/**
 * The controller plane of `npm run bench`: `acis controller` as its own process against the
 * Kubernetes API test server and the simulated kubelet (in this process), measuring
 *  - time from creating a Sandbox to its Ready status, adopted from a warm pool vs a cold pod
 *    (anchor: agent-sandbox's published warm claim p50 92 ms / p99 376 ms at 45 claims/s);
 *  - reconciles per second while a burst of BENCH_CONTROLLER_BURST (300) Sandboxes becomes Ready,
 *    and the controller process's CPU per reconcile.
 * Runner pods are a tiny Python listener (no bubblewrap): the plane measures the controller and the
 * API round trips, not runner start-up, which the conversation plane measures.
 * The kubelet's timings (BENCH_KUBELET_TIMINGS, hack/k8s/kubelet-timings.ts): `realistic` (the
 * default, as the comparison with agent-sandbox's figures, measured on a real cluster, needs):
 * seeded image pull and container start times and the kubelet's probe periods; or `fast`, no pull or
 * start time and probes every 100 ms (what the figures before 2026-11-29 used).
 * Environment: BENCH_CONTROLLER_CLAIMS (warm and cold claims each, default 60),
 * BENCH_CONTROLLER_RATE (warm claims per second, default 45), BENCH_CONTROLLER_BURST (default 300),
 * BENCH_KUBELET_TIMINGS (realistic or fast).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startKubelet } from '../k8s/kubelet.js';
import type { KubeletTimingsMode } from '../k8s/kubelet-timings.js';
import { startKubeTestServer, type KubeTestServer } from '../k8s/server.js';
import type { KubeObject } from '../k8s/store.js';
import { processCpuMs } from './cpu.js';
import { acisArgs, freePort } from './processes.js';
import { nearestRank } from './stats.js';
import { envCount } from './env.js';

const NAMESPACE = 'default';

function kubeletTimingsOf(value: string | undefined): KubeletTimingsMode {
  if (value === undefined || value === '' || value === 'realistic') return 'realistic';
  if (value === 'fast') return 'fast';
  throw new Error(`BENCH_KUBELET_TIMINGS must be realistic or fast, not ${JSON.stringify(value)}`);
}
const IMAGE = 'bench/runner:1';

interface PlaneOutcome {
  markdown: string;
  failures: string[];
  files: string[];
}

interface Latencies {
  count: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

function percentiles(samples: number[]): Latencies {
  const sorted = samples.filter((v) => !Number.isNaN(v)).sort((a, b) => a - b);
  const at = (q: number) => nearestRank(sorted, q) ?? NaN;
  return { count: sorted.length, p50: at(0.5), p90: at(0.9), p99: at(0.99), max: sorted.at(-1) ?? NaN };
}

/**
 * Resolves with the time from `watch(name)` to the Sandbox's first Ready status, or NaN when it
 * failed instead (counted, and its reason kept, by the caller).
 */
function readyLatencies(server: KubeTestServer): { watch(name: string): Promise<number>; failed: string[]; close(): void } {
  const waiting = new Map<string, { since: number; resolve: (ms: number) => void }>();
  const failed: string[] = [];
  const unsubscribe = server.store.store.subscribe((change) => {
    if (!change.storageKey.includes('sandboxes')) return;
    const object = change.object as KubeObject & {
      status?: { phase?: string; conditions?: { type: string; reason?: string; message?: string }[] };
    };
    const name = object.metadata.name ?? '';
    const entry = waiting.get(name);
    if (!entry || !object.status?.phase) return;
    if (object.status.phase === 'Ready') {
      waiting.delete(name);
      entry.resolve(performance.now() - entry.since);
    } else if (object.status.phase === 'Failed') {
      waiting.delete(name);
      const ready = object.status.conditions?.find((c) => c.type === 'Ready');
      failed.push(`${name}: ${ready?.reason} ${ready?.message}`);
      entry.resolve(Number.NaN);
    }
  });
  return {
    watch: (name) => new Promise((resolve) => waiting.set(name, { since: performance.now(), resolve })),
    failed,
    close: unsubscribe,
  };
}

function createSandbox(server: KubeTestServer, name: string, mode: 'pooled' | 'warm', agentType: string): void {
  const conversationId = `con_BENCH${name.replace(/[^A-Za-z0-9]/g, '')}`;
  server.store.create('sandboxes', NAMESPACE, {
    apiVersion: 'acis.dev/v1alpha1',
    kind: 'Sandbox',
    metadata: { name, labels: { 'acis.dev/tenant': 'tnt_BENCH', 'acis.dev/conversation': conversationId } },
    spec: { conversationId, tenantId: 'tnt_BENCH', agentType, mode },
  } as KubeObject);
}

async function controllerMetrics(port: number): Promise<{ reconciles: number }> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  let reconciles = 0;
  for (const line of text.split('\n')) {
    const match = /^acis_controller_reconciles_total\{[^}]*\} (\d+)/.exec(line);
    if (match) reconciles += Number(match[1]);
  }
  return { reconciles };
}

/** `acis controller` as its own process, leading once its metrics say so; `env` overrides this plane's settings. */
export async function startControllerProcess(
  root: string,
  kubeconfig: string,
  env: Record<string, string> = {},
): Promise<{ child: ChildProcess; port: number; stop(): Promise<void> }> {
  const port = await freePort();
  const child = spawn(process.execPath, acisArgs(root, 'controller'), {
    env: {
      ...process.env,
      KUBECONFIG: kubeconfig,
      ACIS_K8S_NAMESPACE: NAMESPACE,
      ACIS_RUNNER_IMAGE: IMAGE,
      ACIS_RUNNER_CPU_REQUEST: '1m',
      ACIS_RUNNER_MEMORY_REQUEST: '1Mi',
      ACIS_CLUSTER_MAX_SANDBOXES: '2000',
      ACIS_CONTROLLER_METRICS_HOST: '127.0.0.1',
      ACIS_CONTROLLER_METRICS_PORT: String(port),
      ACIS_CONTROLLER_LEASE_SECONDS: '5',
      // Reconciles wait on API round trips, not CPU: more of them in flight for a burst.
      ACIS_CONTROLLER_WORKERS: '16',
      // Runner pods have no DNS: the controller needs an address for the proxy (none runs here).
      ACIS_EGRESS_PROXY_HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      ...env,
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  for (let attempt = 0; ; attempt++) {
    const ok = await fetch(`http://127.0.0.1:${port}/metrics`).then(
      async (r) => r.ok && /acis_controller_leader 1/.test(await r.text()),
      () => false,
    );
    if (ok) break;
    if (attempt > 600 || child.exitCode !== null) throw new Error('the controller did not start leading');
    await sleep(100);
  }
  return {
    child,
    port,
    stop: async () => {
      child.kill('SIGTERM');
      await Promise.race([exited, sleep(10_000).then(() => child.kill('SIGKILL'))]);
    },
  };
}

export async function runControllerPlane(options: {
  root: string;
  outDir: string;
  defer: (step: () => Promise<unknown>) => void;
}): Promise<PlaneOutcome> {
  const claims = envCount('BENCH_CONTROLLER_CLAIMS', 60);
  const rate = envCount('BENCH_CONTROLLER_RATE', 45);
  const burst = envCount('BENCH_CONTROLLER_BURST', 300);
  const timings = kubeletTimingsOf(process.env.BENCH_KUBELET_TIMINGS);
  const failures: string[] = [];

  const server = await startKubeTestServer({ crdDirectories: [path.join(options.root, 'crds')], historyLimit: 100_000 });
  options.defer(() => server.close());
  // One small process per pod that accepts and closes connections in a loop: no process per
  // readiness probe (a forking listener turns 300 pods' probes into thousands of forks a second).
  const listener = [
    'import os, socket',
    's = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)',
    "s.bind((os.environ['POD_IP'], int(os.environ['ACIS_RUNNER_PORT']))); s.listen(64)",
    'while True: s.accept()[0].close()',
  ].join('\n');
  const kubelet = await startKubelet({
    server,
    images: { [IMAGE]: { command: '/usr/bin/python3', args: ['-c', listener] } },
    isolation: 'none',
    timings,
    // Fast timings only: a real kubelet probes every second at most; 100 ms keeps probing 300 pods from starving the API server in this process.
    probePeriodMs: 100,
    allocatable: { cpu: '1000', memory: '1000Gi', pods: 5000 },
    // The plane measures the controller: pods share the host's network (a pod network's set-up is in
    // the realistic start times), and a burst of 300 needs more addresses than the netns mode's /24.
    network: 'loopback',
  });
  options.defer(() => kubelet.close());
  const controller = await startControllerProcess(options.root, server.kubeconfigPath);
  options.defer(() => controller.stop());
  const ready = readyLatencies(server);
  options.defer(async () => ready.close());

  // Warm claims: a pool big enough for a second of claims, claims at `rate` per second, each deleted
  // once Ready (a pooled message's life), the pool refilling behind.
  const poolSize = Math.min(claims, rate);
  server.store.create('sandboxwarmpools', NAMESPACE, {
    apiVersion: 'acis.dev/v1alpha1',
    kind: 'SandboxWarmPool',
    metadata: { name: 'bench-pool' },
    spec: { agentType: 'bench-pooled', replicas: poolSize },
  } as KubeObject);
  await server.store.waitFor(
    'sandboxwarmpools',
    NAMESPACE,
    'bench-pool',
    (p) => (p as { status?: { readyReplicas?: number } })?.status?.readyReplicas === poolSize,
    120_000,
  );
  // One at a time first: the path's own latency, without claims queueing behind each other.
  const single: number[] = [];
  for (let i = 0; i < Math.min(claims, poolSize); i++) {
    const name = `single-${i}`;
    const latency = ready.watch(name);
    createSandbox(server, name, 'pooled', 'bench-pooled');
    single.push(await latency);
    server.store.delete('sandboxes', NAMESPACE, name);
  }
  await server.store.waitFor(
    'sandboxwarmpools',
    NAMESPACE,
    'bench-pool',
    (p) => (p as { status?: { readyReplicas?: number } })?.status?.readyReplicas === poolSize,
    120_000,
  );
  const warmSingle = percentiles(single);
  const warmClaims: Promise<number>[] = [];
  const launches: Record<string, number> = {};
  for (let i = 0; i < claims; i++) {
    const name = `warm-${i}`;
    const latency = ready.watch(name);
    createSandbox(server, name, 'pooled', 'bench-pooled');
    warmClaims.push(
      latency.then((ms) => {
        const launch = (server.store.get('sandboxes', NAMESPACE, name) as { status?: { launch?: string } }).status?.launch ?? '?';
        launches[launch] = (launches[launch] ?? 0) + 1;
        server.store.delete('sandboxes', NAMESPACE, name);
        return ms;
      }),
    );
    await sleep(1000 / rate);
  }
  const warm = percentiles(await Promise.all(warmClaims));

  // Cold claims, one at a time (no pool of their agent type).
  const cold: number[] = [];
  for (let i = 0; i < claims; i++) {
    const name = `cold-${i}`;
    const latency = ready.watch(name);
    createSandbox(server, name, 'pooled', 'bench-cold');
    cold.push(await latency);
    server.store.delete('sandboxes', NAMESPACE, name);
  }

  // Burst: `burst` Sandboxes at once, cold.
  const before = await controllerMetrics(controller.port);
  const cpuBefore = processCpuMs(controller.child.pid!);
  const started = performance.now();
  const burstReady: Promise<number>[] = [];
  for (let i = 0; i < burst; i++) {
    const name = `burst-${i}`;
    burstReady.push(ready.watch(name));
    createSandbox(server, name, 'warm', 'bench-burst');
  }
  const burstLatency = percentiles(await Promise.all(burstReady));
  const seconds = (performance.now() - started) / 1000;
  // The reconciles the burst caused, including those just after the last Ready.
  await sleep(500);
  const after = await controllerMetrics(controller.port);
  const cpuAfter = processCpuMs(controller.child.pid!);
  const reconciles = after.reconciles - before.reconciles;
  const cpuMs = cpuBefore !== undefined && cpuAfter !== undefined ? cpuAfter - cpuBefore : null;

  const figures = {
    date: new Date().toISOString(),
    node: process.version,
    kubeletTimings: timings,
    warmOneAtATime: warmSingle,
    warm: { ...warm, ratePerSecond: rate, poolSize, launches },
    cold: percentiles(cold),
    failed: ready.failed,
    burst: {
      sandboxes: burst,
      allReadySeconds: seconds,
      readyLatency: burstLatency,
      reconciles,
      reconcilesPerSecond: reconciles / seconds,
      controllerCpuMs: cpuMs,
      controllerCpuUsPerReconcile: cpuMs === null ? null : (cpuMs * 1000) / reconciles,
    },
  };
  if (ready.failed.length > 0)
    failures.push(`controller: ${ready.failed.length} Sandboxes failed instead of becoming Ready, first: ${ready.failed[0]}`);
  const ms = (v: number) => `${v.toFixed(0)} ms`;
  const markdown = [
    '## Controller plane',
    '',
    `Sandbox created → status Ready, \`acis controller\` as its own process against the Kubernetes API test server and simulated kubelet (${process.version}), kubelet timings \`${timings}\` (hack/k8s/kubelet-timings.ts).`,
    '',
    '| launch | claims | p50 | p90 | p99 | max |',
    '|---|---:|---:|---:|---:|---:|',
    `| warm pool (one at a time) | ${warmSingle.count} | ${ms(warmSingle.p50)} | ${ms(warmSingle.p90)} | ${ms(warmSingle.p99)} | ${ms(warmSingle.max)} |`,
    `| warm pool (${rate}/s, pool of ${poolSize}; ${launches.pool ?? 0} adopted, ${launches.cold ?? 0} fell back to cold) | ${warm.count} | ${ms(warm.p50)} | ${ms(warm.p90)} | ${ms(warm.p99)} | ${ms(warm.max)} |`,
    `| cold pod (one at a time) | ${figures.cold.count} | ${ms(figures.cold.p50)} | ${ms(figures.cold.p90)} | ${ms(figures.cold.p99)} | ${ms(figures.cold.max)} |`,
    '',
    `Burst of ${burst} Sandboxes at once: all Ready in ${seconds.toFixed(1)} s (p50 ${ms(burstLatency.p50)}, p99 ${ms(burstLatency.p99)}); ` +
      `${reconciles} reconciles, ${(reconciles / seconds).toFixed(0)} reconciles/s; controller CPU ${cpuMs === null ? 'n/a' : `${cpuMs.toFixed(0)} ms, ${figures.burst.controllerCpuUsPerReconcile!.toFixed(0)} µs per reconcile`}.`,
    '',
  ].join('\n');
  await mkdir(options.outDir, { recursive: true });
  const files = [path.join(options.outDir, 'controller.json'), path.join(options.outDir, 'controller.md')];
  await writeFile(files[0]!, `${JSON.stringify(figures, null, 2)}\n`);
  await writeFile(files[1]!, markdown);
  return { markdown, failures, files };
}
