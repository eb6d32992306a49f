import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiResponse, problemSlug, startTestServer, type TestServer } from '../helpers/test-server.js';

let t: TestServer;
let key: string;
let otherKey: string;
let db: pg.Client;

beforeAll(async () => {
  t = await startTestServer();
  ({ serviceKey: key } = await t.createIntegration('credentials suite'));
  ({ serviceKey: otherKey } = await t.createIntegration('other integration'));
  db = new pg.Client({ connectionString: t.databaseUrl });
  await db.connect();
});
afterAll(async () => {
  await db.end();
  await t.stop();
});

let counter = 0;
const unique = (prefix: string) => `${prefix}-${++counter}`;
const pointers = (res: ApiResponse) => res.body.errors.map((e: { pointer: string }) => e.pointer).sort();

async function createCredential(body: Record<string, unknown>, token = key) {
  return t.request('POST', '/credentials', { token, body: { secret: 's3cret', ...body } });
}

async function storedRow(id: string) {
  const result = await db.query('select * from credentials where id = $1', [id]);
  return result.rows[0] as { secret_ciphertext: string; name: string; integration_id: string } | undefined;
}

async function count(token = key): Promise<number> {
  const res = await t.request('GET', '/credentials?limit=100', { token });
  return res.body.data.length;
}

describe('POST /credentials', () => {
  it('creates a credential without echoing the secret and vaults it bound to its id', async () => {
    const res = await createCredential({ name: '  GitHub PAT  ', type: 'git_pat', secret: 'ghp_example', metadata: { team: 'x' } });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(['created_at', 'id', 'metadata', 'name', 'object', 'type', 'updated_at']);
    expect(res.body).toMatchObject({ object: 'credential', name: 'GitHub PAT', type: 'git_pat', metadata: { team: 'x' } });
    expect(res.body.id).toMatch(/^crd_[A-Za-z0-9]+$/);
    expect(res.body.created_at).toBe(res.body.updated_at);
    expect((await t.request('GET', `/credentials/${res.body.id}`, { token: key })).body).toEqual(res.body);

    const row = await storedRow(res.body.id);
    expect(row?.secret_ciphertext).toMatch(/^v1\./);
    const vault = t.server.deps.vault;
    expect(vault.decrypt(row!.secret_ciphertext, `credential:${res.body.id}`)).toBe('ghp_example');
    // Bound to its row: the same ciphertext does not open as another credential's secret.
    expect(() => vault.decrypt(row!.secret_ciphertext, 'credential:crd_other')).toThrow();
  });

  it('defaults type to generic_secret and metadata to {}, and keeps open-enum types', async () => {
    const plain = await createCredential({ name: unique('plain') });
    expect(plain.status).toBe(201);
    expect(plain.body).toMatchObject({ type: 'generic_secret', metadata: {} });
    const custom = await createCredential({ name: unique('custom'), type: '  vendor_specific_token  ' });
    expect(custom.body.type).toBe('vendor_specific_token');
    const longest = await createCredential({ name: unique('type64'), type: 't'.repeat(64) });
    expect(longest.status).toBe(201);
    expect(longest.body.type).toHaveLength(64);
  });

  it('keeps the secret verbatim (no trimming)', async () => {
    const res = await createCredential({ name: unique('verbatim'), secret: '  spaced secret\n' });
    const row = await storedRow(res.body.id);
    expect(t.server.deps.vault.decrypt(row!.secret_ciphertext, `credential:${res.body.id}`)).toBe('  spaced secret\n');
  });

  it('accepts a secret of exactly 64 KiB (UTF-8 bytes) and refuses one byte more', async () => {
    const atLimit = await createCredential({ name: unique('big'), secret: 'k'.repeat(65536) });
    expect(atLimit.status).toBe(201);
    const row = await storedRow(atLimit.body.id);
    expect(t.server.deps.vault.decrypt(row!.secret_ciphertext, `credential:${atLimit.body.id}`)).toHaveLength(65536);
    const multibyteAtLimit = await createCredential({ name: unique('big'), secret: 'é'.repeat(32768) });
    expect(multibyteAtLimit.status).toBe(201);

    const before = await count();
    for (const secret of ['k'.repeat(65537), 'é'.repeat(32769)]) {
      const res = await createCredential({ name: unique('too-big'), secret });
      expect(res.status).toBe(422);
      expect(pointers(res)).toEqual(['/secret']);
    }
    expect(await count()).toBe(before);
  });

  it('validates the body with JSON pointers (422) and changes nothing', async () => {
    const before = await count();
    const cases: [Record<string, unknown>, string[]][] = [
      [{ name: 'n', secret: undefined }, ['/secret']],
      [{ name: 'n', secret: '' }, ['/secret']],
      [{ name: 'n', secret: 42 }, ['/secret']],
      [{ name: undefined }, ['/name']],
      [{ name: '   ' }, ['/name']],
      [{ name: 'x'.repeat(256) }, ['/name']],
      [{ name: 'n', type: '   ' }, ['/type']],
      [{ name: 'n', type: 't'.repeat(65) }, ['/type']],
      [{ name: 'n', metadata: { a: 1 } }, ['/metadata/a']],
      [{ name: 'n', metadata: { k: 'v'.repeat(501) } }, ['/metadata/k']],
      [{ name: 'x'.repeat(256), type: '', secret: '' }, ['/name', '/secret', '/type']],
    ];
    for (const [body, expected] of cases) {
      const res = await createCredential(body);
      expect(res.status, JSON.stringify(body).slice(0, 80)).toBe(422);
      expect(problemSlug(res)).toBe('validation-error');
      expect(pointers(res)).toEqual(expected);
    }
    expect(await count()).toBe(before);
  });

  it('accepts names of exactly 255 characters and metadata at its limits', async () => {
    const metadata = Object.fromEntries(Array.from({ length: 50 }, (_, i) => [`k${i}`, 'v'.repeat(500)]));
    const res = await createCredential({ name: ` ${'c'.repeat(255)} `, metadata });
    expect(res.status).toBe(201);
    expect(res.body.name).toHaveLength(255);
    const tooMany = await createCredential({ name: unique('meta'), metadata: { ...metadata, k50: 'x' } });
    expect(tooMany.status).toBe(422);
    expect(pointers(tooMany)).toEqual(['/metadata']);
  });

  it('refuses a taken name with 409 name-conflict naming the holder; other integrations may use it', async () => {
    const name = unique('shared');
    const first = await createCredential({ name });
    const second = await createCredential({ name: ` ${name} `, secret: 'another' });
    expect(second.status).toBe(409);
    expect(problemSlug(second)).toBe('name-conflict');
    expect(second.body.conflicting_resource_id).toBe(first.body.id);
    // The holder is untouched.
    const row = await storedRow(first.body.id);
    expect(t.server.deps.vault.decrypt(row!.secret_ciphertext, `credential:${first.body.id}`)).toBe('s3cret');
    const elsewhere = await createCredential({ name }, otherKey);
    expect(elsewhere.status).toBe(201);
  });

  it('collapses concurrent creates of one name: one 201, the rest 409 naming the winner', async () => {
    const name = unique('race');
    const results = await Promise.all(Array.from({ length: 8 }, () => createCredential({ name })));
    const winners = results.filter((r) => r.status === 201);
    expect(winners).toHaveLength(1);
    const losers = results.filter((r) => r.status === 409);
    expect(losers).toHaveLength(7);
    for (const loser of losers) expect(loser.body.conflicting_resource_id).toBe(winners[0]!.body.id);
  });

  it('replays with the same Idempotency-Key and refuses the key with another secret', async () => {
    const name = unique('idem');
    const headers = { 'Idempotency-Key': `credential-${name}` };
    const body = { name, secret: 'first-secret' };
    const first = await t.request('POST', '/credentials', { token: key, headers, body });
    expect(first.status).toBe(201);
    const replay = await t.request('POST', '/credentials', { token: key, headers, body });
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotency-replayed')).toBe('true');
    expect(replay.body).toEqual(first.body);
    const otherSecret = await t.request('POST', '/credentials', { token: key, headers, body: { name, secret: 'second-secret' } });
    expect(otherSecret.status).toBe(409);
    expect(problemSlug(otherSecret)).toBe('idempotency-key-conflict');
    const stored = await db.query('select count(*)::int as n from credentials where name = $1', [name]);
    expect(stored.rows[0].n).toBe(1);
  });

  it('needs a service key', async () => {
    const none = await t.request('POST', '/credentials', { body: { name: 'x', secret: 'y' } });
    expect(none.status).toBe(401);
    expect(problemSlug(none)).toBe('insufficient-scope');
    const unknown = await t.request('GET', '/credentials', { token: 'sk_int_doesnotexist0000000000' });
    expect(unknown.status).toBe(401);
  });
});

describe('GET /credentials', () => {
  it('pages newest first, forwards and backwards, within the caller integration only', async () => {
    const { serviceKey } = await t.createIntegration('credential paging');
    const ids: string[] = [];
    for (let i = 0; i < 25; i++) ids.push((await createCredential({ name: `page-${i}` }, serviceKey)).body.id);
    const newestFirst = [...ids].reverse();
    const list = (query: string) => t.request('GET', `/credentials?${query}`, { token: serviceKey });
    const idsOf = (res: ApiResponse) => res.body.data.map((x: { id: string }) => x.id);

    const page1 = await list('limit=10');
    expect(idsOf(page1)).toEqual(newestFirst.slice(0, 10));
    expect(page1.body).toMatchObject({ object: 'list', has_more: true, next_cursor: newestFirst[9] });
    expect(Object.keys(page1.body.data[0]).sort()).toEqual(['created_at', 'id', 'metadata', 'name', 'object', 'type', 'updated_at']);
    const page2 = await list(`limit=10&starting_after=${page1.body.next_cursor}`);
    expect(idsOf(page2)).toEqual(newestFirst.slice(10, 20));
    const page3 = await list(`limit=10&starting_after=${page2.body.next_cursor}`);
    expect(idsOf(page3)).toEqual(newestFirst.slice(20));
    expect(page3.body).toMatchObject({ has_more: false, next_cursor: null });
    const back = await list(`limit=5&ending_before=${page2.body.data[0].id}`);
    expect(idsOf(back)).toEqual(newestFirst.slice(5, 10));
    expect(back.body.has_more).toBe(true);
    expect(idsOf(await list(''))).toEqual(newestFirst.slice(0, 20));

    const mine = idsOf(await t.request('GET', '/credentials?limit=100', { token: key }));
    expect(mine.filter((id: string) => ids.includes(id))).toEqual([]);
  });

  it('answers 400 for both cursors or a bad limit', async () => {
    for (const query of ['starting_after=crd_a&ending_before=crd_b', 'limit=0', 'limit=101', 'limit=x']) {
      const res = await t.request('GET', `/credentials?${query}`, { token: key });
      expect(res.status, query).toBe(400);
      expect(problemSlug(res)).toBe('validation-error');
    }
  });
});

describe('GET|DELETE /credentials/{credential_id}', () => {
  it('deletes (204), then answers 404 everywhere; the name becomes free again', async () => {
    const name = unique('gone');
    const created = await createCredential({ name });
    const deleted = await t.request('DELETE', `/credentials/${created.body.id}`, { token: key });
    expect(deleted.status).toBe(204);
    expect(deleted.text).toBe('');
    const after = await t.request('GET', `/credentials/${created.body.id}`, { token: key });
    expect(after.status).toBe(404);
    expect(problemSlug(after)).toBe('not-found');
    expect((await t.request('DELETE', `/credentials/${created.body.id}`, { token: key })).status).toBe(404);
    expect(await storedRow(created.body.id)).toBeUndefined();
    expect((await createCredential({ name })).status).toBe(201);
  });

  it('refuses to delete while a repository uses it (409 resource-in-use naming the repository)', async () => {
    const credential = await createCredential({ name: unique('in-use') });
    const repository = await t.request('POST', '/repositories', {
      token: key,
      body: { name: unique('repo'), repo_url: 'https://github.com/acme/skills.git', credential_id: credential.body.id },
    });
    expect(repository.status).toBe(201);
    const refused = await t.request('DELETE', `/credentials/${credential.body.id}`, { token: key });
    expect(refused.status).toBe(409);
    expect(problemSlug(refused)).toBe('resource-in-use');
    expect(refused.body.conflicting_resource_id).toBe(repository.body.id);
    expect((await t.request('GET', `/credentials/${credential.body.id}`, { token: key })).status).toBe(200);

    const cleared = await t.request('PATCH', `/repositories/${repository.body.id}`, { token: key, body: { credential_id: null } });
    expect(cleared.body.credential_id).toBeNull();
    expect((await t.request('DELETE', `/credentials/${credential.body.id}`, { token: key })).status).toBe(204);
  });

  it('hides credentials of another integration behind 404', async () => {
    const mine = await createCredential({ name: unique('isolated') });
    for (const method of ['GET', 'DELETE']) {
      const res = await t.request(method, `/credentials/${mine.body.id}`, { token: otherKey });
      expect(res.status, method).toBe(404);
      expect(problemSlug(res)).toBe('not-found');
    }
    const theirs = await t.request('GET', '/credentials?limit=100', { token: otherKey });
    expect(theirs.body.data.map((x: { id: string }) => x.id)).not.toContain(mine.body.id);
    expect((await t.request('GET', `/credentials/${mine.body.id}`, { token: key })).status).toBe(200);
    expect((await t.request('GET', '/credentials/crd_unknown', { token: key })).status).toBe(404);
  });
});

describe('the secret is write-only (canary)', () => {
  it('appears in no response, no log line and nowhere in the database, while its ciphertext is stored', async () => {
    const canary = `canary-${randomUUID()}`;
    const name = unique('canary');
    const responses: ApiResponse[] = [];
    const send = async (method: string, path: string, options: Parameters<TestServer['request']>[2] = {}) => {
      const res = await t.request(method, path, { token: key, ...options });
      responses.push(res);
      return res;
    };

    const headers = { 'Idempotency-Key': `canary-${name}` };
    const created = await send('POST', '/credentials', { headers, body: { name, type: 'api_key', secret: canary } });
    expect(created.status).toBe(201);
    expect(
      (await send('POST', '/credentials', { headers, body: { name, type: 'api_key', secret: canary } })).headers.get(
        'idempotency-replayed',
      ),
    ).toBe('true');
    expect((await send('GET', `/credentials/${created.body.id}`)).status).toBe(200);
    expect((await send('GET', '/credentials?limit=100')).body.data.map((x: { id: string }) => x.id)).toContain(created.body.id);
    // Failures carrying the secret must not echo it either.
    expect((await send('POST', '/credentials', { body: { name, secret: canary } })).status).toBe(409);
    expect((await send('POST', '/credentials', { body: { name: 'x'.repeat(256), secret: canary } })).status).toBe(422);
    expect((await send('POST', '/credentials', { body: { name: unique('c'), secret: `${canary}${'x'.repeat(65536)}` } })).status).toBe(422);

    const forms = [
      canary,
      Buffer.from(canary).toString('base64'),
      Buffer.from(canary).toString('base64url'),
      Buffer.from(canary).toString('hex'),
    ];
    const leaks = (text: string) => forms.filter((form) => text.includes(form));
    for (const res of responses) {
      expect(leaks(res.text)).toEqual([]);
      expect(leaks(JSON.stringify([...res.headers.entries()]))).toEqual([]);
    }

    expect(t.logs.length).toBeGreaterThan(0);
    expect(t.logs.some((line) => line.includes(`/credentials/${created.body.id}`))).toBe(true);
    expect(leaks(t.logs.join('\n'))).toEqual([]);

    // Every row of every table, as text.
    const tables = await db.query<{ schema: string; name: string }>(
      `select table_schema as schema, table_name as name from information_schema.tables
       where table_type = 'BASE TABLE' and table_schema not in ('pg_catalog', 'information_schema')`,
    );
    expect(tables.rows.map((r) => r.name)).toEqual(expect.arrayContaining(['credentials', 'idempotency_keys']));
    let dump = '';
    for (const table of tables.rows) {
      const rows = await db.query<{ row: string }>(`select t::text as row from "${table.schema}"."${table.name}" t`);
      dump += `${rows.rows.map((r) => r.row).join('\n')}\n`;
    }
    expect(dump).toContain(created.body.id);
    expect(dump).toContain(name);
    expect(leaks(dump)).toEqual([]);

    const row = await storedRow(created.body.id);
    expect(row?.secret_ciphertext).toMatch(/^v1\./);
    expect(dump).toContain(row!.secret_ciphertext);
    expect(t.server.deps.vault.decrypt(row!.secret_ciphertext, `credential:${created.body.id}`)).toBe(canary);
  });
});
