import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiResponse, problemSlug, startTestServer, type TestServer } from '../helpers/test-server.js';

let t: TestServer;
let key: string;
let rootTenantId: string;
let otherKey: string;

beforeAll(async () => {
  t = await startTestServer();
  ({ serviceKey: key, rootTenantId } = await t.createIntegration('tenants suite'));
  ({ serviceKey: otherKey } = await t.createIntegration('other integration'));
});
afterAll(() => t.stop());

const eid = (suffix: string) => `test:tenant:${suffix}`;

describe('POST /tenants', () => {
  it('creates a tenant with default settings under the integration root', async () => {
    const res = await t.request('POST', '/tenants', { token: key, body: { name: '  Acme  ', external_id: eid('create') } });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      object: 'tenant',
      name: 'Acme',
      external_id: eid('create'),
      status: 'active',
      parent_id: rootTenantId,
      repository_id: null,
      metadata: {},
      settings: { filler_enabled: true, default_agent_type: 'vendor-agent-sdk', max_idle_ttl_seconds: 3600, max_concurrent_warm: 5 },
    });
    expect(res.body.id).toMatch(/^tnt_[A-Za-z0-9]+$/);
    expect(res.headers.get('x-request-id')).toMatch(/^req_/);
    const fetched = await t.request('GET', `/tenants/${res.body.id}`, { token: key });
    expect(fetched.body).toEqual(res.body);
  });

  it('refuses a taken external_id with 409 external-id-conflict naming the holder', async () => {
    const first = await t.request('POST', '/tenants', { token: key, body: { name: 'A', external_id: eid('dup') } });
    const second = await t.request('POST', '/tenants', { token: key, body: { name: 'B', external_id: ` ${eid('dup')} ` } });
    expect(second.status).toBe(409);
    expect(problemSlug(second)).toBe('external-id-conflict');
    expect(second.body.conflicting_resource_id).toBe(first.body.id);
  });

  it('validates the body with JSON pointers (422) and changes nothing', async () => {
    const before = await t.request('GET', '/tenants?limit=100', { token: key });
    const res = await t.request('POST', '/tenants', {
      token: key,
      body: { name: 'x'.repeat(256), settings: { max_idle_ttl_seconds: 10 }, metadata: { a: 1 } },
    });
    expect(res.status).toBe(422);
    expect(problemSlug(res)).toBe('validation-error');
    const pointers = res.body.errors.map((e: { pointer: string }) => e.pointer).sort();
    expect(pointers).toEqual(['/metadata/a', '/name', '/settings/max_idle_ttl_seconds']);
    const after = await t.request('GET', '/tenants?limit=100', { token: key });
    expect(after.body.data.length).toBe(before.body.data.length);
  });

  it('accepts names of exactly 255 characters after trimming, and metadata at its limits', async () => {
    const metadata = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, 'v'.repeat(500)]));
    const ok = await t.request('POST', '/tenants', { token: key, body: { name: ` ${'n'.repeat(255)} `, metadata } });
    expect(ok.status).toBe(201);
    expect(ok.body.name).toHaveLength(255);
    const tooMany = await t.request('POST', '/tenants', { token: key, body: { name: 'm', metadata: { ...metadata, k50: 'x' } } });
    expect(tooMany.status).toBe(422);
    const tooLong = await t.request('POST', '/tenants', { token: key, body: { name: 'm', metadata: { k: 'v'.repeat(501) } } });
    expect(tooLong.status).toBe(422);
    expect(tooLong.body.errors[0].pointer).toBe('/metadata/k');
  });

  it('answers malformed JSON with 400 and a non-JSON body with 415', async () => {
    const bad = await t.request('POST', '/tenants', { token: key, rawBody: '{"name":', headers: { 'content-type': 'application/json' } });
    expect(bad.status).toBe(400);
    expect(problemSlug(bad)).toBe('validation-error');
    const text = await t.request('POST', '/tenants', { token: key, rawBody: 'name=x', headers: { 'content-type': 'text/plain' } });
    expect(text.status).toBe(415);
  });

  it('needs a service key: 401 without one, 401 for an unknown key', async () => {
    const none = await t.request('POST', '/tenants', { body: { name: 'x' } });
    expect(none.status).toBe(401);
    expect(problemSlug(none)).toBe('insufficient-scope');
    expect(none.body.title).toBe('Unauthorized');
    expect(none.headers.get('www-authenticate')).toBe('Bearer');
    const unknown = await t.request('POST', '/tenants', { token: 'sk_int_doesnotexist0000000000', body: { name: 'x' } });
    expect(unknown.status).toBe(401);
  });
});

describe('Idempotency-Key on POST /tenants', () => {
  it('replays the original response and refuses another payload with the same key', async () => {
    const headers = { 'Idempotency-Key': 'create-tenant-1' };
    const first = await t.request('POST', '/tenants', { token: key, headers, body: { name: 'Idem' } });
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotency-replayed')).toBeNull();
    const replay = await t.request('POST', '/tenants', { token: key, headers, body: { name: 'Idem' } });
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotency-replayed')).toBe('true');
    expect(replay.body).toEqual(first.body);
    const conflict = await t.request('POST', '/tenants', { token: key, headers, body: { name: 'Other' } });
    expect(conflict.status).toBe(409);
    expect(problemSlug(conflict)).toBe('idempotency-key-conflict');
    const list = await t.request('GET', '/tenants?limit=100', { token: key });
    expect(list.body.data.filter((x: { name: string }) => x.name === 'Idem')).toHaveLength(1);
  });

  it('runs concurrent requests with one key only once', async () => {
    const headers = { 'Idempotency-Key': 'concurrent-1' };
    const results = await Promise.all(
      Array.from({ length: 8 }, () => t.request('POST', '/tenants', { token: key, headers, body: { name: 'Concurrent' } })),
    );
    expect(results.map((r) => r.status)).toEqual(Array(8).fill(201));
    expect(new Set(results.map((r) => r.body.id)).size).toBe(1);
    expect(results.filter((r) => r.headers.get('idempotency-replayed') === 'true')).toHaveLength(7);
  });

  it('keys are per principal: another integration may reuse the key', async () => {
    const headers = { 'Idempotency-Key': 'shared-key' };
    const a = await t.request('POST', '/tenants', { token: key, headers, body: { name: 'Mine' } });
    const b = await t.request('POST', '/tenants', { token: otherKey, headers, body: { name: 'Theirs' } });
    expect(a.status).toBe(201);
    expect(b.status).toBe(201);
    expect(b.headers.get('idempotency-replayed')).toBeNull();
    expect(b.body.id).not.toBe(a.body.id);
  });

  it('caches error responses too, and expires keys after 24 hours', async () => {
    const headers = { 'Idempotency-Key': 'invalid-once' };
    const first = await t.request('POST', '/tenants', { token: key, headers, body: {} });
    expect(first.status).toBe(422);
    const replay = await t.request('POST', '/tenants', { token: key, headers, body: {} });
    expect(replay.headers.get('idempotency-replayed')).toBe('true');
    expect(replay.body).toEqual(first.body);
    t.clock.advance(24 * 3600 * 1000 + 1000);
    const later = await t.request('POST', '/tenants', { token: key, headers, body: {} });
    expect(later.headers.get('idempotency-replayed')).toBeNull();
  });

  it('refuses a key longer than 255 characters with 400', async () => {
    const res = await t.request('POST', '/tenants', { token: key, headers: { 'Idempotency-Key': 'k'.repeat(256) }, body: { name: 'x' } });
    expect(res.status).toBe(400);
  });
});

describe('PUT /tenants/by-external-id/{external_id}', () => {
  it('creates cold (201), then returns warm (200) merging only provided fields', async () => {
    const path = `/tenants/by-external-id/${encodeURIComponent(eid('upsert/1'))}`;
    const cold = await t.request('PUT', path, { token: key, body: {} });
    expect(cold.status).toBe(201);
    expect(cold.body).toMatchObject({ external_id: eid('upsert/1'), name: null });
    const warm = await t.request('PUT', path, { token: key, body: { name: 'Named', metadata: { plan: 'pro' } } });
    expect(warm.status).toBe(200);
    expect(warm.body).toMatchObject({ id: cold.body.id, name: 'Named', metadata: { plan: 'pro' } });
    const again = await t.request('PUT', path, { token: key, body: { metadata: { tier: 'x' } } });
    expect(again.body).toMatchObject({ name: 'Named', metadata: { tier: 'x' } });
    const cleared = await t.request('PUT', path, { token: key, body: { name: null } });
    expect(cleared.body.name).toBeNull();
    const unchanged = await t.request('PUT', path, { token: key, body: {} });
    expect(unchanged.body.updated_at).toBe(cleared.body.updated_at);
  });

  it('replaces settings wholesale (omitted settings fields fall back to defaults)', async () => {
    const path = `/tenants/by-external-id/${eid('settings')}`;
    await t.request('PUT', path, { token: key, body: { settings: { max_concurrent_warm: 9, filler_enabled: false } } });
    const res = await t.request('PUT', path, { token: key, body: { settings: { max_idle_ttl_seconds: 600 } } });
    expect(res.body.settings).toEqual({
      filler_enabled: true,
      default_agent_type: 'vendor-agent-sdk',
      max_idle_ttl_seconds: 600,
      max_concurrent_warm: 5,
      max_busy_sandboxes: null,
      max_busy_sandboxes_per_user: null,
    });
  });

  it('collapses concurrent upserts of one external id: exactly one 201, the rest 200 with the same record', async () => {
    const path = `/tenants/by-external-id/${eid('race')}`;
    const results = await Promise.all(Array.from({ length: 10 }, () => t.request('PUT', path, { token: key, body: { name: 'Race' } })));
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    expect(results.filter((r) => r.status === 200)).toHaveLength(9);
    expect(new Set(results.map((r) => r.body.id)).size).toBe(1);
  });

  it('returns a suspended tenant as it is and never reactivates it', async () => {
    const path = `/tenants/by-external-id/${eid('suspended')}`;
    const created = await t.request('PUT', path, { token: key, body: {} });
    const suspended = await t.request('PATCH', `/tenants/${created.body.id}`, { token: key, body: { status: 'suspended' } });
    expect(suspended.body.status).toBe('suspended');
    const upserted = await t.request('PUT', path, { token: key, body: { name: 'Still suspended', status: 'active' } });
    expect(upserted.status).toBe(200);
    expect(upserted.body).toMatchObject({ status: 'suspended', name: 'Still suspended' });
    const reactivated = await t.request('PATCH', `/tenants/${created.body.id}`, { token: key, body: { status: 'active' } });
    expect(reactivated.body.status).toBe('active');
  });

  it('answers a warm upsert exactly as GET /tenants/{id} presents the tenant, whether or not it changes anything', async () => {
    const path = `/tenants/by-external-id/${encodeURIComponent(eid('ü "stored" \\ tenant'))}`;
    const fields = {
      name: 'Ünïcödé "name" \\ \u2028 😀',
      settings: { filler_enabled: false, default_agent_type: 'custom', max_idle_ttl_seconds: 60, max_concurrent_warm: 0 },
      metadata: { 'key with "quotes"': '\n\t \u0001', unicode: 'ü 😀 \u2028', empty: '' },
    };
    const cold = await t.request('PUT', path, { token: key, body: fields });
    expect(cold.status, JSON.stringify(cold.body)).toBe(201);
    const asFetched = async () => (await t.request('GET', `/tenants/${cold.body.id}`, { token: key })).body;
    const steps: Array<[string, object]> = [
      ['empty body', {}],
      ['the same fields again', fields],
      ['the same parent', { parent_id: cold.body.parent_id }],
      ['a change', { name: 'Renamed', metadata: { plan: 'gold' } }],
      ['empty body after the change', {}],
    ];
    for (const [step, body] of steps) {
      const warm = await t.request('PUT', path, { token: key, body });
      expect(warm.status, step).toBe(200);
      expect(warm.body, step).toEqual(await asFetched());
    }
    expect(await asFetched()).toMatchObject({ name: 'Renamed', metadata: { plan: 'gold' }, settings: fields.settings });
    const moved = await t.request('PUT', path, { token: key, body: { parent_id: cold.body.id } });
    expect(moved.status).toBe(422);
    expect(moved.body.errors).toEqual([expect.objectContaining({ pointer: '/parent_id' })]);
    expect(await asFetched()).toMatchObject({ name: 'Renamed', parent_id: cold.body.parent_id });
  });

  it('refuses external ids longer than 255 characters after trimming (400) and accepts 255', async () => {
    const ok = await t.request('PUT', `/tenants/by-external-id/${'e'.repeat(255)}`, { token: key, body: {} });
    expect(ok.status).toBe(201);
    const long = await t.request('PUT', `/tenants/by-external-id/${'e'.repeat(256)}`, { token: key, body: {} });
    expect(long.status).toBe(400);
    expect(problemSlug(long)).toBe('validation-error');
  });
});

describe('GET|DELETE /tenants/by-external-id/{external_id}', () => {
  it('gets and deletes by external id; afterwards 404 everywhere', async () => {
    const path = `/tenants/by-external-id/${eid('gone')}`;
    const created = await t.request('PUT', path, { token: key, body: {} });
    expect((await t.request('GET', path, { token: key })).body.id).toBe(created.body.id);
    const deleted = await t.request('DELETE', path, { token: key });
    expect(deleted.status).toBe(204);
    const after = await t.request('GET', path, { token: key });
    expect(after.status).toBe(404);
    expect(problemSlug(after)).toBe('not-found');
    expect((await t.request('GET', `/tenants/${created.body.id}`, { token: key })).status).toBe(404);
    expect((await t.request('DELETE', path, { token: key })).status).toBe(404);
  });

  it('refuses to delete the integration root', async () => {
    const res = await t.request('DELETE', `/tenants/${rootTenantId}`, { token: key });
    expect(res.status).toBe(403);
  });
});

describe('PATCH /tenants/{tenant_id}', () => {
  it('updates name, settings and metadata wholesale; 404 for unknown ids', async () => {
    const created = await t.request('POST', '/tenants', { token: key, body: { name: 'Patch', metadata: { a: '1', b: '2' } } });
    const res = await t.request('PATCH', `/tenants/${created.body.id}`, { token: key, body: { metadata: { c: '3' }, name: 'Patched' } });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ name: 'Patched', metadata: { c: '3' } });
    expect((await t.request('PATCH', '/tenants/tnt_unknown', { token: key, body: {} })).status).toBe(404);
    const invalid = await t.request('PATCH', `/tenants/${created.body.id}`, { token: key, body: { status: 'deleted' } });
    expect(invalid.status).toBe(422);
    expect(invalid.body.errors[0].pointer).toBe('/status');
  });
});

describe('GET /tenants', () => {
  it('pages newest first, forwards and backwards, with a status filter', async () => {
    const fresh = await startTestServer();
    try {
      const { serviceKey } = await fresh.createIntegration();
      const ids: string[] = [];
      for (let i = 0; i < 25; i++) {
        const res = await fresh.request('POST', '/tenants', { token: serviceKey, body: { name: `T${i}` } });
        ids.push(res.body.id);
      }
      const newestFirst = [...ids].reverse();
      const page1 = await fresh.request('GET', '/tenants?limit=10', { token: serviceKey });
      expect(page1.body.data.map((x: { id: string }) => x.id)).toEqual(newestFirst.slice(0, 10));
      expect(page1.body).toMatchObject({ object: 'list', has_more: true, next_cursor: newestFirst[9] });
      const page2 = await fresh.request('GET', `/tenants?limit=10&starting_after=${page1.body.next_cursor}`, { token: serviceKey });
      expect(page2.body.data.map((x: { id: string }) => x.id)).toEqual(newestFirst.slice(10, 20));
      const page3 = await fresh.request('GET', `/tenants?limit=10&starting_after=${page2.body.next_cursor}`, { token: serviceKey });
      expect(page3.body.data.map((x: { id: string }) => x.id)).toEqual(newestFirst.slice(20));
      expect(page3.body).toMatchObject({ has_more: false, next_cursor: null });
      const back = await fresh.request('GET', `/tenants?limit=10&ending_before=${page2.body.data[0].id}`, { token: serviceKey });
      expect(back.body.data.map((x: { id: string }) => x.id)).toEqual(newestFirst.slice(0, 10));
      expect(back.body.has_more).toBe(false);
      const backPartial = await fresh.request('GET', `/tenants?limit=5&ending_before=${page2.body.data[0].id}`, { token: serviceKey });
      expect(backPartial.body.data.map((x: { id: string }) => x.id)).toEqual(newestFirst.slice(5, 10));
      expect(backPartial.body.has_more).toBe(true);

      const defaultPage = await fresh.request('GET', '/tenants', { token: serviceKey });
      expect(defaultPage.body.data).toHaveLength(20);

      await fresh.request('PATCH', `/tenants/${ids[3]}`, { token: serviceKey, body: { status: 'suspended' } });
      const suspended = await fresh.request('GET', '/tenants?status=suspended', { token: serviceKey });
      expect(suspended.body.data.map((x: { id: string }) => x.id)).toEqual([ids[3]]);
    } finally {
      await fresh.stop();
    }
  });

  it('lists each tenant exactly as GET /tenants/{id} presents it (the page is rendered by the database)', async () => {
    const fresh = await startTestServer();
    try {
      const { serviceKey } = await fresh.createIntegration();
      const full = await fresh.request('PUT', `/tenants/by-external-id/${encodeURIComponent('ü "quoted" \\ tenant')}`, {
        token: serviceKey,
        body: {
          name: 'Ünïcödé "name" \\ \u2028 😀',
          settings: { filler_enabled: false, default_agent_type: 'custom', max_idle_ttl_seconds: 60, max_concurrent_warm: 0 },
          metadata: { 'key with "quotes"': '\n\t \u0001', unicode: 'ü 😀 \u2028', empty: '' },
        },
      });
      expect(full.status, JSON.stringify(full.body)).toBe(201);
      const bare = await fresh.request('PUT', '/tenants/by-external-id/bare', { token: serviceKey, body: {} });
      await fresh.request('PATCH', `/tenants/${bare.body.id}`, { token: serviceKey, body: { status: 'suspended' } });
      const listed = await fresh.request('GET', '/tenants', { token: serviceKey });
      expect(listed.headers.get('content-type')).toMatch(/^application\/json/);
      expect(listed.body).toMatchObject({ object: 'list', has_more: false, next_cursor: null });
      for (const item of listed.body.data) {
        const fetched = await fresh.request('GET', `/tenants/${item.id}`, { token: serviceKey });
        expect(item).toEqual(fetched.body);
      }
      expect(listed.body.data.map((x: { id: string }) => x.id)).toEqual([bare.body.id, full.body.id]);
    } finally {
      await fresh.stop();
    }
  });

  it('lists a tenant as it is after each kind of write (upsert merge, PATCH, repository attach and detach)', async () => {
    const fresh = await startTestServer();
    try {
      const { serviceKey } = await fresh.createIntegration();
      const path = '/tenants/by-external-id/rewritten';
      const created = await fresh.request('PUT', path, { token: serviceKey, body: { name: 'First' } });
      const listedMatchesGet = async (step: string) => {
        const fetched = await fresh.request('GET', `/tenants/${created.body.id}`, { token: serviceKey });
        const listed = await fresh.request('GET', '/tenants', { token: serviceKey });
        expect(listed.body.data, step).toEqual([fetched.body]);
        return fetched.body;
      };
      expect(await listedMatchesGet('created')).toEqual(created.body);

      const merged = await fresh.request('PUT', path, { token: serviceKey, body: { name: 'Second', metadata: { plan: 'gold' } } });
      expect(merged.status).toBe(200);
      expect(await listedMatchesGet('upsert merge')).toMatchObject({ name: 'Second', metadata: { plan: 'gold' } });

      const settings = { filler_enabled: false, default_agent_type: 'custom', max_idle_ttl_seconds: 60, max_concurrent_warm: 1 };
      await fresh.request('PATCH', `/tenants/${created.body.id}`, { token: serviceKey, body: { settings, status: 'suspended' } });
      expect(await listedMatchesGet('patch')).toMatchObject({ settings, status: 'suspended' });

      const repository = await fresh.request('POST', '/repositories', {
        token: serviceKey,
        body: { name: 'skills', repo_url: 'https://git.example.com/acme/skills.git' },
      });
      expect(repository.status, JSON.stringify(repository.body)).toBe(201);
      const repositoryPath = `/tenants/${created.body.id}/repository`;
      const attached = await fresh.request('PUT', repositoryPath, { token: serviceKey, body: { repository_id: repository.body.id } });
      expect(attached.status).toBe(200);
      expect(await listedMatchesGet('repository attached')).toMatchObject({ repository_id: repository.body.id });
      await fresh.request('DELETE', repositoryPath, { token: serviceKey });
      expect(await listedMatchesGet('repository detached')).toMatchObject({ repository_id: null });
    } finally {
      await fresh.stop();
    }
  });

  it("pages only the integration's own tenants when two integrations' tenants interleave", async () => {
    const a = await t.createIntegration('interleaved a');
    const b = await t.createIntegration('interleaved b');
    const created: Record<string, string[]> = { a: [], b: [] };
    for (let i = 0; i < 7; i++) {
      for (const [side, integration] of [
        ['a', a],
        ['b', b],
      ] as const) {
        const res = await t.request('POST', '/tenants', { token: integration.serviceKey, body: { name: `${side}${i}` } });
        created[side]!.push(res.body.id);
      }
    }
    await t.request('PATCH', `/tenants/${created.a![2]}`, { token: a.serviceKey, body: { status: 'suspended' } });
    const ids = (res: { body: { data: Array<{ id: string }> } }) => res.body.data.map((x) => x.id);
    for (const side of ['a', 'b'] as const) {
      const token = (side === 'a' ? a : b).serviceKey;
      const newestFirst = [...created[side]!].reverse();
      const pages: string[][] = [];
      let cursor: string | null = null;
      do {
        const res: ApiResponse = await t.request('GET', `/tenants?limit=3${cursor ? `&starting_after=${cursor}` : ''}`, { token });
        expect(res.status).toBe(200);
        pages.push(ids(res));
        cursor = res.body.next_cursor;
      } while (cursor);
      expect(pages, side).toEqual([newestFirst.slice(0, 3), newestFirst.slice(3, 6), newestFirst.slice(6)]);
      const back = await t.request('GET', `/tenants?limit=3&ending_before=${newestFirst[6]}`, { token });
      expect(ids(back), side).toEqual(newestFirst.slice(3, 6));
      expect(back.body.has_more).toBe(true);
      // A cursor names a position, whoever's tenant it is: the other integration's oldest one here.
      const other = created[side === 'a' ? 'b' : 'a']![0]!;
      const fromOther = await t.request('GET', `/tenants?limit=10&starting_after=${other}`, { token });
      expect(ids(fromOther), side).toEqual(newestFirst.filter((id) => id < other));
    }
    const suspended = await t.request('GET', '/tenants?status=suspended', { token: a.serviceKey });
    expect(ids(suspended)).toEqual([created.a![2]]);
    expect(ids(await t.request('GET', '/tenants?status=suspended', { token: b.serviceKey }))).toEqual([]);
  });

  it('answers 400 for both cursors, a bad limit or a bad status', async () => {
    for (const query of ['starting_after=tnt_a&ending_before=tnt_b', 'limit=0', 'limit=101', 'limit=abc', 'status=gone']) {
      const res = await t.request('GET', `/tenants?${query}`, { token: key });
      expect(res.status, query).toBe(400);
      expect(problemSlug(res)).toBe('validation-error');
    }
    expect((await t.request('GET', '/tenants?limit=100', { token: key })).status).toBe(200);
    expect((await t.request('GET', '/tenants?limit=1', { token: key })).body.data).toHaveLength(1);
  });
});

describe('subtree isolation', () => {
  it('hides tenants of another integration behind 404, never 403', async () => {
    const mine = await t.request('POST', '/tenants', { token: key, body: { name: 'Mine only', external_id: eid('isolated') } });
    const id = mine.body.id;
    for (const [method, path, body] of [
      ['GET', `/tenants/${id}`, undefined],
      ['PATCH', `/tenants/${id}`, { name: 'hijack' }],
      ['DELETE', `/tenants/${id}`, undefined],
      ['GET', `/tenants/by-external-id/${eid('isolated')}`, undefined],
      ['PUT', `/tenants/${id}/repository`, { repository_id: 'rep_x' }],
    ] as const) {
      const res = await t.request(method, path, { token: otherKey, body });
      expect(res.status, `${method} ${path}`).toBe(404);
      expect(problemSlug(res)).toBe('not-found');
    }
    const theirs = await t.request('GET', '/tenants?limit=100', { token: otherKey });
    expect(theirs.body.data.map((x: { id: string }) => x.id)).not.toContain(id);
    // The same external id is free in the other integration.
    const other = await t.request('PUT', `/tenants/by-external-id/${eid('isolated')}`, { token: otherKey, body: {} });
    expect(other.status).toBe(201);
    expect((await t.request('GET', `/tenants/${id}`, { token: key })).body.name).toBe('Mine only');
  });
});

describe('unknown routes', () => {
  it('answers problem+json 404 for an unknown path and 405 for a wrong method', async () => {
    const res = await t.request('GET', '/nope', { token: key });
    expect(res.status).toBe(404);
    expect(problemSlug(res)).toBe('not-found');
    const wrong = await t.request('POST', '/tenants/tnt_x', { token: key, body: {} });
    expect(wrong.status).toBe(405);
  });
});

describe('response headers', () => {
  it('sends JSON as application/json; charset=utf-8 with its length in bytes, and problems as application/problem+json', async () => {
    const upserted = await t.request('PUT', `/tenants/by-external-id/${eid('headers')}`, {
      token: key,
      body: { name: 'Ünïcödé 😀 \u2028' },
    });
    const warm = await t.request('PUT', `/tenants/by-external-id/${eid('headers')}`, { token: key, body: {} });
    const page = await t.request('GET', '/tenants?limit=2', { token: key });
    for (const [res, status] of [
      [upserted, 201],
      [warm, 200],
      [page, 200],
    ] as const) {
      expect(res.status).toBe(status);
      expect(res.headers.get('content-type')).toBe('application/json; charset=utf-8');
      expect(res.headers.get('content-length')).toBe(String(Buffer.byteLength(res.text)));
    }
    expect(upserted.text).toBe(JSON.stringify(upserted.body));
    expect(warm.body).toEqual({ ...upserted.body });
    const missing = await t.request('GET', `/tenants/by-external-id/${eid('no-such')}`, { token: key });
    expect(missing.status).toBe(404);
    expect(missing.headers.get('content-type')).toBe('application/problem+json');
    expect(missing.headers.get('content-length')).toBe(String(Buffer.byteLength(missing.text)));
  });
});
