/**
 * The provisioning plane of `npm run bench`: ACIS's provisioning routes under load, each beside floors
 * measured in the same run (a bare Koa route, a Koa route with one `SELECT 1`, and the routes written
 * plainly on that stack: floors.ts), on a fresh PostgreSQL database grown from 1k to 1M tenants.
 * Every server runs in its own process, so the load generator here never shares a core with it.
 * Environment: BENCH_DURATION_S (measured seconds per scenario, default 10), BENCH_WARMUP_S (default 3),
 * BENCH_ROUNDS (rounds of the scenarios at each data size, each led by the one-query floor; default 3),
 * BENCH_CPU_PROF=1 (servers write V8 CPU profiles under .data/bench/profiles), BENCH_SCENARIOS
 * (comma-separated scenario ids or id prefixes such as `token-exchange` or `tenants-list-first@1M`:
 * only those run, beside the two floors (a route's prefix also picks its plain floor, e.g.
 * `token-exchange-floor@1k`); a dataset is only seeded when one of them needs it).
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { cpuSnapshot, cpuSpentMs, machineBusyShare, machineCpuMs } from './cpu.js';
import { envCount, envNumber } from './env.js';
import { measure, type RequestPlan, warmUp } from './load.js';
import type { PlaneContext, PlaneResult } from './plane.js';
import { acisArgs, type ServerProcess, setServerNodeFlags, startServerProcess } from './processes.js';
import { type RunInfo, renderMarkdown, type ScenarioOutcome, type ScenarioRun, writeReport } from './report.js';
import { DATASETS, QUERY_FLOOR, type Scenario, selectedScenarios, type Target } from './scenarios.js';
import { type Fixture, growTenants, seedBase } from './seed.js';

const REPORT_NAME = 'provisioning';
const CONNECTIONS = 50;

interface Settings {
  durationSeconds: number;
  warmupSeconds: number;
  rounds: number;
}

export async function runProvisioningPlane(ctx: PlaneContext): Promise<PlaneResult> {
  const settings: Settings = {
    durationSeconds: envNumber('BENCH_DURATION_S', 10),
    rounds: envCount('BENCH_ROUNDS', 3),
    warmupSeconds: envNumber('BENCH_WARMUP_S', 3),
  };
  if (process.env.BENCH_CPU_PROF === '1') {
    setServerNodeFlags(['--cpu-prof', `--cpu-prof-dir=${path.join(ctx.outDir, 'profiles')}`]);
  }

  const databaseUrl = await ctx.newDatabase();
  const db = new pg.Client({ connectionString: databaseUrl });
  await db.connect();
  ctx.defer(() => db.end());
  const servers = await provisioningServers(ctx, databaseUrl);

  // Other work on the machine takes CPU from the servers: say so before the figures are trusted.
  const busyBefore = await machineBusyShare(2000);
  if (busyBefore !== null && busyBefore > 0.15) {
    console.error(
      `bench: WARNING: the machine was ${(100 * busyBefore).toFixed(0)}% busy before the run; throughput will be low and noisy`,
    );
  }

  const outcomes = await runDatasets(ctx, servers, db, settings);
  const info: RunInfo = {
    date: new Date().toISOString().slice(0, 10),
    node: process.version,
    postgres: `PostgreSQL ${(await db.query<{ server_version: string }>('show server_version')).rows[0]?.server_version}`,
    cpus: `${os.cpus().length} × ${os.cpus()[0]?.model.trim() ?? 'unknown CPU'}`,
    connections: CONNECTIONS,
    ...settings,
    machineBusyBefore: busyBefore,
    acisCommand: `node ${servers.acisServe.map((arg) => (path.isAbsolute(arg) ? path.relative(ctx.root, arg) : arg)).join(' ')}`,
  };
  const files = await writeReport(ctx.outDir, REPORT_NAME, info, outcomes);
  // Its servers and database are not needed by the next plane: free the machine now.
  await servers.stopAll();
  return {
    markdown: renderMarkdown(info, outcomes),
    failures: outcomes.flatMap(({ scenario, runs }) =>
      runs.filter((run) => run.failure).map((run) => `${scenario.id} (round ${run.round}): ${run.failure}`),
    ),
    files,
  };
}

interface ProvisioningServers {
  serviceKey: string;
  acisServe: string[];
  /** The target's server, started on first use (a run of floors alone never starts ACIS). */
  serverFor(target: Target): Promise<ServerProcess>;
  stopAll(): Promise<void>;
}

async function provisioningServers(ctx: PlaneContext, databaseUrl: string): Promise<ProvisioningServers> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'acis-bench-'));
  ctx.defer(() => rm(dataDir, { recursive: true, force: true }));
  const serviceKey = `sk_int_bench_${randomBytes(18).toString('base64url')}`;
  const acisServe = acisArgs(ctx.root, 'serve');
  const servers = new Map<Target, ServerProcess>();
  const start = (target: Target) =>
    target === 'acis'
      ? startServerProcess('acis', acisServe, {
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
      : startServerProcess(`floor ${target}`, ['--import', 'tsx', path.join(ctx.root, 'hack/bench/floors.ts'), target], {
          DATABASE_URL: databaseUrl,
        });
  return {
    serviceKey,
    acisServe,
    serverFor: async (target) => {
      let server = servers.get(target);
      if (!server) {
        const started = await start(target);
        ctx.defer(() => started.stop());
        servers.set(target, started);
        server = started;
      }
      return server;
    },
    stopAll: async () => {
      for (const server of servers.values()) await server.stop();
    },
  };
}

/** Each dataset seeded in turn, then its scenarios in rounds; every run keeps its round's floor. */
async function runDatasets(ctx: PlaneContext, servers: ProvisioningServers, db: pg.Client, settings: Settings): Promise<ScenarioOutcome[]> {
  const outcomes = new Map<string, ScenarioOutcome>();
  let fixture: Fixture | undefined;
  const selected = selectedScenarios();
  const queryFloor = selected.find((s) => s.id === QUERY_FLOOR)!;
  for (const dataset of [null, ...DATASETS]) {
    const scenarios = selected.filter((s) => s.dataset === (dataset?.id ?? null));
    if (scenarios.length === 0) continue;
    if (dataset) {
      const acis = await servers.serverFor('acis');
      const started = Date.now();
      fixture ??= await seedBase({ url: acis.url, serviceKey: servers.serviceKey }, db);
      fixture = await growTenants(db, fixture, dataset.tenants);
      console.error(`bench: ${dataset.id} tenants seeded in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    }
    // The machine's speed drifts over minutes: every round runs the one-query floor (at its head once
    // data is seeded; among the floors before), and each scenario's ratio is to its own round's floor.
    const order = dataset ? [queryFloor, ...scenarios] : scenarios;
    for (let round = 1; round <= settings.rounds; round++) {
      const runs: Array<{ scenario: Scenario; run: ScenarioRun }> = [];
      for (const scenario of order) {
        if (ctx.interrupted()) throw new Error('interrupted');
        const server = await servers.serverFor(scenario.target);
        // Only floors (dataset null) run before the first seeding, and their plans read no fixture.
        const plan = scenario.plan(fixture as Fixture);
        const run = await runScenario(scenario, plan, round, { server, db, connections: CONNECTIONS, ...settings });
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
  return [...outcomes.values()];
}

interface ScenarioContext extends Settings {
  server: ServerProcess;
  db: pg.Client;
  connections: number;
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
