import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from '../bench/processes.js';

/** ACIS running from source in a child process (what `npm run dev` runs). */
export interface AcisProcess {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

const READY_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 10_000;

/**
 * Starts `node --import tsx cli/acis.ts serve` (one process, unlike the tsx CLI, so stopping
 * it stops the server) with `env` and waits for GET /healthz. The server's log lines are echoed
 * with an `[acis]` prefix.
 */
export async function startAcis(root: string, env: Record<string, string>): Promise<AcisProcess> {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(root, 'cli/acis.ts'), 'serve'], {
    cwd: root,
    env: { ...inheritedEnv(), ...env, PORT: String(port), HOST: '127.0.0.1' },
    stdio: ['ignore', 'pipe', 'pipe'],
    // Its own process group: Ctrl-C reaches only the demo, which then stops the server with one
    // SIGTERM (a server sent both signals would shut down twice).
    detached: true,
  });
  for (const stream of [child.stdout, child.stderr]) {
    createInterface({ input: stream! }).on('line', (line) => console.log(`  [acis] ${line}`));
  }
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // Last resort if the demo dies without its cleanup: the server does not outlive it.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);

  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), STOP_TIMEOUT_MS);
      await exited;
      clearTimeout(timer);
    }
    process.removeListener('exit', killOnExit);
  };
  try {
    await waitUntilReady(url, child);
  } catch (error) {
    await stop();
    throw error;
  }
  return { url, pid: child.pid!, stop };
}

/** The demo's environment without the server's own settings: a developer's DATABASE_URL must not leak in. */
function inheritedEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) {
    const serverSetting = /^(ACIS_|ANTHROPIC_)/.test(name) || ['DATABASE_URL', 'PORT', 'HOST', 'LOG_LEVEL'].includes(name);
    if (value !== undefined && !serverSetting) env[name] = value;
  }
  return env;
}

async function waitUntilReady(url: string, child: ChildProcess): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`ACIS exited during start (${child.exitCode ?? child.signalCode}); see the [acis] lines above`);
    }
    try {
      if ((await fetch(`${url}/healthz`)).ok) return;
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  throw new Error(`ACIS did not answer ${url}/healthz within ${READY_TIMEOUT_MS / 1000} s`);
}
