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
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { serveUnixToTcp } from '../../runner/bridge.js';
import {
  type Api,
  measureCase,
  measureFirstMessages,
  ndjsonLines,
  prompt,
  settle,
  startBenchAcis,
  startStub,
  summary,
} from './acis-turns.js';
import { Alternation } from './alternation.js';
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
import { envCount } from './env.js';
import type { PlaneContext, PlaneResult } from './plane.js';
import { acisArgs, type ServerProcess } from './processes.js';
import { childrenOf, commandLine, processInfo, treeRss } from './proc-tree.js';
import { type FloorId, runSdkFloors, type Where } from './sdk-floors.js';

const log = (line: string) => console.error(`bench: conversations: ${line}`);

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
    selected &&
    new Set<FloorId>([...selected].flatMap((id) => (id === 'pooled' ? [CASES[id].floor, 'fresh-in-host' as const] : [CASES[id].floor])));
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
    acisCommand: `node ${acisArgs(ctx.root, 'serve')
      .map((arg) => (path.isAbsolute(arg) ? path.relative(ctx.root, arg) : arg))
      .join(' ')}`,
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
export function selectedCases(): Set<CaseId> | undefined {
  const wanted = (process.env.BENCH_SCENARIOS ?? '')
    .split(',')
    .map((id) => id.trim())
    .filter(Boolean);
  const picked = CASE_IDS.filter((id) => wanted.some((w) => id === w || id.startsWith(w)));
  return picked.length === 0 ? undefined : new Set(picked);
}

/** The runners of an ACIS server: those of its children that are bwrap, or the runner itself with isolation none (not tsx's esbuild). */
function runnersOf(server: ServerProcess) {
  return childrenOf(server.pid).filter((child) => child.name === 'bwrap' || commandLine(child.pid).includes('runner/runner.ts'));
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
      const follower = await api.fetch(
        'GET',
        `/conversations/${conversation.id}/messages/${messageId}/stream?after=0`,
        undefined,
        followers.signal,
      );
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
