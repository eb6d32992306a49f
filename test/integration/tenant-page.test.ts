import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateToLatest } from '../../api-server/core/db/database.js';
import { createTestDatabase, dropTestDatabase } from '../helpers/test-server.js';

// Migration 0011's `tenant_page` runs on a generic plan, chosen once per connection without the
// values. These tests hold it to what it was written for: whatever the statistics say, each page
// is a range of `tenants_list` that reads the page's rows and no other integration's.

const LARGE_TENANTS = 5_000;

let databaseUrl: string;
let db: Kysely<any>;
let client: pg.Client;

beforeAll(async () => {
  databaseUrl = await createTestDatabase();
  db = new Kysely({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: databaseUrl, max: 1 }) }) });
  await migrateToLatest(db);
  // A large integration and a small one whose tenants are all older than the large one's: the case
  // where walking the primary key backwards and filtering by integration reads the whole table.
  await sql`insert into integrations (id, name, root_tenant_id, created_at) values
    ('int_large', 'large', 'tnt_large_root', now()), ('int_small', 'small', 'tnt_0_small_root', now())`.execute(db);
  await sql`insert into tenants (id, integration_id, parent_id, external_id, name, status, settings, metadata, created_at, updated_at)
    values ('tnt_large_root', 'int_large', null, null, 'root', 'active', '{}', '{}', now(), now()),
           ('tnt_0_small_root', 'int_small', null, null, 'root', 'active', '{}', '{}', now(), now())`.execute(db);
  await sql`insert into tenants (id, integration_id, parent_id, external_id, name, status, settings, metadata, created_at, updated_at)
    select 'tnt_1_' || lpad(n::text, 6, '0'), 'int_large', 'tnt_large_root', 'large:' || n, 'L' || n, 'active', '{}', '{}', now(), now()
    from generate_series(1, ${LARGE_TENANTS}) n`.execute(db);
  await sql`insert into tenants (id, integration_id, parent_id, external_id, name, status, settings, metadata, created_at, updated_at)
    select 'tnt_0_small_' || n, 'int_small', 'tnt_0_small_root', 'small:' || n, 'S' || n, 'active', '{}', '{}', now(), now()
    from generate_series(1, 3) n`.execute(db);
  await sql`analyze tenants`.execute(db);

  client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  // auto_explain reports the plans of the statements inside the function to this client.
  for (const setting of [
    `load 'auto_explain'`,
    'set auto_explain.log_min_duration = 0',
    'set auto_explain.log_nested_statements = on',
    'set auto_explain.log_analyze = on',
    'set auto_explain.log_format = json',
    'set auto_explain.log_level = notice',
  ]) {
    await client.query(setting);
  }
});
afterAll(async () => {
  await client?.end();
  await db?.destroy();
  await dropTestDatabase(databaseUrl);
});

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  'Relation Name'?: string;
  'Actual Rows': number;
  'Rows Removed by Filter'?: number;
  Plans?: PlanNode[];
}

/** Runs one page and returns its ids with the plan nodes that read `tenants`. */
async function page(integration: string, direction: string, cursor: string | null, rowCount: number) {
  const plans: PlanNode[] = [];
  const onNotice = (notice: { message?: string }) => {
    const text = notice.message ?? '';
    const json = text.slice(text.indexOf('{'));
    if (!text.includes('plan:') || !json.startsWith('{')) return;
    const explained = JSON.parse(json) as { 'Query Text': string; Plan: PlanNode };
    if (!explained['Query Text'].includes('from tenants t')) return;
    const visit = (node: PlanNode) => {
      if (node['Relation Name'] === 'tenants') plans.push(node);
      node.Plans?.forEach(visit);
    };
    visit(explained.Plan);
  };
  client.on('notice', onNotice);
  try {
    const result = await client.query<{ tenant_id: string }>('select tenant_id from tenant_page($1, $2, $3, $4)', [
      integration,
      direction,
      cursor,
      rowCount,
    ]);
    return { ids: result.rows.map((row) => row.tenant_id), plans };
  } finally {
    client.off('notice', onNotice);
  }
}

describe('tenant_page (migration 0011)', () => {
  const largeNewestFirst = Array.from({ length: LARGE_TENANTS }, (_, i) => `tnt_1_${String(LARGE_TENANTS - i).padStart(6, '0')}`);
  const cases: Array<{ name: string; args: [string, string, string | null, number]; ids: readonly string[] }> = [
    { name: 'small, newest', args: ['int_small', 'newest', null, 21], ids: ['tnt_0_small_3', 'tnt_0_small_2', 'tnt_0_small_1'] },
    { name: 'small, older', args: ['int_small', 'older', 'tnt_0_small_3', 21], ids: ['tnt_0_small_2', 'tnt_0_small_1'] },
    { name: 'small, newer', args: ['int_small', 'newer', 'tnt_0_small_1', 21], ids: ['tnt_0_small_2', 'tnt_0_small_3'] },
    { name: 'large, newest', args: ['int_large', 'newest', null, 21], ids: largeNewestFirst.slice(0, 21) },
    { name: 'large, older (deep)', args: ['int_large', 'older', largeNewestFirst[4_970]!, 21], ids: largeNewestFirst.slice(4_971, 4_992) },
    { name: 'large, newer', args: ['int_large', 'newer', largeNewestFirst[30]!, 21], ids: largeNewestFirst.slice(9, 30).reverse() },
  ];

  it('answers each direction with the integration’s own tenants in order, the root left out', async () => {
    for (const { name, args, ids } of cases) {
      expect((await page(...args)).ids, name).toEqual(ids);
    }
  });

  it('reads each page as a range of tenants_list, the same plan on every run, whatever the statistics', async () => {
    // Several runs each: a prepared statement's plan may change after its fifth run.
    for (let run = 0; run < 7; run++) {
      for (const { name, args, ids } of cases) {
        const { plans } = await page(...args);
        expect(plans, name).toHaveLength(1);
        const [scan] = plans;
        expect({ node: scan!['Node Type'], index: scan!['Index Name'] }, name).toEqual({ node: 'Index Scan', index: 'tenants_list' });
        // The page's rows, and at most the integration's root filtered out beside them.
        expect(scan!['Actual Rows'], name).toBe(ids.length);
        expect(scan!['Rows Removed by Filter'] ?? 0, name).toBeLessThanOrEqual(1);
      }
    }
  });

  it('refuses a direction it does not know', async () => {
    await expect(client.query(`select * from tenant_page('int_small', 'sideways', null, 21)`)).rejects.toThrow(/unknown direction/);
  });
});
