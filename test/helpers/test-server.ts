import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import pg from 'pg';
import { type Config, loadConfig } from '../../api-server/config.js';
import { createLogger, type RunningServer, startServer } from '../../api-server/server.js';

/** Where tests find PostgreSQL; each test file gets a fresh database on it. */
const ADMIN_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const ADMIN_TOKEN = 'test-admin-token-0123456789';

export interface ApiResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface RequestOptions {
  token?: string | null;
  body?: unknown;
  /** Raw body text (sent as is, with the given headers). */
  rawBody?: string;
  headers?: Record<string, string>;
}

export interface TestClock {
  now(): Date;
  advance(ms: number): void;
}

export interface TestServer {
  url: string;
  server: RunningServer;
  clock: TestClock;
  databaseUrl: string;
  /** Every log line the server wrote, for tests that look for leaks. */
  logs: string[];
  request<T = any>(method: string, path: string, options?: RequestOptions): Promise<ApiResponse<T>>;
  /** Creates an integration through the admin API; returns its service key and root tenant. */
  createIntegration(name?: string): Promise<{ id: string; serviceKey: string; rootTenantId: string }>;
  stop(): Promise<void>;
}

export async function createTestDatabase(): Promise<string> {
  const name = `acis_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(ADMIN_DATABASE_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

export async function dropTestDatabase(databaseUrl: string): Promise<void> {
  const name = new URL(databaseUrl).pathname.slice(1);
  const admin = new pg.Client({ connectionString: ADMIN_DATABASE_URL });
  await admin.connect();
  try {
    // Without FORCE: wait for the server's own connections to finish closing rather than killing them
    // (a killed connection surfaces as an uncaught error in the process that is shutting down).
    for (let attempt = 0; ; attempt++) {
      try {
        await admin.query(`drop database if exists ${name}`);
        break;
      } catch (error) {
        const inUse = (error as { code?: string }).code === '55006';
        if (!inUse || attempt >= 100) throw error;
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
  } finally {
    await admin.end();
  }
}

export async function startTestServer(env: Record<string, string> = {}): Promise<TestServer> {
  const databaseUrl = env.DATABASE_URL ?? (await createTestDatabase());
  const dataDir = await mkdtemp(path.join(tmpdir(), 'acis-test-'));
  // A server that never starts (a test may expect its configuration refused) leaves nothing behind.
  const discard = async () => {
    if (!env.DATABASE_URL) await dropTestDatabase(databaseUrl);
    await rm(dataDir, { recursive: true, force: true });
  };
  let config: Config;
  try {
    config = loadConfig({
      PORT: '0',
      HOST: '127.0.0.1',
      DATABASE_URL: databaseUrl,
      ACIS_DATA_DIR: dataDir,
      ACIS_MASTER_KEY: randomBytes(32).toString('base64'),
      ACIS_ADMIN_TOKEN: ADMIN_TOKEN,
      LOG_LEVEL: 'info',
      // Suites that run agents ask for pre-started runners; the others should not pay for them.
      ACIS_POOL_SIZE: '0',
      ...env,
    });
  } catch (error) {
    await discard();
    throw error;
  }
  let offsetMs = 0;
  const clock: TestClock = {
    now: () => new Date(Date.now() + offsetMs),
    advance: (ms) => {
      offsetMs += ms;
    },
  };
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk, _encoding, done) {
      logs.push(String(chunk));
      done();
    },
  });
  const server = await startServer(config, {
    logger: createLogger(config, sink),
    now: clock.now,
    validateResponses: true,
  }).catch(async (error: unknown) => {
    await discard();
    throw error;
  });

  const request = async <T>(method: string, urlPath: string, options: RequestOptions = {}): Promise<ApiResponse<T>> => {
    const headers: Record<string, string> = { ...options.headers };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    let body: string | undefined = options.rawBody;
    if (options.body !== undefined) {
      headers['content-type'] ??= 'application/json';
      body = JSON.stringify(options.body);
    }
    const response = await fetch(`${server.url}${urlPath}`, { method, headers, body });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = text ? JSON.parse(text) : undefined;
    } catch {
      // not JSON: keep the text
    }
    return { status: response.status, headers: response.headers, body: parsed as T, text };
  };

  return {
    url: server.url,
    server,
    clock,
    databaseUrl,
    logs,
    request,
    async createIntegration(name = 'test integration') {
      const response = await request<any>('POST', '/admin/integrations', { token: ADMIN_TOKEN, body: { name } });
      if (response.status !== 201) throw new Error(`admin create integration failed: ${response.status} ${response.text}`);
      return { id: response.body.id, serviceKey: response.body.service_key, rootTenantId: response.body.root_tenant_id };
    },
    async stop() {
      await server.stop();
      if (!env.DATABASE_URL) await dropTestDatabase(databaseUrl);
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** Asserts the RFC 9457 envelope and returns its slug. */
export function problemSlug(response: ApiResponse): string {
  const contentType = response.headers.get('content-type') ?? '';
  if (!contentType.startsWith('application/problem+json')) {
    throw new Error(`expected a problem document, got ${contentType}: ${response.text}`);
  }
  const type = String(response.body?.type ?? '');
  const match = /\/problems\/([a-z0-9-]+)$/.exec(type);
  if (!match?.[1]) throw new Error(`problem type has no slug: ${type}`);
  if (response.body.status !== response.status) throw new Error('problem status differs from the HTTP status');
  if (typeof response.body.title !== 'string') throw new Error('problem has no title');
  return match[1];
}
