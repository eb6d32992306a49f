import type pg from 'pg';
import { TenantSettings } from '../../api-server/tenants/tenants.schemas.js';

/** What the scenarios address: the bootstrap integration and the seeded tenants and users. */
export interface Fixture {
  serviceKey: string;
  integrationId: string;
  rootTenantId: string;
  /** External ids of existing tenants, for the warm-path upsert. */
  warmTenantExternalIds: string[];
  /** (tenant, user) external-id pairs that exist, for token exchange. */
  exchangePairs: Array<{ tenant_external_id: string; user_external_id: string }>;
  /** Tenants under the root now (the dataset size). */
  tenantCount: number;
  /** A `starting_after` cursor whose page is one of the last of GET /tenants. */
  deepCursor: string;
}

/** Tenants made through the API (the realistic path); beyond this count they are bulk-inserted. */
const API_TENANTS = 1_000;
const API_CONCURRENCY = 20;
/** Warm upserts and token exchanges rotate over this many tenants (one user each). */
const HOT_TENANTS = 100;
/** The deep page starts this many tenants before the oldest, so it is a full page. */
const DEEP_PAGE_FROM_END = 40;

const tenantExternalId = (n: number) => `bench:tenant:${String(n).padStart(7, '0')}`;
const userExternalId = (n: number) => `bench:user:${String(n).padStart(7, '0')}`;

interface Api {
  url: string;
  serviceKey: string;
}

/** One API call during seeding; any other status than `status` stops the bench with the answer. */
// biome-ignore lint/suspicious/noExplicitAny: the JSON answer, read loosely by the seeding script (a wrong shape stops the bench)
async function expectStatus(api: Api, method: string, path: string, body: unknown, status: number): Promise<any> {
  const response = await fetch(`${api.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${api.serviceKey}`,
      ...(body !== undefined && { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (response.status !== status) throw new Error(`seed: ${method} ${path} answered ${response.status}: ${text}`);
  return JSON.parse(text);
}

/** Reads the bootstrap integration and creates the first tenants and the users through the API. */
export async function seedBase(api: Api, db: pg.Client): Promise<Fixture> {
  const integration = await expectStatus(api, 'GET', '/integration', undefined, 200);
  const tenantIds: string[] = new Array(API_TENANTS);
  let next = 0;
  const worker = async () => {
    for (let n = next++; n < API_TENANTS; n = next++) {
      const path = `/tenants/by-external-id/${encodeURIComponent(tenantExternalId(n))}`;
      const tenant = await expectStatus(api, 'PUT', path, { name: `Bench tenant ${n}` }, 201);
      tenantIds[n] = tenant.id;
    }
  };
  await Promise.all(Array.from({ length: API_CONCURRENCY }, worker));

  const hot = Array.from({ length: HOT_TENANTS }, (_, n) => n);
  for (const n of hot) {
    const path = `/tenants/${tenantIds[n]}/users/by-external-id/${encodeURIComponent(userExternalId(n))}`;
    await expectStatus(api, 'PUT', path, {}, 201);
  }
  await db.query('analyze');
  return {
    serviceKey: api.serviceKey,
    integrationId: integration.id,
    rootTenantId: integration.root_tenant_id,
    warmTenantExternalIds: hot.map(tenantExternalId),
    exchangePairs: hot.map((n) => ({ tenant_external_id: tenantExternalId(n), user_external_id: userExternalId(n) })),
    tenantCount: API_TENANTS,
    deepCursor: await deepCursor(db, integration.id, API_TENANTS),
  };
}

// Crockford base32 as api-server/core/ids.ts: 10 characters of milliseconds, 16 random ones.
const ALPHABET = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const TIME_CHARS = Array.from({ length: 10 }, (_, i) => `substr('${ALPHABET}', ((s.ms >> ${5 * (9 - i)}) & 31)::int + 1, 1)`);
const RANDOM_CHARS = Array.from({ length: 16 }, () => `substr('${ALPHABET}', floor(random() * 32)::int + 1, 1)`);

/**
 * Grows the integration to `total` tenants with one `insert ... select from generate_series`.
 * Their ids are one millisecond apart and older than the API-made tenants, so they are valid,
 * time-ordered ids and the API-made tenants stay the newest (the first page).
 */
export async function growTenants(db: pg.Client, fixture: Fixture, total: number): Promise<Fixture> {
  if (total <= fixture.tenantCount) return fixture;
  const oldest = await db.query<{ ms: string }>(
    `select (extract(epoch from min(created_at)) * 1000)::bigint as ms from tenants where integration_id = $1 and parent_id is not null`,
    [fixture.integrationId],
  );
  const firstMs = BigInt(oldest.rows[0]!.ms) - BigInt(total) - 1000n;
  await db.query(
    `insert into tenants (id, integration_id, parent_id, external_id, name, status, repository_id, settings, metadata, created_at, updated_at)
     select 'tnt_' || ${[...TIME_CHARS, ...RANDOM_CHARS].join(' || ')},
            $1, $2, 'bench:tenant:' || lpad(s.n::text, 7, '0'), 'Bench tenant ' || s.n, 'active', null,
            $3::jsonb, '{}'::jsonb, to_timestamp(s.ms / 1000.0), to_timestamp(s.ms / 1000.0)
     from (select n, $4::bigint + n as ms from generate_series($5::int, $6::int) n) s`,
    [
      fixture.integrationId,
      fixture.rootTenantId,
      JSON.stringify(TenantSettings.parse({})),
      String(firstMs),
      fixture.tenantCount,
      total - 1,
    ],
  );
  // Vacuum too: it sets hint bits and the visibility map now, so no autovacuum runs during the load.
  await db.query('vacuum analyze tenants');
  return { ...fixture, tenantCount: total, deepCursor: await deepCursor(db, fixture.integrationId, total) };
}

async function deepCursor(db: pg.Client, integrationId: string, total: number): Promise<string> {
  const result = await db.query<{ id: string }>(
    `select id from tenants where integration_id = $1 and parent_id is not null order by id desc offset $2 limit 1`,
    [integrationId, total - DEEP_PAGE_FROM_END],
  );
  if (!result.rows[0]) throw new Error('seed: no tenant at the deep-page position');
  return result.rows[0].id;
}
