/**
 * `tsx hack/bench/egress.ts`: what the egress proxy costs a small request.
 *
 * Starts a local HTTP and HTTPS echo server (own throwaway CA) in this process and the proxy twice as its
 * own process through its CLI entry (egress-proxy/main.ts): once with runs from a temporary runs file (the
 * floor of the proxy itself), once resolving every request at a resolve listener (the API server's, here
 * in this process answering from memory, as the replica hosting a run does: the cost of asking on every
 * request rather than caching). Then measures the same small request (a header and a JSON body carrying a
 * secret: through the proxy as placeholders, directly as the value) directly and through each proxy:
 * sequential latency (p50/p99) and closed-loop throughput.
 * Connections are kept alive on every path, as a runner's client would. Prints a Markdown table.
 *
 * Environment: BENCH_REQUESTS (sequential requests per row, default 2000), BENCH_DURATION_S (throughput
 * seconds per row, default 5), BENCH_CONCURRENCY (requests in flight, default 32). Traffic stays on 127.0.0.1.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { Agent as HttpAgent, createServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { Agent as HttpsAgent, createServer as createHttpsServer, request as httpsRequest, type RequestOptions } from 'node:https';
import { connect, type AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { Duplex } from 'node:stream';
import { connect as tlsConnect } from 'node:tls';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { startEgressResolveServer } from '../../api-server/egress/resolve-server.js';
import { startApiIdentity } from '../../api-server/internal-tls/api-identity.js';
import { createEphemeralCa, loadOrCreateDeploymentCa } from '../../egress-proxy/deployment-ca.js';
import { envCount, envNumber } from './env.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const REQUESTS = envCount('BENCH_REQUESTS', 2000);
const DURATION_MS = envNumber('BENCH_DURATION_S', 5, 0.1) * 1000;
const CONCURRENCY = envCount('BENCH_CONCURRENCY', 32);
const RUN = { id: 'run_bench', token: 'tok-bench-1', secrets: { API_KEY: 'sk-bench-0123456789abcdef' } };
const RESOLVE_TOKEN = 'bench-resolve-token-0123456789abcdef';

/** Small echo: reflects the authorization header and body, as a chatty API would. */
function echo(req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    res.setHeader('content-type', 'application/json');
    res.end(JSON.stringify({ auth: req.headers.authorization, body: Buffer.concat(chunks).toString() }));
  });
}

/** An https.Agent that reaches its hosts through CONNECT tunnels of the proxy (Node 20 has no proxy support). */
class TunnelAgent extends HttpsAgent {
  constructor(
    private readonly proxyPort: number,
    private readonly authorization: string,
    private readonly proxyCa: string,
  ) {
    super({ keepAlive: true });
  }

  override createConnection(options: RequestOptions, callback?: (err: Error | null, stream: Duplex) => void): undefined {
    const done = callback!; // Node's agent always passes one
    const raw = connect(this.proxyPort, '127.0.0.1');
    const authority = `${options.host}:${options.port}`;
    raw.once('error', (err) => done(err, raw));
    raw.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\nProxy-Authorization: ${this.authorization}\r\n\r\n`);
    let head = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf('\r\n\r\n');
      if (end === -1) return;
      raw.off('data', onData);
      if (!head.subarray(0, end).toString().startsWith('HTTP/1.1 200')) {
        raw.destroy();
        return done(new Error(`CONNECT refused: ${head.subarray(0, end).toString().split('\r\n')[0]}`), raw);
      }
      const tls = tlsConnect({ socket: raw, servername: options.servername ?? options.host ?? 'localhost', ca: this.proxyCa });
      tls.once('secureConnect', () => done(null, tls));
      tls.once('error', (err) => done(err, tls));
    };
    raw.on('data', onData);
    return undefined;
  }
}

interface Target {
  name: string;
  send(): Promise<void>;
}

function target(
  name: string,
  request: typeof httpRequest,
  base: { host: string; port: number; path: string; agent: HttpAgent },
  headers: Record<string, string>,
  body: string,
): Target {
  const payload = Buffer.from(body);
  return {
    name,
    send: () =>
      new Promise<void>((resolve, reject) => {
        const req = request({
          ...base,
          method: 'POST',
          headers: { ...headers, 'content-type': 'application/json', 'content-length': String(payload.length) },
        });
        req.once('error', reject);
        req.once('response', (res) => {
          res.resume();
          res.once('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`${name}: status ${res.statusCode}`))));
        });
        req.end(payload);
      }),
  };
}

async function latency(t: Target): Promise<{ p50: number; p99: number }> {
  for (let i = 0; i < Math.min(200, REQUESTS); i++) await t.send(); // warm connections, JIT and leaf cache
  const samples: number[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    const start = performance.now();
    await t.send();
    samples.push(performance.now() - start);
  }
  samples.sort((a, b) => a - b);
  const at = (q: number) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))]!;
  return { p50: at(0.5), p99: at(0.99) };
}

async function throughput(t: Target): Promise<number> {
  const deadline = performance.now() + DURATION_MS;
  let done = 0;
  const loop = async () => {
    while (performance.now() < deadline) {
      await t.send();
      done++;
    }
  };
  const start = performance.now();
  await Promise.all(Array.from({ length: CONCURRENCY }, loop));
  return done / ((performance.now() - start) / 1000);
}

/** Starts the proxy's CLI entry and reads its URL from the startup log line. */
async function startProxy(env: NodeJS.ProcessEnv): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'egress-proxy/main.ts')], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    let out = '';
    child.once('exit', (code) => reject(new Error(`egress proxy exited with ${code}`)));
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /"url":"http:\/\/127\.0\.0\.1:(\d+)"/.exec(out);
      if (match) resolve(Number(match[1]));
    });
  });
  child.stdout!.resume();
  return { child, port };
}

async function main(): Promise<void> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'acis-egress-bench-'));
  const upstreamCa = await createEphemeralCa('bench upstream CA');
  const leaf = await upstreamCa.issueLeaf('localhost');
  const httpEcho = createServer({ keepAliveTimeout: 60_000 }, echo);
  const httpsEcho = createHttpsServer({ cert: leaf.certPem, key: leaf.keyPem, keepAliveTimeout: 60_000 }, echo);
  await Promise.all([httpEcho, httpsEcho].map((s) => new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve))));
  const httpPort = (httpEcho.address() as AddressInfo).port;
  const httpsPort = (httpsEcho.address() as AddressInfo).port;
  await writeFile(path.join(dir, 'upstream-ca.pem'), upstreamCa.certPem);
  await writeFile(path.join(dir, 'runs.json'), JSON.stringify({ [RUN.id]: { token: RUN.token, secrets: RUN.secrets } }), { mode: 0o600 });

  const common = {
    ACIS_EGRESS_PORT: '0',
    ACIS_EGRESS_ALLOW: `127.0.0.1:${httpPort},localhost:${httpsPort}`,
    ACIS_EGRESS_EXTRA_CA: path.join(dir, 'upstream-ca.pem'),
    LOG_LEVEL: 'info',
  };
  const fileProxy = await startProxy({ ...common, ACIS_DATA_DIR: dir, ACIS_EGRESS_RUNS_FILE: path.join(dir, 'runs.json') });
  const runSecrets = new Map(Object.entries(RUN.secrets));
  // The listener's certificate comes from the proxies' CA, as the API server's does in a deployment.
  const identity = await startApiIdentity(
    await loadOrCreateDeploymentCa(path.join(dir, 'egress-ca')),
    ['localhost'],
    pino({ level: 'silent' }),
  );
  const resolveListener = await startEgressResolveServer({
    host: '127.0.0.1',
    port: 0,
    token: RESOLVE_TOKEN,
    identity,
    resolve: async (runnerId, token) => (runnerId === RUN.id && token === RUN.token ? { secrets: runSecrets } : undefined),
    standsForRun: async (runnerId, token) => runnerId === RUN.id && token === RUN.token,
    abortMissing: async () => {},
    logger: pino({ level: 'silent' }),
  });
  // The same CA directory: both proxies present leaves of the one CA, as replicas do.
  const resolvingProxy = await startProxy({
    ...common,
    ACIS_DATA_DIR: dir,
    ACIS_EGRESS_RESOLVE_URL: `https://localhost:${resolveListener.port}`,
    ACIS_EGRESS_RESOLVE_TOKEN: RESOLVE_TOKEN,
  });
  try {
    const proxyCa = await readFile(path.join(dir, 'egress-ca', 'ca.crt'), 'utf8');
    const authorization = `Basic ${Buffer.from(`${RUN.id}:${RUN.token}`).toString('base64')}`;
    const value = RUN.secrets.API_KEY;
    const direct = { authorization: `Bearer ${value}` };
    const viaProxy = { authorization: 'Bearer {{secret:API_KEY}}' };
    const directBody = JSON.stringify({ key: value, note: 'small request' });
    const proxyBody = JSON.stringify({ key: '{{secret:API_KEY}}', note: 'small request' });
    const httpsCaAgent = new HttpsAgent({ keepAlive: true, ca: upstreamCa.certPem });

    const viaHttp = (proxyPort: number) =>
      target(
        'proxy',
        httpRequest,
        { host: '127.0.0.1', port: proxyPort, path: `http://127.0.0.1:${httpPort}/echo`, agent: new HttpAgent({ keepAlive: true }) },
        { ...viaProxy, 'proxy-authorization': authorization },
        proxyBody,
      );
    const viaHttps = (proxyPort: number) =>
      target(
        'proxy',
        httpsRequest,
        { host: 'localhost', port: httpsPort, path: '/echo', agent: new TunnelAgent(proxyPort, authorization, proxyCa) },
        viaProxy,
        proxyBody,
      );
    const paths: Array<[string, Target, Array<[string, Target]>]> = [
      [
        'HTTP',
        target(
          'direct',
          httpRequest,
          { host: '127.0.0.1', port: httpPort, path: '/echo', agent: new HttpAgent({ keepAlive: true }) },
          direct,
          directBody,
        ),
        [
          ['via proxy (runs file)', viaHttp(fileProxy.port)],
          ['via proxy (resolve listener)', viaHttp(resolvingProxy.port)],
        ],
      ],
      [
        'HTTPS',
        target('direct', httpsRequest, { host: 'localhost', port: httpsPort, path: '/echo', agent: httpsCaAgent }, direct, directBody),
        [
          ['via proxy (runs file)', viaHttps(fileProxy.port)],
          ['via proxy (resolve listener)', viaHttps(resolvingProxy.port)],
        ],
      ],
    ];

    const rows: string[] = [];
    for (const [scheme, directTarget, proxied] of paths) {
      const d = { ...(await latency(directTarget)), rps: await throughput(directTarget) };
      const ms = (v: number) => v.toFixed(3);
      rows.push(`| ${scheme} | direct | ${ms(d.p50)} | ${ms(d.p99)} | ${Math.round(d.rps)} | | | |`);
      for (const [label, proxyTarget] of proxied) {
        const p = { ...(await latency(proxyTarget)), rps: await throughput(proxyTarget) };
        rows.push(
          `| ${scheme} | ${label} | ${ms(p.p50)} | ${ms(p.p99)} | ${Math.round(p.rps)} | ${(p.p50 / d.p50).toFixed(2)}× | ${(p.p99 / d.p99).toFixed(2)}× | ${(p.rps / d.rps).toFixed(2)}× |`,
        );
      }
    }
    console.log(
      [
        `Egress proxy micro-benchmark (${new Date().toISOString()}, Node ${process.version}, ${os.cpus().length} CPUs ${os.cpus()[0]?.model ?? ''})`,
        `Small POST (JSON body and Authorization header carrying one secret), keep-alive; latency over ${REQUESTS} sequential requests, throughput with ${CONCURRENCY} in flight for ${DURATION_MS / 1000} s. Proxies in processes of their own; client, echo servers and the resolve listener share this one. Load average at start: ${os
          .loadavg()
          .map((l) => l.toFixed(2))
          .join(' ')}.`,
        '',
        '| scheme | path | p50 ms | p99 ms | req/s | p50 ratio | p99 ratio | req/s ratio |',
        '|---|---|---:|---:|---:|---:|---:|---:|',
        ...rows,
      ].join('\n'),
    );
  } finally {
    fileProxy.child.kill('SIGTERM');
    resolvingProxy.child.kill('SIGTERM');
    await resolveListener.close();
    identity.stop();
    httpEcho.closeAllConnections();
    httpsEcho.closeAllConnections();
    httpEcho.close();
    httpsEcho.close();
    await rm(dir, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(1);
  },
);
