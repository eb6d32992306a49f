import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createEphemeralCa } from '../../egress-proxy/deployment-ca.js';
import { createEgressProxy, type EgressProxy, type RunSecrets } from '../../egress-proxy/egress-proxy.js';

/**
 * Black-box over real sockets: curl (an independent client and TLS stack) and Node clients talk to the proxy,
 * which talks to local echo servers (plain HTTP, and HTTPS with a CA of their own trusted through
 * extraCaPath). The echo servers record what really arrived; their responses reflect it back, which is
 * what masking must catch.
 */

interface Received {
  method: string;
  url: string;
  headers: IncomingMessage['headers'];
  body: Buffer;
}

function echoServer(received: Received[]) {
  return (req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const record = { method: req.method!, url: req.url!, headers: req.headers, body: Buffer.concat(chunks) };
      received.push(record);
      const json = Buffer.from(JSON.stringify({ ...record, body: record.body.toString('utf8') }));
      res.setHeader('content-type', 'application/json');
      if (req.headers.authorization) res.setHeader('x-echo-authorization', req.headers.authorization);
      if (req.headers['x-echo-gzip']) {
        res.setHeader('content-encoding', 'gzip');
        res.end(gzipSync(json));
      } else {
        res.end(json);
      }
    });
  };
}

async function listen(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

const RUN_A = {
  id: 'run_a',
  token: 'tok-a-3f9c',
  /** The API request that started run A: the proxy's lines about its requests carry it. */
  requestId: 'req_run_a_4e1f',
  secrets: new Map([
    ['API_KEY', 'sk-a 9f/8e+7d'],
    ['ONLY_A', 'only-a-value-41'],
  ]),
};
const RUN_B = { id: 'run_b', token: 'tok-b-77d1', secrets: new Map([['API_KEY', 'sk-b-5c5c5c']]) };
const A_KEY = RUN_A.secrets.get('API_KEY')!;
const B_KEY = RUN_B.secrets.get('API_KEY')!;

let dir: string;
let received: Received[];
let httpEcho: Server;
let httpsEcho: Server;
let httpPort: number;
let httpsPort: number;
let proxy: EgressProxy;
let strict: EgressProxy;
let proxyCaFile: string;
let strictCaFile: string;
const missing: Array<[string, string]> = [];
/** What `proxy` logged, as the fields of each line and its message. */
const logged: Array<Record<string, unknown>> = [];
/** Checks waiting for a line; each answers whether it is done. */
const logWaiters = new Set<() => boolean>();
const line = (obj: object, msg: string) => {
  logged.push({ ...obj, msg });
  for (const check of logWaiters) if (check()) logWaiters.delete(check);
};

const runs: Record<string, { token: string; secrets: RunSecrets; requestId?: string }> = {
  [RUN_A.id]: { token: RUN_A.token, secrets: RUN_A.secrets, requestId: RUN_A.requestId },
  [RUN_B.id]: { token: RUN_B.token, secrets: RUN_B.secrets },
};
/** How many more lookups answer before they fail (the API server a standalone proxy asks going down); unset: all do. */
let lookupsLeft: number | undefined;
const resolveRun = ({ runnerId, token }: { runnerId: string; token: string }) => {
  if (lookupsLeft !== undefined && lookupsLeft-- <= 0) throw new Error('the run source is down');
  const run = runs[runnerId];
  return run?.token === token ? { secrets: run.secrets, requestId: run.requestId } : undefined;
};

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'acis-egress-'));
  received = [];
  httpEcho = createServer(echoServer(received));
  const upstreamCa = await createEphemeralCa('echo upstream test CA');
  const leaf = await upstreamCa.issueLeaf('localhost');
  httpsEcho = createHttpsServer({ cert: leaf.certPem, key: leaf.keyPem }, echoServer(received));
  [httpPort, httpsPort] = await Promise.all([listen(httpEcho), listen(httpsEcho)]);
  const extraCa = path.join(dir, 'upstream-ca.pem');
  await writeFile(extraCa, upstreamCa.certPem);

  proxy = await createEgressProxy({
    caDir: path.join(dir, 'egress-ca'),
    allow: `127.0.0.1:${httpPort},localhost:${httpsPort}`,
    extraCaPath: extraCa,
    resolveRun,
    onMissing: (runnerId, alias) => missing.push([runnerId, alias]),
    logger: { debug: line, info: line, warn: line, error: line },
  });
  // No allow entry for the HTTP echo, no extra CA for the HTTPS one, another missing-secret status.
  strict = await createEgressProxy({
    caDir: path.join(dir, 'strict-ca'),
    allow: `localhost:${httpsPort}`,
    resolveRun,
    onMissing: (runnerId, alias) => missing.push([runnerId, alias]),
    missingSecretStatus: 502,
  });
  proxyCaFile = path.join(dir, 'proxy-ca.pem');
  strictCaFile = path.join(dir, 'strict-ca.pem');
  await writeFile(proxyCaFile, proxy.caCertificatePem);
  await writeFile(strictCaFile, strict.caCertificatePem);
});

afterAll(async () => {
  await Promise.all([proxy?.close(), strict?.close()]);
  httpEcho?.close();
  httpsEcho?.close();
  await rm(dir, { recursive: true, force: true });
});

beforeEach(() => {
  received.length = 0;
  missing.length = 0;
  logged.length = 0;
  lookupsLeft = undefined;
});

const withCredentials = (p: EgressProxy, run: { id: string; token: string }) => p.url.replace('http://', `http://${run.id}:${run.token}@`);

interface CurlResult {
  status: number;
  connectStatus: number;
  headers: Record<string, string>;
  body: string;
}

/** curl through a proxy; `-g` so the braces of placeholders are not taken as URL globs. */
async function curl(proxyUrl: string, url: string, args: string[] = [], caFile = proxyCaFile): Promise<CurlResult> {
  const headerFile = path.join(dir, `h-${Math.random().toString(36).slice(2)}`);
  const stdout = await new Promise<string>((resolve, reject) =>
    execFile(
      'curl',
      ['-sS', '-g', '-x', proxyUrl, '--cacert', caFile, '-D', headerFile, '-w', '\n%{http_code} %{http_connect}', url, ...args],
      { encoding: 'utf8' },
      // curl exits non-zero when a CONNECT is refused; the status line still tells what happened.
      (err, out) => (err && !out ? reject(err) : resolve(out)),
    ),
  );
  const cut = stdout.lastIndexOf('\n');
  const [status, connectStatus] = stdout
    .slice(cut + 1)
    .split(' ')
    .map(Number);
  const rawHeaders = await readFile(headerFile, 'utf8').catch(() => '');
  const lastBlock =
    rawHeaders
      .trim()
      .split(/\r\n\r\n/)
      .pop() ?? '';
  const headers: Record<string, string> = {};
  for (const line of lastBlock.split('\r\n').slice(1)) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: status!, connectStatus: connectStatus!, headers, body: stdout.slice(0, cut) };
}

/** A Node client sending an absolute-form request through the proxy, body written in the given pieces. */
async function nodeRequest(
  p: EgressProxy,
  run: { id: string; token: string },
  url: string,
  options: { method?: string; headers?: Record<string, string>; pieces?: Buffer[] } = {},
): Promise<{ status: number; headers: IncomingMessage['headers']; body: Buffer }> {
  const target = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port: p.port,
      method: options.method ?? 'POST',
      path: url,
      headers: {
        host: target.host,
        'proxy-authorization': `Basic ${Buffer.from(`${run.id}:${run.token}`).toString('base64')}`,
        ...options.headers,
      },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks) }));
    });
    for (const piece of options.pieces ?? []) req.write(piece);
    req.end();
  });
}

describe('createEgressProxy: substitution and masking', () => {
  it('HTTP: the upstream gets the value in target, header and body; the client sees placeholders', async () => {
    const res = await curl(withCredentials(proxy, RUN_A), `http://127.0.0.1:${httpPort}/v1/{{secret:API_KEY}}?key={{secret:API_KEY}}`, [
      '-H',
      'Authorization: Bearer {{secret:API_KEY}}',
      '-H',
      'Content-Type: application/json',
      '--data-binary',
      '{"key":"{{secret:API_KEY}}"}',
    ]);
    expect(res.status).toBe(200);

    expect(received).toHaveLength(1);
    const got = received[0]!;
    const encoded = encodeURIComponent(A_KEY);
    expect(got.url).toBe(`/v1/${encoded}?key=${encoded}`);
    expect(got.headers.authorization).toBe(`Bearer ${A_KEY}`);
    expect(got.body.toString()).toBe(`{"key":"${A_KEY}"}`);
    expect(got.headers['content-length']).toBe(String(got.body.length));
    expect(got.headers['proxy-authorization']).toBeUndefined();

    const echoed = JSON.parse(res.body) as { url: string; headers: Record<string, string>; body: string };
    expect(echoed.url).toBe('/v1/{{secret:API_KEY}}?key={{secret:API_KEY}}');
    expect(echoed.headers.authorization).toBe('Bearer {{secret:API_KEY}}');
    expect(echoed.body).toBe('{"key":"{{secret:API_KEY}}"}');
    expect(res.headers['x-echo-authorization']).toBe('Bearer {{secret:API_KEY}}');
    expect(res.body).not.toContain(A_KEY);
    expect(res.body).not.toContain(encoded);
  });

  it('HTTPS: TLS terminated with the deployment CA, upstream verified with the extra CA, Host from the CONNECT target', async () => {
    const res = await curl(withCredentials(proxy, RUN_A), `https://localhost:${httpsPort}/q?key={{secret:API_KEY}}`, [
      '-H',
      'Authorization: token {{secret:API_KEY}}',
      '-H',
      'Host: 169.254.169.254',
      '-H',
      'Content-Type: text/plain',
      '--data-binary',
      'first {{secret:API_KEY}} then {{secret:ONLY_A}}',
    ]);
    expect(res.status).toBe(200);
    expect(res.connectStatus).toBe(200);

    expect(received).toHaveLength(1);
    const got = received[0]!;
    expect(got.headers.host).toBe(`localhost:${httpsPort}`);
    expect(got.url).toBe(`/q?key=${encodeURIComponent(A_KEY)}`);
    expect(got.headers.authorization).toBe(`token ${A_KEY}`);
    expect(got.body.toString()).toBe(`first ${A_KEY} then only-a-value-41`);

    const echoed = JSON.parse(res.body) as { url: string; headers: Record<string, string>; body: string };
    expect(echoed.headers.authorization).toBe('token {{secret:API_KEY}}');
    expect(echoed.body).toBe('first {{secret:API_KEY}} then {{secret:ONLY_A}}');
    expect(res.body).not.toContain('only-a-value-41');
  });

  it('streams a large body: placeholders split across writes are substituted, framing switches to chunked', async () => {
    const line = 'data {{secret:API_KEY}} and {{secret:ONLY_A}};\n';
    const body = Buffer.from(line.repeat(40_000)); // ≈2 MB, over the buffering limit
    // Odd-sized pieces put piece boundaries inside placeholders all along the body.
    const pieces: Buffer[] = [];
    for (let at = 0; at < body.length; at += 997) pieces.push(body.subarray(at, at + 997));
    const res = await nodeRequest(proxy, RUN_A, `http://127.0.0.1:${httpPort}/upload`, {
      headers: { 'content-type': 'text/plain', 'content-length': String(body.length) },
      pieces,
    });
    expect(res.status).toBe(200);

    const got = received[0]!;
    expect(got.headers['transfer-encoding']).toBe('chunked');
    expect(got.body.toString()).toBe(`data ${A_KEY} and only-a-value-41;\n`.repeat(40_000));
    const echoed = JSON.parse(res.body.toString()) as { body: string };
    expect(echoed.body).toBe(line.repeat(40_000));
  });

  it('passes a gzip request body untouched: its placeholder reaches the upstream unsubstituted', async () => {
    const compressed = gzipSync('{"key":"{{secret:API_KEY}}"}');
    const res = await nodeRequest(proxy, RUN_A, `http://127.0.0.1:${httpPort}/gz`, {
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip', 'content-length': String(compressed.length) },
      pieces: [compressed],
    });
    expect(res.status).toBe(200);
    expect(received[0]!.body.equals(compressed)).toBe(true);
    expect(gunzipSync(received[0]!.body).toString()).toBe('{"key":"{{secret:API_KEY}}"}');
  });

  it('decodes a gzip response to mask it, and sends it on without the encoding', async () => {
    const res = await curl(withCredentials(proxy, RUN_A), `http://127.0.0.1:${httpPort}/gzipped`, [
      '--compressed',
      '-H',
      'X-Echo-Gzip: 1',
      '-H',
      'Authorization: {{secret:API_KEY}}',
    ]);
    expect(res.status).toBe(200);
    expect(received[0]!.headers.authorization).toBe(A_KEY);
    // curl asked for zstd too; the proxy only offers codings it can decode.
    expect(received[0]!.headers['accept-encoding']).not.toMatch(/zstd/);
    expect(res.headers['content-encoding']).toBeUndefined();
    expect(JSON.parse(res.body).headers.authorization).toBe('{{secret:API_KEY}}');
  });
});

describe('createEgressProxy: run credentials', () => {
  it('answers 407 and forwards nothing without valid run credentials', async () => {
    const none = await curl(proxy.url, `http://127.0.0.1:${httpPort}/x`);
    expect(none.status).toBe(407);
    expect(none.headers['proxy-authenticate']).toBe('Basic realm="acis-egress"');
    const wrong = await curl(withCredentials(proxy, { id: RUN_A.id, token: RUN_B.token }), `http://127.0.0.1:${httpPort}/x`);
    expect(wrong.status).toBe(407);
    const tunnel = await curl(proxy.url, `https://localhost:${httpsPort}/x`);
    expect(tunnel.connectStatus).toBe(407);
    expect(received).toHaveLength(0);
  });

  it('answers 503 lookup-failed and forwards nothing when the run cannot be looked up: plain, CONNECT, and inside an open tunnel', async () => {
    lookupsLeft = 0;
    const plain = await curl(withCredentials(proxy, RUN_A), `http://127.0.0.1:${httpPort}/down`, ['-H', 'X-Key: {{secret:API_KEY}}']);
    expect(plain.status).toBe(503);
    expect(plain.headers['x-acis-egress-error']).toBe('lookup-failed');
    const connect = await curl(withCredentials(proxy, RUN_A), `https://localhost:${httpsPort}/down`);
    expect(connect.connectStatus).toBe(503);
    // The CONNECT and the tunnel's first request are looked up; the second request on it is not.
    lookupsLeft = 2;
    const tunnel = await curl(withCredentials(proxy, RUN_A), `https://localhost:${httpsPort}/first`, [
      `https://localhost:${httpsPort}/second`,
      '-H',
      'X-Key: {{secret:API_KEY}}',
    ]);
    expect(tunnel.status).toBe(503);
    expect(tunnel.headers['x-acis-egress-error']).toBe('lookup-failed');
    expect(received.map((r) => r.url)).toEqual(['/first']);
    expect(missing).toEqual([]);
  });

  it("never substitutes or masks another run's values", async () => {
    const res = await curl(withCredentials(proxy, RUN_B), `http://127.0.0.1:${httpPort}/b`, [
      '-H',
      'Authorization: {{secret:API_KEY}}',
      '--data-binary',
      `literal ${A_KEY}`,
    ]);
    expect(res.status).toBe(200);
    expect(received[0]!.headers.authorization).toBe(B_KEY);
    // Run A's value is plain text to run B: nothing to substitute, nothing of B's to mask.
    expect(JSON.parse(res.body).body).toBe(`literal ${A_KEY}`);
    expect(res.headers['x-echo-authorization']).toBe('{{secret:API_KEY}}');

    const other = await curl(withCredentials(proxy, RUN_B), `https://localhost:${httpsPort}/b`, ['-H', 'X-Key: {{secret:ONLY_A}}']);
    expect(other.status).toBe(422);
    expect(missing).toEqual([[RUN_B.id, 'ONLY_A']]);
    expect(received).toHaveLength(1);
  });
});

describe('createEgressProxy: missing secrets', () => {
  it('refuses a placeholder without a secret before anything is sent, and reports it', async () => {
    const res = await curl(withCredentials(proxy, RUN_A), `http://127.0.0.1:${httpPort}/m`, ['-H', 'X-Key: {{secret:NOT_VAULTED}}']);
    expect(res.status).toBe(422);
    expect(res.headers['x-acis-egress-error']).toBe('missing-secret');
    expect(res.body).toContain('{{secret:NOT_VAULTED}}');
    const inTarget = await curl(withCredentials(proxy, RUN_A), `https://localhost:${httpsPort}/m?k={{secret:NOT_VAULTED}}`);
    expect(inTarget.status).toBe(422);
    expect(missing).toEqual([
      [RUN_A.id, 'NOT_VAULTED'],
      [RUN_A.id, 'NOT_VAULTED'],
    ]);
    expect(received).toHaveLength(0);
  });

  it('aborts a large streamed body at the placeholder, so the upstream never gets a complete request', async () => {
    const body = Buffer.from(`${'x'.repeat(1_500_000)} {{secret:NOT_VAULTED}}`);
    const res = await nodeRequest(proxy, RUN_A, `http://127.0.0.1:${httpPort}/big`, {
      headers: { 'content-type': 'text/plain', 'content-length': String(body.length) },
      pieces: [body],
    });
    expect(res.status).toBe(422);
    expect(missing).toEqual([[RUN_A.id, 'NOT_VAULTED']]);
    expect(received).toHaveLength(0);
  });

  it('answers the configured status', async () => {
    const res = await curl(withCredentials(strict, RUN_A), `https://localhost:${httpsPort}/m`, ['-H', 'X: {{secret:NOPE}}'], strictCaFile);
    expect(res.status).toBe(502);
    expect(res.headers['x-acis-egress-error']).toBe('missing-secret');
    expect(missing).toEqual([[RUN_A.id, 'NOPE']]);
  });
});

describe('createEgressProxy: destination policy', () => {
  it('refuses loopback destinations the allow list does not name', async () => {
    const creds = withCredentials(proxy, RUN_A);
    for (const url of [
      `http://127.0.0.1:${httpsPort}/`,
      `http://localhost:${httpPort}/`,
      `http://[::1]:${httpPort}/`,
      `http://0x7f.1:${httpsPort}/`,
    ]) {
      const res = await curl(creds, url);
      expect(res.status, url).toBe(403);
      expect(res.headers['x-acis-egress-error']).toBe('destination-refused');
      expect(res.body).toMatch(/loopback/);
    }
    expect((await curl(withCredentials(strict, RUN_A), `http://127.0.0.1:${httpPort}/`, [], strictCaFile)).status).toBe(403);
    expect((await curl(creds, `https://127.0.0.1:${httpsPort}/`)).connectStatus).toBe(403);
    expect(received).toHaveLength(0);
  });

  it('refuses cloud metadata endpoints, by address and by name', async () => {
    const creds = withCredentials(proxy, RUN_A);
    const plain = await curl(creds, 'http://169.254.169.254/latest/meta-data/');
    expect(plain.status).toBe(403);
    expect(plain.body).toMatch(/cloud-metadata/);
    expect((await curl(creds, 'https://169.254.169.254/')).connectStatus).toBe(403);
    expect((await curl(creds, 'http://metadata.google.internal/computeMetadata/v1/')).status).toBe(403);
    expect((await curl(creds, 'http://[fd00:ec2::254]/')).status).toBe(403);
  });

  it('verifies upstream TLS: without the extra CA the echo server is not trusted', async () => {
    const res = await curl(withCredentials(strict, RUN_A), `https://localhost:${httpsPort}/`, [], strictCaFile);
    expect(res.status).toBe(502);
    expect(res.headers['x-acis-egress-error']).toBe('upstream-certificate');
    expect(received).toHaveLength(0);
  });
});

describe('createEgressProxy: log lines', () => {
  /** Resolves with the first line logged (now or later) that `predicate` accepts. */
  const untilLogged = (predicate: (entry: Record<string, unknown>) => boolean) =>
    new Promise<Record<string, unknown>>((resolve) => {
      const check = () => {
        const found = logged.find(predicate);
        if (!found) return false;
        resolve(found);
        return true;
      };
      if (!check()) logWaiters.add(check);
    });

  it("name the runner and the API request of its run on every request, HTTP and HTTPS, forwarded or refused; a runner's own X-Request-Id changes nothing", async () => {
    const forged = { 'x-request-id': 'req_forged_by_the_agent' };
    const plain = await nodeRequest(proxy, RUN_A, `http://127.0.0.1:${httpPort}/plain`, { method: 'GET', headers: forged });
    expect(plain.status).toBe(200);
    const tls = await curl(withCredentials(proxy, RUN_A), `https://localhost:${httpsPort}/tls`, [
      '-H',
      'X-Request-Id: req_forged_by_the_agent',
    ]);
    expect(tls.status).toBe(200);
    const refused = await curl(withCredentials(proxy, RUN_A), 'http://169.254.169.254/latest/meta-data/');
    expect(refused.status).toBe(403);

    const ofRunA = { runner_id: RUN_A.id, request_id: RUN_A.requestId };
    expect(await untilLogged((e) => e.msg === 'egress request' && e.destination === `127.0.0.1:${httpPort}`)).toMatchObject({
      ...ofRunA,
      method: 'GET',
      status: 200,
    });
    expect(await untilLogged((e) => e.msg === 'egress request' && e.destination === `localhost:${httpsPort}`)).toMatchObject(ofRunA);
    expect(await untilLogged((e) => e.msg === 'egress destination refused')).toMatchObject({
      ...ofRunA,
      destination: '169.254.169.254:80',
    });
    expect(JSON.stringify(logged)).not.toContain('forged');
    // What the run asked for is forwarded untouched: the header is the runner's business, not the proxy's.
    expect(received.map((r) => r.headers['x-request-id'])).toEqual(['req_forged_by_the_agent', 'req_forged_by_the_agent']);
  });

  it('leave the request id out when the run source names none (a runs file)', async () => {
    expect((await nodeRequest(proxy, RUN_B, `http://127.0.0.1:${httpPort}/b`, { method: 'GET' })).status).toBe(200);
    const entry = await untilLogged((e) => e.msg === 'egress request' && e.runner_id === RUN_B.id);
    expect(entry).not.toHaveProperty('request_id');
  });
});

describe('createEgressProxy: deployment CA', () => {
  it('is persisted on first start and reused by the next', async () => {
    const again = await createEgressProxy({ caDir: path.join(dir, 'egress-ca'), resolveRun, onMissing: () => {} });
    try {
      expect(again.caCertificatePem).toBe(proxy.caCertificatePem);
    } finally {
      await again.close();
    }
    expect((await stat(path.join(dir, 'egress-ca', 'ca.key'))).mode & 0o777).toBe(0o600);
    expect((await stat(path.join(dir, 'egress-ca'))).mode & 0o777).toBe(0o700);
    expect(strict.caCertificatePem).not.toBe(proxy.caCertificatePem);
  });
});
