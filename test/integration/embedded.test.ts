import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanEnv, killLeftovers, runAcis, serveAcis, stopAcis } from '../helpers/acis-process.js';
import { createTestDatabase, dropTestDatabase } from '../helpers/test-server.js';

/**
 * The zero-setup path: `serve` with no DATABASE_URL runs on embedded PGlite under ACIS_DATA_DIR,
 * as a real child process, and keeps its data and master key across restarts.
 */

const BOOTSTRAP_KEY = 'sk_int_embeddedsmoketest0123456789';
const STARTUP_TIMEOUT_MS = 60_000;

let dataDir: string;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'acis-embedded-'));
});
afterAll(async () => {
  killLeftovers();
  await rm(dataDir, { recursive: true, force: true });
});

function serve() {
  return serveAcis(cleanEnv({ ACIS_DATA_DIR: dataDir, ACIS_BOOTSTRAP_SERVICE_KEY: BOOTSTRAP_KEY }));
}

async function api(base: string, method: string, urlPath: string, token?: string, body?: unknown) {
  const res = await fetch(`${base}${urlPath}`, {
    method,
    headers: {
      ...(token && { authorization: `Bearer ${token}` }),
      ...(body !== undefined && { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

describe('embedded PGlite (no DATABASE_URL)', () => {
  it(
    'serves, persists across a restart on the same data dir, and reuses its generated master key',
    async () => {
      const first = await serve();
      let tenant: any;
      let platformJwt: string;
      let masterKey: string;
      try {
        expect((await api(first.url, 'GET', '/readyz')).status).toBe(200);
        const created = await api(first.url, 'POST', '/tenants', BOOTSTRAP_KEY, { name: 'Persisted', external_id: 'smoke:tenant:1' });
        expect(created.status).toBe(201);
        tenant = created.body;
        expect((await api(first.url, 'GET', `/tenants/${tenant.id}`, BOOTSTRAP_KEY)).body).toEqual(tenant);

        const user = await api(first.url, 'PUT', `/tenants/${tenant.id}/users/by-external-id/smoke:user:1`, BOOTSTRAP_KEY, {});
        expect(user.status).toBe(201);
        const exchanged = await api(first.url, 'POST', '/auth/token-exchange', BOOTSTRAP_KEY, {
          tenant_external_id: 'smoke:tenant:1',
          user_external_id: 'smoke:user:1',
          ttl_seconds: 3600,
        });
        expect(exchanged.status).toBe(200);
        platformJwt = exchanged.body.token;
        // A valid JWT on a provisioning route is 403; one the server cannot verify would be 401.
        expect((await api(first.url, 'GET', '/tenants', platformJwt)).status).toBe(403);

        // No ACIS_ADMIN_TOKEN: the admin API is closed to everyone.
        expect((await api(first.url, 'POST', '/admin/integrations', BOOTSTRAP_KEY, { name: 'x' })).status).toBe(401);

        masterKey = await readFile(path.join(dataDir, 'master.key'), 'utf8');
        expect(Buffer.from(masterKey.trim(), 'base64')).toHaveLength(32);
      } finally {
        expect(await stopAcis(first)).toBe(0);
      }

      const second = await serve();
      try {
        expect((await api(second.url, 'GET', `/tenants/${tenant.id}`, BOOTSTRAP_KEY)).body).toEqual(tenant);
        const list = await api(second.url, 'GET', '/tenants', BOOTSTRAP_KEY);
        expect(list.body.data.map((x: { id: string }) => x.id)).toEqual([tenant.id]);
        expect(await readFile(path.join(dataDir, 'master.key'), 'utf8')).toBe(masterKey);
        // The token signed before the restart still verifies: same key, derived again.
        expect((await api(second.url, 'GET', '/tenants', platformJwt)).status).toBe(403);
      } finally {
        expect(await stopAcis(second)).toBe(0);
      }
    },
    4 * STARTUP_TIMEOUT_MS,
  );
});

describe('acis migrate', () => {
  it(
    'exits 0 on a fresh embedded data dir and again when it is up to date',
    async () => {
      const dir = await mkdtemp(path.join(tmpdir(), 'acis-migrate-'));
      try {
        for (let i = 0; i < 2; i++) {
          const child = runAcis(['migrate'], cleanEnv({ ACIS_DATA_DIR: dir, LOG_LEVEL: 'info' }));
          expect(await child.exited, child.output()).toBe(0);
          expect(child.output()).toMatch(i === 0 ? /migrations applied/ : /up to date/);
        }
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
    2 * STARTUP_TIMEOUT_MS,
  );

  it(
    'exits 0 against PostgreSQL with DATABASE_URL',
    async () => {
      const databaseUrl = await createTestDatabase();
      const dir = await mkdtemp(path.join(tmpdir(), 'acis-migrate-'));
      try {
        const child = runAcis(['migrate'], cleanEnv({ DATABASE_URL: databaseUrl, ACIS_DATA_DIR: dir, LOG_LEVEL: 'info' }));
        expect(await child.exited, child.output()).toBe(0);
        expect(child.output()).toMatch(/migrations applied/);
      } finally {
        await dropTestDatabase(databaseUrl);
        await rm(dir, { recursive: true, force: true });
      }
    },
    STARTUP_TIMEOUT_MS,
  );

  it('rejects an invalid environment with a readable message and a non-zero exit', async () => {
    const child = runAcis(['migrate'], cleanEnv({ ACIS_DATA_DIR: dataDir, ACIS_BOOTSTRAP_SERVICE_KEY: 'nope' }));
    expect(await child.exited).toBe(1);
    expect(child.output()).toMatch(/ACIS_BOOTSTRAP_SERVICE_KEY/);
    expect(child.output()).not.toMatch(/at .*\.ts:\d+/);
  });
});
