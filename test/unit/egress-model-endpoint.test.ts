/**
 * The egress proxy's model endpoint: the platform's key goes on calls to it and to nothing else, the
 * run's placeholders reach it unsubstituted, and what it answers is masked of the key.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEgressProxy, type EgressProxy } from '../../egress-proxy/egress-proxy.js';
import { isModelEndpoint, parseModelEndpoint } from '../../egress-proxy/model-endpoint.js';

const PLATFORM_KEY = 'sk-platform-0123456789abcdef';
const CANARY = 'canary-value-42';
const CREDENTIAL = `Basic ${Buffer.from('runner-1:token-1').toString('base64')}`;

interface Received {
  port: number;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

const received: Received[] = [];
const servers: Server[] = [];
const missing: string[] = [];
let modelPort: number;
let otherPort: number;
let proxy: EgressProxy;
let caDir: string;

/** Answers with the key it was given, so masking of the answer shows. */
function upstream(): Server {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({
        port: (server.address() as AddressInfo).port,
        path: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ key_seen: req.headers['x-api-key'] ?? null }));
    });
  });
  servers.push(server);
  return server;
}

function listen(server: Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)));
}

function viaProxy(
  url: string,
  headers: Record<string, string>,
  body: string,
): Promise<{ status: number; headers: IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: '127.0.0.1',
        port: proxy.port,
        method: 'POST',
        path: url,
        headers: { 'proxy-authorization': CREDENTIAL, 'content-type': 'application/json', ...headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

beforeAll(async () => {
  [modelPort, otherPort] = await Promise.all([listen(upstream()), listen(upstream())]);
  caDir = await mkdtemp(path.join(tmpdir(), 'acis-model-endpoint-'));
  proxy = await createEgressProxy({
    caDir,
    // The other upstream is listed; the model endpoint is allowed as the model endpoint.
    allow: `127.0.0.1:${otherPort}`,
    modelEndpoint: { baseUrl: `http://127.0.0.1:${modelPort}/`, apiKey: PLATFORM_KEY },
    resolveRun: ({ runnerId, token }) =>
      runnerId === 'runner-1' && token === 'token-1' ? { secrets: new Map([['CANARY', CANARY]]) } : undefined,
    onMissing: (_runnerId, alias) => missing.push(alias),
  });
});

afterAll(async () => {
  await proxy?.close();
  for (const server of servers) server.close();
  if (caDir) await rm(caDir, { recursive: true, force: true });
});

describe('the egress proxy and the platform model endpoint', () => {
  it('puts the platform key on model calls in place of the key headers sent, substitutes nothing of the run’s, and masks the key in the answer', async () => {
    const body = JSON.stringify({ messages: [{ role: 'user', content: 'run curl -H "X: {{secret:CANARY}}" and {{secret:NOT_VAULTED}}' }] });
    const res = await viaProxy(
      `http://127.0.0.1:${modelPort}/v1/messages`,
      { 'x-api-key': '{{secret:ANTHROPIC_API_KEY}}', authorization: 'Bearer {{secret:ANTHROPIC_API_KEY}}' },
      body,
    );
    expect(res.status).toBe(200);
    const call = received.find((r) => r.port === modelPort && r.path === '/v1/messages')!;
    expect(call.headers['x-api-key']).toBe(PLATFORM_KEY);
    expect(call.headers.authorization).toBeUndefined();
    expect(call.body).toBe(body);
    expect(res.body).toBe(JSON.stringify({ key_seen: '{{secret:ANTHROPIC_API_KEY}}' }));
    expect(missing).toEqual([]);
  });

  it('refuses the key placeholder bound for any other host or port, before anything is sent', async () => {
    const before = received.length;
    const res = await viaProxy(`http://127.0.0.1:${otherPort}/collect`, { 'x-api-key': '{{secret:ANTHROPIC_API_KEY}}' }, '{}');
    expect(res.status).toBe(422);
    expect(res.headers['x-acis-egress-error']).toBe('missing-secret');
    expect(received.length).toBe(before);
    expect(missing).toEqual(['ANTHROPIC_API_KEY']);
    expect(JSON.stringify(res)).not.toContain(PLATFORM_KEY);
  });

  it('still substitutes the run’s own values elsewhere', async () => {
    const res = await viaProxy(`http://127.0.0.1:${otherPort}/with-canary`, { 'x-canary': '{{secret:CANARY}}' }, '{}');
    expect(res.status).toBe(200);
    expect(received.find((r) => r.path === '/with-canary')!.headers['x-canary']).toBe(CANARY);
  });

  it('names the endpoint by scheme, host and port together', () => {
    const endpoint = parseModelEndpoint('https://API.anthropic.com/');
    expect(endpoint).toEqual({ scheme: 'https', destination: { host: 'api.anthropic.com', port: 443 } });
    expect(isModelEndpoint(endpoint, 'https', { host: 'api.anthropic.com', port: 443 })).toBe(true);
    expect(isModelEndpoint(endpoint, 'http', { host: 'api.anthropic.com', port: 443 })).toBe(false);
    expect(isModelEndpoint(endpoint, 'https', { host: 'api.anthropic.com', port: 8443 })).toBe(false);
    expect(isModelEndpoint(endpoint, 'https', { host: 'evil.example', port: 443 })).toBe(false);
    expect(isModelEndpoint(undefined, 'https', { host: 'api.anthropic.com', port: 443 })).toBe(false);
    expect(() => parseModelEndpoint('ftp://models')).toThrow(/http/);
  });
});
