import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** A server under test, running in its own child process on loopback. */
export interface ServerProcess {
  name: string;
  pid: number;
  url: string;
  /** How it was started, for the report. */
  command: string;
  stop(): Promise<void>;
}

const READY_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 10_000;

const running = new Set<ChildProcess>();

// Last resort when the parent dies without its cleanup running: no server outlives the bench.
process.once('exit', () => {
  for (const child of running) child.kill('SIGKILL');
});

/** Extra node flags for every server process, e.g. `--cpu-prof` (see provisioning-plane.ts). */
let nodeFlags: string[] = [];
export function setServerNodeFlags(flags: string[]): void {
  nodeFlags = flags;
}

/**
 * Starts `node <args>` with PORT set to a free loopback port and waits until GET /healthz answers
 * 200. The process inherits stdout and stderr, so a crash explains itself in the bench output.
 */
export async function startServerProcess(name: string, args: string[], env: Record<string, string>): Promise<ServerProcess> {
  const port = await freePort();
  const argv = [...nodeFlags, ...args];
  const child = spawn(process.execPath, argv, {
    env: { ...process.env, ...env, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  running.add(child);
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => {
      running.delete(child);
      resolve();
    });
  });
  const server: ServerProcess = {
    name,
    pid: child.pid!,
    url: `http://127.0.0.1:${port}`,
    command: `node ${argv.join(' ')}`,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
      await exited;
      clearTimeout(timer);
    },
  };
  try {
    await waitUntilReady(server.url, child);
  } catch (error) {
    await server.stop();
    throw new Error(`${name} did not start: ${(error as Error).message}`);
  }
  return server;
}

async function waitUntilReady(url: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`exited with ${child.exitCode ?? child.signalCode}`);
    }
    try {
      const response = await fetch(`${url}/healthz`);
      if (response.ok) return;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  throw new Error(`no answer on ${url}/healthz within ${READY_TIMEOUT_MS / 1000} s`);
}

/** A port nothing listens on now, on loopback. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/**
 * The arguments that run `acis <command>`: the compiled build when it is fresh (what `npm start` and
 * the image run), otherwise the sources through tsx (what `npm run dev` runs). A stale build is never
 * measured.
 */
export function acisArgs(root: string, command: string): string[] {
  return freshBuild(root) ? [compiledMain(root), command] : ['--import', 'tsx', path.join(root, 'cli/acis.ts'), command];
}

/** Whether `dist/` is newer than every source file it is built from (the folders tsconfig.build.json includes). */
export function freshBuild(root: string): boolean {
  const compiled = compiledMain(root);
  if (!existsSync(compiled)) return false;
  const { include } = JSON.parse(readFileSync(path.join(root, 'tsconfig.build.json'), 'utf8')) as { include: string[] };
  const sources = Math.max(...include.map((dir) => newestMtime(path.join(root, dir))));
  return statSync(compiled).mtimeMs >= sources;
}

function compiledMain(root: string): string {
  return path.join(root, 'dist/cli/acis.js');
}

function newestMtime(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) newest = Math.max(newest, statSync(path.join(entry.parentPath, entry.name)).mtimeMs);
  }
  return newest;
}
