import type { RequestPlan } from './load.js';
import type { Fixture } from './seed.js';

/** The servers a scenario can load; each runs in its own process (see provisioning-plane.ts). */
export type Target = 'bare' | 'one-query' | 'routes' | 'acis';

/** Sizes the integration is grown to, in this order; the scenarios of each run after its seeding. */
export const DATASETS = [
  { id: '1k', tenants: 1_000 },
  { id: '1M', tenants: 1_000_000 },
] as const;
export type DatasetId = (typeof DATASETS)[number]['id'];

export interface Scenario {
  id: string;
  title: string;
  target: Target;
  /** The integration size it runs at; floors need no data. */
  dataset: DatasetId | null;
  /** The status every response must have (a warm upsert answering 201 would measure the cold path). */
  expectStatus: number;
  /** A look at one response before the load, so a wrong fixture cannot make a fast, empty benchmark. */
  // biome-ignore lint/suspicious/noExplicitAny: a scenario's check reads the JSON answer field by field
  check?: (body: any) => string | undefined;
  /** Id of a scenario this one's throughput is compared with (the same request at another size). */
  baseline?: string;
  plan(fixture: Fixture): RequestPlan;
}

/** Ratios in the report are taken against these two. */
export const BARE_FLOOR = 'floor-bare';
export const QUERY_FLOOR = 'floor-one-query';

const PAGE = 20;
// biome-ignore lint/suspicious/noExplicitAny: reads the JSON answer field by field; a wrong shape is reported, not thrown
const fullPage = (body: any) =>
  body?.data?.length === PAGE && body.has_more === true ? undefined : `expected a full page of ${PAGE} with has_more`;

const bearer = (fixture: Fixture) => ({ authorization: `Bearer ${fixture.serviceKey}` });

const exchangePlan =
  (fixture: Fixture): RequestPlan =>
  (n) => ({
    method: 'POST',
    path: '/auth/token-exchange',
    headers: bearer(fixture),
    body: fixture.exchangePairs[n % fixture.exchangePairs.length],
  });

const warmUpsertPlan =
  (fixture: Fixture): RequestPlan =>
  (n) => ({
    method: 'PUT',
    path: `/tenants/by-external-id/${encodeURIComponent(fixture.warmTenantExternalIds[n % fixture.warmTenantExternalIds.length]!)}`,
    headers: bearer(fixture),
    body: {},
  });

/** The same requests sent to the route written plainly on the one-query floor's stack (floors.ts). */
function plainFloorOf(scenario: Scenario, title: string): Scenario {
  const floorId = (id: string) => id.replace('@', '-floor@');
  return { ...scenario, id: floorId(scenario.id), title, target: 'routes', baseline: scenario.baseline && floorId(scenario.baseline) };
}

/** The provisioning requests, at one integration size. */
function provisioning(dataset: DatasetId): Scenario[] {
  const baseline = dataset === '1k' ? undefined : (name: string) => `${name}@1k`;
  const tokenExchange: Scenario = {
    id: `token-exchange@${dataset}`,
    title: 'POST /auth/token-exchange',
    target: 'acis',
    dataset,
    expectStatus: 200,
    check: (body) => (typeof body?.token === 'string' ? undefined : 'expected a token'),
    baseline: baseline?.('token-exchange'),
    plan: exchangePlan,
  };
  const warmUpsert: Scenario = {
    id: `tenant-upsert-warm@${dataset}`,
    title: 'PUT /tenants/by-external-id/{eid} `{}` (warm)',
    target: 'acis',
    dataset,
    expectStatus: 200,
    check: (body) => (body?.object === 'tenant' && typeof body.id === 'string' ? undefined : 'expected a tenant'),
    baseline: baseline?.('tenant-upsert-warm'),
    plan: warmUpsertPlan,
  };
  return [
    tokenExchange,
    plainFloorOf(tokenExchange, 'floor: the same token exchange, plain Koa + pg'),
    warmUpsert,
    plainFloorOf(warmUpsert, 'floor: the same warm upsert, plain Koa + pg'),
    {
      id: `tenants-list-first@${dataset}`,
      title: 'GET /tenants?limit=20 (first page)',
      target: 'acis',
      dataset,
      expectStatus: 200,
      check: fullPage,
      baseline: baseline?.('tenants-list-first'),
      plan: (fixture) => ({ method: 'GET', path: `/tenants?limit=${PAGE}`, headers: bearer(fixture) }),
    },
    {
      id: `tenants-list-deep@${dataset}`,
      title: 'GET /tenants?limit=20&starting_after= (deep page)',
      target: 'acis',
      dataset,
      expectStatus: 200,
      check: fullPage,
      baseline: baseline?.('tenants-list-deep'),
      plan: (fixture) => ({
        method: 'GET',
        path: `/tenants?limit=${PAGE}&starting_after=${fixture.deepCursor}`,
        headers: bearer(fixture),
      }),
    },
  ];
}

/** Every scenario, in run order. Add new ones here. */
export const SCENARIOS: Scenario[] = [
  {
    id: BARE_FLOOR,
    title: 'floor: bare Koa route, small JSON',
    target: 'bare',
    dataset: null,
    expectStatus: 200,
    plan: () => ({ method: 'GET', path: '/floor' }),
  },
  {
    id: QUERY_FLOOR,
    title: 'floor: Koa route + one `SELECT 1` (pg Pool of 20)',
    target: 'one-query',
    dataset: null,
    expectStatus: 200,
    plan: () => ({ method: 'GET', path: '/floor' }),
  },
  // ACIS's own floors: where its overhead over the raw floors comes from (middleware, then kysely).
  {
    id: 'acis-healthz',
    title: 'ACIS GET /healthz (middleware stack, no auth, no query)',
    target: 'acis',
    dataset: null,
    expectStatus: 200,
    plan: () => ({ method: 'GET', path: '/healthz' }),
  },
  {
    id: 'acis-readyz',
    title: 'ACIS GET /readyz (middleware stack + one kysely `select 1`)',
    target: 'acis',
    dataset: null,
    expectStatus: 200,
    plan: () => ({ method: 'GET', path: '/readyz' }),
  },
  ...DATASETS.flatMap((dataset) => provisioning(dataset.id)),
];

/** The scenarios BENCH_SCENARIOS names (all when unset), always with the floors the ratios need. */
export function selectedScenarios(): Scenario[] {
  const wanted = (process.env.BENCH_SCENARIOS ?? '')
    .split(',')
    .map((id) => id.trim())
    .filter(Boolean);
  if (wanted.length === 0) return SCENARIOS;
  const picked = SCENARIOS.filter(
    (s) => s.id === BARE_FLOOR || s.id === QUERY_FLOOR || wanted.some((id) => s.id === id || s.id.startsWith(id)),
  );
  if (picked.length === 2) throw new Error(`BENCH_SCENARIOS matches no scenario: ${wanted.join(', ')}`);
  return picked;
}
