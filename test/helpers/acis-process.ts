/**
 * ACIS as a separate OS process, for the suites that need a real one: the zero-setup path, a second
 * API node beside the in-process test server, what `npm start` runs. Also the little tools those
 * suites share (a free port, the machine's process command lines).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readdir, readFile } from 'node:fs/promises';
import { connect, createServer } from 'node:net';
import path from 'node:path';

export const ROOT = path.resolve(import.meta.dirname, '../..');
const READY_TIMEOUT_MS = 60_000;

export interface AcisProcess {
  process: ChildProcess;
  /** Everything it wrote to stdout and stderr so far. */
  output(): string;
  /** Its exit code (null when killed by a signal). */
  exited: Promise<number | null>;
}

export interface ServingAcis extends AcisProcess {
  url: string;
}

const started = new Set<ChildProcess>();

/** A port nothing listens on now, on loopback. */
export async function freePort(): Promise<number> {
  const probe = createServer().listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const { port } = probe.address() as { port: number };
  probe.close();
  await once(probe, 'close');
  return port;
}

/** This environment without ACIS's own settings (a fresh machine's), plus `extra`; logs at warn unless said. */
export function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(process.env)) {
    if (name === 'DATABASE_URL' || name.startsWith('ACIS_') || name === 'PORT' || name === 'HOST') continue;
    env[name] = value;
  }
  return { ...env, LOG_LEVEL: 'warn', ...extra };
}

/**
 * Runs `acis <args>` in one node process: from source through tsx's loader, or `compiled` from
 * dist/ (what `npm start` runs; build it first).
 */
export function runAcis(args: string[], env: NodeJS.ProcessEnv, options: { compiled?: boolean } = {}): AcisProcess {
  const entry = options.compiled ? ['dist/cli/acis.js'] : ['--import', 'tsx', 'cli/acis.ts'];
  return runNode([...entry, ...args], env);
}

/**
 * The standalone egress proxy (`egress-proxy/main.ts`, as its Deployment runs it) with `env` (see
 * cleanEnv; ACIS_EGRESS_PORT among it), once its proxy port answers: ready as its readiness probe
 * sees it (its metrics port opens first).
 */
export async function startEgressProxyProcess(env: NodeJS.ProcessEnv): Promise<AcisProcess> {
  const child = runNode(['--import', 'tsx', 'egress-proxy/main.ts'], env);
  const port = Number(env.ACIS_EGRESS_PORT);
  for (const deadline = Date.now() + READY_TIMEOUT_MS; !(await portOpen(port)); await new Promise((resolve) => setTimeout(resolve, 100))) {
    if (child.process.exitCode !== null || Date.now() > deadline) {
      child.process.kill('SIGKILL');
      throw new Error(`the egress proxy did not start:\n${child.output()}`);
    }
  }
  return child;
}

function runNode(args: string[], env: NodeJS.ProcessEnv): AcisProcess {
  const child = spawn(process.execPath, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  started.add(child);
  let output = '';
  child.stdout?.on('data', (chunk) => (output += chunk));
  child.stderr?.on('data', (chunk) => (output += chunk));
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      started.delete(child);
      resolve(code);
    }),
  );
  return { process: child, output: () => output, exited };
}

/** `acis serve` on a free loopback port with `env` (see cleanEnv), once GET /healthz answers. */
export async function serveAcis(env: NodeJS.ProcessEnv, options: { compiled?: boolean } = {}): Promise<ServingAcis> {
  const port = await freePort();
  const child = runAcis(['serve'], { ...env, PORT: String(port), HOST: '127.0.0.1' }, options);
  const url = `http://127.0.0.1:${port}`;
  for (const deadline = Date.now() + READY_TIMEOUT_MS; Date.now() < deadline; ) {
    if (child.process.exitCode !== null) throw new Error(`acis serve exited with ${child.process.exitCode}:\n${child.output()}`);
    if (
      await fetch(`${url}/healthz`).then(
        (r) => r.ok,
        () => false,
      )
    )
      return { ...child, url };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  child.process.kill('SIGKILL');
  throw new Error(`acis serve did not become healthy:\n${child.output()}`);
}

/** Sends `signal` (a graceful SIGTERM by default) and answers the exit code; at once if it has exited. */
export async function stopAcis(child: AcisProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
  if (child.process.exitCode === null && child.process.signalCode === null) child.process.kill(signal);
  return child.exited;
}

/** Kills whatever a suite started and left running (its afterAll). */
export function killLeftovers(): void {
  for (const child of started) if (child.exitCode === null) child.kill('SIGKILL');
}

export interface ProcessInfo {
  pid: number;
  ppid: number;
  /** Its arguments, space-separated. */
  commandLine: string;
}

/** Every process on this machine (Linux /proc) that was still there when read. */
export async function processes(): Promise<ProcessInfo[]> {
  const pids = (await readdir('/proc')).filter((name) => /^\d+$/.test(name));
  const all = await Promise.all(
    pids.map(async (pid) => {
      try {
        const [cmdline, stat] = await Promise.all([readFile(`/proc/${pid}/cmdline`, 'utf8'), readFile(`/proc/${pid}/stat`, 'utf8')]);
        // The fields after the command name (which may hold spaces and parentheses): state, then ppid.
        const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
        return { pid: Number(pid), ppid, commandLine: cmdline.split('\0').join(' ') };
      } catch {
        return undefined;
      }
    }),
  );
  return all.filter((info) => info !== undefined);
}

/** The processes descended from `pid`, among `list`. */
export function descendantsOf(pid: number, list: ProcessInfo[]): ProcessInfo[] {
  const found: ProcessInfo[] = [];
  const parents = new Set([pid]);
  for (let grew = true; grew; ) {
    grew = false;
    for (const info of list) {
      if (parents.has(info.ppid) && !parents.has(info.pid)) {
        parents.add(info.pid);
        found.push(info);
        grew = true;
      }
    }
  }
  return found;
}

/** The command line of every process on this machine, space-separated. */
export async function commandLines(): Promise<string[]> {
  return (await processes()).map((info) => info.commandLine);
}

/** Whether something accepts TCP connections on the loopback port now. */
export function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
