import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { problemSlug, startTestServer, type TestServer } from '../helpers/test-server.js';

let t: TestServer;
let key: string;
let otherKey: string;
let tenant: string;
let foreignTenant: string;

const pointers = (res: { body: { errors: { pointer: string }[] } }) => res.body.errors.map((e) => e.pointer).sort();
let counter = 0;
const unique = (prefix: string) => `${prefix}-${++counter}`;

async function newTenant(body: object = {}, token = key): Promise<string> {
  const res = await t.request('PUT', `/tenants/by-external-id/${unique('test:tenant:roles')}`, { token, body });
  expect(res.status).toBe(201);
  return res.body.id;
}

async function newChildTenant(parentId: string): Promise<string> {
  const res = await t.request('POST', '/tenants', { token: key, body: { name: unique('child'), parent_id: parentId } });
  expect(res.status).toBe(201);
  return res.body.id;
}

/** A registry repository with manually added skills, through the repository and skill routes. */
async function newRepository(skillCount: number, token = key): Promise<{ id: string; skillIds: string[] }> {
  const repository = await t.request('POST', '/repositories', {
    token,
    body: { name: unique('repo'), repo_url: 'https://example.com/x.git' },
  });
  expect(repository.status).toBe(201);
  const skillIds: string[] = [];
  for (let i = 0; i < skillCount; i++) {
    const skill = await t.request('POST', `/repositories/${repository.body.id}/skills`, {
      token,
      body: { name: `skill-${i}` },
    });
    expect(skill.status).toBe(201);
    skillIds.push(skill.body.id);
  }
  return { id: repository.body.id, skillIds };
}

async function attach(tenantId: string, repositoryId: string): Promise<void> {
  const res = await t.request('PUT', `/tenants/${tenantId}/repository`, { token: key, body: { repository_id: repositoryId } });
  expect(res.status).toBe(200);
}

function createRole(tenantId: string, body: object, options: { token?: string; headers?: Record<string, string> } = {}) {
  return t.request('POST', `/tenants/${tenantId}/roles`, { token: options.token ?? key, headers: options.headers, body });
}

async function roleNames(tenantId: string): Promise<string[]> {
  const res = await t.request('GET', `/tenants/${tenantId}/roles?limit=100`, { token: key });
  expect(res.status).toBe(200);
  return res.body.data.map((r: { name: string }) => r.name);
}

async function assignedRepository(tenantId: string, roleId: string): Promise<string | null> {
  const user = await t.request('PUT', `/tenants/${tenantId}/users/by-external-id/${unique('holder')}`, {
    token: key,
    body: { role_id: roleId },
  });
  expect(user.status).toBe(201);
  const roles = await t.request('GET', `/users/${user.body.id}/roles`, { token: key });
  expect(roles.body.data).toHaveLength(1);
  await t.request('DELETE', `/users/${user.body.id}`, { token: key });
  return roles.body.data[0].repository_id;
}

beforeAll(async () => {
  t = await startTestServer();
  ({ serviceKey: key } = await t.createIntegration('roles suite'));
  ({ serviceKey: otherKey } = await t.createIntegration('other integration'));
  tenant = await newTenant();
  foreignTenant = await newTenant({}, otherKey);
});
afterAll(() => t.stop());

describe('POST /tenants/{tenant_id}/roles', () => {
  it('creates a role granting every skill by default', async () => {
    const res = await createRole(tenant, { name: '  Admin  ' });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({
      object: 'role',
      id: expect.stringMatching(/^rol_[A-Za-z0-9]+$/),
      tenant_id: tenant,
      name: 'Admin',
      description: null,
      skill_access: { mode: 'all' },
      metadata: {},
      created_at: expect.any(String),
      updated_at: res.body.created_at,
    });
    expect((await t.request('GET', `/roles/${res.body.id}`, { token: key })).body).toEqual(res.body);
  });

  it('stores description, explicit skill access and metadata', async () => {
    const res = await createRole(tenant, {
      name: 'Viewer',
      description: 'Read only',
      skill_access: { mode: 'all' },
      metadata: { team: 'ops' },
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ description: 'Read only', skill_access: { mode: 'all' }, metadata: { team: 'ops' } });
    expect((await t.request('GET', `/roles/${res.body.id}`, { token: key })).body).toEqual(res.body);
  });

  it('refuses a taken name with 409 name-conflict naming the holder; other tenants may reuse it', async () => {
    const first = await createRole(tenant, { name: 'Taken' });
    const second = await createRole(tenant, { name: ' Taken ', description: 'another' });
    expect(second.status).toBe(409);
    expect(problemSlug(second)).toBe('name-conflict');
    expect(second.body.conflicting_resource_id).toBe(first.body.id);
    expect((await roleNames(tenant)).filter((name) => name === 'Taken')).toHaveLength(1);
    // Names are case-sensitive and per tenant.
    expect((await createRole(tenant, { name: 'taken' })).status).toBe(201);
    const elsewhere = await createRole(await newTenant(), { name: 'Taken' });
    expect(elsewhere.status).toBe(201);
  });

  it('creates one role when the same name is posted concurrently; the others get 409 naming it', async () => {
    const results = await Promise.all(Array.from({ length: 6 }, () => createRole(tenant, { name: 'Racing' })));
    const created = results.filter((r) => r.status === 201);
    expect(created).toHaveLength(1);
    const conflicts = results.filter((r) => r.status === 409);
    expect(conflicts).toHaveLength(5);
    for (const conflict of conflicts) expect(conflict.body.conflicting_resource_id).toBe(created[0]!.body.id);
  });

  it('replays with the same Idempotency-Key and refuses another payload under it', async () => {
    const headers = { 'Idempotency-Key': 'create-role-1' };
    const first = await createRole(tenant, { name: 'Idem' }, { headers });
    expect(first.status).toBe(201);
    const replay = await createRole(tenant, { name: 'Idem' }, { headers });
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotency-replayed')).toBe('true');
    expect(replay.body).toEqual(first.body);
    const conflict = await createRole(tenant, { name: 'Other' }, { headers });
    expect(conflict.status).toBe(409);
    expect(problemSlug(conflict)).toBe('idempotency-key-conflict');
    expect((await roleNames(tenant)).filter((name) => name === 'Idem')).toHaveLength(1);
  });

  it('validates the body with JSON pointers (422) and creates nothing', async () => {
    const before = await roleNames(tenant);
    const cases: [object, string[]][] = [
      [{}, ['/name']],
      [{ name: '   ' }, ['/name']],
      [{ name: 'n'.repeat(256) }, ['/name']],
      [{ name: 'x', description: 5 }, ['/description']],
      [{ name: 'x', description: 'd'.repeat(10_001) }, ['/description']],
      [{ name: 'x', metadata: { a: 1 } }, ['/metadata/a']],
      [{ name: 'x', skill_access: { mode: 'some' } }, ['/skill_access/mode']],
      [{ name: 'x', skill_access: { mode: 'selected' } }, ['/skill_access/skill_ids']],
      [{ name: 'x', skill_access: { mode: 'selected', skill_ids: 'skl_a' } }, ['/skill_access/skill_ids']],
      [{ name: 'x', skill_access: { mode: 'selected', skill_ids: ['skl_a', ''] } }, ['/skill_access/skill_ids/1']],
      [{ name: 'x', skill_access: { mode: 'selected', skill_ids: Array(1001).fill('skl_a') } }, ['/skill_access/skill_ids']],
      [{ name: 'x', skill_access: null }, ['/skill_access']],
    ];
    for (const [body, expected] of cases) {
      const res = await createRole(tenant, body);
      expect(res.status, JSON.stringify(body).slice(0, 80)).toBe(422);
      expect(problemSlug(res)).toBe('validation-error');
      expect(pointers(res), JSON.stringify(body).slice(0, 80)).toEqual(expected);
    }
    expect(await roleNames(tenant)).toEqual(before);
  });

  it('accepts a name of exactly 255 characters, a 10000-character description and metadata at its limits', async () => {
    const metadata = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, 'v'.repeat(500)]));
    const res = await createRole(tenant, { name: 'n'.repeat(255), description: 'd'.repeat(10_000), metadata });
    expect(res.status).toBe(201);
    expect(res.body.name).toHaveLength(255);
    const tooMany = await createRole(tenant, { name: 'm', metadata: { ...metadata, k50: 'x' } });
    expect(tooMany.status).toBe(422);
    expect(pointers(tooMany)).toEqual(['/metadata']);
  });

  it('answers 404 for an unknown tenant and a tenant of another integration', async () => {
    for (const tenantId of ['tnt_doesnotexist', foreignTenant]) {
      const res = await createRole(tenantId, { name: 'Nope' });
      expect(res.status, tenantId).toBe(404);
      expect(problemSlug(res)).toBe('not-found');
    }
  });

  it('needs a service key (401)', async () => {
    const res = await t.request('POST', `/tenants/${tenant}/roles`, { body: { name: 'anon' } });
    expect(res.status).toBe(401);
  });
});

describe('skill_access selected', () => {
  it("accepts skills of the tenant's repository, drops duplicates and pins the repository", async () => {
    const repository = await newRepository(3);
    const tenantId = await newTenant();
    await attach(tenantId, repository.id);
    const [s0, , s2] = repository.skillIds as [string, string, string];
    const res = await createRole(tenantId, { name: 'Selected', skill_access: { mode: 'selected', skill_ids: [s2, s0, s2] } });
    expect(res.status).toBe(201);
    expect(res.body.skill_access).toEqual({ mode: 'selected', skill_ids: [s2, s0] });
    expect((await t.request('GET', `/roles/${res.body.id}`, { token: key })).body.skill_access).toEqual({
      mode: 'selected',
      skill_ids: [s2, s0],
    });
    expect(await assignedRepository(tenantId, res.body.id)).toBe(repository.id);
    const all = await createRole(tenantId, { name: 'All' });
    expect(await assignedRepository(tenantId, all.body.id)).toBeNull();
    // An empty selection grants nothing, and is valid.
    const none = await createRole(tenantId, { name: 'None', skill_access: { mode: 'selected', skill_ids: [] } });
    expect(none.status).toBe(201);
    expect(none.body.skill_access).toEqual({ mode: 'selected', skill_ids: [] });
  });

  it('refuses skills outside the effective repository with 422 pointing at each offending index', async () => {
    const repository = await newRepository(2);
    const otherRepository = await newRepository(1);
    const tenantId = await newTenant();
    await attach(tenantId, repository.id);
    const res = await createRole(tenantId, {
      name: 'Bad skills',
      skill_access: { mode: 'selected', skill_ids: [repository.skillIds[0], 'skl_doesnotexist', otherRepository.skillIds[0]] },
    });
    expect(res.status).toBe(422);
    expect(problemSlug(res)).toBe('validation-error');
    expect(pointers(res)).toEqual(['/skill_access/skill_ids/1', '/skill_access/skill_ids/2']);
    expect(await roleNames(tenantId)).toEqual([]);
  });

  it('refuses any selected skill when the tenant has no repository', async () => {
    const repository = await newRepository(1);
    const tenantId = await newTenant();
    const res = await createRole(tenantId, { name: 'Orphan', skill_access: { mode: 'selected', skill_ids: repository.skillIds } });
    expect(res.status).toBe(422);
    expect(pointers(res)).toEqual(['/skill_access/skill_ids/0']);
  });

  it("uses the nearest ancestor's repository when the tenant has none of its own", async () => {
    const parentRepository = await newRepository(1);
    const ownRepository = await newRepository(1);
    const parent = await newTenant();
    await attach(parent, parentRepository.id);
    const child = await newChildTenant(parent);
    const inherited = await createRole(child, {
      name: 'Inherited',
      skill_access: { mode: 'selected', skill_ids: parentRepository.skillIds },
    });
    expect(inherited.status).toBe(201);
    expect(await assignedRepository(child, inherited.body.id)).toBe(parentRepository.id);
    // An own assignment overrides the ancestor's.
    await attach(child, ownRepository.id);
    const overridden = await createRole(child, {
      name: 'Overridden',
      skill_access: { mode: 'selected', skill_ids: parentRepository.skillIds },
    });
    expect(overridden.status).toBe(422);
    const own = await createRole(child, { name: 'Own', skill_access: { mode: 'selected', skill_ids: ownRepository.skillIds } });
    expect(own.status).toBe(201);
    expect(await assignedRepository(child, own.body.id)).toBe(ownRepository.id);
  });

  it('does not accept skills of a repository of another integration', async () => {
    const foreign = await newRepository(1, otherKey);
    const mine = await newRepository(1);
    const tenantId = await newTenant();
    await attach(tenantId, mine.id);
    const res = await createRole(tenantId, { name: 'Foreign', skill_access: { mode: 'selected', skill_ids: foreign.skillIds } });
    expect(res.status).toBe(422);
    expect(pointers(res)).toEqual(['/skill_access/skill_ids/0']);
  });
});

describe('GET /tenants/{tenant_id}/roles', () => {
  it('pages newest first, forwards and backwards, with an exact name filter', async () => {
    const tenantId = await newTenant();
    const ids: string[] = [];
    for (let i = 0; i < 25; i++) ids.push((await createRole(tenantId, { name: `Role ${i}` })).body.id);
    const newestFirst = [...ids].reverse();
    const list = (query: string) => t.request('GET', `/tenants/${tenantId}/roles?${query}`, { token: key });
    const page1 = await list('limit=10');
    expect(page1.status).toBe(200);
    expect(page1.body.data.map((x: { id: string }) => x.id)).toEqual(newestFirst.slice(0, 10));
    expect(page1.body).toMatchObject({ object: 'list', has_more: true, next_cursor: newestFirst[9] });
    const page2 = await list(`limit=10&starting_after=${page1.body.next_cursor}`);
    expect(page2.body.data.map((x: { id: string }) => x.id)).toEqual(newestFirst.slice(10, 20));
    const page3 = await list(`limit=10&starting_after=${page2.body.next_cursor}`);
    expect(page3.body.data.map((x: { id: string }) => x.id)).toEqual(newestFirst.slice(20));
    expect(page3.body).toMatchObject({ has_more: false, next_cursor: null });
    const back = await list(`limit=10&ending_before=${page2.body.data[0].id}`);
    expect(back.body.data.map((x: { id: string }) => x.id)).toEqual(newestFirst.slice(0, 10));
    expect((await list('')).body.data).toHaveLength(20);
    expect((await list('limit=100')).body.data).toHaveLength(25);
    expect((await list('limit=1')).body.data).toHaveLength(1);

    const byName = await list(`name=${encodeURIComponent('Role 7')}`);
    expect(byName.body.data.map((x: { id: string }) => x.id)).toEqual([ids[7]]);
    expect(byName.body.data[0]).toEqual((await t.request('GET', `/roles/${ids[7]}`, { token: key })).body);
    expect((await list(`name=${encodeURIComponent('role 7')}`)).body.data).toEqual([]);
    expect((await list('name=Role')).body.data).toEqual([]);
  });

  it('finds the holder of a conflicting name (the recovery path after 409)', async () => {
    const tenantId = await newTenant();
    await createRole(tenantId, { name: 'Support' });
    const conflict = await createRole(tenantId, { name: 'Support' });
    const found = await t.request('GET', `/tenants/${tenantId}/roles?name=Support`, { token: key });
    expect(found.body.data.map((r: { id: string }) => r.id)).toEqual([conflict.body.conflicting_resource_id]);
  });

  it('answers 400 for bad pagination or an empty name, 404 for an unknown tenant', async () => {
    for (const query of ['starting_after=rol_a&ending_before=rol_b', 'limit=0', 'limit=101', 'limit=x', 'name=']) {
      const res = await t.request('GET', `/tenants/${tenant}/roles?${query}`, { token: key });
      expect(res.status, query).toBe(400);
      expect(problemSlug(res)).toBe('validation-error');
    }
    expect((await t.request('GET', '/tenants/tnt_doesnotexist/roles', { token: key })).status).toBe(404);
  });
});

describe('PATCH /roles/{role_id}', () => {
  it('updates with merge semantics; a no-op keeps updated_at', async () => {
    const created = await createRole(tenant, { name: 'Patchable', description: 'before', metadata: { a: '1', b: '2' } });
    const res = await t.request('PATCH', `/roles/${created.body.id}`, { token: key, body: { name: 'Patched', metadata: { c: '3' } } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: 'Patched', description: 'before', skill_access: { mode: 'all' }, metadata: { c: '3' } });
    const cleared = await t.request('PATCH', `/roles/${created.body.id}`, { token: key, body: { description: null } });
    expect(cleared.body.description).toBeNull();
    const noop = await t.request('PATCH', `/roles/${created.body.id}`, {
      token: key,
      body: { name: 'Patched', skill_access: { mode: 'all' } },
    });
    expect(noop.status).toBe(200);
    expect(noop.body).toEqual(cleared.body);
    expect((await t.request('GET', `/roles/${created.body.id}`, { token: key })).body).toEqual(cleared.body);
  });

  it('refuses a taken name with 409 naming the holder, and changes nothing', async () => {
    const holder = await createRole(tenant, { name: 'Holder' });
    const other = await createRole(tenant, { name: 'Renamer' });
    const res = await t.request('PATCH', `/roles/${other.body.id}`, { token: key, body: { name: 'Holder', description: 'x' } });
    expect(res.status).toBe(409);
    expect(problemSlug(res)).toBe('name-conflict');
    expect(res.body.conflicting_resource_id).toBe(holder.body.id);
    expect((await t.request('GET', `/roles/${other.body.id}`, { token: key })).body).toEqual(other.body);
  });

  it('switches skill access with the same validation, and re-pins the repository', async () => {
    const repository = await newRepository(2);
    const tenantId = await newTenant();
    await attach(tenantId, repository.id);
    const role = await createRole(tenantId, { name: 'Switching' });
    const bad = await t.request('PATCH', `/roles/${role.body.id}`, {
      token: key,
      body: { skill_access: { mode: 'selected', skill_ids: ['skl_nope', repository.skillIds[1]] } },
    });
    expect(bad.status).toBe(422);
    expect(pointers(bad)).toEqual(['/skill_access/skill_ids/0']);
    expect((await t.request('GET', `/roles/${role.body.id}`, { token: key })).body).toEqual(role.body);

    const selected = await t.request('PATCH', `/roles/${role.body.id}`, {
      token: key,
      body: { skill_access: { mode: 'selected', skill_ids: [repository.skillIds[1]] } },
    });
    expect(selected.status).toBe(200);
    expect(selected.body.skill_access).toEqual({ mode: 'selected', skill_ids: [repository.skillIds[1]] });
    expect(await assignedRepository(tenantId, role.body.id)).toBe(repository.id);

    // A rename keeps the pin even after the tenant moves to another repository.
    const next = await newRepository(1);
    await attach(tenantId, next.id);
    await t.request('PATCH', `/roles/${role.body.id}`, { token: key, body: { name: 'Renamed' } });
    expect(await assignedRepository(tenantId, role.body.id)).toBe(repository.id);

    const all = await t.request('PATCH', `/roles/${role.body.id}`, { token: key, body: { skill_access: { mode: 'all' } } });
    expect(all.body.skill_access).toEqual({ mode: 'all' });
    expect(await assignedRepository(tenantId, role.body.id)).toBeNull();
  });

  it('validates the body (422) and answers 404 for unknown roles', async () => {
    const created = await createRole(tenant, { name: 'Validated' });
    const res = await t.request('PATCH', `/roles/${created.body.id}`, {
      token: key,
      body: { name: '', skill_access: { mode: 'none' }, metadata: { k: 'v'.repeat(501) } },
    });
    expect(res.status).toBe(422);
    expect(pointers(res)).toEqual(['/metadata/k', '/name', '/skill_access/mode']);
    const nullName = await t.request('PATCH', `/roles/${created.body.id}`, { token: key, body: { name: null } });
    expect(nullName.status).toBe(422);
    expect(pointers(nullName)).toEqual(['/name']);
    const missing = await t.request('PATCH', '/roles/rol_doesnotexist', { token: key, body: {} });
    expect(missing.status).toBe(404);
    expect(problemSlug(missing)).toBe('not-found');
  });
});

describe('DELETE /roles/{role_id}', () => {
  it('deletes an unused role (204); afterwards 404 and its name is free', async () => {
    const created = await createRole(tenant, { name: 'Disposable' });
    const res = await t.request('DELETE', `/roles/${created.body.id}`, { token: key });
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    for (const method of ['GET', 'PATCH', 'DELETE']) {
      const after = await t.request(method, `/roles/${created.body.id}`, { token: key, body: method === 'PATCH' ? {} : undefined });
      expect(after.status, method).toBe(404);
      expect(problemSlug(after)).toBe('not-found');
    }
    expect(await roleNames(tenant)).not.toContain('Disposable');
    expect((await createRole(tenant, { name: 'Disposable' })).status).toBe(201);
  });

  it('refuses while a user holds the role (409 resource-in-use naming the user); works once cleared', async () => {
    const role = await createRole(tenant, { name: 'Held' });
    const user = await t.request('PUT', `/tenants/${tenant}/users/by-external-id/holder-of-held`, {
      token: key,
      body: { role_id: role.body.id },
    });
    const refused = await t.request('DELETE', `/roles/${role.body.id}`, { token: key });
    expect(refused.status).toBe(409);
    expect(problemSlug(refused)).toBe('resource-in-use');
    expect(refused.body.conflicting_resource_id).toBe(user.body.id);
    expect((await t.request('GET', `/roles/${role.body.id}`, { token: key })).status).toBe(200);

    await t.request('PATCH', `/users/${user.body.id}`, { token: key, body: { role_id: null } });
    expect((await t.request('DELETE', `/roles/${role.body.id}`, { token: key })).status).toBe(204);
    expect((await t.request('GET', `/users/${user.body.id}`, { token: key })).body.role_id).toBeNull();
  });

  it('goes with its tenant when the tenant is deprovisioned, users holding it included', async () => {
    const tenantId = await newTenant();
    const role = await createRole(tenantId, { name: 'Doomed' });
    const user = await t.request('PUT', `/tenants/${tenantId}/users/by-external-id/doomed`, {
      token: key,
      body: { role_id: role.body.id },
    });
    expect((await t.request('DELETE', `/tenants/${tenantId}`, { token: key })).status).toBe(204);
    expect((await t.request('GET', `/roles/${role.body.id}`, { token: key })).status).toBe(404);
    expect((await t.request('GET', `/users/${user.body.id}`, { token: key })).status).toBe(404);
  });
});

describe('integration isolation', () => {
  it('hides roles of another integration behind 404, never 403', async () => {
    const role = await createRole(tenant, { name: 'Private' });
    for (const [method, path, body] of [
      ['GET', `/roles/${role.body.id}`, undefined],
      ['PATCH', `/roles/${role.body.id}`, { name: 'hijack' }],
      ['DELETE', `/roles/${role.body.id}`, undefined],
      ['GET', `/tenants/${tenant}/roles`, undefined],
      ['POST', `/tenants/${tenant}/roles`, { name: 'intruder' }],
    ] as const) {
      const res = await t.request(method, path, { token: otherKey, body });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(problemSlug(res)).toBe('not-found');
    }
    expect((await t.request('GET', `/roles/${role.body.id}`, { token: key })).body).toEqual(role.body);
    expect(await roleNames(tenant)).not.toContain('intruder');
  });

  it('needs a service key on every route (401)', async () => {
    const role = await createRole(tenant, { name: 'Guarded' });
    for (const [method, path] of [
      ['GET', `/roles/${role.body.id}`],
      ['PATCH', `/roles/${role.body.id}`],
      ['DELETE', `/roles/${role.body.id}`],
      ['GET', `/tenants/${tenant}/roles`],
    ] as const) {
      const res = await t.request(method, path, { body: method === 'PATCH' ? {} : undefined });
      expect(res.status, `${method} ${path}`).toBe(401);
    }
    expect((await t.request('GET', `/roles/${role.body.id}`, { token: key })).status).toBe(200);
  });
});
