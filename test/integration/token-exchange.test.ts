import { randomBytes } from 'node:crypto';
import { decodeJwt, decodeProtectedHeader, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiResponse, problemSlug, startTestServer, type TestServer } from '../helpers/test-server.js';

let t: TestServer;
let key: string;
let otherKey: string;

beforeAll(async () => {
  t = await startTestServer();
  ({ serviceKey: key } = await t.createIntegration('token exchange'));
  ({ serviceKey: otherKey } = await t.createIntegration('other integration'));
});
afterAll(() => t.stop());

const tenantEid = (name: string) => `test:tenant:${name}`;
const userEid = (name: string) => `test:user:${name}`;

/** Upserts a tenant and a user in it through the API; returns their ids. */
async function provision(serviceKey: string, tenant: string, user: string): Promise<{ tenantId: string; userId: string }> {
  const t1 = await t.request('PUT', `/tenants/by-external-id/${encodeURIComponent(tenantEid(tenant))}`, { token: serviceKey, body: {} });
  expect([200, 201]).toContain(t1.status);
  const u1 = await t.request('PUT', `/tenants/${t1.body.id}/users/by-external-id/${encodeURIComponent(userEid(user))}`, {
    token: serviceKey,
    body: {},
  });
  expect([200, 201]).toContain(u1.status);
  return { tenantId: t1.body.id, userId: u1.body.id };
}

const exchange = (body: unknown, token: string | null = key) => t.request('POST', '/auth/token-exchange', { token, body });

function expectUnauthorized(res: ApiResponse): void {
  expect(res.status).toBe(401);
  expect(problemSlug(res)).toBe('insufficient-scope');
  expect(res.body.title).toBe('Unauthorized');
  expect(res.headers.get('www-authenticate')).toBe('Bearer');
}

describe('POST /auth/token-exchange', () => {
  it('returns a Token for an existing (tenant, user) pair, its JWT an HS256 token for that user', async () => {
    const { tenantId, userId } = await provision(key, 'happy', 'alice');
    const before = t.clock.now().getTime();
    const res = await exchange({ tenant_external_id: tenantEid('happy'), user_external_id: userEid('alice') });
    const after = t.clock.now().getTime();
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(Object.keys(res.body).sort()).toEqual(['expires_at', 'object', 'tenant_id', 'token', 'token_type', 'user_id']);
    expect(res.body).toMatchObject({ object: 'token', token_type: 'Bearer', tenant_id: tenantId, user_id: userId });
    const expiresAt = Date.parse(res.body.expires_at);
    expect(res.body.expires_at).toBe(new Date(expiresAt).toISOString());
    // Whole seconds (JWT exp), so up to one second below now + ttl.
    expect(expiresAt).toBeGreaterThanOrEqual(before + 900_000 - 1000);
    expect(expiresAt).toBeLessThanOrEqual(after + 900_000);

    const token: string = res.body.token;
    expect(decodeProtectedHeader(token)).toMatchObject({ alg: 'HS256', typ: 'JWT' });
    const claims = decodeJwt(token);
    expect(claims.sub).toBe(userId);
    expect(claims.exp! * 1000).toBe(expiresAt);
    expect(claims.exp! - claims.iat!).toBe(900);
    // The signature checks out under the deployment's signing key (and only under it).
    const signingKey = t.server.deps.vault.deriveKey('platform-jwt');
    const verified = await jwtVerify(token, signingKey, { algorithms: ['HS256'], currentDate: t.clock.now() });
    expect(verified.payload.sub).toBe(userId);
    await expect(jwtVerify(token, randomBytes(32), { algorithms: ['HS256'] })).rejects.toThrow();
    // Nothing about the token is written anywhere it could be read back.
    expect(t.logs.join('')).not.toContain(token);
  });

  it('mints a new token per call and trims the external ids like every other lookup', async () => {
    await provision(key, 'trim', 'bob');
    const first = await exchange({ tenant_external_id: `  ${tenantEid('trim')} `, user_external_id: ` ${userEid('bob')}\t` });
    const second = await exchange({ tenant_external_id: tenantEid('trim'), user_external_id: userEid('bob') });
    expect(first.status).toBe(200);
    expect(second.status).toBe(200);
    expect(second.body.token).not.toBe(first.body.token);
    expect(second.body.user_id).toBe(first.body.user_id);
  });

  describe('ttl_seconds', () => {
    beforeAll(async () => {
      await provision(key, 'ttl', 'carol');
    });
    const pair = { tenant_external_id: tenantEid('ttl'), user_external_id: userEid('carol') };

    it.each([60, 3600, 61, 3599])('accepts %i and sets expires_at that far ahead', async (ttl) => {
      const now = t.clock.now().getTime();
      const res = await exchange({ ...pair, ttl_seconds: ttl });
      expect(res.status).toBe(200);
      const lifetime = Date.parse(res.body.expires_at) - now;
      expect(lifetime).toBeGreaterThan(ttl * 1000 - 1500);
      expect(lifetime).toBeLessThanOrEqual(ttl * 1000 + 500);
      const claims = decodeJwt(res.body.token);
      expect(claims.exp! - claims.iat!).toBe(ttl);
    });

    it.each([59, 3601, 0, -60, 90.5, '900', null])('refuses %s with 422 pointing at /ttl_seconds', async (ttl) => {
      const res = await exchange({ ...pair, ttl_seconds: ttl });
      expect(res.status).toBe(422);
      expect(problemSlug(res)).toBe('validation-error');
      expect(res.body.errors.map((e: { pointer: string }) => e.pointer)).toEqual(['/ttl_seconds']);
    });
  });

  it('validates the body with JSON pointers (422)', async () => {
    const missing = await exchange({});
    expect(missing.status).toBe(422);
    expect(missing.body.errors.map((e: { pointer: string }) => e.pointer).sort()).toEqual(['/tenant_external_id', '/user_external_id']);
    const tooLong = await exchange({ tenant_external_id: 'x'.repeat(256), user_external_id: '   ' });
    expect(tooLong.status).toBe(422);
    expect(tooLong.body.errors.map((e: { pointer: string }) => e.pointer).sort()).toEqual(['/tenant_external_id', '/user_external_id']);
    const wrongTypes = await exchange({ tenant_external_id: 1, user_external_id: ['u'] });
    expect(wrongTypes.status).toBe(422);
  });

  it('does not provision: unknown tenant or user gives 404 not-found and creates nothing', async () => {
    const { tenantId } = await provision(key, 'known', 'dave');
    const cases = [
      { tenant_external_id: tenantEid('nobody-made-this'), user_external_id: userEid('dave') },
      { tenant_external_id: tenantEid('known'), user_external_id: userEid('nobody-made-this') },
    ];
    for (const body of cases) {
      const res = await exchange(body);
      expect(res.status, JSON.stringify(body)).toBe(404);
      expect(problemSlug(res)).toBe('not-found');
    }
    expect((await t.request('GET', `/tenants/by-external-id/${tenantEid('nobody-made-this')}`, { token: key })).status).toBe(404);
    const users = await t.request('GET', `/tenants/${tenantId}/users?limit=100`, { token: key });
    expect(users.body.data.map((u: { external_id: string }) => u.external_id)).toEqual([userEid('dave')]);
  });

  it('gives 404 for a user that belongs to another tenant, and for a deleted user', async () => {
    await provision(key, 'home', 'erin');
    await provision(key, 'elsewhere', 'frank');
    const res = await exchange({ tenant_external_id: tenantEid('elsewhere'), user_external_id: userEid('erin') });
    expect(res.status).toBe(404);
    expect(problemSlug(res)).toBe('not-found');

    const { userId } = await provision(key, 'home', 'gone');
    expect((await t.request('DELETE', `/users/${userId}`, { token: key })).status).toBe(204);
    const deleted = await exchange({ tenant_external_id: tenantEid('home'), user_external_id: userEid('gone') });
    expect(deleted.status).toBe(404);
  });

  it("gives 404 for another integration's tenant, even with identical external ids", async () => {
    await provision(otherKey, 'theirs', 'grace');
    const res = await exchange({ tenant_external_id: tenantEid('theirs'), user_external_id: userEid('grace') });
    expect(res.status).toBe(404);
    expect(problemSlug(res)).toBe('not-found');

    // The same external ids on both sides resolve to each caller's own records.
    const mine = await provision(key, 'shared', 'henry');
    const theirs = await provision(otherKey, 'shared', 'henry');
    const pair = { tenant_external_id: tenantEid('shared'), user_external_id: userEid('henry') };
    expect((await exchange(pair, key)).body).toMatchObject({ tenant_id: mine.tenantId, user_id: mine.userId });
    expect((await exchange(pair, otherKey)).body).toMatchObject({ tenant_id: theirs.tenantId, user_id: theirs.userId });
  });

  it('refuses a suspended tenant with 403 tenant-suspended until it is reactivated', async () => {
    const { tenantId } = await provision(key, 'suspended', 'ivan');
    const pair = { tenant_external_id: tenantEid('suspended'), user_external_id: userEid('ivan') };
    expect((await t.request('PATCH', `/tenants/${tenantId}`, { token: key, body: { status: 'suspended' } })).status).toBe(200);
    const res = await exchange(pair);
    expect(res.status).toBe(403);
    expect(problemSlug(res)).toBe('tenant-suspended');
    expect(res.text).not.toContain('"token"');
    await t.request('PATCH', `/tenants/${tenantId}`, { token: key, body: { status: 'active' } });
    expect((await exchange(pair)).status).toBe(200);
  });

  it('refuses a suspended user with 403 insufficient-scope until reactivated; other users are unaffected', async () => {
    const { userId } = await provision(key, 'users', 'judy');
    await provision(key, 'users', 'kate');
    const pair = { tenant_external_id: tenantEid('users'), user_external_id: userEid('judy') };
    expect((await t.request('PATCH', `/users/${userId}`, { token: key, body: { status: 'suspended' } })).status).toBe(200);
    const res = await exchange(pair);
    expect(res.status).toBe(403);
    expect(problemSlug(res)).toBe('insufficient-scope');
    expect((await exchange({ ...pair, user_external_id: userEid('kate') })).status).toBe(200);
    await t.request('PATCH', `/users/${userId}`, { token: key, body: { status: 'active' } });
    expect((await exchange(pair)).status).toBe(200);
  });
});

describe('credentials at token exchange', () => {
  it('needs a bearer token: none, a malformed header or an unknown key give the 401 envelope', async () => {
    const body = { tenant_external_id: tenantEid('x'), user_external_id: userEid('x') };
    expectUnauthorized(await exchange(body, null));
    expectUnauthorized(await exchange(body, 'sk_int_unknownunknownunknownunknown'));
    expectUnauthorized(await exchange(body, 'garbage'));
    const basic = await t.request('POST', '/auth/token-exchange', { headers: { authorization: `Basic ${key}` }, body });
    expectUnauthorized(basic);
    const emptyBearer = await t.request('POST', '/auth/token-exchange', { headers: { authorization: 'Bearer ' }, body });
    expectUnauthorized(emptyBearer);
  });

  it('refuses a platform JWT as the credential with 403 insufficient-scope', async () => {
    await provision(key, 'jwt-credential', 'leo');
    const pair = { tenant_external_id: tenantEid('jwt-credential'), user_external_id: userEid('leo') };
    const { token } = (await exchange(pair)).body;
    const res = await exchange(pair, token);
    expect(res.status).toBe(403);
    expect(problemSlug(res)).toBe('insufficient-scope');
    expect(res.body.title).toBe('Insufficient scope');
  });
});

describe('platform JWTs', () => {
  async function tokenFor(tenant: string, user: string, ttl = 900): Promise<{ token: string; tenantId: string; userId: string }> {
    const ids = await provision(key, tenant, user);
    const res = await exchange({ tenant_external_id: tenantEid(tenant), user_external_id: userEid(user), ttl_seconds: ttl });
    expect(res.status).toBe(200);
    return { token: res.body.token, ...ids };
  }

  it('is 403 on service routes while valid, and 401 once expired', async () => {
    const { token, tenantId } = await tokenFor('expiry', 'mia', 60);
    const valid = await t.request('GET', `/tenants/${tenantId}`, { token });
    expect(valid.status).toBe(403);
    expect(problemSlug(valid)).toBe('insufficient-scope');

    // exp is whole seconds after issue, so 58 s later it is valid whatever the sub-second phase.
    t.clock.advance(58_000);
    expect((await t.request('GET', `/tenants/${tenantId}`, { token })).status).toBe(403);
    t.clock.advance(3_000);
    const expired = await t.request('GET', `/tenants/${tenantId}`, { token });
    expectUnauthorized(expired);
    expectUnauthorized(await exchange({ tenant_external_id: tenantEid('expiry'), user_external_id: userEid('mia') }, token));
  });

  it('is 401 when tampered with, unsigned, or signed by another deployment', async () => {
    const { token, tenantId } = await tokenFor('forgery', 'nick');
    const [header, payload, signature] = token.split('.') as [string, string, string];
    const claims = JSON.parse(Buffer.from(payload, 'base64url').toString());
    const otherUser = Buffer.from(JSON.stringify({ ...claims, sub: 'usr_someoneelse' })).toString('base64url');
    const none = Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url');
    const flipped = `${signature.slice(0, -2)}${signature.endsWith('AA') ? 'BB' : 'AA'}`;
    for (const forged of [`${header}.${otherUser}.${signature}`, `${none}.${payload}.`, `${header}.${payload}.${flipped}`]) {
      expectUnauthorized(await t.request('GET', `/tenants/${tenantId}`, { token: forged }));
    }

    const elsewhere = await startTestServer();
    try {
      const { serviceKey } = await elsewhere.createIntegration();
      const tenant = await elsewhere.request('PUT', `/tenants/by-external-id/${tenantEid('forgery')}`, { token: serviceKey, body: {} });
      await elsewhere.request('PUT', `/tenants/${tenant.body.id}/users/by-external-id/${userEid('nick')}`, { token: serviceKey, body: {} });
      const foreign = await elsewhere.request('POST', '/auth/token-exchange', {
        token: serviceKey,
        body: { tenant_external_id: tenantEid('forgery'), user_external_id: userEid('nick') },
      });
      expect(foreign.status).toBe(200);
      expectUnauthorized(await t.request('GET', `/tenants/${tenantId}`, { token: foreign.body.token }));
    } finally {
      await elsewhere.stop();
    }
  });

  it("minted for one integration, cannot read that or another integration's tenants", async () => {
    const { token } = await tokenFor('reader', 'olga');
    const theirs = await provision(otherKey, 'target', 'pete');
    for (const path of [
      `/tenants/${theirs.tenantId}`,
      `/tenants/by-external-id/${tenantEid('target')}`,
      `/tenants/${theirs.tenantId}/users`,
      `/users/${theirs.userId}`,
      '/tenants',
      '/integration',
    ]) {
      const res = await t.request('GET', path, { token });
      expect(res.status, path).toBe(403);
      expect(problemSlug(res)).toBe('insufficient-scope');
      expect(res.body.object).toBeUndefined();
    }
    // Where a platform JWT is accepted (conversation routes), it still reaches only its own user.
    for (const query of [`tenant_id=${theirs.tenantId}`, `user_id=${theirs.userId}`]) {
      const res = await t.request('GET', `/conversations?${query}`, { token });
      expect(res.status, query).toBe(403);
      expect(problemSlug(res)).toBe('insufficient-scope');
    }
    // Nor write there.
    const write = await t.request('PATCH', `/tenants/${theirs.tenantId}`, { token, body: { name: 'hijacked' } });
    expect(write.status).toBe(403);
    expect((await t.request('GET', `/tenants/${theirs.tenantId}`, { token: otherKey })).body.name).toBeNull();
  });
});
