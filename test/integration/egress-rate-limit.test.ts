/**
 * The egress proxy's per-runner rate: a runner past its burst is answered 429 (plain requests and
 * CONNECT alike) before its run is looked up (with standalone proxies, a call to the API server's
 * resolve listener), while another runner keeps its own budget; and the bucket refills with time.
 */
import { once } from 'node:events';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createEgressProxy, type EgressProxy } from '../../egress-proxy/egress-proxy.js';
import { createRunnerRateLimiter } from '../../egress-proxy/runner-rate-limit.js';

const RUNS: Record<string, string> = { run_a: 'tok-a', run_b: 'tok-b' };
let dir: string;
let upstream: Server;
let upstreamPort: number;
let proxy: EgressProxy;
const lookups: string[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'acis-egress-rate-'));
  upstream = createServer((_req, res) => res.end('upstream'));
  upstream.listen(0, '127.0.0.1');
  await once(upstream, 'listening');
  upstreamPort = (upstream.address() as AddressInfo).port;
  proxy = await createEgressProxy({
    caDir: path.join(dir, 'ca'),
    allow: `127.0.0.1:${upstreamPort}`,
    resolveRun: ({ runnerId, token }) => {
      lookups.push(runnerId);
      return RUNS[runnerId] === token ? { secrets: new Map() } : undefined;
    },
    onMissing: () => {},
    // A burst of 3 and next to no refill: the fourth request within the test is over the rate.
    runnerRateLimit: { perSecond: 0.001, burst: 3 },
  });
});

afterAll(async () => {
  await proxy?.close();
  upstream?.close();
  await rm(dir, { recursive: true, force: true });
});

function send(runnerId: string, method: 'GET' | 'CONNECT' = 'GET'): Promise<number> {
  const auth = `Basic ${Buffer.from(`${runnerId}:${RUNS[runnerId]}`).toString('base64')}`;
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port: proxy.port,
      method,
      path: method === 'CONNECT' ? `127.0.0.1:${upstreamPort}` : `http://127.0.0.1:${upstreamPort}/x`,
      headers: { 'proxy-authorization': auth },
    });
    req.once('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.once('connect', (res, socket) => {
      socket.destroy();
      resolve(res.statusCode ?? 0);
    });
    req.once('error', reject);
    req.end();
  });
}

describe('the egress proxy, per runner', () => {
  it('answers 429 past the burst without looking the run up, and leaves other runners their own budget', async () => {
    expect([await send('run_a'), await send('run_a'), await send('run_a')]).toEqual([200, 200, 200]);
    const before = lookups.length;
    expect(await send('run_a')).toBe(429);
    expect(await send('run_a', 'CONNECT')).toBe(429);
    expect(lookups.length).toBe(before);
    expect(await send('run_b')).toBe(200);
    expect(lookups.slice(before)).toEqual(['run_b']);
  });
});

describe('createRunnerRateLimiter', () => {
  it('refills each bucket at the rate, up to the burst', () => {
    let now = 0;
    const limiter = createRunnerRateLimiter({ perSecond: 2, burst: 2 }, () => now);
    expect([limiter.take('r'), limiter.take('r'), limiter.take('r')]).toEqual([true, true, false]);
    now += 500;
    expect([limiter.take('r'), limiter.take('r')]).toEqual([true, false]);
    now += 10_000;
    expect([limiter.take('r'), limiter.take('r'), limiter.take('r')]).toEqual([true, true, false]);
    expect(limiter.take('other')).toBe(true);
  });
});
