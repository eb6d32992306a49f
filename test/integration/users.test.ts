import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { problemSlug, startTestServer, type TestServer } from '../helpers/test-server.js';

let t: TestServer;
let key: string;
let otherKey: string;
/** Two tenants of one integration, and a tenant of another integration. */
let tenantA: string;
let tenantB: string;
let foreignTenant: string;
let roleA: string;
let roleB: string;
let foreignRole: string;

const eid = (suffix: string) => `test:user:${suffix}`;
const upsertPath = (tenantId: string, externalId: string) => `/tenants/${tenantId}/users/by-external-id/${encodeURIComponent(externalId)}`;
const pointers = (res: { body: { errors: { pointer: string }[] } }) => res.body.errors.map((e) => e.pointer).sort();

async function upsert(externalId: string, body: object = {}, tenantId = tenantA) {
  return t.request('PUT', upsertPath(tenantId, externalId), { token: key, body });
}

async function tenantUserIds(tenantId: string): Promise<string[]> {
  const res = await t.request('GET', `/tenants/${tenantId}/users?limit=100`, { token: key });
  expect(res.status).toBe(200);
  return res.body.data.map((u: { id: string }) => u.id);
}

beforeAll(async () => {
  t = await startTestServer();
  ({ serviceKey: key } = await t.createIntegration('users suite'));
  ({ serviceKey: otherKey } = await t.createIntegration('other integration'));
  tenantA = (await t.request('PUT', '/tenants/by-external-id/test:tenant:a', { token: key, body: {} })).body.id;
  tenantB = (await t.request('PUT', '/tenants/by-external-id/test:tenant:b', { token: key, body: {} })).body.id;
  foreignTenant = (await t.request('PUT', '/tenants/by-external-id/test:tenant:a', { token: otherKey, body: {} })).body.id;
  roleA = (await t.request('POST', `/tenants/${tenantA}/roles`, { token: key, body: { name: 'member' } })).body.id;
  roleB = (await t.request('POST', `/tenants/${tenantB}/roles`, { token: key, body: { name: 'member' } })).body.id;
  foreignRole = (await t.request('POST', `/tenants/${foreignTenant}/roles`, { token: otherKey, body: { name: 'member' } })).body.id;
  for (const id of [tenantA, tenantB, foreignTenant, roleA, roleB, foreignRole]) expect(id).toBeTruthy();
});
afterAll(() => t.stop());

describe('PUT /tenants/{tenant_id}/users/by-external-id/{external_id}', () => {
  it('creates (201) with the platform bucket attached, then merges provided fields (200)', async () => {
    const cold = await upsert(eid('upsert'), {});
    expect(cold.status).toBe(201);
    expect(cold.body).toEqual({
      object: 'user',
      id: expect.stringMatching(/^usr_[A-Za-z0-9]+$/),
      tenant_id: tenantA,
      external_id: eid('upsert'),
      email: null,
      display_name: null,
      status: 'active',
      role_id: null,
      storage: { provider: 'platform', bucket_uri: `s3://acis-platform/tenants/${tenantA}/users/${cold.body.id}/` },
      metadata: {},
      created_at: expect.any(String),
      updated_at: cold.body.created_at,
    });
    expect((await t.request('GET', `/users/${cold.body.id}`, { token: key })).body).toEqual(cold.body);

    const warm = await upsert(eid('upsert'), {
      email: 'ada@example.com',
      display_name: '  Ada  ',
      role_id: roleA,
      metadata: { plan: 'pro', seat: '1' },
    });
    expect(warm.status).toBe(200);
    expect(warm.body).toMatchObject({
      id: cold.body.id,
      email: 'ada@example.com',
      display_name: 'Ada',
      role_id: roleA,
      metadata: { plan: 'pro', seat: '1' },
      storage: cold.body.storage,
    });

    const merged = await upsert(eid('upsert'), { metadata: { tier: 'x' }, email: null });
    expect(merged.body).toMatchObject({ email: null, display_name: 'Ada', role_id: roleA, metadata: { tier: 'x' } });
    const unchanged = await upsert(eid('upsert'), {});
    expect(unchanged.status).toBe(200);
    expect(unchanged.body).toEqual(merged.body);
    expect((await t.request('GET', `/users/${cold.body.id}`, { token: key })).body).toEqual(merged.body);
  });

  it('creates with every field given at once', async () => {
    const res = await upsert(eid('full'), { email: 'b@example.org', display_name: 'B', role_id: roleA, metadata: { k: 'v' } });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ email: 'b@example.org', display_name: 'B', role_id: roleA, metadata: { k: 'v' } });
  });

  it('uses the configured bucket for the platform storage', async () => {
    const custom = await startTestServer({ ACIS_STORAGE_BUCKET: 'my-bucket' });
    try {
      const { serviceKey } = await custom.createIntegration();
      const tenant = await custom.request('PUT', '/tenants/by-external-id/t', { token: serviceKey, body: {} });
      const user = await custom.request('PUT', `/tenants/${tenant.body.id}/users/by-external-id/u`, { token: serviceKey, body: {} });
      expect(user.body.storage).toEqual({
        provider: 'platform',
        bucket_uri: `s3://my-bucket/tenants/${tenant.body.id}/users/${user.body.id}/`,
      });
    } finally {
      await custom.stop();
    }
  });

  it('collapses concurrent upserts of one external id: exactly one 201, the rest 200 with the same record', async () => {
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => upsert(eid('race'), { display_name: `Racer ${i}` })));
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    expect(results.filter((r) => r.status === 200)).toHaveLength(9);
    expect(new Set(results.map((r) => r.body.id)).size).toBe(1);
    const ids = await tenantUserIds(tenantA);
    expect(ids.filter((id) => id === results[0]!.body.id)).toHaveLength(1);
  });

  it('never reactivates a suspended user; only PATCH does', async () => {
    const created = await upsert(eid('suspended'), {});
    const suspended = await t.request('PATCH', `/users/${created.body.id}`, { token: key, body: { status: 'suspended' } });
    expect(suspended.body.status).toBe('suspended');
    const upserted = await upsert(eid('suspended'), { status: 'active', display_name: 'Still suspended' });
    expect(upserted.status).toBe(200);
    expect(upserted.body).toMatchObject({ status: 'suspended', display_name: 'Still suspended' });
    expect((await t.request('GET', `/users/${created.body.id}`, { token: key })).body.status).toBe('suspended');
    const reactivated = await t.request('PATCH', `/users/${created.body.id}`, { token: key, body: { status: 'active' } });
    expect(reactivated.status).toBe(200);
    expect(reactivated.body.status).toBe('active');
  });

  it('keys users by (tenant, external id): the same external id in two tenants is two users', async () => {
    const a = await upsert(eid('shared'), {}, tenantA);
    const b = await upsert(eid('shared'), {}, tenantB);
    expect(a.status).toBe(201);
    expect(b.status).toBe(201);
    expect(b.body.id).not.toBe(a.body.id);
    expect(b.body.tenant_id).toBe(tenantB);
  });

  it('compares external ids after trimming, case-sensitively', async () => {
    const created = await upsert(eid('Trim'), {});
    const padded = await upsert(` ${eid('Trim')} `, {});
    expect(padded.status).toBe(200);
    expect(padded.body.id).toBe(created.body.id);
    const lower = await upsert(eid('trim'), {});
    expect(lower.status).toBe(201);
  });

  it('checks role_id as PATCH does: 409 for a role of another tenant, 422 for an unknown one; nothing is created', async () => {
    const before = await tenantUserIds(tenantA);
    const cross = await upsert(eid('role-cross'), { role_id: roleB });
    expect(cross.status).toBe(409);
    expect(problemSlug(cross)).toBe('cross-tenant');
    const unknown = await upsert(eid('role-unknown'), { role_id: 'rol_doesnotexist' });
    expect(unknown.status).toBe(422);
    expect(problemSlug(unknown)).toBe('validation-error');
    expect(pointers(unknown)).toEqual(['/role_id']);
    const malformed = await upsert(eid('role-malformed'), { role_id: 'member' });
    expect(malformed.status).toBe(422);
    expect(pointers(malformed)).toEqual(['/role_id']);
    // A role of another integration is as unknown as a missing one.
    const foreign = await upsert(eid('role-foreign'), { role_id: foreignRole });
    expect(foreign.status).toBe(422);
    expect(pointers(foreign)).toEqual(['/role_id']);
    expect(await tenantUserIds(tenantA)).toEqual(before);
  });

  it('validates the body with JSON pointers (422) and changes nothing', async () => {
    const created = await upsert(eid('invalid'), { display_name: 'Keep' });
    const res = await upsert(eid('invalid'), {
      email: 'not-an-email',
      display_name: 'x'.repeat(256),
      metadata: { a: 1 },
    });
    expect(res.status).toBe(422);
    expect(problemSlug(res)).toBe('validation-error');
    expect(pointers(res)).toEqual(['/display_name', '/email', '/metadata/a']);
    expect((await t.request('GET', `/users/${created.body.id}`, { token: key })).body).toEqual(created.body);
  });

  it('accepts display names of exactly 255 characters after trimming, and metadata at its limits', async () => {
    const metadata = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, 'v'.repeat(500)]));
    const ok = await upsert(eid('limits'), { display_name: ` ${'n'.repeat(255)} `, metadata });
    expect(ok.status).toBe(201);
    expect(ok.body.display_name).toHaveLength(255);
    expect(Object.keys(ok.body.metadata)).toHaveLength(50);
    const tooMany = await upsert(eid('limits'), { metadata: { ...metadata, k50: 'x' } });
    expect(tooMany.status).toBe(422);
    expect(pointers(tooMany)).toEqual(['/metadata']);
    const tooLong = await upsert(eid('limits'), { metadata: { k: 'v'.repeat(501) } });
    expect(tooLong.status).toBe(422);
    expect(pointers(tooLong)).toEqual(['/metadata/k']);
  });

  it('refuses external ids longer than 255 characters after trimming (400) and accepts 255', async () => {
    expect((await upsert('e'.repeat(255), {})).status).toBe(201);
    const long = await upsert('e'.repeat(256), {});
    expect(long.status).toBe(400);
    expect(problemSlug(long)).toBe('validation-error');
  });

  it('answers 404 for an unknown tenant and for a tenant of another integration', async () => {
    const unknown = await upsert(eid('nowhere'), {}, 'tnt_doesnotexist');
    expect(unknown.status).toBe(404);
    expect(problemSlug(unknown)).toBe('not-found');
    const foreign = await upsert(eid('nowhere'), {}, foreignTenant);
    expect(foreign.status).toBe(404);
    expect(problemSlug(foreign)).toBe('not-found');
    const theirs = await t.request('GET', `/tenants/${foreignTenant}/users?limit=100`, { token: otherKey });
    expect(theirs.body.data).toEqual([]);
  });

  it('needs a service key (401)', async () => {
    const res = await t.request('PUT', upsertPath(tenantA, eid('anon')), { body: {} });
    expect(res.status).toBe(401);
    expect(problemSlug(res)).toBe('insufficient-scope');
  });
});

describe('PATCH /users/{user_id}', () => {
  it('updates profile fields with merge semantics; a no-op keeps updated_at', async () => {
    const created = await upsert(eid('patch'), { email: 'p@example.com', display_name: 'P', metadata: { a: '1', b: '2' } });
    const res = await t.request('PATCH', `/users/${created.body.id}`, {
      token: key,
      body: { display_name: null, metadata: { c: '3' } },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ email: 'p@example.com', display_name: null, metadata: { c: '3' } });
    const noop = await t.request('PATCH', `/users/${created.body.id}`, { token: key, body: { email: 'p@example.com' } });
    expect(noop.body.updated_at).toBe(res.body.updated_at);
    expect((await t.request('GET', `/users/${created.body.id}`, { token: key })).body).toEqual(res.body);
  });

  it('assigns, keeps and clears the role', async () => {
    const created = await upsert(eid('role'), {});
    const assigned = await t.request('PATCH', `/users/${created.body.id}`, { token: key, body: { role_id: roleA } });
    expect(assigned.status).toBe(200);
    expect(assigned.body.role_id).toBe(roleA);
    const kept = await t.request('PATCH', `/users/${created.body.id}`, { token: key, body: { display_name: 'R' } });
    expect(kept.body.role_id).toBe(roleA);
    const cleared = await t.request('PATCH', `/users/${created.body.id}`, { token: key, body: { role_id: null } });
    expect(cleared.body.role_id).toBeNull();
    expect((await t.request('GET', `/users/${created.body.id}`, { token: key })).body.role_id).toBeNull();
  });

  it('refuses a role of another tenant of the same integration with 409 cross-tenant, and changes nothing', async () => {
    const created = await upsert(eid('cross'), { role_id: roleA });
    const res = await t.request('PATCH', `/users/${created.body.id}`, { token: key, body: { role_id: roleB, display_name: 'X' } });
    expect(res.status).toBe(409);
    expect(problemSlug(res)).toBe('cross-tenant');
    expect((await t.request('GET', `/users/${created.body.id}`, { token: key })).body).toEqual(created.body);
  });

  it('refuses a role that does not resolve in the integration with 422 at /role_id', async () => {
    const created = await upsert(eid('unknown-role'), {});
    for (const roleId of ['rol_doesnotexist', foreignRole, 'usr_notarole', '']) {
      const res = await t.request('PATCH', `/users/${created.body.id}`, { token: key, body: { role_id: roleId } });
      expect(res.status, roleId).toBe(422);
      expect(problemSlug(res)).toBe('validation-error');
      expect(pointers(res)).toEqual(['/role_id']);
    }
    expect((await t.request('GET', `/users/${created.body.id}`, { token: key })).body.role_id).toBeNull();
  });

  it('links an external bucket and restores the platform one', async () => {
    const created = await upsert(eid('storage'), {});
    const platform = created.body.storage;
    const external = { provider: 'external', bucket_uri: 's3://host-bucket/users/42/' };
    const linked = await t.request('PATCH', `/users/${created.body.id}`, { token: key, body: { storage: external } });
    expect(linked.status).toBe(200);
    expect(linked.body.storage).toEqual(external);
    expect((await t.request('GET', `/users/${created.body.id}`, { token: key })).body.storage).toEqual(external);
    // Upserts do not touch storage.
    expect((await upsert(eid('storage'), { display_name: 'S' })).body.storage).toEqual(external);

    const restored = await t.request('PATCH', `/users/${created.body.id}`, { token: key, body: { storage: { provider: 'platform' } } });
    expect(restored.body.storage).toEqual(platform);
    await t.request('PATCH', `/users/${created.body.id}`, { token: key, body: { storage: external } });
    const explicit = await t.request('PATCH', `/users/${created.body.id}`, { token: key, body: { storage: platform } });
    expect(explicit.status).toBe(200);
    expect(explicit.body.storage).toEqual(platform);
  });

  it('validates storage: an s3 URI for external, only the platform URI for platform', async () => {
    const created = await upsert(eid('storage-invalid'), {});
    const cases: [unknown, string][] = [
      [{ provider: 'external', bucket_uri: 'https://example.com/bucket' }, '/storage/bucket_uri'],
      [{ provider: 'external', bucket_uri: 's3://UPPER/' }, '/storage/bucket_uri'],
      [{ provider: 'external' }, '/storage/bucket_uri'],
      [{ provider: 'platform', bucket_uri: 's3://another-bucket/' }, '/storage/bucket_uri'],
      [{ provider: 'ftp', bucket_uri: 's3://b-b/' }, '/storage/provider'],
      [null, '/storage'],
    ];
    for (const [storage, pointer] of cases) {
      const res = await t.request('PATCH', `/users/${created.body.id}`, { token: key, body: { storage } });
      expect(res.status, JSON.stringify(storage)).toBe(422);
      expect(problemSlug(res)).toBe('validation-error');
      expect(pointers(res), JSON.stringify(storage)).toEqual([pointer]);
    }
    expect((await t.request('GET', `/users/${created.body.id}`, { token: key })).body).toEqual(created.body);
  });

  it('validates status, email and display_name', async () => {
    const created = await upsert(eid('patch-invalid'), {});
    const res = await t.request('PATCH', `/users/${created.body.id}`, {
      token: key,
      body: { status: 'deleted', email: 'a@', display_name: 'd'.repeat(256) },
    });
    expect(res.status).toBe(422);
    expect(pointers(res)).toEqual(['/display_name', '/email', '/status']);
    const atLimit = await t.request('PATCH', `/users/${created.body.id}`, { token: key, body: { display_name: 'd'.repeat(255) } });
    expect(atLimit.status).toBe(200);
  });

  it('answers 404 for an unknown user', async () => {
    const res = await t.request('PATCH', '/users/usr_doesnotexist', { token: key, body: {} });
    expect(res.status).toBe(404);
    expect(problemSlug(res)).toBe('not-found');
  });
});

describe('GET|DELETE /users/{user_id}', () => {
  it('deletes (204); afterwards 404 everywhere, and the external id is free again', async () => {
    const created = await upsert(eid('gone'), { role_id: roleA });
    const deleted = await t.request('DELETE', `/users/${created.body.id}`, { token: key });
    expect(deleted.status).toBe(204);
    expect(deleted.text).toBe('');
    for (const [method, path] of [
      ['GET', `/users/${created.body.id}`],
      ['PATCH', `/users/${created.body.id}`],
      ['DELETE', `/users/${created.body.id}`],
      ['GET', `/users/${created.body.id}/roles`],
    ] as const) {
      const res = await t.request(method, path, { token: key, body: method === 'PATCH' ? {} : undefined });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(problemSlug(res)).toBe('not-found');
    }
    expect(await tenantUserIds(tenantA)).not.toContain(created.body.id);
    const again = await upsert(eid('gone'), {});
    expect(again.status).toBe(201);
    expect(again.body.id).not.toBe(created.body.id);
  });

  it('answers 404 for an unknown user', async () => {
    expect((await t.request('GET', '/users/usr_doesnotexist', { token: key })).status).toBe(404);
    expect((await t.request('DELETE', '/users/usr_doesnotexist', { token: key })).status).toBe(404);
  });
});

describe('GET /tenants/{tenant_id}/users', () => {
  it('pages newest first, forwards and backwards, with a status filter', async () => {
    const tenant = (await t.request('PUT', '/tenants/by-external-id/test:tenant:paging', { token: key, body: {} })).body.id;
    const ids: string[] = [];
    for (let i = 0; i < 25; i++) {
      const res = await upsert(eid(`page-${i}`), {}, tenant);
      ids.push(res.body.id);
    }
    const newestFirst = [...ids].reverse();
    const list = (query: string) => t.request('GET', `/tenants/${tenant}/users?${query}`, { token: key });
    const page1 = await list('limit=10');
    expect(page1.body.data.map((x: { id: string }) => x.id)).toEqual(newestFirst.slice(0, 10));
    expect(page1.body).toMatchObject({ object: 'list', has_more: true, next_cursor: newestFirst[9] });
    const page2 = await list(`limit=10&starting_after=${page1.body.next_cursor}`);
    expect(page2.body.data.map((x: { id: string }) => x.id)).toEqual(newestFirst.slice(10, 20));
    const page3 = await list(`limit=10&starting_after=${page2.body.next_cursor}`);
    expect(page3.body.data.map((x: { id: string }) => x.id)).toEqual(newestFirst.slice(20));
    expect(page3.body).toMatchObject({ has_more: false, next_cursor: null });
    const back = await list(`limit=10&ending_before=${page2.body.data[0].id}`);
    expect(back.body.data.map((x: { id: string }) => x.id)).toEqual(newestFirst.slice(0, 10));
    expect(back.body.has_more).toBe(false);
    expect((await list('')).body.data).toHaveLength(20);
    expect((await list('limit=100')).body.data).toHaveLength(25);
    expect((await list('limit=1')).body.data).toHaveLength(1);

    await t.request('PATCH', `/users/${ids[3]}`, { token: key, body: { status: 'suspended' } });
    const suspended = await list('status=suspended');
    expect(suspended.body.data.map((x: { id: string }) => x.id)).toEqual([ids[3]]);
    const active = await list('status=active&limit=100');
    expect(active.body.data).toHaveLength(24);
    // Users of other tenants never appear.
    expect((await list('limit=100')).body.data.every((u: { tenant_id: string }) => u.tenant_id === tenant)).toBe(true);
  });

  it('answers 400 for both cursors, a bad limit or a bad status; 404 for an unknown tenant', async () => {
    for (const query of ['starting_after=usr_a&ending_before=usr_b', 'limit=0', 'limit=101', 'limit=abc', 'status=gone']) {
      const res = await t.request('GET', `/tenants/${tenantA}/users?${query}`, { token: key });
      expect(res.status, query).toBe(400);
      expect(problemSlug(res)).toBe('validation-error');
    }
    expect((await t.request('GET', '/tenants/tnt_doesnotexist/users', { token: key })).status).toBe(404);
  });
});

describe('GET /users/{user_id}/roles', () => {
  it('lists no role for a user without one', async () => {
    const created = await upsert(eid('roleless'), {});
    const res = await t.request('GET', `/users/${created.body.id}/roles`, { token: key });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ object: 'list', data: [], has_more: false, next_cursor: null });
  });

  it("lists the user's role with repository_id and without metadata", async () => {
    const role = await t.request('POST', `/tenants/${tenantA}/roles`, {
      token: key,
      body: { name: 'listed', description: 'Listed role', metadata: { secret: 'not shown' } },
    });
    const created = await upsert(eid('with-role'), { role_id: role.body.id });
    const res = await t.request('GET', `/users/${created.body.id}/roles`, { token: key });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      object: 'list',
      data: [
        {
          object: 'role',
          id: role.body.id,
          tenant_id: tenantA,
          name: 'listed',
          description: 'Listed role',
          skill_access: { mode: 'all' },
          repository_id: null,
          created_at: role.body.created_at,
          updated_at: role.body.updated_at,
        },
      ],
      has_more: false,
      next_cursor: null,
    });
    // The page walks like any other list: past the only role there is nothing.
    const after = await t.request('GET', `/users/${created.body.id}/roles?starting_after=${role.body.id}`, { token: key });
    expect(after.body.data).toEqual([]);
    const limited = await t.request('GET', `/users/${created.body.id}/roles?limit=1`, { token: key });
    expect(limited.body.data).toHaveLength(1);
    expect(limited.body.has_more).toBe(false);
  });

  it('answers 400 for bad pagination and 404 for an unknown user', async () => {
    const created = await upsert(eid('roles-400'), {});
    for (const query of ['starting_after=rol_a&ending_before=rol_b', 'limit=0', 'limit=101']) {
      const res = await t.request('GET', `/users/${created.body.id}/roles?${query}`, { token: key });
      expect(res.status, query).toBe(400);
    }
    expect((await t.request('GET', '/users/usr_doesnotexist/roles', { token: key })).status).toBe(404);
  });
});

describe('integration isolation', () => {
  it('hides users of another integration behind 404, never 403', async () => {
    const mine = await upsert(eid('isolated'), { display_name: 'Mine only' });
    const id = mine.body.id;
    for (const [method, path, body] of [
      ['GET', `/users/${id}`, undefined],
      ['PATCH', `/users/${id}`, { display_name: 'hijack' }],
      ['DELETE', `/users/${id}`, undefined],
      ['GET', `/users/${id}/roles`, undefined],
      ['GET', `/tenants/${tenantA}/users`, undefined],
      ['PUT', upsertPath(tenantA, eid('isolated')), {}],
    ] as const) {
      const res = await t.request(method, path, { token: otherKey, body });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(problemSlug(res)).toBe('not-found');
    }
    expect((await t.request('GET', `/users/${id}`, { token: key })).body).toEqual(mine.body);
  });

  it('needs a service key on every route (401)', async () => {
    const created = await upsert(eid('auth'), {});
    for (const [method, path] of [
      ['GET', `/users/${created.body.id}`],
      ['PATCH', `/users/${created.body.id}`],
      ['DELETE', `/users/${created.body.id}`],
      ['GET', `/users/${created.body.id}/roles`],
      ['GET', `/tenants/${tenantA}/users`],
    ] as const) {
      const res = await t.request(method, path, { body: method === 'PATCH' ? {} : undefined });
      expect(res.status, `${method} ${path}`).toBe(401);
    }
    expect((await t.request('GET', `/users/${created.body.id}`, { token: key })).status).toBe(200);
  });
});
