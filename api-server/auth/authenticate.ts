import type { Context } from 'koa';
import { constantTimeEqual, hashServiceKey } from '../core/crypto.js';
import type { AppDeps } from '../deps.js';
import type { AuthMode } from '../core/http/route.js';
import type { Principal, ServicePrincipal } from '../core/principal.js';
import { problems } from '../core/problems.js';
import { verifyUserToken } from './tokens.js';

export const SERVICE_KEY_PREFIX = 'sk_int_';

/**
 * Service-key lookups are cached briefly per node: every provisioning request would otherwise pay
 * a query for it. A revocation therefore takes effect at once on the node that made it and within
 * this window on the others.
 */
const SERVICE_KEY_CACHE_MS = 5_000;
const SERVICE_KEY_CACHE_MAX = 10_000;

interface CachedKey {
  principal: ServicePrincipal | null;
  expiresAt: number;
}

/** One cache per database, so apps sharing a process (tests) never see each other's keys. */
const serviceKeyCaches = new WeakMap<object, Map<string, CachedKey>>();

function cacheFor(deps: AppDeps): Map<string, CachedKey> {
  let cache = serviceKeyCaches.get(deps.db);
  if (!cache) {
    cache = new Map();
    serviceKeyCaches.set(deps.db, cache);
  }
  return cache;
}

/** Called after a revocation so it applies on this node at once. */
export function forgetServiceKeys(deps: AppDeps): void {
  cacheFor(deps).clear();
}

/** Resolves the bearer credential and checks it may call a route of `mode`. */
export async function authenticate(ctx: Context, mode: AuthMode, deps: AppDeps): Promise<Principal> {
  // No bearer: the route's handler verifies the request's signature before it acts.
  if (mode === 'signature') return { kind: 'webhook' };
  const token = bearerToken(ctx);
  if (mode === 'admin') {
    const expected = deps.config.adminToken;
    if (!expected || !constantTimeEqual(Buffer.from(token), Buffer.from(expected))) {
      throw problems.unauthorized('The admin API needs the admin token.');
    }
    return { kind: 'admin' };
  }
  if (token.startsWith(SERVICE_KEY_PREFIX)) {
    const principal = await resolveServiceKey(deps, token);
    if (!principal) throw problems.unauthorized('Unknown or revoked service key.');
    return principal;
  }
  const user = await verifyUserToken(deps, token);
  if (mode === 'service') throw problems.forbidden('This operation needs the integration service key.');
  return user;
}

function bearerToken(ctx: Context): string {
  const header = ctx.get('Authorization');
  const match = /^Bearer[ ]+(\S+)\s*$/i.exec(header);
  if (!match?.[1]) throw problems.unauthorized('Send Authorization: Bearer <token>.');
  return match[1];
}

async function resolveServiceKey(deps: AppDeps, key: string): Promise<ServicePrincipal | null> {
  const hash = hashServiceKey(key);
  const now = Date.now();
  const cache = cacheFor(deps);
  const cached = cache.get(hash);
  if (cached && cached.expiresAt > now) return cached.principal;

  const row = await deps.db
    .selectFrom('service_keys')
    .innerJoin('integrations', 'integrations.id', 'service_keys.integration_id')
    .select(['service_keys.id as key_id', 'integrations.id as integration_id', 'integrations.root_tenant_id'])
    .where('service_keys.key_hash', '=', hash)
    .where('service_keys.revoked_at', 'is', null)
    .executeTakeFirst();
  const principal: ServicePrincipal | null = row
    ? { kind: 'service', integrationId: row.integration_id, rootTenantId: row.root_tenant_id, serviceKeyId: row.key_id }
    : null;
  if (cache.size >= SERVICE_KEY_CACHE_MAX) cache.clear();
  cache.set(hash, { principal, expiresAt: now + SERVICE_KEY_CACHE_MS });
  return principal;
}
