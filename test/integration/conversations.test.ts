import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiResponse, problemSlug, startTestServer, type TestServer } from '../helpers/test-server.js';

let t: TestServer;
let key: string;
let otherKey: string;

/** The main tenant: a repository of three skills, a role granting all, a role granting two, and users. */
interface Fixture {
  tenantId: string;
  tenantEid: string;
  repositoryId: string;
  skillIds: string[];
  roleAll: string;
  roleSelected: string;
}
let main: Fixture;
/** Alice holds `roleSelected` (skills 0 and 2), Bob `roleAll`. */
let alice: { id: string; eid: string; token: string };
let bob: { id: string; eid: string; token: string };

let counter = 0;
const unique = (prefix: string) => `${prefix}-${++counter}`;
const pointers = (res: ApiResponse) => (res.body.errors as { pointer: string }[]).map((e) => e.pointer).sort();
const byEid = (externalId: string) => `/conversations/by-external-id/${encodeURIComponent(externalId)}`;

async function newTenant(body: object = {}, token = key): Promise<{ id: string; eid: string }> {
  const eid = unique('test:tenant:conv');
  const res = await t.request('PUT', `/tenants/by-external-id/${encodeURIComponent(eid)}`, { token, body });
  expect(res.status).toBe(201);
  return { id: res.body.id, eid };
}

async function newChildTenant(parentId: string): Promise<{ id: string; eid: string }> {
  const eid = unique('test:tenant:child');
  const res = await t.request('POST', '/tenants', { token: key, body: { name: eid, external_id: eid, parent_id: parentId } });
  expect(res.status).toBe(201);
  return { id: res.body.id, eid };
}

/** A registry repository with manually added skills. */
async function newRepository(skillCount: number, token = key): Promise<{ id: string; skillIds: string[] }> {
  const repository = await t.request('POST', '/repositories', {
    token,
    body: { name: unique('repo'), repo_url: 'https://example.com/x.git' },
  });
  expect(repository.status).toBe(201);
  const skillIds: string[] = [];
  for (let i = 0; i < skillCount; i++) skillIds.push(await addSkill(repository.body.id, token));
  return { id: repository.body.id, skillIds };
}

async function addSkill(repositoryId: string, token = key): Promise<string> {
  const skill = await t.request('POST', `/repositories/${repositoryId}/skills`, { token, body: { name: unique('skill') } });
  expect(skill.status).toBe(201);
  return skill.body.id;
}

async function attach(tenantId: string, repositoryId: string, token = key): Promise<void> {
  const res = await t.request('PUT', `/tenants/${tenantId}/repository`, { token, body: { repository_id: repositoryId } });
  expect(res.status).toBe(200);
}

async function newRole(tenantId: string, skillAccess: object = { mode: 'all' }, token = key): Promise<string> {
  const res = await t.request('POST', `/tenants/${tenantId}/roles`, {
    token,
    body: { name: unique('role'), skill_access: skillAccess },
  });
  expect(res.status).toBe(201);
  return res.body.id;
}

async function newUser(tenantId: string, roleId: string | null, token = key): Promise<{ id: string; eid: string }> {
  const eid = unique('test:user:conv');
  const res = await t.request('PUT', `/tenants/${tenantId}/users/by-external-id/${encodeURIComponent(eid)}`, {
    token,
    body: roleId ? { role_id: roleId } : {},
  });
  expect(res.status).toBe(201);
  return { id: res.body.id, eid };
}

async function tokenFor(tenantEid: string, userEid: string, ttlSeconds = 3600, token = key): Promise<string> {
  const res = await t.request('POST', '/auth/token-exchange', {
    token,
    body: { tenant_external_id: tenantEid, user_external_id: userEid, ttl_seconds: ttlSeconds },
  });
  expect(res.status).toBe(200);
  return res.body.token;
}

/** A fresh tenant with its own repository of `skills` skills and a role granting all of them. */
async function provision(options: { skills?: number; settings?: object } = {}) {
  const tenant = await newTenant(options.settings ? { settings: options.settings } : {});
  const repository = await newRepository(options.skills ?? 1);
  await attach(tenant.id, repository.id);
  const roleId = await newRole(tenant.id);
  const user = await newUser(tenant.id, roleId);
  return { tenant, repository, roleId, user };
}

function create(body: object, options: { token?: string; headers?: Record<string, string> } = {}) {
  return t.request('POST', '/conversations', { token: options.token ?? key, headers: options.headers, body });
}

function upsert(externalId: string, body: object, token = key) {
  return t.request('PUT', byEid(externalId), { token, body });
}

async function conversationIdsOf(userId: string): Promise<string[]> {
  const res = await t.request('GET', `/conversations?user_id=${userId}&limit=100`, { token: key });
  expect(res.status).toBe(200);
  return res.body.data.map((c: { id: string }) => c.id);
}

function expectProblem(res: ApiResponse, status: number, slug: string): void {
  expect(res.status, res.text).toBe(status);
  expect(problemSlug(res)).toBe(slug);
}

beforeAll(async () => {
  t = await startTestServer();
  ({ serviceKey: key } = await t.createIntegration('conversations suite'));
  ({ serviceKey: otherKey } = await t.createIntegration('other integration'));
  const tenant = await newTenant();
  const repository = await newRepository(3);
  await attach(tenant.id, repository.id);
  const [s0, , s2] = repository.skillIds as [string, string, string];
  main = {
    tenantId: tenant.id,
    tenantEid: tenant.eid,
    repositoryId: repository.id,
    skillIds: repository.skillIds,
    roleAll: await newRole(tenant.id),
    roleSelected: await newRole(tenant.id, { mode: 'selected', skill_ids: [s2, s0] }),
  };
  const a = await newUser(tenant.id, main.roleSelected);
  const b = await newUser(tenant.id, main.roleAll);
  alice = { ...a, token: await tokenFor(tenant.eid, a.eid) };
  bob = { ...b, token: await tokenFor(tenant.eid, b.eid) };
});
afterAll(() => t.stop());

describe('POST /conversations', () => {
  it('creates a conversation with its context snapshot, runtime defaults and a platform bucket', async () => {
    const res = await create({ user_id: alice.id });
    expect(res.status).toBe(201);
    const [s0, , s2] = main.skillIds;
    expect(res.body).toEqual({
      object: 'conversation',
      id: expect.stringMatching(/^con_[A-Za-z0-9]+$/),
      external_id: null,
      tenant_id: main.tenantId,
      user_id: alice.id,
      title: null,
      status: 'active',
      context: { role_id: main.roleSelected, repository_id: main.repositoryId, skill_ids: [s0, s2] },
      selected_skill_ids: null,
      runtime: { agent_type: 'vendor-agent-sdk', mode: 'pooled', idle_ttl_seconds: null, sandbox_state: 'cold', expires_at: null },
      filler: null,
      storage: {
        provider: 'platform',
        bucket_uri: `s3://acis-platform/tenants/${main.tenantId}/conversations/${res.body.id}/`,
      },
      message_count: 0,
      last_message_at: null,
      metadata: {},
      created_at: expect.any(String),
      updated_at: res.body.created_at,
    });
    expect((await t.request('GET', `/conversations/${res.body.id}`, { token: key })).body).toEqual(res.body);
  });

  it('snapshots every repository skill for a role granting all, and stores the optional fields', async () => {
    const res = await create({
      user_id: bob.id,
      external_id: `  ${unique('test:conversation:full')}  `,
      title: '  Hello  ',
      selected_skill_ids: [main.skillIds[1]],
      runtime: { agent_type: 'vendor-agent-sdk', mode: 'warm', idle_ttl_seconds: 600 },
      filler: { enabled: false },
      metadata: { source: 'test' },
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      external_id: expect.stringMatching(/^test:conversation:full-\d+$/),
      title: 'Hello',
      context: { role_id: main.roleAll, repository_id: main.repositoryId, skill_ids: main.skillIds },
      selected_skill_ids: [main.skillIds[1]],
      runtime: { agent_type: 'vendor-agent-sdk', mode: 'warm', idle_ttl_seconds: 600, sandbox_state: 'cold', expires_at: null },
      filler: { enabled: false },
      metadata: { source: 'test' },
    });
    expect((await t.request('GET', `/conversations/${res.body.id}`, { token: key })).body).toEqual(res.body);
  });

  it("resolves a child tenant's repository to its nearest ancestor's, and to its own once attached", async () => {
    const child = await newChildTenant(main.tenantId);
    const grandchild = await newChildTenant(child.id);
    const user = await newUser(grandchild.id, await newRole(grandchild.id));
    const inherited = await create({ user_id: user.id });
    expect(inherited.status).toBe(201);
    expect(inherited.body.context).toMatchObject({ repository_id: main.repositoryId, skill_ids: main.skillIds });
    expect(inherited.body.tenant_id).toBe(grandchild.id);

    const own = await newRepository(1);
    await attach(child.id, own.id);
    const nearer = await create({ user_id: user.id });
    expect(nearer.body.context).toMatchObject({ repository_id: own.id, skill_ids: own.skillIds });
  });

  it('snapshots an empty context when no tenant up the chain has a repository (repository_id null)', async () => {
    const tenant = await newTenant();
    const user = await newUser(tenant.id, await newRole(tenant.id));
    const res = await create({ user_id: user.id });
    expect(res.status).toBe(201);
    expect(res.body.context).toEqual({ role_id: expect.stringMatching(/^rol_/), repository_id: null, skill_ids: [] });
  });

  it('keeps the snapshot when the role or the repository changes later', async () => {
    const { tenant, repository } = await provision({ skills: 2 });
    const [s0, s1] = repository.skillIds as [string, string];
    const roleId = await newRole(tenant.id, { mode: 'selected', skill_ids: [s0, s1] });
    const user = await newUser(tenant.id, roleId);
    const before = await create({ user_id: user.id, selected_skill_ids: [s1] });
    expect(before.body.context.skill_ids).toEqual([s0, s1]);

    const patched = await t.request('PATCH', `/roles/${roleId}`, {
      token: key,
      body: { skill_access: { mode: 'selected', skill_ids: [s0] } },
    });
    expect(patched.status).toBe(200);
    const added = await addSkill(repository.id);
    const allRole = await newRole(tenant.id);
    expect((await t.request('PATCH', `/users/${user.id}`, { token: key, body: { role_id: allRole } })).status).toBe(200);

    const reread = await t.request('GET', `/conversations/${before.body.id}`, { token: key });
    expect(reread.body).toEqual(before.body);
    // The changes did happen: a new conversation sees them.
    const after = await create({ user_id: user.id });
    expect(after.body.context).toEqual({ role_id: allRole, repository_id: repository.id, skill_ids: [s0, s1, added] });
    // The old conversation still narrows within its own snapshot, not the new one.
    const outside = await t.request('PATCH', `/conversations/${before.body.id}`, {
      token: key,
      body: { selected_skill_ids: [added] },
    });
    expectProblem(outside, 422, 'validation-error');
    expect(pointers(outside)).toEqual(['/selected_skill_ids/0']);
  });

  it("follows the tenant's repository, not the one a selected role was pinned to", async () => {
    const { tenant, repository } = await provision({ skills: 2 });
    const selectedRole = await newRole(tenant.id, { mode: 'selected', skill_ids: [repository.skillIds[0]] });
    const selectedUser = await newUser(tenant.id, selectedRole);
    const allUser = await newUser(tenant.id, await newRole(tenant.id));
    const moved = await newRepository(1);
    await attach(tenant.id, moved.id);
    const selected = await create({ user_id: selectedUser.id });
    expect(selected.body.context).toEqual({ role_id: selectedRole, repository_id: moved.id, skill_ids: [] });
    const all = await create({ user_id: allUser.id });
    expect(all.body.context).toMatchObject({ repository_id: moved.id, skill_ids: moved.skillIds });
  });

  it('refuses a user without a role with 422 role-required and creates nothing', async () => {
    const user = await newUser(main.tenantId, null);
    const res = await create({ user_id: user.id });
    expectProblem(res, 422, 'role-required');
    expect(await conversationIdsOf(user.id)).toEqual([]);
  });

  it('refuses selected skills outside the snapshot with 422 pointing at each offending index', async () => {
    const [s0, s1] = main.skillIds;
    const res = await create({ user_id: alice.id, selected_skill_ids: [s0, s1, 'skl_doesnotexist'] });
    expectProblem(res, 422, 'validation-error');
    expect(pointers(res)).toEqual(['/selected_skill_ids/1', '/selected_skill_ids/2']);
    const before = await conversationIdsOf(alice.id);
    const empty = await create({ user_id: alice.id, selected_skill_ids: [] });
    expect(empty.status).toBe(201);
    expect(empty.body.selected_skill_ids).toEqual([]);
    expect(await conversationIdsOf(alice.id)).toEqual([empty.body.id, ...before]);
  });

  it('checks idle_ttl_seconds: 60 to 86400, at most the tenant cap; warm defaults to 300', async () => {
    const { user } = await provision({ settings: { max_idle_ttl_seconds: 900 } });
    const ttl = (idle_ttl_seconds: number, mode = 'warm') => create({ user_id: user.id, runtime: { mode, idle_ttl_seconds } });
    for (const value of [59, 86401]) {
      const res = await ttl(value);
      expectProblem(res, 422, 'validation-error');
      expect(pointers(res)).toEqual(['/runtime/idle_ttl_seconds']);
    }
    const aboveCap = await ttl(901);
    expectProblem(aboveCap, 422, 'validation-error');
    expect(pointers(aboveCap)).toEqual(['/runtime/idle_ttl_seconds']);
    // The cap also applies when the mode is pooled (the TTL is then not used).
    expect((await ttl(901, 'pooled')).status).toBe(422);
    expect(await conversationIdsOf(user.id)).toEqual([]);

    expect((await ttl(900)).body.runtime).toMatchObject({ mode: 'warm', idle_ttl_seconds: 900 });
    expect((await ttl(60)).body.runtime.idle_ttl_seconds).toBe(60);
    const warm = await create({ user_id: user.id, runtime: { mode: 'warm' } });
    expect(warm.body.runtime).toEqual({
      agent_type: 'vendor-agent-sdk',
      mode: 'warm',
      idle_ttl_seconds: 300,
      sandbox_state: 'cold',
      expires_at: null,
    });
    const pooled = await ttl(120, 'pooled');
    expect(pooled.status).toBe(201);
    expect(pooled.body.runtime).toMatchObject({ mode: 'pooled', idle_ttl_seconds: null });
  });

  it('accepts the default cap (3600) and 86400 only where the tenant allows it', async () => {
    expect((await create({ user_id: bob.id, runtime: { mode: 'warm', idle_ttl_seconds: 3600 } })).status).toBe(201);
    expect((await create({ user_id: bob.id, runtime: { mode: 'warm', idle_ttl_seconds: 3601 } })).status).toBe(422);
    const { user } = await provision({ settings: { max_idle_ttl_seconds: 86400 } });
    const max = await create({ user_id: user.id, runtime: { mode: 'warm', idle_ttl_seconds: 86400 } });
    expect(max.body.runtime.idle_ttl_seconds).toBe(86400);
  });

  it('defaults a warm TTL to the tenant cap when the cap is below 300', async () => {
    const { user } = await provision({ settings: { max_idle_ttl_seconds: 120 } });
    const res = await create({ user_id: user.id, runtime: { mode: 'warm' } });
    expect(res.status).toBe(201);
    expect(res.body.runtime.idle_ttl_seconds).toBe(120);
  });

  it('refuses an unknown agent type, given explicitly or through the tenant default', async () => {
    const explicit = await create({ user_id: bob.id, runtime: { agent_type: 'other-runtime' } });
    expectProblem(explicit, 422, 'validation-error');
    expect(pointers(explicit)).toEqual(['/runtime/agent_type']);

    const { user } = await provision({ settings: { default_agent_type: 'other-runtime' } });
    const byDefault = await create({ user_id: user.id });
    expectProblem(byDefault, 422, 'validation-error');
    expect(pointers(byDefault)).toEqual(['/runtime']);
    expect(await conversationIdsOf(user.id)).toEqual([]);
    // An explicit known type overrides the tenant's default.
    const known = await create({ user_id: user.id, runtime: { agent_type: 'vendor-agent-sdk' } });
    expect(known.status).toBe(201);
    expect(known.body.runtime.agent_type).toBe('vendor-agent-sdk');
  });

  it('validates the body with JSON pointers (422)', async () => {
    const res = await create({
      user_id: bob.id,
      title: 'x'.repeat(256),
      runtime: { mode: 'hot' },
      filler: {},
      metadata: { a: 1 },
    });
    expectProblem(res, 422, 'validation-error');
    expect(pointers(res)).toEqual(['/filler/enabled', '/metadata/a', '/runtime/mode', '/title']);
    const title = await create({ user_id: bob.id, title: ` ${'t'.repeat(255)} ` });
    expect(title.status).toBe(201);
    expect(title.body.title).toHaveLength(255);
  });

  it('refuses writes to a suspended tenant with 403 tenant-suspended; reads keep working', async () => {
    const { tenant, user } = await provision();
    const token = await tokenFor(tenant.eid, user.eid);
    const existing = await create({ user_id: user.id, external_id: 'test:conversation:suspended' });
    expect(existing.status).toBe(201);
    expect((await t.request('PATCH', `/tenants/${tenant.id}`, { token: key, body: { status: 'suspended' } })).status).toBe(200);

    expectProblem(await create({ user_id: user.id }), 403, 'tenant-suspended');
    expectProblem(await create({}, { token }), 403, 'tenant-suspended');
    expectProblem(await upsert('test:conversation:suspended', { user_id: user.id, title: 'x' }), 403, 'tenant-suspended');
    expectProblem(await upsert('test:conversation:new', { user_id: user.id }), 403, 'tenant-suspended');
    const path = `/conversations/${existing.body.id}`;
    expectProblem(await t.request('PATCH', path, { token: key, body: { title: 'x' } }), 403, 'tenant-suspended');
    expectProblem(await t.request('PATCH', path, { token, body: { status: 'archived' } }), 403, 'tenant-suspended');
    expectProblem(await t.request('DELETE', path, { token: key }), 403, 'tenant-suspended');

    for (const credential of [key, token]) {
      expect((await t.request('GET', path, { token: credential })).body).toEqual(existing.body);
    }
    const list = await t.request('GET', `/conversations?tenant_id=${tenant.id}`, { token: key });
    expect(list.body.data.map((c: { id: string }) => c.id)).toEqual([existing.body.id]);
    const fetched = await t.request('GET', `${byEid('test:conversation:suspended')}?tenant_id=${tenant.id}`, { token: key });
    expect(fetched.status).toBe(200);

    expect((await t.request('PATCH', `/tenants/${tenant.id}`, { token: key, body: { status: 'active' } })).status).toBe(200);
    expect((await create({ user_id: user.id })).status).toBe(201);
  });

  it('refuses a suspended user with 403 until reactivated', async () => {
    const user = await newUser(main.tenantId, main.roleAll);
    const token = await tokenFor(main.tenantEid, user.eid);
    await t.request('PATCH', `/users/${user.id}`, { token: key, body: { status: 'suspended' } });
    expectProblem(await create({ user_id: user.id }), 403, 'insufficient-scope');
    expectProblem(await create({}, { token }), 403, 'insufficient-scope');
    expectProblem(await upsert(unique('test:conversation:suspended-user'), { user_id: user.id }), 403, 'insufficient-scope');
    expect(await conversationIdsOf(user.id)).toEqual([]);
    await t.request('PATCH', `/users/${user.id}`, { token: key, body: { status: 'active' } });
    expect((await create({ user_id: user.id })).status).toBe(201);
  });

  it('refuses a taken external_id in the tenant with 409 naming the holder; other tenants may reuse it', async () => {
    const eid = unique('test:conversation:taken');
    const first = await create({ user_id: alice.id, external_id: eid });
    expect(first.status).toBe(201);
    for (const userId of [alice.id, bob.id]) {
      const again = await create({ user_id: userId, external_id: ` ${eid} ` });
      expectProblem(again, 409, 'external-id-conflict');
      expect(again.body.conflicting_resource_id).toBe(first.body.id);
    }
    expect((await conversationIdsOf(bob.id)).includes(first.body.id)).toBe(false);
    const { user } = await provision();
    const elsewhere = await create({ user_id: user.id, external_id: eid });
    expect(elsewhere.status).toBe(201);
    // External ids are case-sensitive.
    expect((await create({ user_id: alice.id, external_id: eid.toUpperCase() })).status).toBe(201);
  });

  it('creates one conversation when an external id is posted concurrently; the others get 409 naming it', async () => {
    const eid = unique('test:conversation:post-race');
    const results = await Promise.all(Array.from({ length: 6 }, () => create({ user_id: bob.id, external_id: eid })));
    const created = results.filter((r) => r.status === 201);
    expect(created).toHaveLength(1);
    const conflicts = results.filter((r) => r.status === 409);
    expect(conflicts).toHaveLength(5);
    for (const conflict of conflicts) expect(conflict.body.conflicting_resource_id).toBe(created[0]!.body.id);
  });

  it('replays with the same Idempotency-Key and refuses another payload under it', async () => {
    const { user } = await provision();
    const headers = { 'Idempotency-Key': 'create-conversation-1' };
    const first = await create({ user_id: user.id, title: 'Idem' }, { headers });
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotency-replayed')).toBeNull();
    const replay = await create({ user_id: user.id, title: 'Idem' }, { headers });
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotency-replayed')).toBe('true');
    expect(replay.body).toEqual(first.body);
    const conflict = await create({ user_id: user.id, title: 'Other' }, { headers });
    expectProblem(conflict, 409, 'idempotency-key-conflict');
    expect(await conversationIdsOf(user.id)).toEqual([first.body.id]);
  });

  it('answers 404 for an unknown user or a user of another integration; 422 without user_id', async () => {
    expectProblem(await create({ user_id: 'usr_doesnotexist' }), 404, 'not-found');
    // A user of this integration, named under the other integration's key.
    const foreign = await provision();
    expectProblem(await create({ user_id: foreign.user.id }, { token: otherKey }), 404, 'not-found');
    const missing = await create({ title: 'no owner' });
    expectProblem(missing, 422, 'validation-error');
    expect(pointers(missing)).toEqual(['/user_id']);
  });

  it('under a platform JWT takes the user from the token; another user is 403 insufficient-scope', async () => {
    const implicit = await create({ title: 'mine' }, { token: bob.token });
    expect(implicit.status).toBe(201);
    expect(implicit.body).toMatchObject({ user_id: bob.id, tenant_id: main.tenantId, context: { role_id: main.roleAll } });
    expect((await create({ user_id: bob.id }, { token: bob.token })).status).toBe(201);
    const other = await create({ user_id: alice.id }, { token: bob.token });
    expectProblem(other, 403, 'insufficient-scope');
  });

  it('needs a credential (401)', async () => {
    expectProblem(await t.request('POST', '/conversations', { body: { user_id: bob.id } }), 401, 'insufficient-scope');
  });
});

describe('PUT /conversations/by-external-id/{external_id}', () => {
  it('creates (201) with a snapshot, then merges provided fields (200)', async () => {
    const eid = unique('test:conversation:upsert/1');
    const [s0, , s2] = main.skillIds;
    const cold = await upsert(eid, { user_id: alice.id, title: 'First', selected_skill_ids: [s0], metadata: { a: '1' } });
    expect(cold.status).toBe(201);
    expect(cold.body).toMatchObject({
      object: 'conversation',
      external_id: eid,
      user_id: alice.id,
      tenant_id: main.tenantId,
      title: 'First',
      selected_skill_ids: [s0],
      metadata: { a: '1' },
      context: { role_id: main.roleSelected, repository_id: main.repositoryId, skill_ids: [s0, s2] },
      runtime: { mode: 'pooled', idle_ttl_seconds: null, sandbox_state: 'cold' },
      storage: { provider: 'platform', bucket_uri: `s3://acis-platform/tenants/${main.tenantId}/conversations/${cold.body.id}/` },
    });

    const warm = await upsert(eid, { user_id: alice.id, metadata: { b: '2' }, filler: { enabled: true } });
    expect(warm.status).toBe(200);
    expect(warm.body).toMatchObject({
      id: cold.body.id,
      title: 'First',
      selected_skill_ids: [s0],
      metadata: { b: '2' },
      filler: { enabled: true },
    });
    const cleared = await upsert(eid, { user_id: alice.id, title: null, selected_skill_ids: null, filler: null });
    expect(cleared.status).toBe(200);
    expect(cleared.body).toMatchObject({ title: null, selected_skill_ids: null, filler: null, metadata: { b: '2' } });
    const unchanged = await upsert(eid, { user_id: alice.id });
    expect(unchanged.status).toBe(200);
    expect(unchanged.body).toEqual(cleared.body);
    const fetched = await t.request('GET', `${byEid(eid)}?tenant_id=${main.tenantId}`, { token: key });
    expect(fetched.body).toEqual(cleared.body);
    // The padded external id is the same conversation.
    expect((await upsert(` ${eid} `, { user_id: alice.id })).body.id).toBe(cold.body.id);
  });

  it('needs user_id under the service key (422 /user_id), on the create path and on existing conversations', async () => {
    const eid = unique('test:conversation:no-user');
    const missing = await upsert(eid, { title: 'x' });
    expectProblem(missing, 422, 'validation-error');
    expect(pointers(missing)).toEqual(['/user_id']);
    expect((await upsert(eid, { user_id: bob.id })).status).toBe(201);
    const again = await upsert(eid, { title: 'x' });
    expectProblem(again, 422, 'validation-error');
    expect(pointers(again)).toEqual(['/user_id']);
  });

  it('refuses another user_id on an existing conversation (422) and changes nothing', async () => {
    const eid = unique('test:conversation:owner');
    const created = await upsert(eid, { user_id: alice.id, title: 'Keep' });
    const res = await upsert(eid, { user_id: bob.id, title: 'Hijack' });
    expectProblem(res, 422, 'validation-error');
    expect(pointers(res)).toEqual(['/user_id']);
    const fetched = await t.request('GET', `/conversations/${created.body.id}`, { token: key });
    expect(fetched.body).toEqual(created.body);
  });

  it('keeps runtime.agent_type immutable (422 on change, 200 when equal) and lets mode and TTL change', async () => {
    const eid = unique('test:conversation:runtime');
    const created = await upsert(eid, { user_id: bob.id });
    expect(created.body.runtime.mode).toBe('pooled');
    const changed = await upsert(eid, { user_id: bob.id, runtime: { agent_type: 'other-runtime' } });
    expectProblem(changed, 422, 'validation-error');
    expect(pointers(changed)).toEqual(['/runtime/agent_type']);
    const equal = await upsert(eid, { user_id: bob.id, runtime: { agent_type: 'vendor-agent-sdk' } });
    expect(equal.status).toBe(200);
    expect(equal.body.updated_at).toBe(created.body.updated_at);

    const warm = await upsert(eid, { user_id: bob.id, runtime: { mode: 'warm' } });
    expect(warm.body.runtime).toMatchObject({ agent_type: 'vendor-agent-sdk', mode: 'warm', idle_ttl_seconds: 300 });
    const ttl = await upsert(eid, { user_id: bob.id, runtime: { idle_ttl_seconds: 1200 } });
    expect(ttl.body.runtime).toMatchObject({ mode: 'warm', idle_ttl_seconds: 1200 });
    const aboveCap = await upsert(eid, { user_id: bob.id, runtime: { idle_ttl_seconds: 3601 } });
    expectProblem(aboveCap, 422, 'validation-error');
    expect(pointers(aboveCap)).toEqual(['/runtime/idle_ttl_seconds']);
    const pooled = await upsert(eid, { user_id: bob.id, runtime: { mode: 'pooled' } });
    expect(pooled.body.runtime).toMatchObject({ mode: 'pooled', idle_ttl_seconds: null });
    const fetched = await t.request('GET', `/conversations/${created.body.id}`, { token: key });
    expect(fetched.body).toEqual(pooled.body);
  });

  it('checks the create path as POST does: role-required, unknown agent type, skills outside the snapshot', async () => {
    const roleless = await newUser(main.tenantId, null);
    expectProblem(await upsert(unique('test:conversation:roleless'), { user_id: roleless.id }), 422, 'role-required');
    const agent = await upsert(unique('test:conversation:agent'), { user_id: bob.id, runtime: { agent_type: 'nope' } });
    expectProblem(agent, 422, 'validation-error');
    const skills = await upsert(unique('test:conversation:skills'), { user_id: alice.id, selected_skill_ids: [main.skillIds[1]] });
    expectProblem(skills, 422, 'validation-error');
    expect(pointers(skills)).toEqual(['/selected_skill_ids/0']);
    expectProblem(await upsert(unique('test:conversation:x'), { user_id: 'usr_doesnotexist' }), 404, 'not-found');
    expect(await conversationIdsOf(roleless.id)).toEqual([]);
  });

  it('collapses concurrent upserts of one external id: exactly one 201, the rest 200 with the same record', async () => {
    const { user } = await provision();
    const eid = 'test:conversation:race';
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => upsert(eid, { user_id: user.id, metadata: { racer: String(i) } })),
    );
    expect(results.map((r) => r.status).sort()).toEqual([200, 200, 200, 200, 200, 200, 200, 200, 200, 201]);
    expect(new Set(results.map((r) => r.body.id)).size).toBe(1);
    expect(await conversationIdsOf(user.id)).toEqual([results[0]!.body.id]);
  });

  it('refuses external ids longer than 255 characters (400) and accepts 255', async () => {
    expect((await upsert('e'.repeat(255), { user_id: bob.id })).status).toBe(201);
    expectProblem(await upsert('e'.repeat(256), { user_id: bob.id }), 400, 'validation-error');
  });

  it('under a platform JWT takes the user from the token; another user is 403 insufficient-scope', async () => {
    const eid = unique('test:conversation:jwt');
    const created = await upsert(eid, { title: 'via token' }, alice.token);
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ user_id: alice.id, tenant_id: main.tenantId, external_id: eid });
    const same = await upsert(eid, { user_id: alice.id, title: 'again' }, alice.token);
    expect(same.status).toBe(200);
    expect(same.body).toMatchObject({ id: created.body.id, title: 'again' });
    expectProblem(await upsert(eid, { user_id: bob.id }, alice.token), 403, 'insufficient-scope');
    // Bob's token reaching Alice's conversation through its external id.
    expectProblem(await upsert(eid, { title: 'hijack' }, bob.token), 403, 'insufficient-scope');
    expect((await t.request('GET', `/conversations/${created.body.id}`, { token: key })).body.title).toBe('again');
  });
});

describe('GET|PATCH|DELETE /conversations/{conversation_id}', () => {
  it('gets a conversation; unknown ids and other integrations are 404', async () => {
    const created = await create({ user_id: bob.id });
    const path = `/conversations/${created.body.id}`;
    expect((await t.request('GET', path, { token: key })).body).toEqual(created.body);
    expectProblem(await t.request('GET', '/conversations/con_doesnotexist', { token: key }), 404, 'not-found');
    for (const [method, body] of [
      ['GET', undefined],
      ['PATCH', { title: 'hijack' }],
      ['DELETE', undefined],
    ] as const) {
      expectProblem(await t.request(method, path, { token: otherKey, body }), 404, 'not-found');
    }
    expect((await t.request('GET', path, { token: key })).body).toEqual(created.body);
  });

  it('archives and reactivates through PATCH status', async () => {
    const created = await create({ user_id: bob.id });
    const path = `/conversations/${created.body.id}`;
    const archived = await t.request('PATCH', path, { token: key, body: { status: 'archived' } });
    expect(archived.status).toBe(200);
    expect(archived.body.status).toBe('archived');
    expect((await t.request('GET', path, { token: key })).body.status).toBe('archived');
    // Only message writes are refused on an archived conversation; its own fields stay editable.
    const renamed = await t.request('PATCH', path, { token: key, body: { title: 'Archived' } });
    expect(renamed.body).toMatchObject({ status: 'archived', title: 'Archived' });
    const active = await t.request('PATCH', path, { token: bob.token, body: { status: 'active' } });
    expect(active.body.status).toBe('active');
    expect((await t.request('GET', path, { token: key })).body).toEqual(active.body);
  });

  it('merges title, skills, filler and metadata; a no-op keeps updated_at', async () => {
    const [s0, s1, s2] = main.skillIds;
    const created = await create({ user_id: bob.id, title: 'T', metadata: { a: '1' } });
    const path = `/conversations/${created.body.id}`;
    const patched = await t.request('PATCH', path, {
      token: key,
      body: { selected_skill_ids: [s2, s1], metadata: { b: '2' }, filler: { enabled: true } },
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ title: 'T', selected_skill_ids: [s2, s1], metadata: { b: '2' }, filler: { enabled: true } });
    const cleared = await t.request('PATCH', path, { token: key, body: { title: null, selected_skill_ids: null } });
    expect(cleared.body).toMatchObject({ title: null, selected_skill_ids: null, filler: { enabled: true } });
    const noop = await t.request('PATCH', path, { token: key, body: { metadata: { b: '2' } } });
    expect(noop.body).toEqual(cleared.body);
    const outside = await t.request('PATCH', `/conversations/${(await create({ user_id: alice.id })).body.id}`, {
      token: key,
      body: { selected_skill_ids: [s0, s1] },
    });
    expectProblem(outside, 422, 'validation-error');
    expect(pointers(outside)).toEqual(['/selected_skill_ids/1']);
    const invalid = await t.request('PATCH', path, { token: key, body: { status: 'deleted', title: 'x'.repeat(256) } });
    expectProblem(invalid, 422, 'validation-error');
    expect(pointers(invalid)).toEqual(['/status', '/title']);
    expect((await t.request('GET', path, { token: key })).body).toEqual(cleared.body);
  });

  it('switches runtime mode: warm takes the 300 s default TTL, pooled clears it; agent_type stays', async () => {
    const created = await create({ user_id: bob.id });
    const path = `/conversations/${created.body.id}`;
    const warm = await t.request('PATCH', path, { token: key, body: { runtime: { mode: 'warm' } } });
    expect(warm.body.runtime).toEqual({
      agent_type: 'vendor-agent-sdk',
      mode: 'warm',
      idle_ttl_seconds: 300,
      sandbox_state: 'cold',
      expires_at: null,
    });
    const ttl = await t.request('PATCH', path, { token: key, body: { runtime: { idle_ttl_seconds: 90 } } });
    expect(ttl.body.runtime.idle_ttl_seconds).toBe(90);
    const tooLow = await t.request('PATCH', path, { token: key, body: { runtime: { idle_ttl_seconds: 30 } } });
    expectProblem(tooLow, 422, 'validation-error');
    const agent = await t.request('PATCH', path, { token: key, body: { runtime: { agent_type: 'other-runtime' } } });
    expectProblem(agent, 422, 'validation-error');
    expect(pointers(agent)).toEqual(['/runtime/agent_type']);
    const pooled = await t.request('PATCH', path, { token: key, body: { runtime: { mode: 'pooled' } } });
    expect(pooled.body.runtime).toMatchObject({ mode: 'pooled', idle_ttl_seconds: null });
    expect((await t.request('GET', path, { token: key })).body).toEqual(pooled.body);
  });

  it('deletes (204), then 404 everywhere', async () => {
    const created = await create({ user_id: bob.id, external_id: unique('test:conversation:gone') });
    const path = `/conversations/${created.body.id}`;
    const deleted = await t.request('DELETE', path, { token: key });
    expect(deleted.status).toBe(204);
    expect(deleted.text).toBe('');
    expectProblem(await t.request('GET', path, { token: key }), 404, 'not-found');
    expectProblem(await t.request('PATCH', path, { token: key, body: { title: 'x' } }), 404, 'not-found');
    expectProblem(await t.request('DELETE', path, { token: key }), 404, 'not-found');
    const byExternal = await t.request('GET', `${byEid(created.body.external_id)}?tenant_id=${main.tenantId}`, { token: key });
    expectProblem(byExternal, 404, 'not-found');
    expect(await conversationIdsOf(bob.id)).not.toContain(created.body.id);
    // The external id is free again.
    expect((await upsert(created.body.external_id, { user_id: bob.id })).status).toBe(201);
  });
});

describe('GET|DELETE /conversations/by-external-id/{external_id}', () => {
  it('needs tenant_id with the service key (400); a platform JWT uses its own tenant', async () => {
    const eid = unique('test:conversation:by-eid');
    const created = await upsert(eid, { user_id: alice.id });
    const missing = await t.request('GET', byEid(eid), { token: key });
    expectProblem(missing, 400, 'validation-error');
    expect(pointers(missing)).toEqual(['/tenant_id']);
    expect((await t.request('GET', `${byEid(eid)}?tenant_id=${main.tenantId}`, { token: key })).body).toEqual(created.body);
    expect((await t.request('GET', byEid(eid), { token: alice.token })).body).toEqual(created.body);
    const ownTenant = await t.request('GET', `${byEid(eid)}?tenant_id=${main.tenantId}`, { token: alice.token });
    expect(ownTenant.status).toBe(200);

    const other = await newTenant();
    expectProblem(await t.request('GET', `${byEid(eid)}?tenant_id=${other.id}`, { token: key }), 404, 'not-found');
    expectProblem(await t.request('GET', `${byEid(eid)}?tenant_id=${main.tenantId}`, { token: otherKey }), 404, 'not-found');
    expectProblem(await t.request('GET', `${byEid(eid)}?tenant_id=${other.id}`, { token: alice.token }), 403, 'insufficient-scope');
    expectProblem(await t.request('GET', byEid('test:conversation:nope'), { token: alice.token }), 404, 'not-found');
  });

  it('deletes by external id (204), then 404', async () => {
    const eid = unique('test:conversation:delete-eid');
    const created = await upsert(eid, { user_id: bob.id });
    expectProblem(await t.request('DELETE', byEid(eid), { token: key }), 400, 'validation-error');
    expectProblem(await t.request('DELETE', `${byEid(eid)}?tenant_id=${main.tenantId}`, { token: otherKey }), 404, 'not-found');
    expect((await t.request('DELETE', `${byEid(eid)}?tenant_id=${main.tenantId}`, { token: key })).status).toBe(204);
    expectProblem(await t.request('GET', `/conversations/${created.body.id}`, { token: key }), 404, 'not-found');
    expectProblem(await t.request('DELETE', `${byEid(eid)}?tenant_id=${main.tenantId}`, { token: key }), 404, 'not-found');

    const mine = unique('test:conversation:delete-jwt');
    await upsert(mine, {}, bob.token);
    expect((await t.request('DELETE', byEid(mine), { token: bob.token })).status).toBe(204);
    expectProblem(await t.request('GET', byEid(mine), { token: bob.token }), 404, 'not-found');
  });
});

describe('GET /conversations', () => {
  it('needs exactly one of user_id and tenant_id (400)', async () => {
    for (const query of [
      '',
      `?user_id=${bob.id}&tenant_id=${main.tenantId}`,
      '?limit=0&user_id=x',
      `?user_id=${bob.id}&starting_after=a&ending_before=b`,
    ]) {
      const res = await t.request('GET', `/conversations${query}`, { token: key });
      expectProblem(res, 400, 'validation-error');
    }
  });

  it('pages newest first by user and by tenant', async () => {
    const { tenant, roleId, user } = await provision();
    const second = await newUser(tenant.id, roleId);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await create({ user_id: i % 2 === 0 ? user.id : second.id })).body.id);
    const newestFirst = [...ids].reverse();

    const page1 = await t.request('GET', `/conversations?tenant_id=${tenant.id}&limit=2`, { token: key });
    expect(page1.body).toMatchObject({ object: 'list', has_more: true, next_cursor: newestFirst[1] });
    expect(page1.body.data.map((c: { id: string }) => c.id)).toEqual(newestFirst.slice(0, 2));
    const page2 = await t.request('GET', `/conversations?tenant_id=${tenant.id}&limit=2&starting_after=${page1.body.next_cursor}`, {
      token: key,
    });
    expect(page2.body.data.map((c: { id: string }) => c.id)).toEqual(newestFirst.slice(2, 4));
    const page3 = await t.request('GET', `/conversations?tenant_id=${tenant.id}&limit=2&starting_after=${page2.body.next_cursor}`, {
      token: key,
    });
    expect(page3.body).toMatchObject({ has_more: false, next_cursor: null });
    expect(page3.body.data.map((c: { id: string }) => c.id)).toEqual(newestFirst.slice(4));
    const back = await t.request('GET', `/conversations?tenant_id=${tenant.id}&limit=2&ending_before=${newestFirst[4]}`, {
      token: key,
    });
    expect(back.body.data.map((c: { id: string }) => c.id)).toEqual(newestFirst.slice(2, 4));

    expect(await conversationIdsOf(user.id)).toEqual([ids[4], ids[2], ids[0]]);
    expect(await conversationIdsOf(second.id)).toEqual([ids[3], ids[1]]);
  });

  it('answers 404 for a user or tenant of another integration, or one that does not exist, as a GET of it does', async () => {
    expectProblem(await t.request('GET', `/conversations?user_id=${bob.id}`, { token: otherKey }), 404, 'not-found');
    expectProblem(await t.request('GET', `/conversations?tenant_id=${main.tenantId}`, { token: otherKey }), 404, 'not-found');
    const missingUser = `usr_${'0'.repeat(26)}`;
    const missingTenant = `tnt_${'0'.repeat(26)}`;
    expect((await t.request('GET', `/users/${missingUser}`, { token: key })).status).toBe(404);
    expectProblem(await t.request('GET', `/conversations?user_id=${missingUser}`, { token: key }), 404, 'not-found');
    expectProblem(await t.request('GET', `/conversations?tenant_id=${missingTenant}`, { token: key }), 404, 'not-found');
    expect((await t.request('GET', `/conversations?user_id=${bob.id}`, { token: key })).status).toBe(200);
  });

  it('refuses a filter that is not an id of its kind, and a limit not written in decimal digits (400)', async () => {
    for (const query of [
      `tenant_id=${encodeURIComponent("tnt_x' OR '1'='1")}`,
      `tenant_id=${bob.id}`,
      `user_id=${main.tenantId}`,
      'user_id=x',
      `user_id=${bob.id}&limit=0x10`,
      `user_id=${bob.id}&limit=1e1`,
      `user_id=${bob.id}&limit=%2016`,
      `user_id=${bob.id}&limit=`,
    ]) {
      const res = await t.request('GET', `/conversations?${query}`, { token: key });
      expectProblem(res, 400, 'validation-error');
    }
    const sixteen = await t.request('GET', `/conversations?user_id=${bob.id}&limit=16`, { token: key });
    expect(sixteen.status).toBe(200);
  });

  it('under a platform JWT lists only its own user; tenant_id or another user_id is 403', async () => {
    const { tenant, roleId, user } = await provision();
    const token = await tokenFor(tenant.eid, user.eid);
    const other = await newUser(tenant.id, roleId);
    const mine = await create({}, { token });
    await create({ user_id: other.id });
    const own = await t.request('GET', `/conversations?user_id=${user.id}`, { token });
    expect(own.status).toBe(200);
    expect(own.body.data.map((c: { id: string }) => c.id)).toEqual([mine.body.id]);
    expectProblem(await t.request('GET', `/conversations?user_id=${other.id}`, { token }), 403, 'insufficient-scope');
    expectProblem(await t.request('GET', `/conversations?tenant_id=${tenant.id}`, { token }), 403, 'insufficient-scope');
  });
});

describe('platform JWT isolation', () => {
  it("refuses another user's token on a conversation with 403 insufficient-scope, and changes nothing", async () => {
    const created = await create({ title: 'Alice only' }, { token: alice.token });
    expect(created.status).toBe(201);
    const path = `/conversations/${created.body.id}`;
    expectProblem(await t.request('GET', path, { token: bob.token }), 403, 'insufficient-scope');
    expectProblem(await t.request('PATCH', path, { token: bob.token, body: { title: 'Bob' } }), 403, 'insufficient-scope');
    expectProblem(await t.request('DELETE', path, { token: bob.token }), 403, 'insufficient-scope');
    const eid = unique('test:conversation:alice');
    await upsert(eid, {}, alice.token);
    expectProblem(await t.request('GET', byEid(eid), { token: bob.token }), 403, 'insufficient-scope');
    expectProblem(await t.request('DELETE', byEid(eid), { token: bob.token }), 403, 'insufficient-scope');
    expect((await t.request('GET', byEid(eid), { token: alice.token })).status).toBe(200);
    expect((await t.request('GET', path, { token: alice.token })).body).toEqual(created.body);
  });

  it('hides conversations of another tenant or integration from a token behind 404', async () => {
    const created = await create({ user_id: alice.id, external_id: unique('test:conversation:hidden') });
    const path = `/conversations/${created.body.id}`;
    const sibling = await provision();
    const siblingToken = await tokenFor(sibling.tenant.eid, sibling.user.eid);
    const foreignTenant = await newTenant({}, otherKey);
    const foreignUser = await newUser(foreignTenant.id, await newRole(foreignTenant.id, { mode: 'all' }, otherKey), otherKey);
    const foreignToken = await tokenFor(foreignTenant.eid, foreignUser.eid, 3600, otherKey);
    for (const token of [siblingToken, foreignToken]) {
      expectProblem(await t.request('GET', path, { token }), 404, 'not-found');
      expectProblem(await t.request('PATCH', path, { token, body: { title: 'x' } }), 404, 'not-found');
      expectProblem(await t.request('DELETE', path, { token }), 404, 'not-found');
      expectProblem(await t.request('GET', byEid(created.body.external_id), { token }), 404, 'not-found');
    }
    expect((await t.request('GET', path, { token: key })).body).toEqual(created.body);
  });

  it('shows a conversation created under a JWT to the service key', async () => {
    const created = await create({ title: 'from token' }, { token: bob.token });
    expect((await t.request('GET', `/conversations/${created.body.id}`, { token: key })).body).toEqual(created.body);
    expect(await conversationIdsOf(bob.id)).toContain(created.body.id);
    const mine = await t.request('GET', `/conversations?user_id=${bob.id}&limit=100`, { token: bob.token });
    expect(mine.body.data.map((c: { id: string }) => c.id)).toContain(created.body.id);
  });

  it('answers an expired token with 401', async () => {
    const token = await tokenFor(main.tenantEid, bob.eid, 60);
    const created = await create({}, { token });
    expect(created.status).toBe(201);
    t.clock.advance(61_000);
    const res = await t.request('GET', `/conversations/${created.body.id}`, { token });
    expectProblem(res, 401, 'insufficient-scope');
    expect(res.body.title).toBe('Unauthorized');
    expectProblem(await create({}, { token }), 401, 'insufficient-scope');
    expect((await t.request('GET', `/conversations/${created.body.id}`, { token: bob.token })).status).toBe(200);
  });
});
