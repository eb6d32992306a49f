import net from 'node:net';
import { gzipSync } from 'node:zlib';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_INPUT_DEPTH } from '../../api-server/core/http/validation.js';
import { allRoutes } from '../../api-server/routes.js';
import { provisionUser, userToken } from '../helpers/provision.js';
import { ADMIN_TOKEN, type ApiResponse, problemSlug, startTestServer, type TestServer } from '../helpers/test-server.js';

let t: TestServer;
let key: string;
let integrationId: string;
let jwt: string;
let db: pg.Client;
let ids: Record<string, string>;

beforeAll(async () => {
  t = await startTestServer();
  ({ serviceKey: key, id: integrationId } = await t.createIntegration('hostile input suite'));
  const user = await provisionUser(t, key);
  jwt = await userToken(t, key, user);
  const credential = await t.request('POST', '/credentials', { token: key, body: { name: 'pat', secret: 's3cret' } });
  const conversation = await t.request('POST', '/conversations', { token: key, body: { user_id: user.userId, title: 'x' } });
  expect([credential.status, conversation.status]).toEqual([201, 201]);
  ids = {
    tenant_id: user.tenantId,
    user_id: user.userId,
    role_id: user.roleId,
    credential_id: credential.body.id,
    conversation_id: conversation.body.id,
    // Ids that find nothing: a write they reach would be a 404 anyway.
    repository_id: 'rep_01HZZZZZZZZZZZZZZZZZZZZZZZ',
    message_id: 'msg_01HZZZZZZZZZZZZZZZZZZZZZZZ',
    approval_id: 'apr_01HZZZZZZZZZZZZZZZZZZZZZZZ',
    integration_id: integrationId,
    service_key_id: 'key_01HZZZZZZZZZZZZZZZZZZZZZZZ',
    approver_key_id: 'apk_01HZZZZZZZZZZZZZZZZZZZZZZZ',
    external_id: 'fuzz-external-id',
    alias: 'FUZZ_ALIAS',
  };
  db = new pg.Client({ connectionString: t.databaseUrl });
  await db.connect();
});
afterAll(async () => {
  await db?.end();
  await t?.stop();
});

const pointers = (res: ApiResponse) => (res.body.errors ?? []).map((e: { pointer: string }) => e.pointer);

function expectProblem(res: ApiResponse, status: number, slug: string): void {
  expect(res.status, res.text).toBe(status);
  expect(problemSlug(res)).toBe(slug);
}

/** Every row of every table, as one comparable text per table: equal snapshots mean nothing was written. */
async function snapshot(): Promise<Map<string, string>> {
  const tables = await db.query<{ table_name: string }>(
    "select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE' order by 1",
  );
  const out = new Map<string, string>();
  for (const { table_name: table } of tables.rows) {
    // The node heartbeat row changes on a timer, and the rate limiter counts every authenticated
    // request, refused or not: neither is something a request wrote.
    if (table === 'nodes' || table === 'rate_limit_windows') continue;
    const rows = await db.query(
      `select count(*)::int as n, md5(coalesce(string_agg(t::text, '|' order by t::text), '')) as h from "${table}" t`,
    );
    out.set(table, `${rows.rows[0].n}:${rows.rows[0].h}`);
  }
  return out;
}

describe('NUL bytes never reach the database', () => {
  it('refuses NUL in cursors, path ids, path external ids and body ids with 4xx problems', async () => {
    const before = await snapshot();
    const cursor = await t.request('GET', '/credentials?starting_after=%00', { token: key });
    expectProblem(cursor, 400, 'validation-error');
    expect(pointers(cursor)).toEqual(['/starting_after']);

    for (const [method, path] of [
      ['DELETE', '/credentials/%00'],
      ['GET', '/credentials/crd_x%00'],
      ['DELETE', '/tenants/by-external-id/x%00y'],
      ['GET', `/conversations/${ids.conversation_id}/messages/msg_x%00/stream`],
      ['GET', `/tenants/${ids.tenant_id}/users?starting_after=usr_a%00`],
    ] as const) {
      const res = await t.request(method, path, { token: key });
      expect(res.status, `${method} ${path}: ${res.text}`).toBeGreaterThanOrEqual(400);
      expect(res.status, `${method} ${path}`).toBeLessThan(500);
      problemSlug(res);
    }

    const body = await t.request('POST', '/repositories', {
      token: key,
      body: { name: 'nul', repo_url: 'https://example.com/skills.git', credential_id: 'crd_x\u0000' },
    });
    expectProblem(body, 422, 'validation-error');
    expect(pointers(body)).toEqual(['/credential_id']);

    const key0 = await t.request('POST', '/tenants', { token: key, body: { name: 'n', metadata: { 'k\u0000': 'v' } } });
    expectProblem(key0, 422, 'validation-error');
    expect(pointers(key0)).toEqual(['/metadata/k\u0000']);
    expect(await snapshot()).toEqual(before);
  });
});

describe('text that is not well-formed Unicode', () => {
  it('refuses lone surrogates in body strings with 422 and a pointer, storing nothing', async () => {
    const before = await snapshot();
    for (const externalId of ['a\ud800', 'a\udfff', 'a\udc00\ud83d']) {
      const res = await t.request('POST', '/tenants', { token: key, body: { name: 'tenant', external_id: externalId } });
      expectProblem(res, 422, 'validation-error');
      expect(pointers(res)).toEqual(['/external_id']);
    }
    const nested = await t.request('PATCH', `/conversations/${ids.conversation_id}`, {
      token: key,
      body: { title: 'ok', metadata: { note: 'x\ud801' } },
    });
    expectProblem(nested, 422, 'validation-error');
    expect(pointers(nested)).toEqual(['/metadata/note']);
    const exchange = await t.request('POST', '/auth/token-exchange', {
      token: key,
      body: { tenant_external_id: 'a\ud800', user_external_id: 'b' },
    });
    expectProblem(exchange, 422, 'validation-error');
    expect(await snapshot()).toEqual(before);
  });

  it('keeps well-formed text exactly, astral characters and U+FFFD included', async () => {
    const name = 'caf\u00e9 \ud83d\ude00 \ufffd';
    const res = await t.request('PUT', '/tenants/by-external-id/emoji-%F0%9F%98%80', { token: key, body: { name } });
    expect(res.status, res.text).toBe(201);
    expect(res.body).toMatchObject({ name, external_id: 'emoji-\ud83d\ude00' });
  });

  it('refuses a raw body whose bytes are not UTF-8', async () => {
    const before = await snapshot();
    const bytes = Buffer.concat([Buffer.from('{"name":"a'), Buffer.from([0xff, 0xfe]), Buffer.from('","external_id":"raw"}')]);
    const response = await fetch(`${t.url}/tenants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: bytes,
    });
    const text = await response.text();
    expect(response.status, text).toBe(400);
    expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(await snapshot()).toEqual(before);
  });
});

describe('JSON request bodies', () => {
  const post = (body: Buffer | string, headers: Record<string, string> = {}) =>
    fetch(`${t.url}/tenants`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers },
      body,
    });

  it('refuses a __proto__ key, plain or escaped, at any depth with 400, storing nothing', async () => {
    const before = await snapshot();
    for (const body of ['{"name":"p","__proto__":{"admin":true}}', '{"name":"p","metadata":{"a":[{"\\u005f_proto__":{"admin":true}}]}}']) {
      const response = await post(body);
      const text = await response.text();
      expect(response.status, text).toBe(400);
      expect(JSON.parse(text)).toMatchObject({ status: 400, detail: 'The request body is not valid JSON.' });
    }
    expect(await snapshot()).toEqual(before);
  });

  it('refuses a body that is not an object or an array with 400', async () => {
    for (const body of ['"a string"', '42', 'null', 'true', '{"name":']) {
      const response = await post(body);
      expect(response.status, body).toBe(400);
      expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    }
  });

  it('reads an empty body as {}, so the schema names what is missing', async () => {
    const response = await post('');
    expect(response.status).toBe(422);
    const problem = (await response.json()) as { errors: Array<{ pointer: string }> };
    expect(problem.errors.map((e) => e.pointer)).toEqual(['/name']);
  });

  it('drops a leading byte-order mark and keeps the text exactly', async () => {
    const name = 'bom \u00e9\ud83d\ude00';
    const response = await post(Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from(JSON.stringify({ name }))]));
    expect(response.status).toBe(201);
    expect(((await response.json()) as { name: string }).name).toBe(name);
  });

  it('inflates a gzip-compressed body', async () => {
    const body = gzipSync(JSON.stringify({ name: 'compressed' }));
    const response = await post(body, { 'content-encoding': 'gzip' });
    expect(response.status).toBe(201);
    expect(((await response.json()) as { name: string }).name).toBe('compressed');
  });

  it('answers a body sent in many small chunks as one', async () => {
    const bytes = Buffer.from(JSON.stringify({ name: 'chunked \u00e9', metadata: { note: 'x'.repeat(400) } }));
    // One cut inside the two-byte é: the UTF-8 check is on the whole body, not on each chunk.
    const cuts = [0, bytes.indexOf(0xc3) + 1, 100, 300, bytes.length];
    const chunks = cuts
      .slice(1)
      .map((end, i) => bytes.subarray(cuts[i], end))
      .map((chunk) => Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]));
    const head = `POST /tenants HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`;
    const [answer] = await rawExchange(head, [...chunks, '0\r\n\r\n'], 1);
    expect(answer).toMatch(/^HTTP\/1\.1 201 [\s\S]*"name":"chunked \u00e9"/);
  });
});

describe('deeply nested bodies', () => {
  it('refuses a body nested deeper than the limit with 422, before idempotency records anything', async () => {
    const before = await snapshot();
    const depth = 100_000;
    const res = await t.request('POST', '/tenants', {
      token: key,
      rawBody: `{"name":"n","metadata":{"a":${'['.repeat(depth)}${']'.repeat(depth)}}}`,
      headers: { 'content-type': 'application/json', 'idempotency-key': 'deep-body' },
    });
    expectProblem(res, 422, 'validation-error');
    expect(pointers(res)[0]).toMatch(/^\/metadata\/a(\/0)+$/);
    expect(await snapshot()).toEqual(before);
  });
});

describe('percent-encoding that does not decode to UTF-8', () => {
  it('answers 400 for path segments and query values, creating nothing', async () => {
    const before = await snapshot();
    for (const segment of ['x%ED%A0%80', 'x%C0%AF', 'x%FF', 'x%E0%80%AF', 'x%', 'x%G1', 'x%F0%9F%98', 'x%E2/%82%AC']) {
      const res = await t.request('PUT', `/tenants/by-external-id/${segment}`, { token: key, body: { name: 'n' } });
      expectProblem(res, 400, 'validation-error');
    }
    for (const query of ['status=%FF', 'status%FF=active', 'limit=1&x=%ED%A0%80']) {
      const res = await t.request('GET', `/tenants?${query}`, { token: key });
      expectProblem(res, 400, 'validation-error');
    }
    expect(await snapshot()).toEqual(before);
  });
});

describe('cursors', () => {
  it('refuses a cursor that is not an id of the listed resource', async () => {
    for (const [path, cursor] of [
      ['/tenants', 'ending_before=not-an-id'],
      ['/tenants', 'starting_after=..%2F..'],
      ['/tenants', `starting_after=${ids.user_id}`],
      ['/credentials', 'ending_before=tnt_'],
      [`/tenants/${ids.tenant_id}/users`, 'starting_after=usr_a-b'],
      [`/conversations/${ids.conversation_id}/secrets`, 'starting_after=lower_case'],
    ] as const) {
      const res = await t.request('GET', `${path}?${cursor}`, { token: key });
      expectProblem(res, 400, 'validation-error');
      expect(pointers(res)).toEqual([`/${cursor.split('=')[0]}`]);
    }
  });

  it('still pages with cursors of the right kind', async () => {
    const tenants = await t.request('GET', `/tenants?starting_after=${ids.tenant_id}`, { token: key });
    expect(tenants.status, tenants.text).toBe(200);
    const users = await t.request('GET', `/tenants/${ids.tenant_id}/users?ending_before=${ids.user_id}`, { token: key });
    expect(users.status, users.text).toBe(200);
    const secretsPath = `/conversations/${ids.conversation_id}/secrets?starting_after=SOME_ALIAS`;
    const secrets = await t.request('GET', secretsPath, { token: key });
    expect(secrets.status, secrets.text).toBe(200);
  });
});

describe('transport-level refusals', () => {
  it('answers a 20 KB URL with a 431 problem document', async () => {
    const response = await fetch(`${t.url}/tenants?filler=${'a'.repeat(20_000)}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    const text = await response.text();
    expect(response.status).toBe(431);
    expect(response.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(JSON.parse(text)).toMatchObject({ status: 431, type: expect.stringMatching(/\/problems\/request-header-too-large$/) });
    // The server still serves.
    expect((await t.request('GET', '/integration', { token: key })).status).toBe(200);
  });

  it('answers a request the HTTP parser refuses with a 400 problem document', async () => {
    for (const head of [
      'GET /integration HTTP/1.1\r\nHost: x\r\nNot a header line\r\n\r\n',
      'GET /integration HTTP/1.1\r\nHost: x\r\nX-Test: a\u0000b\r\n\r\n',
      'GET /integration HTTP/9.9\r\nHost: x\r\n\r\n',
    ]) {
      const [answer] = await rawExchange(head, [], 1);
      expect(answer, JSON.stringify(head)).toMatch(/^HTTP\/1\.1 400 [\s\S]*content-type: application\/problem\+json[\s\S]*"status":400/i);
    }
  });

  it('answers a 10 MB body with a 413 problem document the client can read', async () => {
    const before = await snapshot();
    const body = JSON.stringify({ name: 'big', secret: 'x'.repeat(10 * 1024 * 1024) });
    const sized = await fetch(`${t.url}/credentials`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body,
    });
    expect(sized.status).toBe(413);
    expect(sized.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    expect(await sized.json()).toMatchObject({ status: 413, type: expect.stringMatching(/\/problems\/payload-too-large$/) });

    // Without a Content-Length the limit is found while reading. A client that sends its whole body
    // before reading the answer (as curl does) must still get the 413, on a connection that works on.
    const opening = '{"name":"b","secret":"';
    const chunk = Buffer.alloc(64 * 1024, 'x');
    const chunks = Array.from({ length: 160 }, () => `${chunk.length.toString(16)}\r\n${chunk}\r\n`);
    const post = `POST /credentials HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\n`;
    const next = `GET /integration HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n\r\n`;
    const answers = await rawExchange(
      `${post}Transfer-Encoding: chunked\r\n\r\n`,
      [`${Buffer.byteLength(opening).toString(16)}\r\n${opening}\r\n`, ...chunks, '0\r\n\r\n', next],
      2,
    );
    expect(answers[0]).toMatch(/^HTTP\/1\.1 413 [\s\S]*content-type: application\/problem\+json[\s\S]*"status":413/i);
    expect(answers[1]).toMatch(/^HTTP\/1\.1 200 /);

    // A body announced far past what is worth reading is answered at once, and the connection closed.
    const [huge] = await rawExchange(`${post}Content-Length: ${1024 ** 3}\r\n\r\n`, ['{"name":"'], 1);
    expect(huge).toMatch(/^HTTP\/1\.1 413 [\s\S]*connection: close[\s\S]*"status":413/i);
    expect(await snapshot()).toEqual(before);
  });
});

/**
 * Writes a request on a raw socket, every piece in turn (waiting for the socket to take each one),
 * and only then reads: the answers are the texts of the first `responses` HTTP responses.
 */
async function rawExchange(head: string, pieces: Array<string | Buffer>, responses: number): Promise<string[]> {
  const socket = net.connect(t.server.port, '127.0.0.1');
  let received = Buffer.alloc(0);
  const complete: string[] = [];
  const done = new Promise<void>((resolve, reject) => {
    socket.on('data', (data) => {
      received = Buffer.concat([received, data]);
      // Cut complete responses off the front: head, blank line, Content-Length bytes of body.
      for (;;) {
        const headEnd = received.indexOf('\r\n\r\n');
        if (headEnd < 0) break;
        const length = Number(/^content-length: *(\d+)/im.exec(received.subarray(0, headEnd).toString())?.[1] ?? 0);
        if (received.length < headEnd + 4 + length) break;
        complete.push(received.subarray(0, headEnd + 4 + length).toString());
        received = received.subarray(headEnd + 4 + length);
      }
      if (complete.length >= responses) resolve();
    });
    socket.on('close', () => resolve());
    socket.on('error', reject);
  });
  const write = (piece: string | Buffer) =>
    new Promise<void>((resolve, reject) => socket.write(piece, (error) => (error ? reject(error) : resolve())));
  await write(head);
  for (const piece of pieces) await write(piece);
  await done;
  socket.destroy();
  return complete;
}

// ---- the fuzz: every route, generated malformed inputs ----

/** mulberry32: a small seeded PRNG, so a failing case can be replayed from its seed. */
function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let x = state;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

// In URLs: NUL, UTF-8 forms of surrogates, overlong and truncated sequences, bytes that are never UTF-8, broken escapes.
const BAD_URL_PIECES = [
  '%00',
  '%ED%A0%80',
  '%ED%BF%BF',
  '%C0%AF',
  '%C0%80',
  '%E0%80%AF',
  '%FF',
  '%FE',
  '%C3',
  '%F0%9F%98',
  '%F8%88%80%80%80',
  '%',
  '%G1',
  '%1',
];
// In JSON strings: NUL and lone or reversed surrogates.
const BAD_TEXT_PIECES = ['\u0000', '\ud800', '\udfff', '\udc00', '\ud83d', '\ude00\ud83d', 'a\u0000b'];
const SAFE_TEXT = ['', 'a', 'x-1', 'caf\u00e9', '\ud83d\ude00', ' '];
// In raw bodies: a byte that never starts UTF-8, an overlong `/`, a surrogate, a truncated
// sequence, a code point past U+10FFFF, a stray continuation byte.
const BAD_BYTES = [[0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xe2, 0x82], [0xf4, 0x90, 0x80, 0x80], [0x80]];

const BASE_BODIES: Record<string, () => Record<string, unknown>> = {
  exchangeToken: () => ({ tenant_external_id: 'a', user_external_id: 'b' }),
  createTenant: () => ({ name: 'fuzz', external_id: 'fuzz-tenant', metadata: { a: 'b' } }),
  upsertTenant: () => ({ name: 'fuzz', metadata: { a: 'b' } }),
  updateTenant: () => ({ name: 'fuzz' }),
  attachTenantRepository: () => ({ repository_id: ids.repository_id }),
  upsertUser: () => ({ role_id: ids.role_id, display_name: 'Fuzz', email: 'fuzz@example.com' }),
  updateUser: () => ({ display_name: 'Fuzz' }),
  createRole: () => ({ name: 'fuzz-role', description: 'd', skill_access: { mode: 'all' } }),
  updateRole: () => ({ description: 'd' }),
  createCredential: () => ({ name: 'fuzz-cred', secret: 's', type: 'git_pat' }),
  createRepository: () => ({ name: 'fuzz-repo', repo_url: 'https://example.com/r.git', credential_id: ids.credential_id }),
  updateRepository: () => ({ name: 'fuzz-repo' }),
  createSkill: () => ({ name: 'fuzz-skill', description: 'd' }),
  createConversation: () => ({ user_id: ids.user_id, title: 'fuzz', metadata: { a: 'b' } }),
  upsertConversation: () => ({ user_id: ids.user_id, title: 'fuzz' }),
  updateConversation: () => ({ title: 'fuzz' }),
  sendMessage: () => ({ content: 'hello' }),
  putConversationSecrets: () => ({ secrets: { FUZZ: 'v' } }),
  putUserSecrets: () => ({ secrets: { FUZZ: 'v' } }),
  putTenantSecrets: () => ({ secrets: { FUZZ: 'v' } }),
  createIntegration: () => ({ name: 'fuzz' }),
  createApproverKey: () => ({ algorithm: 'hmac-sha256' }),
};

const EMPTY_LIST = { object: 'list', data: [], has_more: false, next_cursor: null };
/** The id kind of each listing, by the last segment of its path (secrets page by alias). */
const LIST_PREFIX: Record<string, string> = {
  tenants: 'tnt',
  users: 'usr',
  roles: 'rol',
  credentials: 'crd',
  repositories: 'rep',
  skills: 'skl',
  conversations: 'con',
  messages: 'msg',
  approvals: 'apr',
};

interface FuzzCase {
  method: string;
  path: string;
  token: string | null;
  body?: Buffer;
  idempotencyKey?: string;
}

function generateCases(random: () => number, perRoute: number): FuzzCase[] {
  const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
  const text = () => `${pick(SAFE_TEXT)}`;
  // The `z` keeps a broken escape from joining the text after it into a valid one (`%1` + `a`).
  const badUrlValue = () => `${encodeURIComponent(text())}${pick(BAD_URL_PIECES)}z${encodeURIComponent(text())}`;
  const badText = () => `${text()}${pick(BAD_TEXT_PIECES)}${text()}`;
  const prefixes = ['tnt', 'usr', 'rol', 'rep', 'skl', 'crd', 'con', 'msg', 'apr', 'apk', 'int', 'key'];
  const cases: FuzzCase[] = [];
  for (const route of allRoutes) {
    const paramNames = [...route.path.matchAll(/:([a-z_]+)/g)].map((match) => match[1]!);
    const isList = Boolean(route.method === 'get' && route.responses[200]?.schema?.safeParse(EMPTY_LIST).success);
    const listed = LIST_PREFIX[route.path.split('/').at(-1)!];
    const hasBody = ['post', 'put', 'patch'].includes(route.method);
    for (let n = 0; n < perRoute; n++) {
      const params = Object.fromEntries(paramNames.map((name) => [name, encodeURIComponent(ids[name]!)]));
      const query: string[] = [];
      const body: unknown = hasBody ? (BASE_BODIES[route.operationId]?.() ?? {}) : undefined;
      const kinds = ['query'];
      if (paramNames.length > 0) kinds.push('path', 'path');
      if (isList) kinds.push('cursor', 'cursor');
      if (hasBody) kinds.push('body', 'body', 'body', 'key', 'bytes', 'deep');
      const kind = pick(kinds);
      let bodyBytes: Buffer | undefined;
      // A well-formed request that finds nothing is a plain 404, which an idempotency key records.
      let wellFormed = false;
      if (kind === 'path') {
        const name = pick(paramNames);
        // A well-formed id of another kind finds nothing; an external id or alias has no wrong kind.
        wellFormed = name.endsWith('_id') && name !== 'external_id' && random() < 0.3;
        const otherKinds = prefixes.filter((prefix) => !ids[name]!.startsWith(`${prefix}_`));
        params[name] = wellFormed ? `${pick(otherKinds)}_01HZ` : badUrlValue();
      } else if (kind === 'bytes') {
        // Bytes that are not UTF-8 at the start of the first string value (or of a string added).
        const json = JSON.stringify(body);
        const at = json.indexOf(':"') + 2;
        const bad = Buffer.from(pick(BAD_BYTES));
        bodyBytes =
          at > 1
            ? Buffer.concat([Buffer.from(json.slice(0, at)), bad, Buffer.from(json.slice(at))])
            : Buffer.concat([Buffer.from('{"a":"'), bad, Buffer.from('"}')]);
      } else if (kind === 'deep') {
        let deep: unknown = text();
        const depth = MAX_INPUT_DEPTH + 1 + Math.floor(random() * 3000);
        for (let i = 0; i < depth; i++) deep = random() < 0.5 ? [deep] : { a: deep };
        (body as Record<string, unknown>)[pick(['metadata', 'settings', 'secrets', 'x'])] = deep;
      } else if (kind === 'cursor') {
        const name = pick(['starting_after', 'ending_before']);
        // A well-formed id of another kind, an id with bad characters, or bad encoding.
        const value = pick([
          () => `${pick(prefixes.filter((prefix) => prefix !== listed))}_01HZ`,
          () => `${listed ?? 'x'}_${pick(['a-b', '..%2F..', '', '%2F', 'A'.repeat(70), '01HZ%00', '01HZ%20'])}`,
          () => pick(['not-an-id', '..%2F..', '%2e%2e', 'tnt', '_', '*', "'", 'null']),
          badUrlValue,
        ])();
        query.push(`${name}=${value}`);
      } else if (kind === 'query') {
        const name = pick(['limit', 'status', 'tenant_id', 'user_id', 'name', 'x', 'starting_after']);
        query.push(random() < 0.5 ? `${name}=${badUrlValue()}` : `${name}${pick(BAD_URL_PIECES)}=1`);
      } else {
        const target = body as Record<string, unknown>;
        const fields = Object.keys(target);
        if (kind === 'key' || fields.length === 0) {
          const holder = random() < 0.5 || !target.metadata ? target : (target.metadata as Record<string, unknown>);
          holder[badText()] = text();
        } else {
          const field = pick(fields);
          const current = target[field];
          if (current !== null && typeof current === 'object') {
            (current as Record<string, unknown>)[pick(['a', 'mode', 'FUZZ', 'note'])] = badText();
          } else {
            target[field] = random() < 0.2 ? [badText()] : badText();
          }
        }
      }
      const path = route.path.replace(/:([a-z_]+)/g, (_, name: string) => params[name]!);
      const token = route.auth === 'admin' ? ADMIN_TOKEN : route.auth === 'service' || random() < 0.5 ? key : jwt;
      cases.push({
        method: route.method.toUpperCase(),
        path: query.length > 0 ? `${path}?${query.join('&')}` : path,
        token,
        ...(body !== undefined && { body: bodyBytes ?? Buffer.from(JSON.stringify(body)) }),
        // A refusal must not leave an idempotency record behind either.
        ...(route.idempotent && !wellFormed && random() < 0.5 && { idempotencyKey: `fuzz-${cases.length}` }),
      });
    }
  }
  return cases;
}

describe('fuzz: malformed input on every route', () => {
  it('answers every generated case with a 4xx problem document and writes nothing', async () => {
    const seed = Number(process.env.FUZZ_SEED ?? 15);
    const cases = generateCases(prng(seed), 50);
    expect(cases.length).toBeGreaterThan(3000);
    const before = await snapshot();
    const failures: string[] = [];
    let next = 0;
    const worker = async () => {
      while (next < cases.length) {
        const c = cases[next++]!;
        const headers: Record<string, string> = {};
        if (c.token) headers.authorization = `Bearer ${c.token}`;
        if (c.body) headers['content-type'] = 'application/json';
        if (c.idempotencyKey) headers['idempotency-key'] = c.idempotencyKey;
        const res = await fetch(`${t.url}${c.path}`, { method: c.method, headers, body: c.body });
        const text = await res.text();
        const isProblem = (res.headers.get('content-type') ?? '').startsWith('application/problem+json');
        if (res.status < 400 || res.status >= 500 || !isProblem) {
          failures.push(`${c.method} ${c.path} ${c.body?.toString().slice(0, 300) ?? ''} -> ${res.status} ${text.slice(0, 200)}`);
        }
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    expect(failures.slice(0, 20), `${failures.length} of ${cases.length} cases failed (seed ${seed})`).toEqual([]);
    expect(await snapshot()).toEqual(before);
  }, 120_000);
});
