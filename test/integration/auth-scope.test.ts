import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ID_PREFIX, type IdKind } from '../../api-server/core/ids.js';
import type { AnyRoute } from '../../api-server/core/http/route.js';
import { allRoutes } from '../../api-server/routes.js';
import { ADMIN_TOKEN, problemSlug, startTestServer, type TestServer } from '../helpers/test-server.js';

/**
 * The credential rules of every route, driven by the route registry: a route added later is
 * covered without touching this file.
 */

let t: TestServer;
let serviceKey: string;
let platformJwt: string;

beforeAll(async () => {
  t = await startTestServer();
  ({ serviceKey } = await t.createIntegration('auth scope'));
  const tenant = await t.request('PUT', '/tenants/by-external-id/test:tenant:scope', { token: serviceKey, body: {} });
  const user = await t.request('PUT', `/tenants/${tenant.body.id}/users/by-external-id/test:user:scope`, {
    token: serviceKey,
    body: {},
  });
  expect(user.status).toBe(201);
  const exchanged = await t.request('POST', '/auth/token-exchange', {
    token: serviceKey,
    body: { tenant_external_id: 'test:tenant:scope', user_external_id: 'test:user:scope' },
  });
  expect(exchanged.status).toBe(200);
  platformJwt = exchanged.body.token;
});
afterAll(() => t.stop());

const snake = (camel: string) => camel.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
/** `tenant_id` → `tnt_...`, `approver_key_id` → `apk_...`: derived from the id registry itself. */
const PLAUSIBLE: Record<string, string> = Object.fromEntries(
  (Object.keys(ID_PREFIX) as IdKind[]).map((kind) => [`${snake(kind)}_id`, `${ID_PREFIX[kind]}_01AUTHSCOPE0000000000000000`]),
);

function concretePath(route: AnyRoute): string {
  return route.path.replace(/:([A-Za-z0-9_]+)/g, (_, name: string) => {
    if (PLAUSIBLE[name]) return PLAUSIBLE[name];
    if (name === 'external_id') return encodeURIComponent('test:thing:1');
    if (name === 'alias') return 'API_TOKEN';
    return 'x1';
  });
}

function call(route: AnyRoute, token: string | null) {
  const hasBody = ['post', 'put', 'patch'].includes(route.method);
  return t.request(route.method.toUpperCase(), concretePath(route), { token, ...(hasBody && { body: {} }) });
}

const label = (route: AnyRoute) => `${route.method.toUpperCase()} ${route.path} (${route.operationId})`;
const byAuth = (auth: AnyRoute['auth']) => allRoutes.filter((route) => route.auth === auth);

function expectUnauthorized(res: Awaited<ReturnType<typeof call>>, what: string): void {
  expect(res.status, what).toBe(401);
  expect(problemSlug(res), what).toBe('insufficient-scope');
  expect(res.body.title, what).toBe('Unauthorized');
  expect(res.headers.get('www-authenticate'), what).toBe('Bearer');
}

it('knows every auth mode in use and has routes of each expected kind', () => {
  expect(byAuth('service').length).toBeGreaterThan(0);
  expect(byAuth('admin').length).toBeGreaterThan(0);
  for (const route of allRoutes) expect(['service', 'service-or-user', 'admin', 'signature'], label(route)).toContain(route.auth);
  // Every route is reachable at a distinct (method, path).
  const keys = allRoutes.map((route) => `${route.method} ${route.path}`);
  expect(new Set(keys).size).toBe(keys.length);
});

describe.each(byAuth('service').map((route) => [label(route), route] as const))('service route %s', (name, route) => {
  it('refuses a valid platform JWT with 403 insufficient-scope', async () => {
    const res = await call(route, platformJwt);
    expect(res.status, name).toBe(403);
    expect(problemSlug(res)).toBe('insufficient-scope');
    expect(res.body.title).toBe('Insufficient scope');
  });

  it('answers 401 with no token, an unknown key, or the admin token', async () => {
    expectUnauthorized(await call(route, null), `${name} without a token`);
    expectUnauthorized(await call(route, 'sk_int_unknownunknownunknownunknown'), `${name} with an unknown key`);
    expectUnauthorized(await call(route, ADMIN_TOKEN), `${name} with the admin token`);
  });

  it('lets the service key through authentication', async () => {
    const res = await call(route, serviceKey);
    expect([401, 403], `${name}: ${res.status} ${res.text}`).not.toContain(res.status);
    expect(res.status, res.text).toBeLessThan(500);
  });
});

describe.each(byAuth('service-or-user').map((route) => [label(route), route] as const))('service-or-user route %s', (name, route) => {
  it('answers 401 with no token, an unknown key, or the admin token', async () => {
    expectUnauthorized(await call(route, null), `${name} without a token`);
    expectUnauthorized(await call(route, 'sk_int_unknownunknownunknownunknown'), `${name} with an unknown key`);
    expectUnauthorized(await call(route, ADMIN_TOKEN), `${name} with the admin token`);
  });

  it('lets both the service key and a platform JWT through authentication', async () => {
    for (const token of [serviceKey, platformJwt]) {
      const res = await call(route, token);
      expect(res.status, `${name}: ${res.status} ${res.text}`).not.toBe(401);
      expect(res.status, res.text).toBeLessThan(500);
    }
  });
});

describe.each(byAuth('signature').map((route) => [label(route), route] as const))('signed webhook route %s', (name, route) => {
  it('takes no bearer credential in place of its signature: 401 with any token or none', async () => {
    for (const token of [serviceKey, platformJwt, ADMIN_TOKEN, null]) {
      const res = await call(route, token);
      expect(res.status, `${name} with ${token === null ? 'no token' : 'a bearer token'}`).toBe(401);
      expect(problemSlug(res)).toBe('webhook-signature-invalid');
    }
  });
});

describe.each(byAuth('admin').map((route) => [label(route), route] as const))('admin route %s', (name, route) => {
  it('answers 401 to a service key, a platform JWT and no token', async () => {
    expectUnauthorized(await call(route, serviceKey), `${name} with a service key`);
    expectUnauthorized(await call(route, platformJwt), `${name} with a platform JWT`);
    expectUnauthorized(await call(route, null), `${name} without a token`);
    expectUnauthorized(await call(route, `${ADMIN_TOKEN}x`), `${name} with a wrong admin token`);
  });

  it('lets the admin token through', async () => {
    const res = await call(route, ADMIN_TOKEN);
    expect([401, 403], `${name}: ${res.status} ${res.text}`).not.toContain(res.status);
    expect(res.status, res.text).toBeLessThan(500);
  });
});

// Last: it moves the server clock past every token minted above.
describe('an expired platform JWT', () => {
  it('is 401 on every route that is not admin-only', async () => {
    t.clock.advance(3601 * 1000);
    for (const route of allRoutes.filter((r) => r.auth !== 'admin' && r.auth !== 'signature')) {
      expectUnauthorized(await call(route, platformJwt), `${label(route)} with an expired JWT`);
    }
  });
});
