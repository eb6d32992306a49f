/**
 * What the runner link costs: the real runner (`runner/runner.ts` in TLS mode, from source, with the
 * real SDK against the model stub) driven by the API side's client over loopback. Prints the median
 * and p90 of a connection's handshake (TLS, then hello and welcome with their proofs, until the link
 * is up) and of a warm turn's first agent line and terminal line.
 *
 *   npx tsx hack/bench/runner-link.ts    (BENCH_HANDSHAKES, default 50; BENCH_TURNS, default 15)
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { pino } from 'pino';
import { connectRemoteRunner } from '../../api-server/sandboxes/remote-runner.js';
import { createEphemeralCa } from '../../egress-proxy/deployment-ca.js';
import { openLinkClient } from '../../runner/link-client.js';
import { API_SERVER_NAME } from '../../runner/link-tls.js';
import { startModelStub } from '../model-stub/model-stub.js';
import { envCount } from './env.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const TOKEN = 'bench-runner-token-0123456789';

async function main(): Promise<void> {
  const handshakes = envCount('BENCH_HANDSHAKES', 50);
  const turns = envCount('BENCH_TURNS', 15);
  const stub = await startModelStub();
  const dir = await mkdtemp(path.join(tmpdir(), 'acis-bench-link-'));
  const ca = await createEphemeralCa('bench deployment CA');
  const leaf = await ca.issueIdentity({ commonName: API_SERVER_NAME, usages: ['client'], validityMs: 3_600_000 });
  const clientCertificate = () => ({ cert: leaf.certPem, key: leaf.keyPem });
  await writeFile(path.join(dir, 'ca.crt'), ca.certPem);
  const runner = await startRunner(dir, stub.url);
  try {
    const connect = { host: '127.0.0.1', port: runner.port, token: TOKEN, clientCertificate, reconnectSeconds: 5 };
    const handshake: number[] = [];
    for (let i = 0; i < handshakes; i++) {
      const started = performance.now();
      const link = await openLinkClient(connect);
      handshake.push(performance.now() - started);
      const gone = new Promise((resolve) => link.onClosed(resolve));
      link.end('bench: next connection');
      await gone;
      // The runner lets the next client in once it saw this one leave.
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const logger = pino({ level: 'silent' });
    const remote = await connectRemoteRunner({ id: 'bench', ...connect, logger });
    const first: number[] = [];
    const terminal: number[] = [];
    for (let i = 0; i < turns + 1; i++) {
      const started = performance.now();
      let firstAt: number | undefined;
      await remote.runTurn({ content: `turn ${i} [[reply: ok]]` }, () => {
        firstAt ??= performance.now();
      });
      // The first turn starts the session: not a warm turn.
      if (i === 0) continue;
      first.push(firstAt! - started);
      terminal.push(performance.now() - started);
    }
    await remote.kill();
    report('handshake (connect to link up)', handshake);
    report('warm turn, first agent line', first);
    report('warm turn, terminal line', terminal);
  } finally {
    runner.kill();
    await stub.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

async function startRunner(dir: string, stubUrl: string): Promise<{ port: number; kill: () => void }> {
  const cwd = path.join(dir, 'workspace');
  const home = path.join(dir, 'home');
  await mkdir(cwd, { recursive: true });
  await mkdir(home, { recursive: true });
  const tsx = pathToFileURL(path.join(ROOT, 'node_modules/tsx/dist/esm/index.mjs')).href;
  const child = spawn(process.execPath, ['--import', tsx, path.join(ROOT, 'runner', 'runner.ts')], {
    cwd,
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: home,
      CLAUDE_CONFIG_DIR: path.join(home, '.claude'),
      ANTHROPIC_BASE_URL: stubUrl,
      ANTHROPIC_API_KEY: 'dummy',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      ...(process.getuid?.() === 0 ? { IS_SANDBOX: '1' } : {}),
      ACIS_RUNNER_LISTEN: '127.0.0.1:0',
      ACIS_RUNNER_TOKEN: TOKEN,
      ACIS_RUNNER_TLS_CA_FILE: path.join(dir, 'ca.crt'),
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  const port = await new Promise<number>((resolve, reject) => {
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
      const listening = /listening on [^\s]+:(\d+)/.exec(stderr);
      if (listening) resolve(Number(listening[1]));
    });
    child.once('exit', (code) => reject(new Error(`the runner exited (${code}): ${stderr}`)));
  });
  return { port, kill: () => child.kill('SIGKILL') };
}

function report(what: string, samples: number[]): void {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!.toFixed(2);
  console.log(`${what}: median ${at(0.5)} ms, p90 ${at(0.9)} ms (${samples.length} samples)`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
