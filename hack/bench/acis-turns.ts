/**
 * ACIS as the benchmark drives it for conversation turns: the server started as `npm start` runs it
 * against the model stub, a provisioned user, and the measuring loops shared by the conversation and
 * kubernetes planes (a case's turns, one at a time once the machine is idle, alternating between
 * targets and, when given a slot, with another loop such as the SDK floors).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { alone, type Slot } from './alternation.js';
import type { CaseRun } from './conversations-report.js';
import type { PlaneContext } from './plane.js';
import { acisArgs, freePort, startServerProcess } from './processes.js';
import { OtherCpu, waitQuiet } from './proc-tree.js';
import type { TurnTiming } from './sdk-floors.js';
import { median } from './stats.js';

const log = (line: string) => console.error(`bench: turns: ${line}`);

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
export async function startBenchAcis(
  ctx: PlaneContext,
  options: { dataDir: string; label: string; stubUrl: string; env: Record<string, string> },
) {
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

/** A progress line's p50s: the same median (stats.ts) as the report's tables. */
export function summary(timings: TurnTiming[]): string {
  const p50 = (values: number[]) => (median(values) ?? Number.NaN).toFixed(1);
  return `first line p50 ${p50(timings.map((t) => t.firstLineMs))} ms, terminal p50 ${p50(timings.map((t) => t.terminalMs))} ms`;
}

function logSummaries(id: CaseRun['id'], states: ReadonlyArray<{ target: TurnTarget; timings: TurnTiming[] }>): void {
  for (const { target, timings } of states) log(`${id}${target.label ? ` (${target.label})` : ''}: ${summary(timings)}`);
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
  const states = targets.map((target) => ({
    target,
    conversationId: '',
    timings: [] as TurnTiming[],
    refillMs: [] as number[],
    other: new OtherCpu(process.pid),
  }));
  const results = (failure?: string) =>
    states.map(({ timings, refillMs, other }) => ({
      id,
      timings,
      otherCpuShare: other.share(),
      ...(failure ? { failure } : id === 'pooled' && { refillMs }),
    }));
  try {
    const mode = id === 'warm' ? 'warm' : 'pooled';
    for (const state of states) {
      state.conversationId = (
        await state.target.api.call('POST', '/conversations', { user_id: state.target.userId, runtime: { mode } }, 201)
      ).id;
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
      if (!check.content.startsWith(expected))
        throw new Error(`the session lost turns: expected "${expected}…", got "${check.content.slice(0, 200)}"`);
    }
    logSummaries(id, states);
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
  const results = (failure?: string) =>
    states.map(({ timings, other }) => ({ id, timings, otherCpuShare: other.share(), ...(failure && { failure }) }));
  try {
    for (let n = 0; n < plan.warmupTurns + plan.turns; n++) {
      for (const { target, timings, other } of roundOrder(states, n)) {
        await slot(async () => {
          const conversation = await target.api.call(
            'POST',
            '/conversations',
            { user_id: target.userId, runtime: { mode: 'pooled' } },
            201,
          );
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
    logSummaries(id, states);
    return results();
  } catch (error) {
    log(`${id}: FAILED: ${(error as Error).message}`);
    return results((error as Error).message);
  }
}

// biome-ignore lint/suspicious/noExplicitAny: a stream line is JSON read field by field; a bench script, its checks catch a wrong shape
export type Line = Record<string, any>;

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
  if (firstLineMs === undefined || terminalAt === undefined || !stored)
    throw new Error('the stream ended without an agent line, message_end and result');
  if (stored.status !== 'completed') throw new Error(`the assistant message is ${stored.status}`);
  const terminal = terminalAt;
  return {
    firstLineMs,
    terminalMs: terminal - start,
    content: stored.content,
    sentAt: start,
    sinceTerminalMs: () => performance.now() - terminal,
  };
}

export async function* ndjsonLines(response: Response): AsyncGenerator<Line> {
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

export class Api {
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
  // biome-ignore lint/suspicious/noExplicitAny: the JSON answer, read loosely by the bench (a wrong shape fails its checks)
  async call(method: string, route: string, body: unknown, status: number): Promise<any> {
    const response = await this.fetch(method, route, body);
    const text = await response.text();
    if (response.status !== status) throw new Error(`${method} ${route} answered ${response.status}: ${text.slice(0, 500)}`);
    return JSON.parse(text);
  }
}

/** A tenant with the filler off (the measured turn is the agent's), a role and a user, through the API. */
async function provision(api: Api): Promise<string> {
  const tenant = await api.call(
    'PUT',
    '/tenants/by-external-id/bench:conversations',
    { name: 'Bench conversations', settings: { filler_enabled: false } },
    201,
  );
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
