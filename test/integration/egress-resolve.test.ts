/**
 * The egress resolve protocol's two ends without a cluster: the API server's listener
 * (startEgressResolveServer, over HTTPS with the API server's certificate of a deployment CA) with its
 * lookups given as plain functions, the standalone proxy's client of it (createApiRunResolver, with the
 * proxy's certificate of the same CA), the proxy's configuration (loadEgressConfig) and the API
 * server's (loadConfig) of it, and the token setting.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { request as httpRequest } from 'node:http';
import { Agent, request } from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../api-server/config.js';
import { type ApiIdentity, startApiIdentity } from '../../api-server/internal-tls/api-identity.js';
import { createEphemeralCa, type DeploymentCa } from '../../egress-proxy/deployment-ca.js';
import { type EgressResolveServer, startEgressResolveServer } from '../../api-server/egress/resolve-server.js';
import { loadEgressConfig } from '../../egress-proxy/egress-config.js';
import { createApiRunResolver, RunLookupError } from '../../egress-proxy/resolve-client.js';
import { EGRESS_PROXY_NAME, MISSING_PATH, readResolveToken, RESOLVE_PATH } from '../../egress-proxy/resolve-protocol.js';
import { API_SERVER_NAME } from '../../runner/link-tls.js';

const TOKEN = 'resolve-token-0123456789-0123456789-abc';
const CANARY = 'canary-value-5f1c2a9e';
/** The API request that started the busy runner's run. */
const REQUEST_ID = 'req_busy_run_01';
/** runner id → [its egress token, its run]: a runner with a run in progress. */
const RUNNERS = new Map([
  ['acis-runner-busy', ['egress-token-busy', { secrets: new Map([['CANARY', CANARY]]), requestId: REQUEST_ID }] as const],
]);

let server: EgressResolveServer;
let url: string;
let ca: DeploymentCa;
let identity: ApiIdentity;
/** The standalone proxy's TLS: its certificate of the deployment CA, and that CA to trust. */
let proxyTls: { ca: string; cert: string; key: string };
let proxyAgent: Agent;
const logs: string[] = [];
const aborted: Array<[string, string]> = [];

beforeAll(async () => {
  const sink = new Writable({
    write(chunk, _encoding, done) {
      logs.push(String(chunk));
      done();
    },
  });
  const credentialOk = (runnerId: string, token: string) => RUNNERS.get(runnerId)?.[0] === token;
  ca = await createEphemeralCa('resolve test CA');
  // The listener's certificate names the host the proxy dials (the resolve Service's names, in a cluster).
  identity = await startApiIdentity(ca, ['localhost'], pino({ level: 'silent' }));
  proxyTls = await clientTls(ca, EGRESS_PROXY_NAME);
  proxyAgent = new Agent({ ...proxyTls, keepAlive: false });
  server = await startEgressResolveServer({
    host: '127.0.0.1',
    port: 0,
    token: TOKEN,
    identity,
    resolve: async (runnerId, token) => (credentialOk(runnerId, token) ? RUNNERS.get(runnerId)![1] : undefined),
    standsForRun: async (runnerId, token) => credentialOk(runnerId, token),
    abortMissing: async (runnerId, alias) => void aborted.push([runnerId, alias]),
    // Generous for the other tests; the flood below uses a runner id of its own.
    runnerRateLimit: { perSecond: 0.001, burst: 50 },
    logger: pino({ level: 'debug' }, sink),
  });
  url = `https://localhost:${server.port}`;
});

afterAll(async () => {
  identity.stop();
  await server.close();
});

async function clientTls(of: DeploymentCa, name: string) {
  const leaf = await of.issueIdentity({ commonName: name, usages: ['client'], validityMs: 3_600_000 });
  return { ca: ca.certPem, cert: leaf.certPem, key: leaf.keyPem };
}

/** One call as the proxy makes it (its certificate, the CA trusted), or with another `agent`. */
function post(pathname: string, body: string, token: string | null = TOKEN, method = 'POST', agent = proxyAgent) {
  return new Promise<{ status: number; cacheControl: string | undefined; body: string }>((resolve, reject) => {
    const req = request(
      `${url}${pathname}`,
      {
        method,
        agent,
        headers: { 'content-type': 'application/json', ...(token !== null && { authorization: `Bearer ${token}` }) },
      },
      (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () => resolve({ status: res.statusCode!, cacheControl: res.headers['cache-control'], body: text }));
      },
    );
    req.on('error', reject);
    req.end(method === 'POST' ? body : undefined);
  });
}

describe('startEgressResolveServer', () => {
  const busy = JSON.stringify({ runner_id: 'acis-runner-busy', token: 'egress-token-busy' });

  it('serves no client without a certificate of the deployment CA naming the egress proxy, nor a plaintext one', async () => {
    const otherCa = await createEphemeralCa('another CA');
    const foreign = await clientTls(otherCa, EGRESS_PROXY_NAME);
    const agents = [new Agent({ ca: ca.certPem }), new Agent({ ...foreign }), new Agent({ ...(await clientTls(ca, API_SERVER_NAME)) })];
    const before = logs.filter((line) => line.includes('egress resolve connection refused')).length;
    for (const agent of agents) await expect(post(RESOLVE_PATH, busy, TOKEN, 'POST', agent)).rejects.toThrow();
    const refusals = logs.filter((line) => line.includes('egress resolve connection refused')).slice(before);
    expect(refusals).toHaveLength(3);
    expect(refusals[2]).toContain(`does not name ${EGRESS_PROXY_NAME}`);
    // Plain HTTP: the TLS listener answers no request, and the token sent in clear is never read.
    const plain = await new Promise<string>((resolve) => {
      const req = httpRequest(`http://127.0.0.1:${server.port}${RESOLVE_PATH}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      req.on('response', (res) => resolve(`answered ${res.statusCode}`));
      req.on('error', (error) => resolve(`failed: ${error.message}`));
      req.end(busy);
    });
    expect(plain).toMatch(/^failed/);
    expect(logs.join('\n')).not.toContain(TOKEN);
  });

  it('answers 401 and nothing else without the resolve token, and logs the refusal without what was sent', async () => {
    for (const token of [null, 'wrong', `${TOKEN}x`, TOKEN.slice(0, -1), `Basic ${TOKEN}`]) {
      for (const pathname of [RESOLVE_PATH, MISSING_PATH, '/elsewhere']) {
        const answer = await post(
          pathname,
          JSON.stringify({ runner_id: 'acis-runner-busy', token: 'egress-token-busy', alias: 'CANARY' }),
          token,
        );
        expect(answer, `${token} ${pathname}`).toEqual({
          status: 401,
          cacheControl: 'no-store',
          body: JSON.stringify({ error: 'unauthorized' }),
        });
      }
    }
    expect(aborted).toEqual([]);
    expect(logs.filter((line) => line.includes('egress resolve call refused')).length).toBe(15);
    expect(logs.join('\n')).not.toContain('egress-token-busy');
    expect(logs.join('\n')).not.toContain(TOKEN.slice(0, -1));
  });

  it('answers a credential that stands for a run with its values and request id, any other with in_progress false, never cached', async () => {
    expect(await post(RESOLVE_PATH, busy)).toEqual({
      status: 200,
      cacheControl: 'no-store',
      body: JSON.stringify({ in_progress: true, secrets: { CANARY }, request_id: REQUEST_ID }),
    });
    for (const credential of [
      { runner_id: 'acis-runner-busy', token: 'egress-token-other' },
      { runner_id: 'acis-runner-idle', token: 'egress-token-busy' },
    ]) {
      expect(await post(RESOLVE_PATH, JSON.stringify(credential))).toEqual({
        status: 200,
        cacheControl: 'no-store',
        body: JSON.stringify({ in_progress: false }),
      });
    }
    expect(logs.join('\n')).not.toContain(CANARY);
  });

  it('ends the run for a missing secret only when the credential stands for it', async () => {
    const wrong = await post(MISSING_PATH, JSON.stringify({ runner_id: 'acis-runner-busy', token: 'egress-token-other', alias: 'NOPE' }));
    expect(wrong).toEqual({ status: 200, cacheControl: 'no-store', body: JSON.stringify({ in_progress: false }) });
    expect(aborted).toEqual([]);
    const right = await post(MISSING_PATH, JSON.stringify({ runner_id: 'acis-runner-busy', token: 'egress-token-busy', alias: 'NOPE' }));
    expect(right.body).toBe(JSON.stringify({ in_progress: true }));
    expect(aborted).toEqual([['acis-runner-busy', 'NOPE']]);
  });

  it('answers 429 to calls for one runner id past its rate, leaving other runner ids their own', async () => {
    const flood = JSON.stringify({ runner_id: 'acis-runner-flood', token: 'guess' });
    const statuses: number[] = [];
    for (let i = 0; i < 52; i++) statuses.push((await post(RESOLVE_PATH, flood)).status);
    expect(statuses.slice(0, 50).every((status) => status === 200)).toBe(true);
    expect(statuses.slice(50)).toEqual([429, 429]);
    expect((await post(MISSING_PATH, JSON.stringify({ runner_id: 'acis-runner-flood', token: 'guess', alias: 'X' }))).status).toBe(429);
    expect((await post(RESOLVE_PATH, busy)).status).toBe(200);
  });

  it('refuses what is not one of its two calls', async () => {
    expect((await post('/v1/egress/other', busy)).status).toBe(404);
    expect((await post(RESOLVE_PATH, '', TOKEN, 'GET')).status).toBe(405);
    for (const body of [
      'not json',
      '{}',
      JSON.stringify({ runner_id: 'r', token: 't', extra: 1 }),
      JSON.stringify({ runner_id: 'r', token: 't', alias: 'lower-case' }),
    ]) {
      expect((await post(body.includes('alias') ? MISSING_PATH : RESOLVE_PATH, body)).status, body).toBe(400);
    }
    expect((await post(RESOLVE_PATH, JSON.stringify({ runner_id: 'r', token: 'x'.repeat(20_000) }))).status).toBe(413);
  });
});

describe('createApiRunResolver', () => {
  it('resolves through the listener, and throws (never answers "no run") when it cannot be asked', async () => {
    const resolver = createApiRunResolver(url, TOKEN, proxyTls);
    expect(await resolver.resolveRun({ runnerId: 'acis-runner-busy', token: 'egress-token-busy' })).toEqual({
      secrets: new Map([['CANARY', CANARY]]),
      requestId: REQUEST_ID,
    });
    expect(await resolver.resolveRun({ runnerId: 'acis-runner-busy', token: 'nope' })).toBeUndefined();
    await expect(
      createApiRunResolver(url, `${TOKEN}x`, proxyTls).resolveRun({ runnerId: 'acis-runner-busy', token: 'egress-token-busy' }),
    ).rejects.toThrow(RunLookupError);
    await expect(
      createApiRunResolver('https://127.0.0.1:1', TOKEN, proxyTls).resolveRun({ runnerId: 'acis-runner-busy', token: 'egress-token-busy' }),
    ).rejects.toThrow(RunLookupError);
  });

  it('trusts only a listener of the deployment CA under the name it dials, and never speaks plaintext', async () => {
    const credential = { runnerId: 'acis-runner-busy', token: 'egress-token-busy' };
    // The listener's certificate names localhost, not the address.
    await expect(createApiRunResolver(`https://127.0.0.1:${server.port}`, TOKEN, proxyTls).resolveRun(credential)).rejects.toThrow(
      /unreachable.*(altnames|IP)/,
    );
    // A listener of another CA: the proxy's trust is the deployment CA alone.
    const otherCa = await createEphemeralCa('another CA');
    const strangerTls = { ...proxyTls, ca: otherCa.certPem };
    await expect(createApiRunResolver(url, TOKEN, strangerTls).resolveRun(credential)).rejects.toThrow(/unreachable/);
    expect(() => createApiRunResolver(`http://localhost:${server.port}`, TOKEN, proxyTls)).toThrow(/must be https/);
  });
});

describe('the resolve settings', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'acis-egress-resolve-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  const proxyEnv = { ACIS_EGRESS_RESOLVE_URL: 'https://acis-egress-resolve:8081' };

  it('loadEgressConfig takes runs from exactly one source, the resolve URL with its token', () => {
    expect(loadEgressConfig({ ...proxyEnv, ACIS_EGRESS_RESOLVE_TOKEN_FILE: '/etc/acis/egress-resolve/token' }).runs).toEqual({
      source: 'api',
      url: 'https://acis-egress-resolve:8081',
      token: { file: '/etc/acis/egress-resolve/token' },
    });
    expect(loadEgressConfig({ ACIS_EGRESS_RUNS_FILE: 'runs.json' }).runs).toEqual({ source: 'file', file: path.resolve('runs.json') });
    expect(() => loadEgressConfig({})).toThrow(/ACIS_EGRESS_RESOLVE_URL .* or, in development, ACIS_EGRESS_RUNS_FILE/);
    expect(() => loadEgressConfig({ ...proxyEnv, ACIS_EGRESS_RESOLVE_TOKEN: TOKEN, ACIS_EGRESS_RUNS_FILE: 'runs.json' })).toThrow(
      /both set/,
    );
    expect(() => loadEgressConfig(proxyEnv)).toThrow(/needs ACIS_EGRESS_RESOLVE_TOKEN/);
    expect(() =>
      loadEgressConfig({ ACIS_EGRESS_RESOLVE_URL: 'http://acis-egress-resolve:8081', ACIS_EGRESS_RESOLVE_TOKEN: TOKEN }),
    ).toThrow(/must be an https URL/);
    expect(() => loadEgressConfig({ ...proxyEnv, ACIS_EGRESS_RESOLVE_TOKEN: 'short' })).toThrow(/at least 32 characters/);
    expect(() => loadEgressConfig({ ...proxyEnv, ACIS_EGRESS_RESOLVE_TOKEN: TOKEN, ACIS_EGRESS_RESOLVE_TOKEN_FILE: '/x' })).toThrow(
      /both set; set one/,
    );
    // A bad token is named, never echoed.
    expect(() => loadEgressConfig({ ...proxyEnv, ACIS_EGRESS_RESOLVE_TOKEN: 'short-secret' })).not.toThrow(/short-secret/);
  });

  it('loadConfig serves the listener only with its token, and a token only with the listener', () => {
    expect(loadConfig({ ACIS_EGRESS_RESOLVE_LISTEN: '0.0.0.0:8081', ACIS_EGRESS_RESOLVE_TOKEN: TOKEN }).egressResolve).toEqual({
      listen: { host: '0.0.0.0', port: 8081 },
      token: { value: TOKEN },
      tlsNames: [],
    });
    expect(
      loadConfig({
        ACIS_EGRESS_RESOLVE_LISTEN: '0.0.0.0:8081',
        ACIS_EGRESS_RESOLVE_TOKEN: TOKEN,
        ACIS_EGRESS_RESOLVE_TLS_NAMES: 'acis-egress-resolve,acis-egress-resolve.acis.svc',
      }).egressResolve?.tlsNames,
    ).toEqual(['acis-egress-resolve', 'acis-egress-resolve.acis.svc']);
    expect(loadConfig({}).egressResolve).toBeUndefined();
    expect(() => loadConfig({ ACIS_EGRESS_RESOLVE_LISTEN: '0.0.0.0:8081' })).toThrow(ConfigError);
    expect(() => loadConfig({ ACIS_EGRESS_RESOLVE_TOKEN_FILE: '/etc/acis/egress-resolve/token' })).toThrow(
      /without ACIS_EGRESS_RESOLVE_LISTEN/,
    );
  });

  it('readResolveToken reads a mounted file without its trailing newline and refuses a short one', async () => {
    await writeFile(path.join(dir, 'token'), `${TOKEN}\n`);
    await writeFile(path.join(dir, 'short'), 'abc\n');
    expect(await readResolveToken({ file: path.join(dir, 'token') })).toBe(TOKEN);
    await expect(readResolveToken({ file: path.join(dir, 'short') })).rejects.toThrow(/at least 32 characters/);
  });
});
