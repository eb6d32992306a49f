/**
 * Vaulted secrets over HTTP: conversation, user and tenant scopes (merge-upsert, listing, removal),
 * validation, auth and scope rules, encryption at rest, cascades, and that no value ever comes back
 * out: not in a response, a log line, or any column of any table.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ProvisionedUser, provisionUser, unique, userToken } from '../helpers/provision.js';
import { type ApiResponse, problemSlug, startTestServer, type TestServer } from '../helpers/test-server.js';

let t: TestServer;
let key: string;
let otherKey: string;
let db: pg.Client;
let owner: ProvisionedUser;
let ownerToken: string;
/** Another user of the owner's tenant. */
let neighbour: ProvisionedUser;
let neighbourToken: string;
/** Every value vaulted by this suite: none may come back out anywhere. */
const vaulted: string[] = [];
/** Every response body this suite received. */
const responses: string[] = [];

beforeAll(async () => {
  t = await startTestServer();
  ({ serviceKey: key } = await t.createIntegration('secrets suite'));
  ({ serviceKey: otherKey } = await t.createIntegration('other integration'));
  owner = await provisionUser(t, key);
  neighbour = await provisionUser(t, key, { tenantId: owner.tenantId });
  ownerToken = await userToken(t, key, owner);
  neighbourToken = await userToken(t, key, neighbour);
  db = new pg.Client({ connectionString: t.databaseUrl });
  await db.connect();
});
afterAll(async () => {
  await db?.end();
  await t?.stop();
});

/** A value unique to the suite, recorded so the leak checks look for it. */
const secretValue = (label = 'value') => {
  const value = `canary-${unique(label)}`;
  vaulted.push(value);
  return value;
};

async function call(method: string, path: string, options: { token?: string | null; body?: unknown } = {}): Promise<ApiResponse> {
  const res = await t.request(method, path, { token: options.token === undefined ? key : options.token, body: options.body });
  responses.push(res.text);
  return res;
}

function expectProblem(res: ApiResponse, status: number, slug: string): void {
  expect(res.status, res.text).toBe(status);
  expect(problemSlug(res)).toBe(slug);
}

const pointers = (res: ApiResponse) => (res.body.errors as { pointer: string }[]).map((e) => e.pointer);

async function newConversation(user: ProvisionedUser = owner): Promise<string> {
  const res = await call('POST', '/conversations', { body: { user_id: user.userId } });
  expect(res.status).toBe(201);
  return res.body.id;
}

async function storedRows(scope: string, scopeId: string) {
  const result = await db.query('select * from secrets where scope = $1 and scope_id = $2 order by alias', [scope, scopeId]);
  return result.rows as { alias: string; value_ciphertext: string; created_at: Date; updated_at: Date }[];
}

async function aliases(path: string, token: string | null = key): Promise<string[]> {
  const res = await call('GET', `${path}?limit=100`, { token });
  expect(res.status).toBe(200);
  return res.body.data.map((s: { alias: string }) => s.alias);
}

describe('PUT /conversations/{id}/secrets', () => {
  it('vaults the values, answers the whole list with aliases and timestamps only, encrypted and bound to owner and alias', async () => {
    const conversationId = await newConversation();
    const token = secretValue('token');
    const res = await call('PUT', `/conversations/${conversationId}/secrets`, {
      body: { secrets: { API_TOKEN: token, DB_PASSWORD: secretValue('password') } },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      object: 'list',
      data: [
        {
          object: 'conversation.secret',
          alias: 'API_TOKEN',
          allowed_hosts: null,
          created_at: expect.any(String),
          updated_at: expect.any(String),
        },
        {
          object: 'conversation.secret',
          alias: 'DB_PASSWORD',
          allowed_hosts: null,
          created_at: expect.any(String),
          updated_at: expect.any(String),
        },
      ],
      has_more: false,
      next_cursor: null,
    });
    expect(res.body.data[0].created_at).toBe(res.body.data[0].updated_at);
    expect((await call('GET', `/conversations/${conversationId}/secrets`)).body).toEqual(res.body);

    const [row] = await storedRows('conversation', conversationId);
    expect(row!.alias).toBe('API_TOKEN');
    expect(row!.value_ciphertext).toMatch(/^v1\.[0-9a-f]{8}\./);
    const vault = t.server.deps.vault;
    expect(vault.decrypt(row!.value_ciphertext, `secret:conversation:${conversationId}:API_TOKEN`)).toBe(token);
    // Bound to its owner and alias: the ciphertext does not open as another alias or another conversation's.
    expect(() => vault.decrypt(row!.value_ciphertext, `secret:conversation:${conversationId}:DB_PASSWORD`)).toThrow();
    expect(() => vault.decrypt(row!.value_ciphertext, 'secret:conversation:con_other:API_TOKEN')).toThrow();
  });

  it('merges per alias: given aliases are overwritten, the others untouched', async () => {
    const conversationId = await newConversation();
    const path = `/conversations/${conversationId}/secrets`;
    const first = await call('PUT', path, { body: { secrets: { A: secretValue(), B: secretValue() } } });
    expect(first.status).toBe(200);
    t.clock.advance(5_000);
    const newB = secretValue('new-b');
    const second = await call('PUT', path, { body: { secrets: { B: newB, C: secretValue() } } });
    expect(second.status).toBe(200);
    expect(second.body.data.map((s: { alias: string }) => s.alias)).toEqual(['A', 'B', 'C']);
    const [a, b, c] = second.body.data;
    expect(a).toEqual(first.body.data[0]);
    expect(b.created_at).toBe(first.body.data[1].created_at);
    expect(Date.parse(b.updated_at)).toBeGreaterThan(Date.parse(first.body.data[1].updated_at));
    expect(c.created_at).toBe(c.updated_at);
    const rows = await storedRows('conversation', conversationId);
    expect(t.server.deps.vault.decrypt(rows[1]!.value_ciphertext, `secret:conversation:${conversationId}:B`)).toBe(newB);
  });

  it('refuses invalid bodies with 422 and pointers, changing nothing', async () => {
    const conversationId = await newConversation();
    const path = `/conversations/${conversationId}/secrets`;
    expect((await call('PUT', path, { body: { secrets: { KEEP: secretValue() } } })).status).toBe(200);
    const before = await storedRows('conversation', conversationId);
    const cases: [unknown, string][] = [
      [{}, '/secrets'],
      [{ secrets: {} }, '/secrets'],
      [{ secrets: 'x' }, '/secrets'],
      [{ secrets: { lower: 'v' } }, '/secrets'],
      [{ secrets: { '1ABC': 'v' } }, '/secrets'],
      [{ secrets: { 'WITH-DASH': 'v' } }, '/secrets'],
      [{ secrets: { [`A${'B'.repeat(64)}`]: 'v' } }, '/secrets'],
      [{ secrets: { EMPTY: '' } }, '/secrets/EMPTY'],
      [{ secrets: { NUMBER: 42 } }, '/secrets/NUMBER'],
      [{ secrets: { HUGE: 'x'.repeat(65_537) } }, '/secrets/HUGE'],
      [{ secrets: { KEEP: 'new', bad: 'v' } }, '/secrets'],
    ];
    for (const [body, pointer] of cases) {
      const res = await call('PUT', path, { body });
      expectProblem(res, 422, 'validation-error');
      expect(
        pointers(res).some((p) => p === pointer || p.startsWith(`${pointer}/`)),
        `${JSON.stringify(body).slice(0, 80)} → ${pointers(res)}`,
      ).toBe(true);
    }
    expect(await storedRows('conversation', conversationId)).toEqual(before);
  });

  it('accepts the longest alias and the largest value', async () => {
    const conversationId = await newConversation();
    const alias = `A${'B'.repeat(63)}`;
    const value = secretValue('big').padEnd(65_536, 'x');
    const res = await call('PUT', `/conversations/${conversationId}/secrets`, { body: { secrets: { [alias]: value } } });
    expect(res.status).toBe(200);
    expect(res.body.data.map((s: { alias: string }) => s.alias)).toEqual([alias]);
    const [row] = await storedRows('conversation', conversationId);
    expect(t.server.deps.vault.decrypt(row!.value_ciphertext, `secret:conversation:${conversationId}:${alias}`)).toBe(value);
  });
});

describe('GET /conversations/{id}/secrets', () => {
  it('pages by alias, A to Z, both ways', async () => {
    const conversationId = await newConversation();
    const path = `/conversations/${conversationId}/secrets`;
    const names = ['ECHO', 'ALPHA', 'DELTA', 'BRAVO', 'CHARLIE'];
    expect((await call('PUT', path, { body: { secrets: Object.fromEntries(names.map((n) => [n, secretValue()])) } })).status).toBe(200);

    const page1 = await call('GET', `${path}?limit=2`);
    expect(page1.status).toBe(200);
    expect(page1.body).toMatchObject({ object: 'list', has_more: true, next_cursor: 'BRAVO' });
    expect(page1.body.data.map((s: { alias: string }) => s.alias)).toEqual(['ALPHA', 'BRAVO']);
    const page2 = await call('GET', `${path}?limit=2&starting_after=${page1.body.next_cursor}`);
    expect(page2.body.data.map((s: { alias: string }) => s.alias)).toEqual(['CHARLIE', 'DELTA']);
    const page3 = await call('GET', `${path}?limit=2&starting_after=${page2.body.next_cursor}`);
    expect(page3.body).toMatchObject({ has_more: false, next_cursor: null });
    expect(page3.body.data.map((s: { alias: string }) => s.alias)).toEqual(['ECHO']);
    const back = await call('GET', `${path}?limit=2&ending_before=DELTA`);
    expect(back.body.data.map((s: { alias: string }) => s.alias)).toEqual(['BRAVO', 'CHARLIE']);
    expect(back.body.has_more).toBe(true);

    const empty = await call('GET', `/conversations/${await newConversation()}/secrets`);
    expect(empty.body).toEqual({ object: 'list', data: [], has_more: false, next_cursor: null });
  });

  it('refuses bad queries with 400', async () => {
    const path = `/conversations/${await newConversation()}/secrets`;
    for (const query of ['limit=0', 'limit=101', 'limit=x', 'starting_after=A&ending_before=B']) {
      expectProblem(await call('GET', `${path}?${query}`), 400, 'validation-error');
    }
  });
});

describe('DELETE /conversations/{id}/secrets/{alias}', () => {
  it('removes one alias (204), leaves the others, and 404s an alias that is not there', async () => {
    const conversationId = await newConversation();
    const path = `/conversations/${conversationId}/secrets`;
    await call('PUT', path, { body: { secrets: { GONE: secretValue(), STAYS: secretValue() } } });
    const res = await call('DELETE', `${path}/GONE`);
    expect(res.status).toBe(204);
    expect(res.text).toBe('');
    expect(await aliases(path)).toEqual(['STAYS']);
    expect((await storedRows('conversation', conversationId)).map((r) => r.alias)).toEqual(['STAYS']);
    expectProblem(await call('DELETE', `${path}/GONE`), 404, 'not-found');
    expectProblem(await call('DELETE', `${path}/not-an-alias`), 404, 'not-found');
    expectProblem(await call('DELETE', `/conversations/con_missing/secrets/STAYS`), 404, 'not-found');
    expect(await aliases(path)).toEqual(['STAYS']);
  });
});

describe('conversation secrets: who may', () => {
  it("accepts the owning user's token; another user's is 403; another integration or none cannot reach them", async () => {
    const conversationId = await newConversation();
    const path = `/conversations/${conversationId}/secrets`;
    const put = await call('PUT', path, { token: ownerToken, body: { secrets: { MINE: secretValue() } } });
    expect(put.status).toBe(200);
    expect(await aliases(path, ownerToken)).toEqual(['MINE']);

    const body = { secrets: { THEIRS: secretValue() } };
    expectProblem(await call('PUT', path, { token: neighbourToken, body }), 403, 'insufficient-scope');
    expectProblem(await call('GET', path, { token: neighbourToken }), 403, 'insufficient-scope');
    expectProblem(await call('DELETE', `${path}/MINE`, { token: neighbourToken }), 403, 'insufficient-scope');
    expectProblem(await call('PUT', path, { token: otherKey, body }), 404, 'not-found');
    expectProblem(await call('GET', path, { token: otherKey }), 404, 'not-found');
    expectProblem(await call('DELETE', `${path}/MINE`, { token: otherKey }), 404, 'not-found');
    expectProblem(await call('PUT', path, { token: null, body }), 401, 'insufficient-scope');
    expectProblem(await call('GET', path, { token: 'sk_int_unknownunknownunknown' }), 401, 'insufficient-scope');
    expectProblem(await call('PUT', '/conversations/con_missing/secrets', { body }), 404, 'not-found');

    expect((await call('DELETE', `${path}/MINE`, { token: ownerToken })).status).toBe(204);
    expect(await storedRows('conversation', conversationId)).toEqual([]);
  });

  it('refuses writes while the tenant is suspended (403) and on an archived conversation (409); reads keep working', async () => {
    const user = await provisionUser(t, key);
    const conversationId = await newConversation(user);
    const path = `/conversations/${conversationId}/secrets`;
    await call('PUT', path, { body: { secrets: { KEPT: secretValue() } } });
    const before = await storedRows('conversation', conversationId);
    const body = { secrets: { KEPT: secretValue(), NEW: secretValue() } };

    expect((await call('PATCH', `/tenants/${user.tenantId}`, { body: { status: 'suspended' } })).status).toBe(200);
    expectProblem(await call('PUT', path, { body }), 403, 'tenant-suspended');
    expectProblem(await call('DELETE', `${path}/KEPT`), 403, 'tenant-suspended');
    expect(await aliases(path)).toEqual(['KEPT']);
    expect((await call('PATCH', `/tenants/${user.tenantId}`, { body: { status: 'active' } })).status).toBe(200);

    expect((await call('PATCH', `/conversations/${conversationId}`, { body: { status: 'archived' } })).status).toBe(200);
    expectProblem(await call('PUT', path, { body }), 409, 'conversation-archived');
    expectProblem(await call('DELETE', `${path}/KEPT`), 409, 'conversation-archived');
    expect(await aliases(path)).toEqual(['KEPT']);
    expect(await storedRows('conversation', conversationId)).toEqual(before);
  });
});

describe.each([
  { scope: 'user', object: 'user.secret', path: () => `/users/${owner.userId}/secrets`, missing: '/users/usr_missing/secrets' },
  { scope: 'tenant', object: 'tenant.secret', path: () => `/tenants/${owner.tenantId}/secrets`, missing: '/tenants/tnt_missing/secrets' },
])('$scope secrets', ({ scope, object, path, missing }) => {
  const ownerId = () => (scope === 'user' ? owner.userId : owner.tenantId);

  it('merge-upserts, lists, pages and removes, with the service key', async () => {
    const first = await call('PUT', path(), { body: { secrets: { ZULU: secretValue(), MIKE: secretValue() } } });
    expect(first.status).toBe(200);
    expect(first.body).toEqual({
      object: 'list',
      data: ['MIKE', 'ZULU'].map((alias) => ({
        object,
        alias,
        allowed_hosts: null,
        created_at: expect.any(String),
        updated_at: expect.any(String),
      })),
      has_more: false,
      next_cursor: null,
    });
    const value = secretValue();
    const second = await call('PUT', path(), { body: { secrets: { ALPHA: value } } });
    expect(second.body.data.map((s: { alias: string }) => s.alias)).toEqual(['ALPHA', 'MIKE', 'ZULU']);
    const page = await call('GET', `${path()}?limit=1&starting_after=ALPHA`);
    expect(page.body).toMatchObject({ has_more: true, next_cursor: 'MIKE', data: [{ object, alias: 'MIKE' }] });

    const rows = await storedRows(scope, ownerId());
    expect(t.server.deps.vault.decrypt(rows[0]!.value_ciphertext, `secret:${scope}:${ownerId()}:ALPHA`)).toBe(value);

    expect((await call('DELETE', `${path()}/MIKE`)).status).toBe(204);
    expectProblem(await call('DELETE', `${path()}/MIKE`), 404, 'not-found');
    expect(await aliases(path())).toEqual(['ALPHA', 'ZULU']);
  });

  it('is for the service key of the integration only', async () => {
    const body = { secrets: { NOPE: secretValue() } };
    const before = await storedRows(scope, ownerId());
    expectProblem(await call('PUT', path(), { token: ownerToken, body }), 403, 'insufficient-scope');
    expectProblem(await call('GET', path(), { token: ownerToken }), 403, 'insufficient-scope');
    expectProblem(await call('DELETE', `${path()}/ALPHA`, { token: ownerToken }), 403, 'insufficient-scope');
    expectProblem(await call('PUT', path(), { token: otherKey, body }), 404, 'not-found');
    expectProblem(await call('GET', path(), { token: otherKey }), 404, 'not-found');
    expectProblem(await call('DELETE', `${path()}/ALPHA`, { token: otherKey }), 404, 'not-found');
    expectProblem(await call('PUT', missing, { body }), 404, 'not-found');
    expectProblem(await call('PUT', path(), { token: null, body }), 401, 'insufficient-scope');
    expectProblem(await call('PUT', path(), { body: { secrets: { bad: 'v' } } }), 422, 'validation-error');
    expect(await storedRows(scope, ownerId())).toEqual(before);
  });
});

describe('deprovisioning', () => {
  it("removes a conversation's, a user's and a tenant's secrets with them", async () => {
    const user = await provisionUser(t, key);
    const conversationId = await newConversation(user);
    await call('PUT', `/conversations/${conversationId}/secrets`, { body: { secrets: { C: secretValue() } } });
    await call('PUT', `/users/${user.userId}/secrets`, { body: { secrets: { U: secretValue() } } });
    await call('PUT', `/tenants/${user.tenantId}/secrets`, { body: { secrets: { T: secretValue() } } });
    const count = async () =>
      Number(
        (await db.query('select count(*) from secrets where scope_id = any($1)', [[conversationId, user.userId, user.tenantId]])).rows[0]
          .count,
      );
    expect(await count()).toBe(3);
    expect((await call('DELETE', `/conversations/${conversationId}`)).status).toBe(204);
    expect(await storedRows('conversation', conversationId)).toEqual([]);
    expect((await call('DELETE', `/users/${user.userId}`)).status).toBe(204);
    expect(await storedRows('user', user.userId)).toEqual([]);
    expect(await count()).toBe(1);
    expect((await call('DELETE', `/tenants/${user.tenantId}`)).status).toBe(204);
    expect(await count()).toBe(0);
  });
});

describe('values never come back out', () => {
  it('appear in no response, no log line and no column of any table', async () => {
    expect(vaulted.length).toBeGreaterThan(10);
    const tables = await db.query<{ table_name: string }>(
      "select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE'",
    );
    const dump: string[] = [];
    for (const { table_name } of tables.rows) {
      const rows = await db.query<{ row: string }>(`select t::text as row from "${table_name}" t`);
      dump.push(...rows.rows.map((r) => r.row));
    }
    const places = { responses: responses.join('\n'), logs: t.logs.join(''), database: dump.join('\n') };
    for (const [place, text] of Object.entries(places)) {
      for (const value of vaulted) expect(text.includes(value), `${place} holds ${value}`).toBe(false);
    }
    // The search is not vacuous: the dump holds the vaulted rows, the responses their aliases.
    expect(places.database).toContain('API_TOKEN');
    expect(places.responses).toContain('DB_PASSWORD');
  });
});
