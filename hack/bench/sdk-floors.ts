/**
 * The conversation plane's floors: the same turns driven through the Agent SDK directly, against the
 * same model stub in the same run, plainly (the SDK in the bench process) and, when asked, inside a
 * bubblewrap sandbox built like a runner's (sandbox/bwrap.ts), with sdk-host.ts as its process.
 */
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { SDKMessage } from '@anthropic-ai/claude-agent-sdk';
import ts from 'typescript';
import { OtherCpu } from './proc-tree.js';
import { bwrapCommand, SANDBOX_APP, SANDBOX_HOME, SANDBOX_RUN, runnerCommand } from '../../runner/bwrap.js';
import { type FloorKind, openSdkHost, runnerLikeOptions } from './sdk-host.js';
import type { Slot } from './alternation.js';

export type Where = 'plain' | 'bwrap';

/**
 * The SDK host kinds of sdk-host.ts, plus `fresh-in-host`: a fresh `query({resume})` in a host
 * process (sandboxed) that was started and went idle before the turn, the clock starting at the
 * prompt, which is what a pre-started ACIS runner does today. Plainly it is `fresh` (the host is
 * the bench process), so it runs in bubblewrap only. And `prestarted-new`: a process pre-started
 * with `startup()` for a session not yet made, fed a new conversation's first message (the floor of
 * a pooled conversation's first message).
 */
export type FloorId = FloorKind | 'fresh-in-host' | 'prestarted-new';

/** ms from sending a turn to its first agent line and to its terminal line. */
export interface TurnTiming {
  firstLineMs: number;
  terminalMs: number;
}

export interface FloorRun {
  kind: FloorId;
  where: Where;
  timings: TurnTiming[];
  /** Share of the CPUs other processes took during the measured turns (see OtherCpu). */
  otherCpuShare: number | null;
  failure?: string;
}

export interface FloorOptions {
  root: string;
  stubUrl: string;
  /** The directory whose `model.sock` a sandbox reaches the stub through. */
  runDir: string;
  appRoot: string;
  warmupTurns: number;
  turns: number;
  prompt(n: number): string;
  /** Awaited before every turn: the machine is idle again. */
  settle(): Promise<unknown>;
  /** Runs each turn (and each host start or compile around them) in the floors' turn on the machine. */
  slot: Slot;
  log(line: string): void;
}

// biome-ignore lint/suspicious/noExplicitAny: a stream line is JSON read field by field; a bench script, its checks catch a wrong shape
type Line = Record<string, any>;

/**
 * Times one turn from `start`: the first line (any agent message) and the terminal `result`, which must
 * be a success. Reads `messages` to its end, so a one-shot process has exited when this returns.
 */
export async function timeTurn(start: number, messages: AsyncIterable<Line>): Promise<TurnTiming & { sessionId: string }> {
  let firstLineMs: number | undefined;
  let result: { terminalMs: number; sessionId: string } | undefined;
  for await (const message of messages) {
    const at = performance.now() - start;
    firstLineMs ??= at;
    if (message.type === 'result') {
      if (message.subtype !== 'success' || message.is_error) throw new Error(`the turn failed: ${JSON.stringify(message).slice(0, 500)}`);
      result ??= { terminalMs: at, sessionId: message.session_id };
    }
  }
  if (firstLineMs === undefined || !result) throw new Error('the turn ended without a result');
  return { firstLineMs, ...result };
}

/** The floors of `wanted` (every one when undefined), plainly and/or in bubblewrap (`wheres`), in that order. */
export async function runSdkFloors(options: FloorOptions, wheres: Where[], wanted?: ReadonlySet<FloorId>): Promise<FloorRun[]> {
  const runs: FloorRun[] = [];
  const hostDir = wheres.includes('bwrap') ? await options.slot(() => compileSdkHost(options)) : '';
  for (const where of wheres) {
    const kinds: FloorId[] =
      where === 'plain'
        ? ['live', 'prestarted', 'prestarted-new', 'fresh']
        : ['live', 'prestarted', 'prestarted-new', 'fresh', 'fresh-in-host'];
    for (const kind of kinds.filter((k) => !wanted || wanted.has(k))) {
      options.log(`floor ${where} ${kind} ...`);
      const dirs = await conversationDirs(options.root, `floor-${where}-${kind}`);
      const open = where === 'plain' ? plainHost(options, dirs) : sandboxedHost(options, dirs, hostDir);
      const other = new OtherCpu(process.pid);
      try {
        runs.push({ kind, where, timings: await floorTurns(kind, open, options, other), otherCpuShare: other.share() });
      } catch (error) {
        runs.push({ kind, where, timings: [], otherCpuShare: null, failure: (error as Error).message });
      }
    }
  }
  return runs;
}

interface Dirs {
  workspace: string;
  home: string;
}

async function conversationDirs(root: string, name: string): Promise<Dirs> {
  const dirs = { workspace: path.join(root, name, 'workspace'), home: path.join(root, name, 'home') };
  await mkdir(dirs.workspace, { recursive: true });
  await mkdir(dirs.home, { recursive: true });
  return dirs;
}

/** Opens a host of `kind` (resuming `resume`) and says when it is ready for the turn. */
type OpenHost = (
  kind: FloorKind,
  resume: string | undefined,
) => { ready: Promise<void>; turn(content: string): AsyncIterable<Line>; close(): Promise<void> };

/**
 * live: one session, its first turns unmeasured. The others: a session made by one unmeasured
 * turn, then each turn in a new process resuming it (as a pooled or cold conversation does, its
 * transcript growing a turn at a time). The clock starts when the prompt is sent, to a host that
 * is ready and idle; for `fresh` it starts before the host is opened (the start is what is measured).
 */
async function floorTurns(kind: FloorId, open: OpenHost, options: FloorOptions, other: OtherCpu): Promise<TurnTiming[]> {
  const timings: TurnTiming[] = [];
  const total = options.warmupTurns + options.turns;
  const { slot } = options;
  if (kind === 'live') {
    // The host starts in the floors' slot too: its start would slow the other loop's turn.
    const host = await slot(async () => {
      const opened = open('live', undefined);
      try {
        await opened.ready;
        return opened;
      } catch (error) {
        await opened.close();
        throw error;
      }
    });
    try {
      for (let n = 0; n < total; n++) {
        await slot(async () => {
          await options.settle();
          if (n >= options.warmupTurns) other.begin();
          const { firstLineMs, terminalMs } = await timeTurn(performance.now(), host.turn(options.prompt(n)));
          other.end();
          if (n >= options.warmupTurns) timings.push({ firstLineMs, terminalMs });
        });
      }
    } finally {
      await host.close();
    }
    return timings;
  }
  if (kind === 'prestarted-new') {
    for (let n = 0; n < total; n++) {
      await slot(async () => {
        const host = open('prestarted', undefined);
        try {
          await host.ready;
          await options.settle();
          const measured = n >= options.warmupTurns;
          if (measured) other.begin();
          const { firstLineMs, terminalMs } = await timeTurn(performance.now(), host.turn(options.prompt(n)));
          other.end();
          if (measured) timings.push({ firstLineMs, terminalMs });
        } finally {
          await host.close();
        }
      });
    }
    return timings;
  }
  const resumingKind: FloorKind = kind === 'fresh-in-host' ? 'fresh' : kind;
  const sessionId = await slot(() => oneTurn(open('fresh', undefined), options.prompt(-1)));
  for (let n = 0; n < total; n++) await slot(() => resumedTurn(n));
  return timings;

  async function resumedTurn(n: number): Promise<void> {
    await options.settle();
    const measured = n >= options.warmupTurns;
    if (measured) other.begin();
    let start = performance.now();
    const host = open(resumingKind, sessionId);
    try {
      await host.ready;
      if (kind !== 'fresh') {
        await options.settle();
        if (measured) other.begin();
        start = performance.now();
      }
      const timing = await timeTurn(start, host.turn(options.prompt(n)));
      other.end();
      if (timing.sessionId !== sessionId) throw new Error(`resumed ${sessionId} but the turn ran in ${timing.sessionId}`);
      if (measured) timings.push({ firstLineMs: timing.firstLineMs, terminalMs: timing.terminalMs });
    } finally {
      await host.close();
    }
  }
}

async function oneTurn(host: ReturnType<OpenHost>, content: string): Promise<string> {
  try {
    await host.ready;
    return (await timeTurn(performance.now(), host.turn(content))).sessionId;
  } finally {
    await host.close();
  }
}

/** The SDK in this process, with its own HOME and workspace. */
function plainHost(options: FloorOptions, dirs: Dirs): OpenHost {
  const env = {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: dirs.home,
    CLAUDE_CONFIG_DIR: path.join(dirs.home, '.claude'),
    ANTHROPIC_BASE_URL: options.stubUrl,
    ANTHROPIC_API_KEY: 'bench',
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
    IS_SANDBOX: '1',
  };
  return (kind, resume) => {
    const host = openSdkHost(kind, runnerLikeOptions(dirs.workspace, env, resume));
    return {
      ready: host.then(() => undefined),
      turn: (content) =>
        (async function* () {
          yield* (await host).turn(content) as AsyncGenerator<SDKMessage & Line>;
        })(),
      close: async () => (await host.catch(() => undefined))?.close(),
    };
  };
}

/**
 * sdk-host.ts as plain JavaScript (in `<root>/floor-host/sdk-host.mjs`), so the sandboxed floor's host
 * starts as a bare node process: no TypeScript loader between the SDK and its floor.
 */
async function compileSdkHost(options: FloorOptions): Promise<string> {
  const source = await readFile(path.join(options.appRoot, 'hack/bench/sdk-host.ts'), 'utf8');
  const output = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2023, verbatimModuleSyntax: true },
  });
  const dir = path.join(options.root, 'floor-host');
  await mkdir(dir, { recursive: true });
  await writeFile(path.join(dir, 'sdk-host.mjs'), output.outputText);
  return dir;
}

/** The compiled sdk-host in a bubblewrap sandbox with a runner's recipe, reaching the stub through `runDir`. */
function sandboxedHost(options: FloorOptions, dirs: Dirs, hostDir: string): OpenHost {
  const source = runnerCommand(options.appRoot, false);
  return (kind, resume) => {
    const { args, env } = bwrapCommand({
      ...dirs,
      runDir: options.runDir,
      // The runner's binds (node_modules, the SDK), plus the host script where node resolves the SDK from it.
      runtimeDirs: [...source.runtimeDirs, { source: hostDir, target: `${SANDBOX_APP}/floor-host` }],
      env: {
        ANTHROPIC_API_KEY: 'bench',
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
        IS_SANDBOX: '1',
        CLAUDE_CONFIG_DIR: `${SANDBOX_HOME}/.claude`,
        ANTHROPIC_BASE_URL: 'http://model.invalid',
        ANTHROPIC_UNIX_SOCKET: `${SANDBOX_RUN}/model.sock`,
        FLOOR_KIND: kind,
        FLOOR_RESUME: resume ?? '',
      },
      command: ['node', `${SANDBOX_APP}/floor-host/sdk-host.mjs`],
    });
    const child: ChildProcessWithoutNullStreams = spawn('bwrap', args, { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString('utf8')).slice(-2000);
    });
    const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
    const lines = createInterface({ input: child.stdout, crlfDelay: Infinity })[Symbol.asyncIterator]();
    const next = async (): Promise<Line> => {
      const read = await lines.next();
      if (read.done) throw new Error(`the sandboxed SDK host exited: ${stderr.trim()}`);
      const line = JSON.parse(read.value) as Line;
      if (line.type === 'host_error') throw new Error(`the sandboxed SDK host failed: ${line.error}`);
      return line;
    };
    return {
      ready: (async () => {
        const first = await next();
        if (first.type !== 'host_ready') throw new Error(`unexpected first line ${JSON.stringify(first)}`);
      })(),
      async *turn(content) {
        child.stdin.write(`${JSON.stringify({ content })}\n`);
        for (;;) {
          const line = await next();
          yield line;
          if (line.type === 'result') return;
        }
      },
      async close() {
        child.stdin.end();
        const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(timer);
      },
    };
  };
}
