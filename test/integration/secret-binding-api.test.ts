/**
 * Host-bound secrets over HTTP: every `secrets` map takes a string or `{value, allowed_hosts}`; the
 * entries are validated with pointers; listings show `allowed_hosts` (null when unbound) and never the
 * value; the binding is stored beside the ciphertext and is part of its context; and with
 * ACIS_SECRETS_REQUIRE_HOSTS=1 a plain string is refused (secret-hosts-required) at every entry point,
 * changing nothing.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ProvisionedUser, provisionUser, unique } from '../helpers/provision.js';
import { type ApiResponse, problemSlug, startTestServer, type TestServer } from '../helpers/test-server.js';

let t: TestServer;
let strict: TestServer;
let key: string;
let strictKey: string;
let db: pg.Client;
let owner: ProvisionedUser;
let strictOwner: ProvisionedUser;
const vaulted: string[] = [];
const responses: string[] = [];

beforeAll(async () => {
  [t, strict] = await Promise.all([startTestServer(), startTestServer({ ACIS_SECRETS_REQUIRE_HOSTS: '1' })]);
  ({ serviceKey: key } = await t.createIntegration('binding suite'));
  ({ serviceKey: strictKey } = await strict.createIntegration('binding suite, hosts required'));
  [owner, strictOwner] = await Promise.all([provisionUser(t, key), provisionUser(strict, strictKey)]);
  db = new pg.Client({ connectionString: t.databaseUrl });
  await db.connect();
});
afterAll(async () => {
  await db?.end();
  await Promise.all([t?.stop(), strict?.stop()]);
});

const canary = (label = 'value') => {
  const value = `canary-${unique(label)}`;
  vaulted.push(value);
  return value;
};

async function call(server: TestServer, method: string, path: string, body?: unknown): Promise<ApiResponse> {
  const res = await server.request(method, path, { token: server === t ? key : strictKey, body });
  responses.push(res.text);
  return res;
}

function expectProblem(res: ApiResponse, status: number, slug: string): void {
  expect(res.status, res.text).toBe(status);
  expect(problemSlug(res)).toBe(slug);
}

const pointers = (res: ApiResponse) => (res.body.errors as { pointer: string }[]).map((e) => e.pointer).sort();

async function newConversation(server: TestServer, user: ProvisionedUser): Promise<string> {
  const res = await call(server, 'POST', '/conversations', { user_id: user.userId });
  expect(res.status).toBe(201);
  return res.body.id;
}

describe('the object form', () => {
  it('is accepted at conversation, user and tenant scope; listings show allowed_hosts (null unbound), never the value', async () => {
    const conversationId = await newConversation(t, owner);
    const scopes = [`/conversations/${conversationId}/secrets`, `/users/${owner.userId}/secrets`, `/tenants/${owner.tenantId}/secrets`];
    const hosts = ['api.example.com', '*.example.org', '10.0.0.5:8443', 'http://[2001:db8::1]:8080', 'HTTP://Plain.Example.NET.'];
    for (const path of scopes) {
      const bound = canary('bound');
      const res = await call(t, 'PUT', path, { secrets: { BOUND: { value: bound, allowed_hosts: hosts }, PLAIN: canary('plain') } });
      expect(res.status, res.text).toBe(200);
      expect(res.body.data.map((s: { alias: string; allowed_hosts: unknown }) => [s.alias, s.allowed_hosts])).toEqual([
        ['BOUND', hosts],
        ['PLAIN', null],
      ]);
      expect((await call(t, 'GET', path)).body.data).toEqual(res.body.data);
    }
    const rows = await db.query("select alias, allowed_hosts, value_ciphertext from secrets where alias = 'BOUND'");
    expect(rows.rows.length).toBeGreaterThanOrEqual(3);
    for (const row of rows.rows) {
      expect(row.allowed_hosts).toEqual(hosts);
      expect(row.value_ciphertext).toMatch(/^v1\./);
    }
  });

  it('rebinding an alias replaces its hosts; a string makes it unbound again', async () => {
    const path = `/conversations/${await newConversation(t, owner)}/secrets`;
    await call(t, 'PUT', path, { secrets: { KEY: { value: canary(), allowed_hosts: ['a.example.com'] } } });
    let res = await call(t, 'PUT', path, { secrets: { KEY: { value: canary(), allowed_hosts: ['b.example.com'] } } });
    expect(res.body.data[0].allowed_hosts).toEqual(['b.example.com']);
    res = await call(t, 'PUT', path, { secrets: { KEY: canary() } });
    expect(res.body.data[0].allowed_hosts).toBeNull();
  });

  it('refuses bad entries with 422 validation-error and a pointer to each, changing nothing', async () => {
    const path = `/conversations/${await newConversation(t, owner)}/secrets`;
    const bad = [
      'https://api.example.com/path',
      'user@api.example.com',
      '*.*.example.com',
      '*.10.0.0.1',
      '2001:db8::1',
      'api.example.com:0',
      'api.example.com:70000',
      'exa mple.com',
      '-bad.example.com',
      '',
    ];
    const res = await call(t, 'PUT', path, {
      secrets: {
        BAD_HOSTS: { value: canary(), allowed_hosts: ['ok.example.com', ...bad] },
        EMPTY: { value: canary(), allowed_hosts: [] },
        TOO_MANY: { value: canary(), allowed_hosts: Array.from({ length: 33 }, (_, i) => `h${i}.example.com`) },
        NO_HOSTS: { value: canary() },
        EXTRA: { value: canary(), allowed_hosts: ['ok.example.com'], note: 'x' },
        NOT_A_VALUE: 42,
      },
    });
    expectProblem(res, 422, 'validation-error');
    expect(pointers(res)).toEqual(
      [
        ...bad.map((_, i) => `/secrets/BAD_HOSTS/allowed_hosts/${i + 1}`),
        '/secrets/EMPTY/allowed_hosts',
        '/secrets/TOO_MANY/allowed_hosts',
        '/secrets/NO_HOSTS/allowed_hosts',
        '/secrets/EXTRA/note',
        '/secrets/NOT_A_VALUE',
      ].sort(),
    );
    expect((await call(t, 'GET', path)).body.data).toEqual([]);
  });

  it('32 entries are accepted', async () => {
    const path = `/users/${owner.userId}/secrets`;
    const hosts = Array.from({ length: 32 }, (_, i) => `h${i}.example.com`);
    const res = await call(t, 'PUT', path, { secrets: { MANY: { value: canary(), allowed_hosts: hosts } } });
    expect(res.status, res.text).toBe(200);
    expect(res.body.data.find((s: { alias: string }) => s.alias === 'MANY').allowed_hosts).toEqual(hosts);
  });

  it('a message send takes the object form (and still refuses a bad entry with its pointer)', async () => {
    const conversationId = await newConversation(t, owner);
    const res = await call(t, 'POST', `/conversations/${conversationId}/messages`, {
      content: 'hello',
      secrets: { TOKEN: { value: canary(), allowed_hosts: ['bad/host'] } },
    });
    expectProblem(res, 422, 'validation-error');
    expect(pointers(res)).toEqual(['/secrets/TOKEN/allowed_hosts/0']);
  });

  it('the binding is part of the ciphertext context: a row rebound in the database no longer decrypts', async () => {
    const conversationId = await newConversation(t, owner);
    await call(t, 'PUT', `/conversations/${conversationId}/secrets`, {
      secrets: { PINNED: { value: canary(), allowed_hosts: ['api.example.com'] } },
    });
    await db.query("update secrets set allowed_hosts = '{attacker.example}' where scope_id = $1 and alias = 'PINNED'", [conversationId]);
    // The run resolves its secrets before it starts: a tampered binding fails it rather than widening it.
    const res = await call(t, 'POST', `/conversations/${conversationId}/messages?stream=false`, { content: '{{secret:PINNED}}' });
    expectProblem(res, 500, 'internal-error');
  });
});

describe('ACIS_SECRETS_REQUIRE_HOSTS=1', () => {
  it('refuses plain strings with 422 secret-hosts-required at conversation, user and tenant scope, changing nothing', async () => {
    const conversationId = await newConversation(strict, strictOwner);
    for (const path of [
      `/conversations/${conversationId}/secrets`,
      `/users/${strictOwner.userId}/secrets`,
      `/tenants/${strictOwner.tenantId}/secrets`,
    ]) {
      const res = await call(strict, 'PUT', path, {
        secrets: { PLAIN: canary(), BOUND: { value: canary(), allowed_hosts: ['api.example.com'] } },
      });
      expectProblem(res, 422, 'secret-hosts-required');
      expect(pointers(res)).toEqual(['/secrets/PLAIN']);
      expect((await call(strict, 'GET', path)).body.data).toEqual([]);
      const ok = await call(strict, 'PUT', path, { secrets: { BOUND: { value: canary(), allowed_hosts: ['api.example.com'] } } });
      expect(ok.status, ok.text).toBe(200);
    }
  });

  it('refuses them in a message send and in a conversation created with an initial message, which is not kept', async () => {
    const conversationId = await newConversation(strict, strictOwner);
    const send = await call(strict, 'POST', `/conversations/${conversationId}/messages`, { content: 'hi', secrets: { PLAIN: canary() } });
    expectProblem(send, 422, 'secret-hosts-required');
    expect(pointers(send)).toEqual(['/secrets/PLAIN']);
    expect((await call(strict, 'GET', `/conversations/${conversationId}/messages`)).body.data).toEqual([]);

    const before = (await call(strict, 'GET', `/conversations?user_id=${strictOwner.userId}&limit=100`)).body.data.length;
    const create = await call(strict, 'POST', '/conversations', {
      user_id: strictOwner.userId,
      initial_message: { content: 'hi', secrets: { PLAIN: canary() } },
    });
    expectProblem(create, 422, 'secret-hosts-required');
    expect(pointers(create)).toEqual(['/initial_message/secrets/PLAIN']);
    expect((await call(strict, 'GET', `/conversations?user_id=${strictOwner.userId}&limit=100`)).body.data.length).toBe(before);
  });

  it('approve takes the object form: the body parses, and an unknown approval is 404, not 422', async () => {
    const res = await call(strict, 'POST', '/approvals/apr_doesnotexist/approve', {
      signature: { key_id: 'k', algorithm: 'hmac-sha256', exp: 1, value: 'x' },
      secrets: { BOUND: { value: canary(), allowed_hosts: ['*.example.com'] } },
    });
    expect(res.status, res.text).toBe(404);
  });
});

describe('OpenAPI', () => {
  it('describes the object form wherever a secrets map is written, and allowed_hosts in listings', async () => {
    const doc = (await t.request('GET', '/openapi.json')).body;
    const schemas = doc.components.schemas;
    expect(schemas.BoundSecretValue).toMatchObject({
      type: 'object',
      required: ['value', 'allowed_hosts'],
      properties: { allowed_hosts: { type: 'array', minItems: 1, maxItems: 32, items: { $ref: '#/components/schemas/AllowedHost' } } },
    });
    expect(schemas.SecretEntry.anyOf).toEqual(expect.arrayContaining([{ $ref: '#/components/schemas/BoundSecretValue' }]));
    const bodyOf = (path: string, method: string) => {
      const schema = doc.paths[path][method].requestBody.content['application/json'].schema;
      return schema.$ref ? schemas[schema.$ref.split('/').pop()] : schema;
    };
    for (const [path, method] of [
      ['/conversations/{conversation_id}/secrets', 'put'],
      ['/users/{user_id}/secrets', 'put'],
      ['/tenants/{tenant_id}/secrets', 'put'],
      ['/conversations/{conversation_id}/messages', 'post'],
      ['/approvals/{approval_id}/approve', 'post'],
    ]) {
      expect(bodyOf(path!, method!).properties.secrets.additionalProperties, path).toEqual({ $ref: '#/components/schemas/SecretEntry' });
    }
    expect(schemas.ConversationSecret.properties.allowed_hosts).toBeDefined();
  });
});

describe('values never come back out', () => {
  it('appear in no response', () => {
    const all = responses.join('\n');
    for (const value of vaulted) expect(all).not.toContain(value);
  });
});
