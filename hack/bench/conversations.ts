/**
 * The conversation plane of `npm run bench`: time from `POST /conversations/{id}/messages` to the
 * first agent line and to the terminal line, for a warm conversation, a pooled claim and a cold start
 * with session resume, each beside the same turns driven through the Agent SDK directly in the same
 * run (sdk-floors.ts); and the resident memory of runners and of open streams.
 *
 * Everything runs in its own process: the model stub (hack/model-stub), ACIS (with its runners), and
 * the plain floors' SDK processes; turns are sequential, each started once the machine is idle again,
 * and the floors' turns alternate with ACIS's (alternation.ts), so that each case and its floors are
 * measured in the same minutes.
 * Environment: BENCH_TURNS (measured turns per case, default 20), BENCH_WARMUP_TURNS (default 3),
 * BENCH_SANDBOX_FLOORS=0 (skip the floors in bubblewrap), BENCH_STREAMS (follower streams for the
 * per-stream memory, default 50), BENCH_ACIS_LOG_LEVEL (default warn), ACIS_SANDBOX_ISOLATION, passed
 * to ACIS, and BENCH_SCENARIOS (case ids or their prefixes, e.g. `pooled-first`: only those cases, beside
 * the floors they are held to; the open streams' memory is measured only when every case runs).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { serveUnixToTcp } from '../../sandbox/bridge.js';
import {
  CASE_IDS,
  CASES,
  type CaseId,
  type CaseRun,
  type ConversationRunInfo,
  type MemoryFigures,
  renderConversationsMarkdown,
  writeConversationsReport,
} from './conversations-report.js';
import { acisArgs, freePort, type ServerProcess, startServerProcess } from './processes.js';
import { childrenOf, commandLine, OtherCpu, processInfo, treeRss, waitQuiet } from './proc-tree.js';
import { type FloorId, runSdkFloors, type TurnTiming, type Where } from './sdk-floors.js';
import { envCount } from './env.js';
import { Alternation, alone, type Slot } from './alternation.js';

export interface PlaneContext {
  root: string;
  outDir: string;
  newDatabase(): Promise<string>;
  /** Registers an undo step (run newest first, also on failure and Ctrl-C). */
  defer(step: () => Promise<unknown>): void;
}

export interface PlaneResult {
  markdown: string;
  failures: string[];
  files: string[];
}

const log = (line: string) => console.error(`bench: conversations: ${line}`);

/** Short replies in three-word deltas: the turn's cost is the platform's, not the model's. */
export const prompt = (n: number) => `[[reply: bench turn ${n + 1}, a short answer of about a dozen words in a few deltas]]`;

/** Idle again: every process of the bench (stub, ACIS, runners, SDK processes) spent ≤ 10 ms per 100 ms twice. */
export async function settle(): Promise<number | null> {
  const busyMs = await waitQuiet([process.pid]);
  if (busyMs === null) log('WARNING: the bench processes did not go idle within 15 s; the next turn shares the CPUs');
  return busyMs;
}

/**
 * ACIS as `npm start` runs it, on a database of its own, against the model stub, with a bootstrap
 * service key and one provisioned user: what every conversation case starts from.
 */
export async function startBenchAcis(ctx: PlaneContext, options: { dataDir: string; label: string; stubUrl: string; env: Record<string, string> }) {
  await mkdir(options.dataDir);
  const serviceKey = `sk_int_bench_${randomBytes(18).toString('base64url')}`;
  const server = await startServerProcess(`acis (${options.label})`, acisArgs(ctx.root, 'serve'), {
    DATABASE_URL: await ctx.newDatabase(),
    ACIS_DATA_DIR: options.dataDir,
    ACIS_MASTER_KEY: randomBytes(32).toString('base64'),
    ACIS_BOOTSTRAP_SERVICE_KEY: serviceKey,
    ACIS_ADMIN_TOKEN: randomBytes(24).toString('hex'),
    LOG_LEVEL: process.env.BENCH_ACIS_LOG_LEVEL ?? 'warn',
    ANTHROPIC_BASE_URL: options.stubUrl,
    ANTHROPIC_API_KEY: 'bench',
    // Every stream sends with one service key: this bench measures turns, not the message limit.
    ACIS_RATE_LIMIT_MESSAGE_SENDS: '1000000000',
    ...options.env,
  });
  ctx.defer(() => server.stop());
  const api = new Api(server.url, serviceKey);
  return { server, api, userId: await provision(api) };
}

export async function runConversationsPlane(ctx: PlaneContext): Promise<PlaneResult> {
  const turns = envCount('BENCH_TURNS', 20, 0);
  // At least one: a live session's first turn starts its process and makes the session.
  const warmupTurns = Math.max(1, envCount('BENCH_WARMUP_TURNS', 3, 0));
  const streams = envCount('BENCH_STREAMS', 50, 0);
  const wheres: Where[] = process.env.BENCH_SANDBOX_FLOORS === '0' ? ['plain'] : ['plain', 'bwrap'];
  const isolation = process.env.ACIS_SANDBOX_ISOLATION ?? 'bwrap';

  const root = await mkdtemp(path.join(os.tmpdir(), 'acis-bench-conv-'));
  ctx.defer(() => rm(root, { recursive: true, force: true }));
  const stub = await startStub(ctx.root);
  ctx.defer(() => stub.stop());
  const runDir = path.join(root, 'run');
  await mkdir(runDir);
  const bridge = await serveUnixToTcp(path.join(runDir, 'model.sock'), { host: '127.0.0.1', port: stub.port });
  ctx.defer(() => bridge.close());

  const selected = selectedCases();
  const runs = (id: CaseId) => selected === undefined || selected.has(id);
  // The pooled claim is also compared with the design floor of a fresh resume in a host started ahead.
  const floorKinds =
    selected && new Set<FloorId>([...selected].flatMap((id) => (id === 'pooled' ? [CASES[id].floor, 'fresh-in-host' as const] : [CASES[id].floor])));
  // The floors and ACIS run side by side, taking turns on the machine (alternation.ts).
  const alternation = new Alternation(2);
  const floorSlot = alternation.slotOf(0);
  const slot = alternation.slotOf(1);
  const floorsMeasured = runSdkFloors(
    { root, stubUrl: stub.url, runDir, appRoot: ctx.root, warmupTurns, turns, prompt, settle, slot: floorSlot, log },
    wheres,
    floorKinds,
  ).finally(() => alternation.end(0));

  const cases: CaseRun[] = [];
  const memory: MemoryFigures = {};
  const plan = { warmupTurns, turns, slot };
  const startAcis = (poolSize: number, env: Record<string, string> = {}) =>
    slot(async () => {
      const started = await startBenchAcis(ctx, {
        dataDir: path.join(root, `acis-pool-${poolSize}-${Object.values(env).join('-') || 'default'}`),
        label: `pool ${poolSize}`,
        stubUrl: stub.url,
        env: { ACIS_POOL_SIZE: String(poolSize), ACIS_SANDBOX_ISOLATION: isolation, ...env },
      });
      // Its pre-started runner is up before the floors take the machine back.
      await settle();
      return started;
    });
  const stopAcis = (server: ServerProcess) => slot(() => server.stop());

  const acisMeasured = (async () => {
    if (runs('warm') || runs('pooled') || runs('pooled-first')) {
      log('ACIS with ACIS_POOL_SIZE=1: warm and pooled conversations, memory');
      const { server, api, userId } = await startAcis(1);
      const [prestarted] = runnersOf(server);
      if (prestarted) memory.idleRunner = treeRss(prestarted.pid);

      if (runs('warm')) {
        cases.push(
          ...(await measureCase('warm', [{ api, userId }], plan, async (conversationId) => {
            const state = (await api.call('GET', `/conversations/${conversationId}`, undefined, 200)).runtime.sandbox_state;
            if (state !== 'warm') throw new Error(`the warm conversation shows sandbox_state ${state}`);
            // The pre-started runner it claimed on its first turn is the one it holds now.
            if (prestarted && runnersOf(server).some((runner) => runner.pid === prestarted.pid)) {
              memory.heldRunner = treeRss(prestarted.pid);
            }
          })),
        );
      }
      if (runs('pooled')) cases.push(...(await measureCase('pooled', [{ api, userId }], plan)));
      if (runs('pooled-first')) cases.push(...(await measureFirstMessages('pooled-first', [{ api, userId }], plan)));
      if (selected === undefined) {
        try {
          Object.assign(memory, await slot(() => streamMemory(server, api, userId, streams)));
        } catch (error) {
          memory.failure = (error as Error).message;
        }
      }
      await stopAcis(server);
    }
    if (runs('pooled-first-unprewarmed')) {
      log('ACIS with ACIS_POOL_PREWARM=0: first messages and the idle runner without a prewarmed runtime');
      const { server, api, userId } = await startAcis(1, { ACIS_POOL_PREWARM: '0' });
      const [prestarted] = runnersOf(server);
      if (prestarted) memory.idleRunnerWithoutPrewarm = treeRss(prestarted.pid);
      cases.push(...(await measureFirstMessages('pooled-first-unprewarmed', [{ api, userId }], plan)));
      await stopAcis(server);
    }
    if (runs('cold')) {
      log('ACIS with ACIS_POOL_SIZE=0: cold starts with session resume');
      const { server, api, userId } = await startAcis(0);
      cases.push(...(await measureCase('cold', [{ api, userId }], plan)));
      await stopAcis(server);
    }
  })().finally(() => alternation.end(1));

  // Both loops end before anything is reported or torn down, even when one of them failed.
  const [floorsOutcome, acisOutcome] = await Promise.allSettled([floorsMeasured, acisMeasured]);
  if (floorsOutcome.status === 'rejected') throw floorsOutcome.reason;
  if (acisOutcome.status === 'rejected') throw acisOutcome.reason;
  const floors = floorsOutcome.value;
  for (const floor of floors) {
    log(`floor ${floor.where} ${floor.kind}: ${floor.failure ? `FAILED: ${floor.failure}` : summary(floor.timings)}`);
  }

  const info: ConversationRunInfo = {
    date: new Date().toISOString().slice(0, 10),
    node: process.version,
    cpus: `${os.cpus().length} × ${os.cpus()[0]?.model.trim() ?? 'unknown CPU'}`,
    turns,
    warmupTurns,
    isolation,
    acisCommand: `node ${acisArgs(ctx.root, 'serve').map((arg) => (path.isAbsolute(arg) ? path.relative(ctx.root, arg) : arg)).join(' ')}`,
    streams,
  };
  const files = await writeConversationsReport(ctx.outDir, info, cases, floors, memory);
  const failures = [
    ...floors.filter((f) => f.failure).map((f) => `floor ${f.where} ${f.kind}: ${f.failure}`),
    ...cases.filter((c) => c.failure).map((c) => `${c.id}: ${c.failure}`),
    ...(memory.failure ? [`memory: ${memory.failure}`] : []),
  ];
  return { markdown: renderConversationsMarkdown(info, cases, floors, memory), failures, files };
}

/** The cases BENCH_SCENARIOS names (exactly or by prefix); undefined (all) when it is unset or names none of them. */
function selectedCases(): Set<CaseId> | undefined {
  const wanted = (process.env.BENCH_SCENARIOS ?? '').split(',').map((id) => id.trim()).filter(Boolean);
  const picked = CASE_IDS.filter((id) => wanted.some((w) => id === w || id.startsWith(w)));
  return picked.length === 0 ? undefined : new Set(picked);
}

export function summary(timings: TurnTiming[]): string {
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;
  return `first line p50 ${median(timings.map((t) => t.firstLineMs)).toFixed(1)} ms, terminal p50 ${median(timings.map((t) => t.terminalMs)).toFixed(1)} ms`;
}

/** The runners of an ACIS server: those of its children that are bwrap, or the runner itself with isolation none (not tsx's esbuild). */
function runnersOf(server: ServerProcess) {
  return childrenOf(server.pid).filter((child) => child.name === 'bwrap' || commandLine(child.pid).includes('sandbox/runner.ts'));
}

/** How many turns a case makes, and in whose slots (alone, unless it alternates with the floors). */
export interface MeasurePlan {
  warmupTurns: number;
  turns: number;
  slot?: Slot;
}

/** Where a case's turns go: an ACIS server and its provisioned user. */
export interface TurnTarget {
  api: Api;
  userId: string;
  /** Names the target in the progress lines when a case has several. */
  label?: string;
  /** Each measured turn's conversation, when its message was sent (performance.now()) and its timing. */
  onMeasured?: (conversationId: string, sentAt: number, timing: TurnTiming) => void;
}

/**
 * Each round sends one turn to every target, the first target first in even rounds and last in odd
 * ones, so that targets compared in one run see the same machine, turn by turn, rather than one
 * after the other (a machine's pace drifts over minutes).
 */
function roundOrder<T>(targets: readonly T[], round: number): T[] {
  return round % 2 === 0 ? [...targets] : [...targets].reverse();
}

/**
 * One case on a conversation of its own per target: warm-up turns (the first makes the session),
 * measured turns, then a turn that asks the stub for the history it was sent, which proves the
 * measured turns ran with the whole conversation (a start that lost the session would be fast and
 * wrong). One result per target, in the targets' order.
 */
export async function measureCase(
  id: CaseRun['id'],
  targets: readonly TurnTarget[],
  plan: MeasurePlan,
  afterWarmup?: (conversationId: string) => Promise<void>,
): Promise<CaseRun[]> {
  const slot = plan.slot ?? alone;
  log(`${id} ...`);
  const states = targets.map((target) => ({ target, conversationId: '', timings: [] as TurnTiming[], refillMs: [] as number[], other: new OtherCpu(process.pid) }));
  const results = (failure?: string) =>
    states.map(({ timings, refillMs, other }) => ({ id, timings, otherCpuShare: other.share(), ...(failure ? { failure } : id === 'pooled' && { refillMs }) }));
  try {
    const mode = id === 'warm' ? 'warm' : 'pooled';
    for (const state of states) {
      state.conversationId = (await state.target.api.call('POST', '/conversations', { user_id: state.target.userId, runtime: { mode } }, 201)).id;
    }
    // The first turn makes the session, so it is never measured.
    const warmup = Math.max(1, plan.warmupTurns);
    const total = warmup + plan.turns;
    for (let n = 0; n < total; n++) {
      for (const state of roundOrder(states, n)) {
        await slot(async () => {
          await settle();
          if (n >= warmup) state.other.begin();
          const timing = await acisTurn(state.target.api, state.conversationId, prompt(n));
          state.other.end();
          if (n >= warmup) {
            state.timings.push({ firstLineMs: timing.firstLineMs, terminalMs: timing.terminalMs });
            state.target.onMeasured?.(state.conversationId, timing.sentAt, timing);
          }
          if (n === warmup - 1) await afterWarmup?.(state.conversationId);
          // A pooled claim leaves the pool one short: the node starts a runner to replace it.
          if (id === 'pooled') {
            const sinceTerminal = timing.sinceTerminalMs();
            const busyMs = await settle();
            if (busyMs !== null && n >= warmup) state.refillMs.push(sinceTerminal + busyMs);
          }
        });
      }
    }
    for (const state of states) {
      const check = await slot(async () => {
        await settle();
        return acisTurn(state.target.api, state.conversationId, '[[echo-history]]');
      });
      const expected = `History: ${total} earlier user turns`;
      if (!check.content.startsWith(expected)) throw new Error(`the session lost turns: expected "${expected}…", got "${check.content.slice(0, 200)}"`);
    }
    for (const { target, timings } of states) log(`${id}${target.label ? ` (${target.label})` : ''}: ${summary(timings)}`);
    return results();
  } catch (error) {
    log(`${id}: FAILED: ${(error as Error).message}`);
    return results((error as Error).message);
  }
}

/**
 * A pooled conversation's first message, each turn on a new conversation, once the node is idle
 * again (its pool refilled, the runner's runtime prewarmed): what a host sees when a user starts a
 * chat. One result per target, in the targets' order.
 */
export async function measureFirstMessages(
  id: 'pooled-first' | 'pooled-first-unprewarmed',
  targets: readonly TurnTarget[],
  plan: MeasurePlan,
): Promise<CaseRun[]> {
  const slot = plan.slot ?? alone;
  log(`${id} ...`);
  const states = targets.map((target) => ({ target, timings: [] as TurnTiming[], other: new OtherCpu(process.pid) }));
  const results = (failure?: string) => states.map(({ timings, other }) => ({ id, timings, otherCpuShare: other.share(), ...(failure && { failure }) }));
  try {
    for (let n = 0; n < plan.warmupTurns + plan.turns; n++) {
      for (const { target, timings, other } of roundOrder(states, n)) {
        await slot(async () => {
          const conversation = await target.api.call('POST', '/conversations', { user_id: target.userId, runtime: { mode: 'pooled' } }, 201);
          await settle();
          const measured = n >= plan.warmupTurns;
          if (measured) other.begin();
          const timing = await acisTurn(target.api, conversation.id, prompt(n));
          other.end();
          if (!timing.content) throw new Error('the first message got an empty reply');
          if (measured) timings.push({ firstLineMs: timing.firstLineMs, terminalMs: timing.terminalMs });
          if (measured) target.onMeasured?.(conversation.id, timing.sentAt, timing);
        });
      }
    }
    for (const { target, timings } of states) log(`${id}${target.label ? ` (${target.label})` : ''}: ${summary(timings)}`);
    return results();
  } catch (error) {
    log(`${id}: FAILED: ${(error as Error).message}`);
    return results((error as Error).message);
  }
}

type Line = Record<string, any>;

/** The turn as a client sees it: the clock starts before the request is sent. */
async function acisTurn(
  api: Api,
  conversationId: string,
  content: string,
): Promise<TurnTiming & { content: string; sentAt: number; sinceTerminalMs: () => number }> {
  const start = performance.now();
  const response = await api.fetch('POST', `/conversations/${conversationId}/messages`, { content });
  if (response.status !== 200) throw new Error(`POST .../messages answered ${response.status}: ${(await response.text()).slice(0, 500)}`);
  let firstLineMs: number | undefined;
  let terminalAt: number | undefined;
  let stored: Line | undefined;
  for await (const line of ndjsonLines(response)) {
    const at = performance.now();
    if (line.event === 'ping') continue;
    if (line.object === 'platform.event') {
      if (line.type === 'error') throw new Error(`the run failed: ${JSON.stringify(line.problem).slice(0, 500)}`);
      if (line.type === 'message_end') stored = line.message;
      continue;
    }
    firstLineMs ??= at - start;
    if (line.type === 'result') terminalAt = at;
  }
  if (firstLineMs === undefined || terminalAt === undefined || !stored) throw new Error('the stream ended without an agent line, message_end and result');
  if (stored.status !== 'completed') throw new Error(`the assistant message is ${stored.status}`);
  const terminal = terminalAt;
  return { firstLineMs, terminalMs: terminal - start, content: stored.content, sentAt: start, sinceTerminalMs: () => performance.now() - terminal };
}

async function* ndjsonLines(response: Response): AsyncGenerator<Line> {
  const decoder = new TextDecoder();
  let buffered = '';
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    buffered += decoder.decode(chunk, { stream: true });
    for (let newline = buffered.indexOf('\n'); newline >= 0; newline = buffered.indexOf('\n')) {
      const text = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      if (text.trim() !== '') yield JSON.parse(text) as Line;
    }
  }
}

/**
 * The ACIS server's resident memory (the server process alone) idle, with one open stream (a run
 * held in flight by a slow model reply), and with `count` more streams following that run
 * (re-attached with GET .../stream), each idle but for pings. RSS moves with garbage collection by
 * megabytes, so each figure is the median of several samples and only the many-stream delta is
 * divided into a per-stream figure.
 */
async function streamMemory(server: ServerProcess, api: Api, userId: string, count: number): Promise<MemoryFigures> {
  log(`memory of open streams (1, then 1 + ${count}) ...`);
  const holdMs = 20_000;
  await settle();
  const idle = await sampleRss(server.pid);
  const conversation = await api.call('POST', '/conversations', { user_id: userId }, 201);
  const response = await api.fetch('POST', `/conversations/${conversation.id}/messages`, {
    content: `[[slow: ${holdMs}]] [[reply: held open]]`,
  });
  if (response.status !== 200) throw new Error(`the held run answered ${response.status}`);
  const messageId = response.headers.get('x-service-message-id');
  const main = ndjsonLines(response)[Symbol.asyncIterator]();
  await main.next();
  const mainDone = (async () => {
    while (!(await main.next()).done);
  })();
  await settle();
  const one = await sampleRss(server.pid);

  const followers = new AbortController();
  await Promise.all(
    Array.from({ length: count }, async () => {
      const follower = await api.fetch('GET', `/conversations/${conversation.id}/messages/${messageId}/stream?after=0`, undefined, followers.signal);
      if (follower.status !== 200) throw new Error(`re-attaching answered ${follower.status}`);
      const lines = ndjsonLines(follower)[Symbol.asyncIterator]();
      await lines.next();
      // Keep reading (pings) in the background until aborted.
      void (async () => {
        try {
          while (!(await lines.next()).done);
        } catch {
          // aborted
        }
      })();
    }),
  );
  await settle();
  const many = await sampleRss(server.pid);
  followers.abort();
  await mainDone;
  return {
    serverIdleMiB: idle,
    serverOneStreamMiB: one,
    serverManyStreamsMiB: many,
    followerStreams: count,
  };
}

/** Median of 9 readings of a process's VmRSS 100 ms apart, in MiB. */
async function sampleRss(pid: number): Promise<number> {
  const samples: number[] = [];
  for (let i = 0; i < 9; i++) {
    samples.push(processInfo(pid).rssKb / 1024);
    await sleep(100);
  }
  return samples.sort((a, b) => a - b)[4]!;
}

class Api {
  constructor(
    readonly url: string,
    private readonly serviceKey: string,
  ) {}

  fetch(method: string, route: string, body?: unknown, signal?: AbortSignal): Promise<Response> {
    return fetch(`${this.url}${route}`, {
      method,
      headers: {
        authorization: `Bearer ${this.serviceKey}`,
        ...(body !== undefined && { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      ...(signal && { signal }),
    });
  }

  /** A JSON call that must answer `status`. */
  async call(method: string, route: string, body: unknown, status: number): Promise<any> {
    const response = await this.fetch(method, route, body);
    const text = await response.text();
    if (response.status !== status) throw new Error(`${method} ${route} answered ${response.status}: ${text.slice(0, 500)}`);
    return JSON.parse(text);
  }
}

/** A tenant with the filler off (the measured turn is the agent's), a role and a user, through the API. */
async function provision(api: Api): Promise<string> {
  const tenant = await api.call('PUT', '/tenants/by-external-id/bench:conversations', { name: 'Bench conversations', settings: { filler_enabled: false } }, 201);
  const role = await api.call('POST', `/tenants/${tenant.id}/roles`, { name: 'bench', skill_access: { mode: 'all' } }, 201);
  const user = await api.call('PUT', `/tenants/${tenant.id}/users/by-external-id/bench:user`, { role_id: role.id }, 201);
  return user.id as string;
}

export interface Stub {
  url: string;
  port: number;
  stop(): Promise<void>;
}

/** The model stub in its own process, so its CPU is not the measuring process's. */
export async function startStub(appRoot: string): Promise<Stub> {
  const port = await freePort();
  const child: ChildProcess = spawn(
    process.execPath,
    ['--import', 'tsx', path.join(appRoot, 'hack/model-stub/main.ts'), '--port', String(port)],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  process.once('exit', () => child.kill('SIGKILL'));
  const lines = createInterface({ input: child.stdout!, crlfDelay: Infinity });
  // It logs one line per request; only the first (listening) matters, the rest are read and dropped.
  const listening = new Promise<void>((resolve, reject) => {
    lines.on('line', (line) => {
      if (line.startsWith('model stub listening')) resolve();
    });
    void exited.then(() => reject(new Error('the model stub exited before listening')));
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
  await listening.finally(() => clearTimeout(timer));
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      await exited;
    },
  };
}
