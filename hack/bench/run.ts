import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { cpuSnapshot, cpuSpentMs, machineBusyShare, machineCpuMs } from './cpu.js';
import { measure, type RequestPlan, stopAllLoad, warmUp } from './load.js';
import { runConversationsPlane } from './conversations.js';
import { runControllerPlane } from './controller-plane.js';
import { runKubernetesPlane } from './kubernetes-plane.js';
import { runSkillsPlane } from './skills.js';
import { acisArgs, type ServerProcess, setServerNodeFlags, startServerProcess } from './processes.js';
import { type RunInfo, renderMarkdown, type ScenarioOutcome, type ScenarioRun, writeReport } from './report.js';
import { BARE_FLOOR, DATASETS, QUERY_FLOOR, SCENARIOS, type Scenario, type Target } from './scenarios.js';
import { type Fixture, growTenants, seedBase } from './seed.js';
import { envCount, envNumber } from './env.js';

/**
 * `npm run bench`: the provisioning plane against its floors, on a fresh PostgreSQL database, then
 * the conversation plane against the Agent SDK driven directly (conversations.ts), the controller
 * plane against the Kubernetes API test server (controller-plane.ts), the conversation plane under the
 * kubernetes provider beside the local one (kubernetes-plane.ts), then the skills plane
 * (skills.ts: skill content from the database, push to next run).
 * Environment: BENCH_PLANES (provisioning | conversations | controller | kubernetes | skills | all, the default), BENCH_DURATION_S
 * (measured seconds per provisioning scenario, default 10), BENCH_WARMUP_S (default 3), BENCH_ROUNDS
 * (rounds of the provisioning scenarios at each data size, each led by the one-query floor; default 3),
 * BENCH_CPU_PROF=1 (servers write V8 CPU profiles under .data/bench/profiles), BENCH_SCENARIOS
 * (comma-separated scenario ids or id prefixes such as `token-exchange` or `tenants-list-first@1M`:
 * only those run, beside the two floors (a route's prefix also picks its plain floor, e.g. `token-exchange-floor@1k`);
 * a dataset is only seeded when one of them needs it),
 * BENCH_ADMIN_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres); the conversation
 * plane's own variables are listed in conversations.ts.
 */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const OUT_DIR = path.join(ROOT, '.data/bench');
const REPORT_NAME = 'provisioning';
const ADMIN_DATABASE_URL = process.env.BENCH_ADMIN_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const CONNECTIONS = 50;

/** Undo steps, run newest first exactly once: on success, on failure and on Ctrl-C. */
const cleanups: Array<() => Promise<unknown>> = [];
let cleaning: Promise<void> | undefined;
function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    for (const step of cleanups.reverse()) {
      try {
        await step();
      } catch (error) {
        console.error('bench: cleanup step failed:', error);
      }
    }
  })();
  return cleaning;
}
let interrupted = false;
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    console.error(`bench: ${signal}, stopping`);
    interrupted = true;
    stopAllLoad();
    void cleanup().finally(() => process.exit(130));
  });
}

const PLANES = ['provisioning', 'conversations', 'controller', 'kubernetes', 'skills'] as const;

function planes(): Array<(typeof PLANES)[number]> {
  const raw = process.env.BENCH_PLANES ?? 'all';
  if (raw === 'all') return [...PLANES];
  if ((PLANES as readonly string[]).includes(raw)) return [raw as (typeof PLANES)[number]];
  throw new Error(`BENCH_PLANES must be one of ${PLANES.join(', ')}, all`);
}

interface PlaneOutcome {
  markdown: string;
  failures: string[];
  files: string[];
}

async function main(): Promise<number> {
  const outcomes: PlaneOutcome[] = [];
  for (const plane of planes()) {
    if (interrupted) throw new Error('interrupted');
    const context = {
      root: ROOT,
      outDir: OUT_DIR,
      newDatabase: async () => {
        const url = await createDatabase();
        cleanups.push(() => dropDatabase(url));
        return url;
      },
      defer: (step: () => Promise<unknown>) => cleanups.push(step),
    };
    const run = {
      provisioning: () => provisioningPlane(),
      conversations: () => runConversationsPlane(context),
      controller: () => runControllerPlane(context),
      kubernetes: () => runKubernetesPlane(context),
      skills: () => runSkillsPlane(context),
    }[plane];
    outcomes.push(await run());
  }
  for (const outcome of outcomes) console.log(outcome.markdown);
  console.error(`bench: written ${outcomes.flatMap((o) => o.files).map((f) => path.relative(ROOT, f)).join(', ')}`);
  const failures = outcomes.flatMap((o) => o.failures);
  for (const failure of failures) console.error(`bench: FAILED ${failure}`);
  return failures.length > 0 ? 1 : 0;
}

async function provisioningPlane(): Promise<PlaneOutcome> {
  const durationSeconds = envNumber('BENCH_DURATION_S', 10);
  const rounds = envCount('BENCH_ROUNDS', 3);
  const warmupSeconds = envNumber('BENCH_WARMUP_S', 3);
  if (process.env.BENCH_CPU_PROF === '1') {
    setServerNodeFlags(['--cpu-prof', `--cpu-prof-dir=${path.join(OUT_DIR, 'profiles')}`]);
  }

  const databaseUrl = await createDatabase();
  cleanups.push(() => dropDatabase(databaseUrl));
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  cleanups.push(() => db.end());
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'acis-bench-'));
  cleanups.push(() => rm(dataDir, { recursive: true, force: true }));

  const serviceKey = `sk_int_bench_${randomBytes(18).toString('base64url')}`;
  const acisServe = acisArgs(ROOT, 'serve');
  const servers = new Map<Target, ServerProcess>();
  const serverFor = async (target: Target): Promise<ServerProcess> => {
    let server = servers.get(target);
    if (!server) {
      server =
        target === 'acis'
          ? await startServerProcess('acis', acisServe, {
              DATABASE_URL: databaseUrl,
              ACIS_DATA_DIR: dataDir,
              ACIS_MASTER_KEY: randomBytes(32).toString('base64'),
              ACIS_BOOTSTRAP_SERVICE_KEY: serviceKey,
              ACIS_ADMIN_TOKEN: randomBytes(24).toString('hex'),
              LOG_LEVEL: 'warn',
              // No pre-started sandbox runners: they belong to the conversation plane, not this bench.
              ACIS_POOL_SIZE: '0',
              // One service key drives thousands of requests a second: limits far above that keep the
              // limiter on the measured path (its chunked reservations) without refusing anything.
              ACIS_RATE_LIMIT_TOKEN_EXCHANGE: '1000000000',
              ACIS_RATE_LIMIT_OTHER: '1000000000',
            })
          : await startServerProcess(`floor ${target}`, ['--import', 'tsx', path.join(ROOT, 'hack/bench/floors.ts'), target], {
              DATABASE_URL: databaseUrl,
            });
      const started = server;
      cleanups.push(() => started.stop());
      servers.set(target, server);
    }
    return server;
  };

  // Other work on the machine takes CPU from the servers: say so before the figures are trusted.
  const busyBefore = await machineBusyShare(2000);
  if (busyBefore !== null && busyBefore > 0.15) {
    console.error(`bench: WARNING: the machine was ${(100 * busyBefore).toFixed(0)}% busy before the run; throughput will be low and noisy`);
  }

  const outcomes = new Map<string, ScenarioOutcome>();
  let fixture: Fixture | undefined;
  const selected = selectedScenarios();
  const queryFloor = selected.find((s) => s.id === QUERY_FLOOR)!;
  for (const dataset of [null, ...DATASETS]) {
    const scenarios = selected.filter((s) => s.dataset === (dataset?.id ?? null));
    if (scenarios.length === 0) continue;
    if (dataset) {
      const acis = await serverFor('acis');
      const started = Date.now();
      fixture ??= await seedBase({ url: acis.url, serviceKey }, db);
      fixture = await growTenants(db, fixture, dataset.tenants);
      console.error(`bench: ${dataset.id} tenants seeded in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    }
    // The machine's speed drifts over minutes: every round runs the one-query floor (at its head once
    // data is seeded; among the floors before), and each scenario's ratio is to its own round's floor.
    const order = dataset ? [queryFloor, ...scenarios] : scenarios;
    for (let round = 1; round <= rounds; round++) {
      const runs: Array<{ scenario: Scenario; run: ScenarioRun }> = [];
      for (const scenario of order) {
        if (interrupted) throw new Error('interrupted');
        const server = await serverFor(scenario.target);
        // Only floors (dataset null) run before the first seeding, and their plans read no fixture.
        const plan = scenario.plan(fixture as Fixture);
        const run = await runScenario(scenario, plan, round, { server, db, connections: CONNECTIONS, warmupSeconds, durationSeconds });
        runs.push({ scenario, run });
      }
      const queryFloorRps = runs.find(({ scenario }) => scenario.id === QUERY_FLOOR)?.run.result?.rps;
      for (const { scenario, run } of runs) {
        const outcome = outcomes.get(scenario.id) ?? { scenario, runs: [] };
        outcome.runs.push({ ...run, queryFloorRps });
        outcomes.set(scenario.id, outcome);
      }
    }
  }

  const info: RunInfo = {
    date: new Date().toISOString().slice(0, 10),
    node: process.version,
    postgres: `PostgreSQL ${(await db.query<{ server_version: string }>('show server_version')).rows[0]?.server_version}`,
    cpus: `${os.cpus().length} × ${os.cpus()[0]?.model.trim() ?? 'unknown CPU'}`,
    connections: CONNECTIONS,
    warmupSeconds,
    durationSeconds,
    rounds,
    machineBusyBefore: busyBefore,
    acisCommand: `node ${acisServe.map((arg) => (path.isAbsolute(arg) ? path.relative(ROOT, arg) : arg)).join(' ')}`,
  };
  const files = await writeReport(OUT_DIR, REPORT_NAME, info, [...outcomes.values()]);
  // Its servers and database are not needed by the next plane: free the machine now.
  for (const server of servers.values()) await server.stop();
  return {
    markdown: renderMarkdown(info, [...outcomes.values()]),
    failures: [...outcomes.values()].flatMap(({ scenario, runs }) =>
      runs.filter((run) => run.failure).map((run) => `${scenario.id} (round ${run.round}): ${run.failure}`),
    ),
    files,
  };
}

/** The scenarios BENCH_SCENARIOS names (all when unset), always with the floors the ratios need. */
function selectedScenarios(): Scenario[] {
  const wanted = (process.env.BENCH_SCENARIOS ?? '').split(',').map((id) => id.trim()).filter(Boolean);
  if (wanted.length === 0) return SCENARIOS;
  const picked = SCENARIOS.filter(
    (s) => s.id === BARE_FLOOR || s.id === QUERY_FLOOR || wanted.some((id) => s.id === id || s.id.startsWith(id)),
  );
  if (picked.length === 2) throw new Error(`BENCH_SCENARIOS matches no scenario: ${wanted.join(', ')}`);
  return picked;
}

interface ScenarioContext {
  server: ServerProcess;
  db: pg.Client;
  connections: number;
  warmupSeconds: number;
  durationSeconds: number;
}

async function runScenario(scenario: Scenario, plan: RequestPlan, round: number, context: ScenarioContext): Promise<ScenarioRun> {
  console.error(`bench: ${scenario.id} (round ${round}) ...`);
  const { server, connections } = context;
  const probeFailure = await probe(scenario, plan, server.url);
  if (probeFailure) return { round, failure: probeFailure };
  await warmUp(plan, { url: server.url, connections, seconds: context.warmupSeconds });

  const serverBefore = cpuSnapshot([server.pid]);
  const dbBefore = cpuSnapshot(await backendPids(context.db));
  const machineBefore = machineCpuMs();
  const selfBefore = process.cpuUsage();
  const result = await measure(plan, { url: server.url, connections, seconds: context.durationSeconds });
  const self = process.cpuUsage(selfBefore);
  const machineMs = machineCpuMs();
  const serverCpuMs = cpuSpentMs(serverBefore, cpuSnapshot([server.pid]));
  const dbCpuMs = cpuSpentMs(dbBefore, cpuSnapshot(await backendPids(context.db)));
  const perRequestUs = (ms: number | null) => (ms === null || result.requests === 0 ? null : (ms * 1000) / result.requests);
  // What the machine spent beyond the server, its backends and the load generator: other processes, interrupts.
  const otherCpuShare =
    machineBefore === null || machineMs === null || serverCpuMs === null || dbCpuMs === null
      ? null
      : Math.max(0, machineMs - machineBefore - serverCpuMs - dbCpuMs - (self.user + self.system) / 1000) /
        (result.seconds * 1000 * os.cpus().length);

  const unexpected = Object.keys(result.statuses).filter((status) => Number(status) !== scenario.expectStatus);
  const failure =
    result.non2xx > 0 || result.errors > 0 || unexpected.length > 0
      ? `${result.non2xx} non-2xx, ${result.errors} connection errors/timeouts, statuses ${JSON.stringify(result.statuses)} (expected only ${scenario.expectStatus})`
      : undefined;
  console.error(
    `bench: ${scenario.id}: ${result.rps.toFixed(0)} req/s, p50 ${result.p50Ms.toFixed(2)} ms, p99 ${result.p99Ms.toFixed(2)} ms${failure ? `, FAILED: ${failure}` : ''}`,
  );
  return {
    round,
    result,
    serverCpuUsPerRequest: perRequestUs(serverCpuMs),
    dbCpuUsPerRequest: perRequestUs(dbCpuMs),
    otherCpuShare,
    failure,
  };
}

/** The PostgreSQL backends serving the bench database (the servers' pools), but not this client. */
async function backendPids(db: pg.Client): Promise<number[]> {
  const result = await db.query<{ pid: number }>(
    'select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()',
  );
  return result.rows.map((row) => row.pid);
}

/** One request before the load: the right status and body, or the scenario fails with the answer. */
async function probe(scenario: Scenario, plan: RequestPlan, url: string): Promise<string | undefined> {
  const spec = typeof plan === 'function' ? plan(0) : plan;
  const response = await fetch(`${url}${spec.path}`, {
    method: spec.method,
    headers: { ...spec.headers, ...(spec.body !== undefined && { 'content-type': 'application/json' }) },
    body: spec.body === undefined ? undefined : JSON.stringify(spec.body),
  });
  const text = await response.text();
  if (response.status !== scenario.expectStatus) {
    return `probe answered ${response.status} (expected ${scenario.expectStatus}): ${text.slice(0, 500)}`;
  }
  const problem = scenario.check?.(JSON.parse(text));
  return problem ? `probe: ${problem}` : undefined;
}

async function adminQuery(statement: string): Promise<void> {
  const admin = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
  await admin.connect();
  try {
    await admin.query(statement);
  } finally {
    await admin.end();
  }
}

async function createDatabase(): Promise<string> {
  const name = `acis_bench_${randomBytes(6).toString('hex')}`;
  await adminQuery(`create database ${name}`);
  const url = new URL(ADMIN_DATABASE_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

async function dropDatabase(databaseUrl: string): Promise<void> {
  await adminQuery(`drop database if exists ${new URL(databaseUrl).pathname.slice(1)} with (force)`);
}

main()
  .catch((error: unknown) => {
    if (!interrupted) console.error('bench: aborted:', error);
    return 1;
  })
  .then(async (code) => {
    await cleanup();
    process.exit(interrupted ? 130 : code);
  });
