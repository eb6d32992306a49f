/**
 * Rate limits per service key and per platform-JWT user, by class (token exchange, message sends,
 * everything else), holding across API server processes that share one database. Node A runs in
 * the test process; node B is `acis serve` in a process of its own.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import pg from 'pg';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../api-server/config.js';
import { openDatabase } from '../../api-server/core/db/database.js';
import { createIdGenerator } from '../../api-server/core/ids.js';
import type { Principal } from '../../api-server/core/principal.js';
import { type RateLimitConfig, RateLimiter } from '../../api-server/core/rate-limit.js';
import { cleanEnv, killLeftovers, type ServingAcis, serveAcis, stopAcis } from '../helpers/acis-process.js';
import { parsePrometheusText, sumOf } from '../helpers/prometheus-text.js';
import { type ProvisionedUser, provisionUser, userToken } from '../helpers/provision.js';
import {
  type ApiResponse,
  createTestDatabase,
  dropTestDatabase,
  problemSlug,
  type RequestOptions,
  startTestServer,
  type TestServer,
} from '../helpers/test-server.js';

const MASTER_KEY = randomBytes(32).toString('base64');
const WINDOW_SECONDS = 600;
const LIMITS = {
  ACIS_RATE_LIMIT_WINDOW_SECONDS: String(WINDOW_SECONDS),
  ACIS_RATE_LIMIT_OTHER: '6',
  ACIS_RATE_LIMIT_TOKEN_EXCHANGE: '4',
  ACIS_RATE_LIMIT_MESSAGE_SENDS: '3',
};

let databaseUrl: string;
let nodeA: TestServer;
let nodeB: ServingAcis;
let nodeBDataDir: string;

beforeAll(async () => {
  databaseUrl = await createTestDatabase();
  nodeA = await startTestServer({ DATABASE_URL: databaseUrl, ACIS_MASTER_KEY: MASTER_KEY, ...LIMITS });
  nodeBDataDir = await mkdtemp(path.join(tmpdir(), 'acis-node-b-'));
  nodeB = await serveAcis(
    cleanEnv({ DATABASE_URL: databaseUrl, ACIS_DATA_DIR: nodeBDataDir, ACIS_MASTER_KEY: MASTER_KEY, ACIS_POOL_SIZE: '0', ...LIMITS }),
  );
}, 120_000);

afterAll(async () => {
  if (nodeB) await stopAcis(nodeB);
  killLeftovers();
  await nodeA?.stop();
  if (nodeBDataDir) await rm(nodeBDataDir, { recursive: true, force: true });
  if (databaseUrl) await dropTestDatabase(databaseUrl);
});

type Node = 'A' | 'B';

/** The same request helper for both nodes. */
async function call(node: Node, method: string, urlPath: string, options: RequestOptions = {}): Promise<ApiResponse> {
  if (node === 'A') return nodeA.request(method, urlPath, options);
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  let body: string | undefined;
  if (options.body !== undefined) {
    headers['content-type'] = 'application/json';
    body = JSON.stringify(options.body);
  }
  const response = await fetch(`${nodeB.url}${urlPath}`, { method, headers, body });
  const text = await response.text();
  return { status: response.status, headers: response.headers, body: text ? JSON.parse(text) : undefined, text };
}

function expectRateLimited(res: ApiResponse): void {
  expect(res.status).toBe(429);
  expect(problemSlug(res)).toBe('rate-limited');
  expect(res.body.title).toBe('Rate limited');
  const retryAfter = Number(res.headers.get('retry-after'));
  expect(Number.isInteger(retryAfter)).toBe(true);
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(WINDOW_SECONDS);
  expect(res.body.detail).toContain(`${retryAfter} s`);
}

/** Statuses of `count` calls, alternating between the nodes starting at A. */
async function alternate(count: number, send: (node: Node) => Promise<ApiResponse>): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < count; i++) statuses.push((await send(i % 2 === 0 ? 'A' : 'B')).status);
  return statuses;
}

describe('rate limits across API servers', () => {
  it('holds one limit per service key on both servers; a refused write changes nothing; another key is unaffected', async () => {
    const { serviceKey: key } = await nodeA.createIntegration('limited');
    const { serviceKey: otherKey } = await nodeA.createIntegration('unaffected');
    const list = (node: Node, token = key) => call(node, 'GET', '/tenants?limit=1', { token });
    expect(await alternate(6, (node) => list(node))).toEqual([200, 200, 200, 200, 200, 200]);
    expectRateLimited(await list('B'));
    expectRateLimited(await list('A'));

    // Refused before validation or any work: the tenant is not created.
    const externalId = `test:tenant:refused-${randomBytes(4).toString('hex')}`;
    expectRateLimited(await call('A', 'PUT', `/tenants/by-external-id/${encodeURIComponent(externalId)}`, { token: key, body: {} }));
    const client = new pg.Client({ connectionString: databaseUrl });
    await client.connect();
    try {
      const { rows } = await client.query('select id from tenants where external_id = $1', [externalId]);
      expect(rows).toEqual([]);
    } finally {
      await client.end();
    }

    expect((await list('A', otherKey)).status).toBe(200);
    expect((await list('B', otherKey)).status).toBe(200);
    // The operator's admin token has no budget to exhaust.
    const admin = await call('A', 'GET', '/admin/integrations', { token: 'test-admin-token-0123456789' });
    expect(admin.status).not.toBe(429);
  });

  it('limits token exchanges, message sends and the rest separately, and each platform user on its own', async () => {
    const { serviceKey: key } = await nodeA.createIntegration('classes');
    const user: ProvisionedUser = await provisionUser(nodeA, key); // 3 of the key's 6 `other` requests
    const exchange = (node: Node) =>
      call(node, 'POST', '/auth/token-exchange', {
        token: key,
        body: { tenant_external_id: user.tenantExternalId, user_external_id: user.userExternalId },
      });
    expect(await alternate(3, (node) => call(node, 'GET', `/tenants/${user.tenantId}`, { token: key }))).toEqual([200, 200, 200]);
    expectRateLimited(await call('B', 'GET', `/tenants/${user.tenantId}`, { token: key }));

    // Token exchange has its own budget of 4, across both nodes.
    const token = await userToken(nodeA, key, user);
    expect(await alternate(3, exchange)).toEqual([200, 200, 200]);
    expectRateLimited(await exchange('B'));

    // Message sends have theirs (3): counted before the conversation is even looked up.
    const missingConversation = createIdGenerator()('conversation');
    const send = (node: Node, authToken: string) =>
      call(node, 'POST', `/conversations/${missingConversation}/messages`, { token: authToken, body: { content: 'hi' } });
    expect(await alternate(3, (node) => send(node, key))).toEqual([404, 404, 404]);
    expectRateLimited(await send('A', key));

    // The user's JWT is a principal of its own, with fresh budgets in every class.
    const conversations = (node: Node) => call(node, 'GET', `/conversations?user_id=${user.userId}`, { token });
    expect(await alternate(2, conversations)).toEqual([200, 200]);
    expect(await alternate(2, (node) => send(node, token))).toEqual([404, 404]);
    // A conversation created with an initial message is a message send (the user's third; for
    // another user, so it is refused before any run starts).
    const otherUser = createIdGenerator()('user');
    const withMessage = (node: Node) =>
      call(node, 'POST', '/conversations', { token, body: { user_id: otherUser, initial_message: { content: 'hi' } } });
    expect([403, 404]).toContain((await withMessage('B')).status);
    expectRateLimited(await send('A', token));
    expectRateLimited(await withMessage('A'));
    // ... while one without is not: it counts against the rest (the user's 3rd of 6), as do reads.
    expect((await call('A', 'POST', '/conversations', { token, body: { user_id: user.userId } })).status).toBe(201);
    expect(await alternate(4, conversations)).toEqual([200, 200, 200, 429]);
  });
});

describe('GET /metrics without ACIS_METRICS_TOKEN', () => {
  it('is open, and each node counts the refusals it answered, by class', async () => {
    const refusals = { other: 0, 'token-exchange': 0, 'message-send': 0 };
    for (const url of [nodeA.url, nodeB.url]) {
      const res = await fetch(`${url}/metrics`);
      expect(res.status).toBe(200);
      const metrics = parsePrometheusText(await res.text());
      for (const rateClass of Object.keys(refusals) as (keyof typeof refusals)[]) {
        refusals[rateClass] += sumOf(metrics, 'acis_rate_limited_total', { class: rateClass });
      }
    }
    // Every 429 the tests above met, wherever it was answered.
    expect(refusals).toEqual({ other: 5, 'token-exchange': 1, 'message-send': 3 });
  });
});

describe('RateLimiter.take(principal, rateClass)', () => {
  const principal = (n: number): Principal => ({
    kind: 'service',
    integrationId: 'int_x',
    rootTenantId: 'ten_x',
    serviceKeyId: `key_${n}_${randomBytes(4).toString('hex')}`,
  });
  const config = (limit: number, windowSeconds = 60): RateLimitConfig => ({
    enabled: true,
    windowSeconds,
    limits: { 'token-exchange': limit, 'message-send': limit, other: limit },
  });
  const quiet = pino({ level: 'silent' });

  it('never lets nodes exceed the limit together, and refuses at most a chunk per extra node early', async () => {
    const database = await openDatabase({ databaseUrl, dataDir: nodeBDataDir, poolSize: 5 });
    try {
      const nodes = [0, 1, 2].map(() => new RateLimiter({ db: database.db, logger: quiet, config: config(500) }));
      const who = principal(1);
      const decisions = await Promise.all(Array.from({ length: 600 }, (_, i) => nodes[i % 3]!.take(who, 'other')));
      const allowed = decisions.filter((d) => d.allowed).length;
      // Chunks of 1% (5): at most two nodes' unspent chunks are stranded.
      expect(allowed).toBeLessThanOrEqual(500);
      expect(allowed).toBeGreaterThanOrEqual(500 - 2 * 5);
    } finally {
      await database.close();
    }
  });

  it('starts a fresh window once the current one has ended', async () => {
    const database = await openDatabase({ databaseUrl, dataDir: nodeBDataDir, poolSize: 2 });
    let nowMs = 1_000_000;
    try {
      const limiter = new RateLimiter({ db: database.db, logger: quiet, config: config(2, 30), nowMs: () => nowMs });
      const who = principal(2);
      expect((await limiter.take(who, 'message-send')).allowed).toBe(true);
      expect((await limiter.take(who, 'message-send')).allowed).toBe(true);
      const refused = await limiter.take(who, 'message-send');
      expect(refused).toEqual({ allowed: false, retryAfterSeconds: expect.any(Number) });
      expect(refused.allowed === false && refused.retryAfterSeconds).toBeGreaterThanOrEqual(29);
      // Time passes: on this node's clock and on the database's (the row's window moved back).
      nowMs += 31_000;
      await database.db
        .updateTable('rate_limit_windows')
        .set({ window_started_at: new Date(Date.now() - 31_000) })
        .execute();
      expect((await limiter.take(who, 'message-send')).allowed).toBe(true);
      expect((await limiter.take(who, 'message-send')).allowed).toBe(true);
      expect((await limiter.take(who, 'message-send')).allowed).toBe(false);
    } finally {
      await database.close();
    }
  });

  it('lets requests through and says so in the log when the database cannot be reached', async () => {
    const lines: string[] = [];
    const logger = pino(
      { level: 'warn' },
      new Writable({
        write: (chunk, _e, done) => {
          lines.push(String(chunk));
          done();
        },
      }),
    );
    const unreachable = await openDatabase({ databaseUrl: 'postgres://postgres@127.0.0.1:1/nothing', dataDir: nodeBDataDir, poolSize: 1 });
    try {
      const limiter = new RateLimiter({ db: unreachable.db, logger, config: config(1) });
      const who = principal(3);
      for (let i = 0; i < 3; i++) expect(await limiter.take(who, 'other')).toEqual({ allowed: true });
      expect(lines.join('')).toContain('rate limits cannot reach the database');
    } finally {
      await unreachable.close();
    }
  });

  it('limits nothing when switched off, and never the admin token', async () => {
    const database = await openDatabase({ databaseUrl, dataDir: nodeBDataDir, poolSize: 1 });
    try {
      const off = new RateLimiter({ db: database.db, logger: quiet, config: { ...config(1), enabled: false } });
      const on = new RateLimiter({ db: database.db, logger: quiet, config: config(1) });
      const who = principal(4);
      for (let i = 0; i < 3; i++) {
        expect((await off.take(who, 'other')).allowed).toBe(true);
        expect((await on.take({ kind: 'admin' }, 'other')).allowed).toBe(true);
      }
    } finally {
      await database.close();
    }
  });
});

describe('loadConfig: rate limits', () => {
  it('limits by default, generously, and refuses settings it cannot honour', () => {
    expect(loadConfig({}).rateLimits).toEqual({
      enabled: true,
      windowSeconds: 60,
      limits: { 'token-exchange': 6000, 'message-send': 600, other: 30000 },
    });
    expect(loadConfig({ ACIS_RATE_LIMITS: 'off' }).rateLimits.enabled).toBe(false);
    for (const [name, value] of [
      ['ACIS_RATE_LIMITS', 'maybe'],
      ['ACIS_RATE_LIMIT_WINDOW_SECONDS', '0'],
      ['ACIS_RATE_LIMIT_OTHER', '0'],
      ['ACIS_RATE_LIMIT_MESSAGE_SENDS', '1.5'],
      ['ACIS_RATE_LIMIT_TOKEN_EXCHANGE', '2000000000'],
    ] as const) {
      expect(() => loadConfig({ [name]: value }), name).toThrow(ConfigError);
      expect(() => loadConfig({ [name]: value }), name).toThrow(name);
    }
  });
});
