/**
 * The link plane of `npm run bench`: what the runner link over TLS costs, against floors taken in the
 * same run, interleaved sample by sample.
 *
 * - A connection's handshake (TLS 1.3 with the API server's client certificate, then hello and welcome
 *   with their proofs, until the link is up), from the API side's client to the real runner in TLS mode,
 *   against a bare TLS 1.3 handshake with a client certificate (both ends in this process) and a bare
 *   TCP connect on loopback.
 * - A warm turn's first agent line and terminal line over the link, against the same turn on the same
 *   runner over stdio (what the local provider does: no link).
 *
 * Both runners run from source, unsandboxed, with the real SDK against the model stub, on loopback.
 * Environment: BENCH_HANDSHAKES (default 50), BENCH_TURNS (default 15).
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { pathToFileURL } from 'node:url';
import { pino } from 'pino';
import { LocalRunner } from '../../api-server/sandboxes/local/runner.js';
import { connectRemoteRunner } from '../../api-server/sandboxes/remote-runner.js';
import type { Runner } from '../../api-server/sandboxes/runner.js';
import { createEphemeralCa } from '../../egress-proxy/deployment-ca.js';
import { openLinkClient } from '../../runner/link-client.js';
import { API_SERVER_NAME, ephemeralCertificate } from '../../runner/link-tls.js';
import { startModelStub } from '../model-stub/model-stub.js';
import { envCount } from './env.js';
import type { PlaneContext, PlaneResult } from './plane.js';
import { percentile } from './stats.js';

const log = (line: string) => console.error(`bench: link: ${line}`);
const TOKEN = 'bench-runner-token-0123456789';
const median = (values: number[]) => percentile(values, 0.5)!;
const p90 = (values: number[]) => percentile(values, 0.9)!;

interface Credentials {
  caPem: string;
  client: { cert: string; key: string };
}

export async function runLinkPlane(ctx: PlaneContext): Promise<PlaneResult> {
  const handshakes = envCount('BENCH_HANDSHAKES', 50);
  const turns = envCount('BENCH_TURNS', 15);
  const stub = await startModelStub();
  ctx.defer(() => stub.stop());
  const dir = await mkdtemp(path.join(tmpdir(), 'acis-bench-link-'));
  ctx.defer(() => rm(dir, { recursive: true, force: true }));
  const ca = await createEphemeralCa('bench deployment CA');
  const leaf = await ca.issueIdentity({ commonName: API_SERVER_NAME, usages: ['client'], validityMs: 3_600_000 });
  const credentials: Credentials = { caPem: ca.certPem, client: { cert: leaf.certPem, key: leaf.keyPem } };
  await writeFile(path.join(dir, 'ca.crt'), ca.certPem);

  const listening = await startTlsRunner(ctx.root, dir, stub.url);
  ctx.defer(async () => listening.kill());
  const connect = {
    host: '127.0.0.1',
    port: listening.port,
    token: TOKEN,
    clientCertificate: () => credentials.client,
    reconnectSeconds: 5,
  };
  const floors = await startFloorServers(credentials);
  ctx.defer(() => floors.close());

  log(`${handshakes} handshakes, each beside a bare TLS handshake and a TCP connect`);
  const handshake = { link: [] as number[], tls: [] as number[], tcp: [] as number[] };
  for (let i = 0; i < handshakes && !ctx.interrupted(); i++) {
    handshake.tcp.push(await timed(() => tcpConnect(floors.tcpPort)));
    handshake.tls.push(await bareTlsHandshake(floors, credentials));
    handshake.link.push(await linkHandshake(connect));
  }

  log(`${turns} warm turns each over the link and over stdio, interleaved`);
  const logger = pino({ level: 'silent' });
  const overLink = await connectRemoteRunner({ id: 'bench-link', ...connect, logger });
  ctx.defer(() => overLink.kill());
  const overStdio = await startStdioRunner(ctx.root, dir, stub.url);
  ctx.defer(() => overStdio.kill());
  // The first turn on each starts its session: not a warm turn.
  await turnTimes(overLink, 0);
  await turnTimes(overStdio, 0);
  const link = { first: [] as number[], terminal: [] as number[] };
  const stdio = { first: [] as number[], terminal: [] as number[] };
  for (let i = 1; i <= turns && !ctx.interrupted(); i++) {
    // Which goes first alternates, so neither always runs right after the other's turn.
    const pairs = [
      { runner: overLink, into: link },
      { runner: overStdio, into: stdio },
    ];
    for (const { runner, into } of i % 2 ? pairs : pairs.reverse()) {
      const times = await turnTimes(runner, i);
      into.first.push(times.first);
      into.terminal.push(times.terminal);
    }
  }
  return { markdown: render(handshake, link, stdio), failures: [], files: [] };
}

function render(
  handshake: { link: number[]; tls: number[]; tcp: number[] },
  link: { first: number[]; terminal: number[] },
  stdio: { first: number[]; terminal: number[] },
): string {
  const ms = (values: number[]) => `${median(values).toFixed(2)} / ${p90(values).toFixed(2)} ms`;
  const signed = (value: number) => `${value < 0 ? '−' : '+'}${Math.abs(value).toFixed(2)} ms`;
  const times = (value: number, of: number) => `${(value / of).toFixed(2)} ×`;
  const row = (what: string, values: number[], floor: number[]) =>
    `| ${what} | ${ms(values)} | ${ms(floor)} | ${signed(median(values) - median(floor))} (${times(median(values), median(floor))}) |`;
  return [
    '### Link plane',
    '',
    `The runner link over TLS on loopback, the real runner from source with the real SDK against the model stub, median / p90 of ${handshake.link.length} handshakes and ${link.first.length} warm turns, each interleaved with its floor:`,
    '',
    '| measured | figure | floor | above the floor |',
    '|---|--:|--:|--:|',
    row('handshake, connect to link up, against a bare TLS 1.3 handshake with a client certificate', handshake.link, handshake.tls),
    row('handshake, connect to link up, against a bare TCP connect', handshake.link, handshake.tcp),
    row('bare TLS 1.3 handshake against a bare TCP connect', handshake.tls, handshake.tcp),
    row('warm turn, first agent line, against the same turn over stdio', link.first, stdio.first),
    row('warm turn, terminal line, against the same turn over stdio', link.terminal, stdio.terminal),
    '',
  ].join('\n');
}

async function timed(work: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await work();
  return performance.now() - started;
}

async function linkHandshake(connect: Parameters<typeof openLinkClient>[0]): Promise<number> {
  const started = performance.now();
  const link = await openLinkClient(connect);
  const elapsed = performance.now() - started;
  const gone = new Promise((resolve) => link.onClosed(resolve));
  link.end('bench: next connection');
  await gone;
  // The runner lets the next client in once it saw this one leave.
  await new Promise((resolve) => setTimeout(resolve, 20));
  return elapsed;
}

async function turnTimes(runner: Runner, i: number): Promise<{ first: number; terminal: number }> {
  const started = performance.now();
  let firstAt: number | undefined;
  const outcome = await runner.runTurn({ content: `turn ${i} [[reply: ok]]` }, () => {
    firstAt ??= performance.now();
  });
  if (outcome.kind === 'crashed') throw new Error(`turn ${i} crashed: ${outcome.error}`);
  if (firstAt === undefined) throw new Error(`turn ${i} ended without an agent line`);
  return { first: firstAt - started, terminal: performance.now() - started };
}

/**
 * The floors' two listeners in this process: TCP that only accepts, TLS 1.3 asking for a client
 * certificate of the CA. `accepted` settles at the TLS server's next verified connection: the bare
 * handshake is timed until both ends are done, as the link's is (the runner checks the certificate
 * before it reads a hello).
 */
async function startFloorServers(
  credentials: Credentials,
): Promise<{ tcpPort: number; tlsPort: number; accepted: () => Promise<void>; close: () => Promise<void> }> {
  const tcp = net.createServer((socket) => socket.on('error', () => undefined));
  const secure = tls.createServer({
    ...ephemeralCertificate('bench-floor'),
    ca: credentials.caPem,
    requestCert: true,
    rejectUnauthorized: true,
    minVersion: 'TLSv1.3',
  });
  secure.on('tlsClientError', () => undefined);
  const listen = (server: net.Server) =>
    new Promise<number>((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as net.AddressInfo).port)));
  const close = (server: net.Server) => new Promise<void>((resolve) => server.close(() => resolve()));
  return {
    tcpPort: await listen(tcp),
    tlsPort: await listen(secure),
    accepted: () =>
      new Promise((resolve) =>
        secure.once('secureConnection', (socket) => {
          socket.on('error', () => undefined);
          resolve();
        }),
      ),
    close: async () => {
      await Promise.all([close(tcp), close(secure)]);
    },
  };
}

function tcpConnect(port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      socket.destroy();
      resolve();
    });
    socket.once('error', reject);
  });
}

/** A bare TLS handshake with the API server's client certificate, timed until both ends are done. */
async function bareTlsHandshake(floors: { tlsPort: number; accepted: () => Promise<void> }, credentials: Credentials): Promise<number> {
  const started = performance.now();
  const [, socket] = await Promise.all([floors.accepted(), tlsConnect(floors.tlsPort, credentials)]);
  const elapsed = performance.now() - started;
  socket.destroy();
  return elapsed;
}

function tlsConnect(port: number, credentials: Credentials): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, ...credentials.client, rejectUnauthorized: false, minVersion: 'TLSv1.3' }, () =>
      resolve(socket),
    );
    socket.once('error', reject);
  });
}

/** The runner's command (from source) and the environment both runners share; each gets its own workspace and home. */
async function runnerSetup(root: string, dir: string, name: string, stubUrl: string) {
  const cwd = path.join(dir, name, 'workspace');
  const home = path.join(dir, name, 'home');
  await mkdir(cwd, { recursive: true });
  await mkdir(home, { recursive: true });
  const tsx = pathToFileURL(path.join(root, 'node_modules/tsx/dist/esm/index.mjs')).href;
  return {
    file: process.execPath,
    args: ['--import', tsx, path.join(root, 'runner', 'runner.ts')],
    cwd,
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: home,
      CLAUDE_CONFIG_DIR: path.join(home, '.claude'),
      ANTHROPIC_BASE_URL: stubUrl,
      ANTHROPIC_API_KEY: 'dummy',
      CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
      ...(process.getuid?.() === 0 ? { IS_SANDBOX: '1' } : {}),
    } as Record<string, string>,
  };
}

async function startStdioRunner(root: string, dir: string, stubUrl: string): Promise<Runner> {
  const runner = new LocalRunner('bench-stdio', await runnerSetup(root, dir, 'stdio', stubUrl), pino({ level: 'silent' }));
  await runner.ready;
  return runner;
}

async function startTlsRunner(root: string, dir: string, stubUrl: string): Promise<{ port: number; kill: () => void }> {
  const command = await runnerSetup(root, dir, 'link', stubUrl);
  const child = spawn(command.file, command.args, {
    cwd: command.cwd,
    env: {
      ...command.env,
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
