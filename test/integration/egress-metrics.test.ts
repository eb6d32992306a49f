/**
 * The standalone egress proxy (`egress-proxy/main.ts`, its own process) serves its metrics on
 * ACIS_EGRESS_METRICS_PORT: requests by outcome, denials by reason and substitutions, read with a
 * Prometheus text parser after a known sequence of proxied requests, behind ACIS_METRICS_TOKEN.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type AcisProcess, cleanEnv, freePort, startEgressProxyProcess, stopAcis } from '../helpers/acis-process.js';
import { parsePrometheusText, sumOf } from '../helpers/prometheus-text.js';

const METRICS_TOKEN = `metrics-${randomBytes(12).toString('hex')}`;
const RUN = { id: `run_${randomBytes(6).toString('hex')}`, token: `tok_${randomBytes(12).toString('hex')}` };
const CANARY = `canary-${randomBytes(8).toString('hex')}`;

let dir: string;
let proxy: AcisProcess | undefined;
let proxyPort: number;
let metricsPort: number;
let allowed: Server;
let allowedPort: number;
let unlistedPort: number;
/** The X-Token header each upstream request carried. */
const upstreamTokens: string[] = [];

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'acis-egress-metrics-'));
  allowed = createServer((req, res) => {
    upstreamTokens.push(String(req.headers['x-token']));
    res.end('ok');
  });
  await new Promise<void>((resolve) => allowed.listen(0, '127.0.0.1', resolve));
  allowedPort = (allowed.address() as AddressInfo).port;
  unlistedPort = await freePort();
  const runsFile = path.join(dir, 'runs.json');
  await writeFile(runsFile, JSON.stringify({ [RUN.id]: { token: RUN.token, secrets: { CANARY } } }), { mode: 0o600 });
  [proxyPort, metricsPort] = [await freePort(), await freePort()];
  proxy = await startEgressProxyProcess(
    cleanEnv({
      ACIS_DATA_DIR: dir,
      ACIS_EGRESS_PORT: String(proxyPort),
      ACIS_EGRESS_METRICS_PORT: String(metricsPort),
      ACIS_METRICS_TOKEN: METRICS_TOKEN,
      ACIS_EGRESS_RUNS_FILE: runsFile,
      ACIS_EGRESS_ALLOW: `127.0.0.1:${allowedPort}`,
    }),
  );
}, 60_000);

afterAll(async () => {
  if (proxy) await stopAcis(proxy);
  allowed?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** An absolute-form GET through the proxy, with the run's credentials unless `credentials` is false. */
function viaProxy(url: string, headers: Record<string, string> = {}, credentials = true): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = request({
      host: '127.0.0.1',
      port: proxyPort,
      path: url,
      headers: {
        host: new URL(url).host,
        ...(credentials && { 'proxy-authorization': `Basic ${Buffer.from(`${RUN.id}:${RUN.token}`).toString('base64')}` }),
        ...headers,
      },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      res.resume();
      res.on('end', () => resolve(res));
    });
    req.end();
  });
}

describe('the standalone egress proxy: GET /metrics on ACIS_EGRESS_METRICS_PORT', () => {
  it('counts requests by outcome, denials by reason and substitutions, and serves them to the token holder only', async () => {
    expect((await viaProxy(`http://127.0.0.1:${allowedPort}/x`, {}, false)).statusCode).toBe(407);
    expect((await viaProxy(`http://127.0.0.1:${allowedPort}/x`, { 'x-token': '{{secret:CANARY}}' })).statusCode).toBe(200);
    expect(upstreamTokens).toEqual([CANARY]);
    expect((await viaProxy(`http://127.0.0.1:${unlistedPort}/x`)).statusCode).toBe(403);
    expect((await viaProxy(`http://127.0.0.1:${allowedPort}/x`, { 'x-token': '{{secret:NOPE}}' })).statusCode).toBe(422);

    const url = `http://127.0.0.1:${metricsPort}/metrics`;
    for (const authorization of [undefined, 'Bearer wrong-token', `Bearer ${RUN.token}`]) {
      const refused = await fetch(url, { headers: authorization ? { authorization } : {} });
      expect(refused.status).toBe(401);
      expect(await refused.text()).not.toContain('acis_');
    }
    const res = await fetch(url, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    const metrics = parsePrometheusText(text);
    expect(sumOf(metrics, 'acis_egress_requests_total')).toBe(4);
    expect(sumOf(metrics, 'acis_egress_requests_total', { outcome: 'forwarded' })).toBe(1);
    expect(sumOf(metrics, 'acis_egress_requests_total', { outcome: 'auth-required' })).toBe(1);
    expect(sumOf(metrics, 'acis_egress_requests_total', { outcome: 'destination-refused' })).toBe(1);
    expect(sumOf(metrics, 'acis_egress_requests_total', { outcome: 'missing-secret' })).toBe(1);
    expect(sumOf(metrics, 'acis_egress_denials_total')).toBe(3);
    expect(sumOf(metrics, 'acis_egress_denials_total', { reason: 'missing-secret' })).toBe(1);
    expect(sumOf(metrics, 'acis_egress_substitutions_total')).toBe(1);
    expect(metrics.families.get('acis_egress_process_cpu_seconds_total')?.type).toBe('counter');
    for (const canary of [CANARY, RUN.id, RUN.token, METRICS_TOKEN, 'NOPE']) expect(text).not.toContain(canary);
  });
});
