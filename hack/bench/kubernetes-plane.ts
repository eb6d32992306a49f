/**
 * The kubernetes plane of `npm run bench`: time from `POST /conversations/{id}/messages` to the
 * first agent line and to the terminal line under ACIS_SANDBOX_PROVIDER=kubernetes, beside the same
 * cases under the local provider in the same run, the two servers running side by side and each
 * case's turns alternating between them (so that both see the machine in the same state), for
 *  - warm: a later turn of a warm conversation (held Sandbox, live session);
 *  - pooled-first: a pooled conversation's first message, served by a runner pod adopted from a
 *    SandboxWarmPool of one (local: the node's pre-started runner), each turn a new conversation sent
 *    once the pool has refilled and the machine is idle;
 *  - cold: a later turn of a pooled conversation with no pool (a new pod or runner resumes the session).
 * The cluster is the Kubernetes API test server (serving HTTPS, as a cluster's API does) and the
 * simulated kubelet in this process, its runner pods the real runner in bubblewrap (as the
 * kubernetes provider's tests run it; built, as the image has it, when the build is fresh, like the
 * controller and the API server); the controller, the API server and the model stub are processes
 * of their own. Runner pods reach the model through the
 * API server's egress proxy, as they do in a cluster. Aim (issue): the kubernetes provider adds at most
 * 10 ms at the median over the local provider for warm turns and for claims from a warm pool.
 * Environment: BENCH_TURNS, BENCH_WARMUP_TURNS (as the conversation plane), BENCH_KUBELET_PROBE_MS
 * (the simulated kubelet's readiness probe period, default 100; a real kubelet's is 1 s at least),
 * BENCH_KUBERNETES_CASES (comma-separated case ids to run, default all three).
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { startKubelet } from '../k8s/kubelet.js';
import { runnerImage } from '../k8s/runner-image.js';
import { startKubeTestServer, type KubeTestServer } from '../k8s/server.js';
import type { KubeObject } from '../k8s/store.js';
import { CLAIM_STEPS, type ClaimStep, traceClaims } from './claim-trace.js';
import { startControllerProcess } from './controller-plane.js';
import type { CaseId, CaseRun } from './conversations-report.js';
import { measureCase, measureFirstMessages, settle, startBenchAcis, startStub } from './acis-turns.js';
import type { PlaneContext, PlaneResult } from './plane.js';
import { freePort, freshBuild } from './processes.js';
import type { TurnTiming } from './sdk-floors.js';
import { percentile } from './stats.js';
import { envCount } from './env.js';

const NAMESPACE = 'default';
const RUNNER_IMAGE = 'acis-runner:bench';
const CA_CONFIGMAP = 'acis-egress-ca';
const POOL = 'runners';
/** The chart's default warm pool (values.yaml warmPool.replicas): a lone claim leaves a ready pod, so its replacement waits the refill delay. */
const POOL_REPLICAS = 2;
/** The agent type the API server's Sandboxes ask for, which the pool must offer. */
const AGENT_TYPE = 'vendor-agent-sdk';
/** The aim (issue text): added ms at the median over the local provider. */
const AIM_ADDED_MS = 10;

const log = (line: string) => console.error(`bench: kubernetes: ${line}`);

type Provider = 'local' | 'kubernetes';
type KubernetesCase = Extract<CaseId, 'warm' | 'pooled-first' | 'cold'>;

const CASE_TITLES: Record<KubernetesCase, string> = {
  warm: 'warm conversation, later turn (held runner / Sandbox, live session)',
  'pooled-first':
    "pooled conversation's first message (local: pre-started runner; kubernetes: pod adopted from a SandboxWarmPool of 2, the chart's default)",
  cold: 'cold start with resume (no pool: a new runner / runner pod resumes the session)',
};

/** The cases the aim applies to; cold start is reported without one. */
const AIMED: ReadonlySet<KubernetesCase> = new Set(['warm', 'pooled-first']);

export async function runKubernetesPlane(ctx: PlaneContext): Promise<PlaneResult> {
  const turns = envCount('BENCH_TURNS', 20, 0);
  const warmupTurns = Math.max(1, envCount('BENCH_WARMUP_TURNS', 3, 0));
  const probePeriodMs = Math.max(1, envCount('BENCH_KUBELET_PROBE_MS', 100, 0));
  const counts = { warmupTurns, turns };

  const root = await mkdtemp(path.join(os.tmpdir(), 'acis-bench-k8s-'));
  ctx.defer(() => rm(root, { recursive: true, force: true }));
  const stub = await startStub(ctx.root);
  ctx.defer(() => stub.stop());

  const startAcis = (label: string, env: Record<string, string>) =>
    startBenchAcis(ctx, { dataDir: path.join(root, label), label, stubUrl: stub.url, env });

  const runs: Array<CaseRun & { provider: Provider }> = [];
  let adoptReadyMs: number[] = [];
  let claimSteps: Record<ClaimStep, number[]> | undefined;
  /** A case's runs, local first, kubernetes second (the order of the targets). */
  const record = ([local, kubernetes]: CaseRun[]) =>
    runs.push({ ...local!, provider: 'local' }, { ...kubernetes!, provider: 'kubernetes' });
  const cases = selectedCases();

  log('kubernetes provider: API test server, simulated kubelet, controller');
  const cluster = await startKubeTestServer({ crdDirectories: [path.join(ctx.root, 'crds')], bookmarkIntervalMs: 200, tls: true });
  ctx.defer(() => cluster.close());
  const kubelet = await startKubelet({
    server: cluster,
    images: { [RUNNER_IMAGE]: runnerImage(ctx.root, { compiled: freshBuild(ctx.root) }) },
    probePeriodMs,
    allocatable: { cpu: '64', memory: '256Gi', pods: 100 },
  });
  ctx.defer(() => kubelet.close());
  const egressPort = await freePort();
  const controller = await startControllerProcess(ctx.root, cluster.kubeconfigPath, {
    ACIS_RUNNER_IMAGE: RUNNER_IMAGE,
    ACIS_RUNNER_PORT: String(await freePort()),
    ACIS_RUNNER_CPU_REQUEST: '10m',
    ACIS_RUNNER_MEMORY_REQUEST: '16Mi',
    ACIS_RUNNER_CPU_LIMIT: '2',
    ACIS_RUNNER_MEMORY_LIMIT: '2Gi',
    // Where runner pods reach the host's proxy: 127.0.0.1 in the kubelet's loopback mode, the node address in netns mode.
    ACIS_EGRESS_PROXY_HOST: kubelet.nodeAddress,
    ACIS_EGRESS_PROXY_PORT: String(egressPort),
    ACIS_EGRESS_CA_CONFIGMAP: CA_CONFIGMAP,
    ACIS_MODEL_BASE_URL: stub.url,
    ACIS_CLUSTER_MAX_SANDBOXES: '20',
    ACIS_CONTROLLER_WORKERS: '4',
  });
  ctx.defer(() => controller.stop());
  const kube = {
    ...(await startAcis('kubernetes', {
      ACIS_SANDBOX_PROVIDER: 'kubernetes',
      KUBECONFIG: cluster.kubeconfigPath,
      ACIS_K8S_NAMESPACE: NAMESPACE,
      ACIS_EGRESS_LISTEN: `127.0.0.1:${egressPort}`,
      ACIS_EGRESS_CA_CONFIGMAP: CA_CONFIGMAP,
    })),
    label: 'kubernetes',
  };

  // Each case's turns alternate between the two providers (measureCase, measureFirstMessages).
  if (cases.has('warm') || cases.has('pooled-first')) {
    log('local provider beside it, ACIS_POOL_SIZE=1: warm turns and pooled first messages');
    const local = { ...(await startAcis('local-pool-1', { ACIS_POOL_SIZE: '1' })), label: 'local' };
    await settle();
    if (cases.has('warm')) record(await measureCase('warm', [local, kube], counts));
    if (cases.has('pooled-first')) {
      log(`SandboxWarmPool ${POOL} of ${POOL_REPLICAS} (the chart's default)`);
      cluster.store.create('sandboxwarmpools', NAMESPACE, {
        apiVersion: 'acis.dev/v1alpha1',
        kind: 'SandboxWarmPool',
        metadata: { name: POOL },
        spec: { agentType: AGENT_TYPE, replicas: POOL_REPLICAS },
      } as KubeObject);
      await until('ready pool pods', () => readyPoolPods(cluster).length === POOL_REPLICAS);
      const launched = launchesOf(cluster);
      const trace = traceClaims(cluster);
      const [localRun, pooledFirst] = await measureFirstMessages('pooled-first', [local, { ...kube, onMeasured: trace.turn }], counts);
      launched.close();
      trace.close();
      claimSteps = trace.steps();
      // Every first message must have been served by an adopted pod, not a cold one.
      const coldLaunches = [...launched.byName.values()].filter((launch) => launch === 'cold').length;
      adoptReadyMs = launched.readyMs;
      const kubeRun =
        coldLaunches > 0 && !pooledFirst!.failure
          ? { ...pooledFirst!, failure: `${coldLaunches} first messages were served by cold pods` }
          : pooledFirst!;
      record([localRun!, kubeRun]);
      cluster.store.delete('sandboxwarmpools', NAMESPACE, POOL);
      await until(
        'pool pods left',
        () => cluster.store.list('pods', NAMESPACE, { labelSelector: `acis.dev/pool=${POOL}` }).items.length === 0,
        'none',
      );
    }
    await local.server.stop();
  }
  if (cases.has('cold')) {
    log('local provider beside it, ACIS_POOL_SIZE=0: cold starts with resume');
    const local = { ...(await startAcis('local-pool-0', { ACIS_POOL_SIZE: '0' })), label: 'local' };
    record(await measureCase('cold', [local, kube], counts));
    await local.server.stop();
  }
  await kube.server.stop();
  await controller.stop();

  const markdown = renderMarkdown(runs, { turns, warmupTurns, probePeriodMs, adoptReadyMs, claimSteps });
  await mkdir(ctx.outDir, { recursive: true });
  const jsonFile = path.join(ctx.outDir, 'kubernetes.json');
  const markdownFile = path.join(ctx.outDir, 'kubernetes.md');
  await writeFile(
    jsonFile,
    `${JSON.stringify({ date: new Date().toISOString().slice(0, 10), turns, warmupTurns, probePeriodMs, adoptReadyMs, claimSteps, runs }, null, 2)}\n`,
  );
  await writeFile(markdownFile, markdown);
  const failures = runs.filter((run) => run.failure).map((run) => `${run.provider} ${run.id}: ${run.failure}`);
  return { markdown, failures, files: [jsonFile, markdownFile] };
}

/** BENCH_KUBERNETES_CASES, or every case. */
function selectedCases(): Set<KubernetesCase> {
  const all = Object.keys(CASE_TITLES) as KubernetesCase[];
  const asked = process.env.BENCH_KUBERNETES_CASES?.split(',')
    .map((id) => id.trim())
    .filter(Boolean);
  if (!asked?.length) return new Set(all);
  const unknown = asked.filter((id) => !all.includes(id as KubernetesCase));
  if (unknown.length) throw new Error(`BENCH_KUBERNETES_CASES: unknown case ${unknown.join(', ')} (known: ${all.join(', ')})`);
  return new Set(asked as KubernetesCase[]);
}

/**
 * From now on until closed: the launch (pool or cold) of each Sandbox, by name, and the ms from its
 * creation being seen to its first Ready status (the controller's part of a claim, as the API test
 * server sees it).
 */
function launchesOf(cluster: KubeTestServer): { byName: Map<string, string>; readyMs: number[]; close(): void } {
  const byName = new Map<string, string>();
  const seenAt = new Map<string, number>();
  const readyMs: number[] = [];
  const ready = new Set<string>();
  const close = cluster.store.store.subscribe((change) => {
    if (!change.storageKey.includes('sandboxes')) return;
    const sandbox = change.object as KubeObject & { status?: { launch?: string; phase?: string } };
    const name = sandbox.metadata.name;
    if (!name) return;
    if (!seenAt.has(name)) seenAt.set(name, performance.now());
    if (sandbox.status?.launch) byName.set(name, sandbox.status.launch);
    if (sandbox.status?.phase === 'Ready' && !ready.has(name)) {
      ready.add(name);
      readyMs.push(performance.now() - seenAt.get(name)!);
    }
  });
  return { byName, readyMs, close };
}

interface PodStatus {
  conditions?: Array<{ type: string; status: string }>;
}

function readyPoolPods(cluster: KubeTestServer): KubeObject[] {
  return cluster.store
    .list('pods', NAMESPACE, { labelSelector: `acis.dev/pool=${POOL}` })
    .items.filter((pod) => (pod.status as PodStatus | undefined)?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
}

/** Polls the in-process store (no watch needed for a one-off wait in a bench). */
async function until(what: string, check: () => boolean, expected = 'one', timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`bench: kubernetes: ${what}: not ${expected} within ${timeoutMs} ms`);
    await sleep(50);
  }
}

const ms = (value: number | null) => (value === null ? '—' : value.toFixed(0));
const signedMs = (value: number | null) => (value === null ? '—' : `${value >= 0 ? '+' : ''}${value.toFixed(0)}`);

function renderMarkdown(
  runs: Array<CaseRun & { provider: Provider }>,
  info: {
    turns: number;
    warmupTurns: number;
    probePeriodMs: number;
    adoptReadyMs: number[];
    claimSteps: Record<ClaimStep, number[]> | undefined;
  },
): string {
  const lines = [
    '### Kubernetes provider beside the local provider',
    '',
    `${new Date().toISOString().slice(0, 10)}, node ${process.version}, ${os.cpus().length} × ${os.cpus()[0]?.model.trim() ?? 'unknown CPU'}; ` +
      `${info.warmupTurns} warm-up and ${info.turns} measured turns per case, one at a time once the machine is idle, the two providers' turns alternating; ` +
      `simulated kubelet probing readiness every ${info.probePeriodMs} ms. Milliseconds from sending the message to the first agent line / the terminal \`result\`.`,
    '',
    '| case | local first line p50 / p90 | kubernetes first line p50 / p90 | added at p50 (ratio) | local terminal p50 | kubernetes terminal p50 | added at p50 (ratio) | aim (first line ≤ +10 ms at p50, as issue 11 measures it) |',
    '|---|---|---|---|---|---|---|---|',
  ];
  for (const id of Object.keys(CASE_TITLES) as KubernetesCase[]) {
    if (!runs.some((run) => run.id === id)) continue;
    const local = runs.find((run) => run.provider === 'local' && run.id === id);
    const kube = runs.find((run) => run.provider === 'kubernetes' && run.id === id);
    const of = (run: CaseRun | undefined, pick: (t: TurnTiming) => number, q: number) => percentile(run?.timings.map(pick) ?? [], q);
    const first = (t: TurnTiming) => t.firstLineMs;
    const terminal = (t: TurnTiming) => t.terminalMs;
    const added = (pick: (t: TurnTiming) => number) => {
      const a = of(local, pick, 0.5);
      const b = of(kube, pick, 0.5);
      return a === null || b === null ? { ms: null, ratio: '—' } : { ms: b - a, ratio: `${(b / a).toFixed(2)}×` };
    };
    const addedFirst = added(first);
    const addedTerminal = added(terminal);
    const failed = [local, kube]
      .filter((run) => run?.failure)
      .map((run) => run!.failure)
      .join('; ');
    const aim = !AIMED.has(id)
      ? 'none'
      : failed || addedFirst.ms === null || addedTerminal.ms === null
        ? 'not measured'
        : addedFirst.ms <= AIM_ADDED_MS
          ? 'met'
          : 'missed';
    lines.push(
      `| ${CASE_TITLES[id]} | ${ms(of(local, first, 0.5))} / ${ms(of(local, first, 0.9))} | ${ms(of(kube, first, 0.5))} / ${ms(of(kube, first, 0.9))} | ` +
        `${signedMs(addedFirst.ms)} (${addedFirst.ratio}) | ${ms(of(local, terminal, 0.5))} | ${ms(of(kube, terminal, 0.5))} | ${signedMs(addedTerminal.ms)} (${addedTerminal.ratio}) | ${aim}${failed ? ` (failed: ${failed})` : ''} |`,
    );
  }
  lines.push(
    '',
    `Pooled first messages under the kubernetes provider: Sandbox created → Ready (adopted from the pool) p50 ${ms(percentile(info.adoptReadyMs, 0.5))} ms, ` +
      `p90 ${ms(percentile(info.adoptReadyMs, 0.9))} ms (${info.adoptReadyMs.length} claims, warm-up included).`,
  );
  if (info.claimSteps) {
    const steps = info.claimSteps;
    lines.push(
      '',
      "Where a pooled first message's time goes (ms after the message was sent, p50 over the measured turns; the steps the Kubernetes API sees; a negative token read was made ahead, while the pod waited in its pool):",
      '',
      `| ${CLAIM_STEPS.join(' | ')} |`,
      `|${CLAIM_STEPS.map(() => '---:').join('|')}|`,
      `| ${CLAIM_STEPS.map((step) => ms(percentile(steps[step], 0.5))).join(' | ')} |`,
    );
  }
  return `${lines.join('\n')}\n`;
}
