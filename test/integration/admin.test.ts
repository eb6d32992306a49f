import { execFile } from 'node:child_process';
import { createHash, generateKeyPairSync, randomBytes } from 'node:crypto';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ADMIN_TOKEN,
  createTestDatabase,
  dropTestDatabase,
  problemSlug,
  startTestServer,
  type TestServer,
} from '../helpers/test-server.js';

let t: TestServer;

beforeAll(async () => {
  t = await startTestServer();
});
afterAll(() => t.stop());

/** Every row of every table, as text: what an attacker with a database dump would see. */
async function dumpDatabase(databaseUrl: string): Promise<string> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const tables = await client.query<{ table_name: string }>(
      "select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE'",
    );
    const dump: Record<string, unknown[]> = {};
    for (const { table_name } of tables.rows) {
      dump[table_name] = (await client.query(`select * from "${table_name}"`)).rows;
    }
    return JSON.stringify(dump);
  } finally {
    await client.end();
  }
}

async function queryRows<T extends pg.QueryResultRow>(databaseUrl: string, text: string, values: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return (await client.query<T>(text, values)).rows;
  } finally {
    await client.end();
  }
}

/** base64url of the raw 32-byte public key of a fresh Ed25519 pair (the JWK `x` member is exactly that). */
function ed25519PublicKey(): string {
  const { publicKey } = generateKeyPairSync('ed25519');
  return publicKey.export({ format: 'jwk' }).x as string;
}

const admin = (method: string, path: string, body?: unknown) => t.request(method, path, { token: ADMIN_TOKEN, body });

describe('POST /admin/integrations', () => {
  it('creates an integration with a root tenant and a service key shown once, stored only as a hash', async () => {
    const res = await admin('POST', '/admin/integrations', { name: '  Acme host  ' });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ object: 'integration', name: 'Acme host' });
    expect(res.body.id).toMatch(/^int_[A-Za-z0-9]+$/);
    expect(res.body.root_tenant_id).toMatch(/^tnt_[A-Za-z0-9]+$/);
    expect(res.body.service_key).toMatch(/^sk_int_[A-Za-z0-9]{32,}$/);
    expect(res.body.service_key_id).toMatch(/^key_[A-Za-z0-9]+$/);

    const self = await t.request('GET', '/integration', { token: res.body.service_key });
    expect(self.status).toBe(200);
    expect(self.body).toMatchObject({
      object: 'integration',
      id: res.body.id,
      name: 'Acme host',
      root_tenant_id: res.body.root_tenant_id,
      approver_keys: [],
    });
    expect(self.text).not.toContain(res.body.service_key);

    const dump = await dumpDatabase(t.databaseUrl);
    expect(dump).not.toContain(res.body.service_key);
    // Not even the random part alone (a prefix-stripped copy would be as good as the key).
    expect(dump).not.toContain(res.body.service_key.slice('sk_int_'.length));
    const [row] = await queryRows<{ key_hash: string; hint: string; revoked_at: Date | null }>(
      t.databaseUrl,
      'select key_hash, hint, revoked_at from service_keys where id = $1',
      [res.body.service_key_id],
    );
    expect(row?.key_hash).toBe(createHash('sha256').update(res.body.service_key).digest('hex'));
    expect(row?.hint).toHaveLength(4);
    expect(row?.revoked_at).toBeNull();
    expect(t.logs.join('')).not.toContain(res.body.service_key);
  });

  it('gives each integration its own key and root tenant', async () => {
    const a = await t.createIntegration('a');
    const b = await t.createIntegration('b');
    expect(a.serviceKey).not.toBe(b.serviceKey);
    expect(a.rootTenantId).not.toBe(b.rootTenantId);
    expect((await t.request('GET', '/integration', { token: b.serviceKey })).body.id).toBe(b.id);
  });

  it('validates the name (422) and creates nothing', async () => {
    const before = (await queryRows<{ n: string }>(t.databaseUrl, 'select count(*) as n from integrations'))[0]?.n;
    for (const body of [{}, { name: '   ' }, { name: 'n'.repeat(256) }, { name: 7 }]) {
      const res = await admin('POST', '/admin/integrations', body);
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(problemSlug(res)).toBe('validation-error');
      expect(res.body.errors[0].pointer).toBe('/name');
    }
    const after = (await queryRows<{ n: string }>(t.databaseUrl, 'select count(*) as n from integrations'))[0]?.n;
    expect(after).toBe(before);
  });

  it('needs the admin token: no token, a wrong token or a service key give 401', async () => {
    const { serviceKey } = await t.createIntegration();
    for (const token of [null, 'test-admin-token-0123456780', serviceKey]) {
      const res = await t.request('POST', '/admin/integrations', { token, body: { name: 'x' } });
      expect(res.status).toBe(401);
      expect(problemSlug(res)).toBe('insufficient-scope');
      expect(res.body.title).toBe('Unauthorized');
      expect(res.headers.get('www-authenticate')).toBe('Bearer');
    }
  });
});

describe('service keys', () => {
  it('rotates: a second key works for the same integration; revoking the first makes it 401 at once', async () => {
    const created = (await admin('POST', '/admin/integrations', { name: 'rotating' })).body;
    const firstKey: string = created.service_key;
    // Use the first key so it is in the per-node cache when it is revoked.
    expect((await t.request('GET', '/integration', { token: firstKey })).status).toBe(200);

    const rotated = await admin('POST', `/admin/integrations/${created.id}/service-keys`);
    expect(rotated.status).toBe(201);
    expect(rotated.body).toMatchObject({ object: 'service_key', integration_id: created.id });
    expect(rotated.body.id).toMatch(/^key_[A-Za-z0-9]+$/);
    expect(rotated.body.service_key).toMatch(/^sk_int_[A-Za-z0-9]{32,}$/);
    expect(rotated.body.service_key).not.toBe(firstKey);
    const viaNew = await t.request('GET', '/integration', { token: rotated.body.service_key });
    expect(viaNew.body.id).toBe(created.id);
    expect(await dumpDatabase(t.databaseUrl)).not.toContain(rotated.body.service_key);

    const revoked = await admin('DELETE', `/admin/service-keys/${created.service_key_id}`);
    expect(revoked.status).toBe(204);
    expect(revoked.text).toBe('');
    const refused = await t.request('GET', '/integration', { token: firstKey });
    expect(refused.status).toBe(401);
    expect(problemSlug(refused)).toBe('insufficient-scope');
    expect(refused.headers.get('www-authenticate')).toBe('Bearer');
    expect((await t.request('GET', '/tenants', { token: firstKey })).status).toBe(401);
    // The other key of the integration is untouched.
    expect((await t.request('GET', '/integration', { token: rotated.body.service_key })).status).toBe(200);

    const again = await admin('DELETE', `/admin/service-keys/${created.service_key_id}`);
    expect(again.status).toBe(404);
    expect(problemSlug(again)).toBe('not-found');
  });

  it('answers 404 for an unknown integration or key', async () => {
    const rotate = await admin('POST', '/admin/integrations/int_unknown/service-keys');
    expect(rotate.status).toBe(404);
    expect(problemSlug(rotate)).toBe('not-found');
    const revoke = await admin('DELETE', '/admin/service-keys/key_unknown');
    expect(revoke.status).toBe(404);
  });

  it('cannot be rotated or revoked with a service key', async () => {
    const created = (await admin('POST', '/admin/integrations', { name: 'self-service' })).body;
    const rotate = await t.request('POST', `/admin/integrations/${created.id}/service-keys`, { token: created.service_key });
    expect(rotate.status).toBe(401);
    const revoke = await t.request('DELETE', `/admin/service-keys/${created.service_key_id}`, { token: created.service_key });
    expect(revoke.status).toBe(401);
    expect((await t.request('GET', '/integration', { token: created.service_key })).status).toBe(200);
  });
});

describe('approver keys', () => {
  it('registers an hmac-sha256 key: the secret (32 bytes, base64url) is shown once and stored encrypted', async () => {
    const { rootTenantId } = await t.createIntegration('hmac');
    const res = await admin('POST', `/admin/tenants/${rootTenantId}/approver-keys`, { algorithm: 'hmac-sha256' });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ object: 'approver_key', tenant_id: rootTenantId, algorithm: 'hmac-sha256' });
    expect(res.body.id).toMatch(/^apk_[A-Za-z0-9]+$/);
    const secret: string = res.body.secret;
    expect(secret).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(secret, 'base64url')).toHaveLength(32);
    expect(Buffer.from(secret, 'base64url').toString('base64url')).toBe(secret);

    const dump = await dumpDatabase(t.databaseUrl);
    expect(dump).not.toContain(secret);
    expect(dump).not.toContain(Buffer.from(secret, 'base64url').toString('base64'));
    expect(dump).not.toContain(Buffer.from(secret, 'base64url').toString('hex'));
    const [row] = await queryRows<{ secret_ciphertext: string; public_key: string | null }>(
      t.databaseUrl,
      'select secret_ciphertext, public_key from approver_keys where id = $1',
      [res.body.id],
    );
    expect(row?.public_key).toBeNull();
    // Encrypted, not discarded: the server can still read it to verify signatures, bound to this key's id.
    expect(t.server.deps.vault.decrypt(row!.secret_ciphertext, `approver_key:${res.body.id}`)).toBe(secret);
    expect(t.logs.join('')).not.toContain(secret);

    const second = await admin('POST', `/admin/tenants/${rootTenantId}/approver-keys`, { algorithm: 'hmac-sha256' });
    expect(second.body.secret).not.toBe(secret);
  });

  it('registers an ed25519 key from a real public key: 201 and no secret', async () => {
    const { rootTenantId } = await t.createIntegration('ed25519');
    const x = ed25519PublicKey();
    const res = await admin('POST', `/admin/tenants/${rootTenantId}/approver-keys`, { algorithm: 'ed25519', public_key: x });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ object: 'approver_key', tenant_id: rootTenantId, algorithm: 'ed25519' });
    expect(res.body).not.toHaveProperty('secret');
    const [row] = await queryRows<{ secret_ciphertext: string | null; public_key: string }>(
      t.databaseUrl,
      'select secret_ciphertext, public_key from approver_keys where id = $1',
      [res.body.id],
    );
    expect(row).toEqual({ secret_ciphertext: null, public_key: x });
  });

  it('refuses a missing or malformed public key, or one given for hmac (422), and stores nothing', async () => {
    const { rootTenantId } = await t.createIntegration('bad keys');
    const valid = Buffer.from(ed25519PublicKey(), 'base64url');
    const cases: [unknown, string][] = [
      [{ algorithm: 'ed25519' }, '/public_key'],
      [{ algorithm: 'ed25519', public_key: '' }, '/public_key'],
      [{ algorithm: 'ed25519', public_key: valid.subarray(0, 31).toString('base64url') }, '/public_key'],
      [{ algorithm: 'ed25519', public_key: Buffer.concat([valid, Buffer.from([0])]).toString('base64url') }, '/public_key'],
      [{ algorithm: 'ed25519', public_key: 'not base64url at all!!' }, '/public_key'],
      [{ algorithm: 'ed25519', public_key: 42 }, '/public_key'],
      [{ algorithm: 'hmac-sha256', public_key: valid.toString('base64url') }, '/public_key'],
      [{ algorithm: 'rsa' }, '/algorithm'],
      [{}, '/algorithm'],
    ];
    for (const [body, pointer] of cases) {
      const res = await admin('POST', `/admin/tenants/${rootTenantId}/approver-keys`, body);
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(problemSlug(res)).toBe('validation-error');
      expect(
        res.body.errors.map((e: { pointer: string }) => e.pointer),
        JSON.stringify(body),
      ).toContain(pointer);
    }
    const rows = await queryRows(t.databaseUrl, 'select id from approver_keys where tenant_id = $1', [rootTenantId]);
    expect(rows).toEqual([]);
  });

  it('answers 404 for an unknown tenant', async () => {
    const res = await admin('POST', '/admin/tenants/tnt_unknown/approver-keys', { algorithm: 'hmac-sha256' });
    expect(res.status).toBe(404);
    expect(problemSlug(res)).toBe('not-found');
  });

  it('cannot be registered with a service key (the adapter must not mint approvals)', async () => {
    const { serviceKey, rootTenantId } = await t.createIntegration('no self approval');
    const res = await t.request('POST', `/admin/tenants/${rootTenantId}/approver-keys`, {
      token: serviceKey,
      body: { algorithm: 'hmac-sha256' },
    });
    expect(res.status).toBe(401);
    expect(res.text).not.toContain('secret');
    expect((await t.request('GET', '/integration', { token: serviceKey })).body.approver_keys).toEqual([]);
  });

  it('revokes: 204, then 404 on a second revoke or an unknown id', async () => {
    const { rootTenantId } = await t.createIntegration('revoke');
    const created = await admin('POST', `/admin/tenants/${rootTenantId}/approver-keys`, { algorithm: 'hmac-sha256' });
    const first = await admin('DELETE', `/admin/approver-keys/${created.body.id}`);
    expect(first.status).toBe(204);
    expect(first.text).toBe('');
    const second = await admin('DELETE', `/admin/approver-keys/${created.body.id}`);
    expect(second.status).toBe(404);
    expect(problemSlug(second)).toBe('not-found');
    expect((await admin('DELETE', '/admin/approver-keys/apk_unknown')).status).toBe(404);
  });
});

describe('GET /integration', () => {
  it("lists the active approver keys of the integration's tenants by id, never secrets", async () => {
    const mine = await t.createIntegration('listing');
    const theirs = await t.createIntegration('other listing');
    const child = await t.request('POST', '/tenants', { token: mine.serviceKey, body: { name: 'child' } });
    expect(child.status).toBe(201);

    const rootKey = await admin('POST', `/admin/tenants/${mine.rootTenantId}/approver-keys`, { algorithm: 'hmac-sha256' });
    const childKey = await admin('POST', `/admin/tenants/${child.body.id}/approver-keys`, {
      algorithm: 'ed25519',
      public_key: ed25519PublicKey(),
    });
    const revokedKey = await admin('POST', `/admin/tenants/${child.body.id}/approver-keys`, { algorithm: 'hmac-sha256' });
    await admin('DELETE', `/admin/approver-keys/${revokedKey.body.id}`);
    const foreignKey = await admin('POST', `/admin/tenants/${theirs.rootTenantId}/approver-keys`, { algorithm: 'hmac-sha256' });

    const res = await t.request('GET', '/integration', { token: mine.serviceKey });
    expect(res.status).toBe(200);
    expect(res.body.approver_keys).toEqual(
      [
        {
          object: 'approver_key',
          id: rootKey.body.id,
          tenant_id: mine.rootTenantId,
          algorithm: 'hmac-sha256',
          created_at: rootKey.body.created_at,
        },
        {
          object: 'approver_key',
          id: childKey.body.id,
          tenant_id: child.body.id,
          algorithm: 'ed25519',
          created_at: childKey.body.created_at,
        },
      ].sort((a, b) => (a.id < b.id ? -1 : 1)),
    );
    for (const secret of [rootKey.body.secret, revokedKey.body.secret, foreignKey.body.secret]) {
      expect(res.text).not.toContain(secret);
    }
    expect(res.text).not.toContain('secret_ciphertext');
    expect(res.text).not.toContain(revokedKey.body.id);
    expect(res.text).not.toContain(foreignKey.body.id);

    const other = await t.request('GET', '/integration', { token: theirs.serviceKey });
    expect(other.body.approver_keys.map((k: { id: string }) => k.id)).toEqual([foreignKey.body.id]);
  });

  it('needs a service key (401 without one)', async () => {
    const res = await t.request('GET', '/integration');
    expect(res.status).toBe(401);
    expect(problemSlug(res)).toBe('insufficient-scope');
  });
});

describe('ACIS_BOOTSTRAP_SERVICE_KEY', () => {
  it('creates a root integration with the key at start, once, across concurrent starts and restarts', async () => {
    const databaseUrl = await createTestDatabase();
    const bootstrapKey = `sk_int_${randomBytes(24).toString('hex')}`;
    const env = { DATABASE_URL: databaseUrl, ACIS_BOOTSTRAP_SERVICE_KEY: bootstrapKey };
    try {
      // Two nodes starting together on a fresh database must both come up and share one integration.
      const [first, second] = await Promise.all([startTestServer(env), startTestServer(env)]);
      let integrationId: string;
      let tenantId: string;
      try {
        const self = await first.request('GET', '/integration', { token: bootstrapKey });
        expect(self.status).toBe(200);
        expect(self.body).toMatchObject({ object: 'integration', root_tenant_id: expect.stringMatching(/^tnt_/) });
        integrationId = self.body.id;
        expect((await second.request('GET', '/integration', { token: bootstrapKey })).body.id).toBe(integrationId);
        const tenant = await first.request('POST', '/tenants', { token: bootstrapKey, body: { name: 'kept' } });
        expect(tenant.status).toBe(201);
        expect(tenant.body.parent_id).toBe(self.body.root_tenant_id);
        tenantId = tenant.body.id;
        expect(await dumpDatabase(databaseUrl)).not.toContain(bootstrapKey);
      } finally {
        await Promise.all([first.stop(), second.stop()]);
      }

      const restarted = await startTestServer(env);
      try {
        expect((await restarted.request('GET', '/integration', { token: bootstrapKey })).body.id).toBe(integrationId);
        expect((await restarted.request('GET', `/tenants/${tenantId}`, { token: bootstrapKey })).status).toBe(200);
      } finally {
        await restarted.stop();
      }
      const hash = createHash('sha256').update(bootstrapKey).digest('hex');
      expect(await queryRows(databaseUrl, 'select id from service_keys where key_hash = $1', [hash])).toHaveLength(1);
      expect(await queryRows(databaseUrl, 'select id from integrations')).toHaveLength(1);
      expect(await queryRows(databaseUrl, 'select id from tenants where parent_id is null')).toHaveLength(1);
    } finally {
      await dropTestDatabase(databaseUrl);
    }
  });

  it('refuses a bootstrap key that does not look like sk_int_...', async () => {
    await expect(startTestServer({ ACIS_BOOTSTRAP_SERVICE_KEY: 'not-a-service-key-000000000' })).rejects.toThrow(
      /ACIS_BOOTSTRAP_SERVICE_KEY/,
    );
  });
});

describe('acis CLI (admin commands over HTTP)', () => {
  const root = path.resolve(import.meta.dirname, '../..');
  const cli = (args: string[], adminToken = ADMIN_TOKEN) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(
        path.join(root, 'node_modules/.bin/tsx'),
        ['cli/acis.ts', ...args],
        { cwd: root, env: { ...process.env, ACIS_URL: `${t.url}/`, ACIS_ADMIN_TOKEN: adminToken } },
        (error, stdout, stderr) => resolve({ code: error ? Number(error.code) : 0, stdout, stderr }),
      );
    });

  // Eight CLI runs in a row, each a fresh process compiling the CLI through tsx: tens of seconds when the machine is busy.
  it('creates an integration and an approver key, revokes them, and reports failures by exit code', async () => {
    const created = await cli(['integrations', 'create', '--name', 'from the cli']);
    expect(created.code, created.stderr).toBe(0);
    const integration = JSON.parse(created.stdout);
    expect(integration).toMatchObject({ object: 'integration', name: 'from the cli' });
    expect((await t.request('GET', '/integration', { token: integration.service_key })).body.id).toBe(integration.id);

    // A base64url key may begin with '-'; the CLI must take it as the option's value, not as an option.
    let publicKey = ed25519PublicKey();
    while (!publicKey.startsWith('-')) publicKey = ed25519PublicKey();
    const apk = await cli([
      'approver-keys',
      'create',
      '--tenant',
      integration.root_tenant_id,
      '--algorithm',
      'ed25519',
      '--public-key',
      publicKey,
    ]);
    expect(apk.code, apk.stderr).toBe(0);
    const approverKey = JSON.parse(apk.stdout);
    expect(approverKey).toMatchObject({ algorithm: 'ed25519', tenant_id: integration.root_tenant_id });
    expect((await cli(['approver-keys', 'revoke', '--id', approverKey.id])).code).toBe(0);
    expect((await cli(['approver-keys', 'revoke', '--id', approverKey.id])).code).toBe(1);

    const rotated = await cli(['service-keys', 'create', '--integration', integration.id]);
    expect(rotated.code).toBe(0);
    expect((await cli(['service-keys', 'revoke', '--id', integration.service_key_id])).code).toBe(0);
    expect((await t.request('GET', '/integration', { token: integration.service_key })).status).toBe(401);
    expect((await t.request('GET', '/integration', { token: JSON.parse(rotated.stdout).service_key })).status).toBe(200);

    const refused = await cli(['integrations', 'create', '--name', 'x'], 'wrong-admin-token-000000');
    expect(refused.code).toBe(1);
    expect(JSON.parse(refused.stdout).status).toBe(401);
    const usage = await cli(['integrations', 'create']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/usage: acis/);
    const unknown = await cli(['integrations', 'create', '--name', 'y', '--colour', 'blue']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/Unknown option '--colour'[\s\S]*usage: acis/);
  }, 180_000);
});
