import { type Kysely, sql } from 'kysely';

// `tenant_page`: a page of an integration's tenants (the root left out) as their stored `api_json`,
// newest first, or, for `newer`, oldest first. It exists to keep one plan per connection:
// - Planned per run, as a prepared query with values, the page cost PostgreSQL about 55 µs of
//   planning against 10 µs of execution, and whether it ever switched to a reusable plan depended
//   on the table's size (a deep page did at a thousand tenants, not at a million), so a page's
//   cost was not flat in the table's size.
// - A reusable (generic) plan of the plain query is unsafe: with `integration_id = $1` PostgreSQL
//   may walk the primary key backwards and filter by integration, which for a small integration
//   beside a large one reads the whole table (seconds at a million tenants).
// So the function forces the generic plan and writes each page as a key range of `tenants_list`
// (integration_id, id): the integration as a range rather than an equality, so the ordering
// `integration_id, id` can only come from that index, and the cursor as a row comparison, which
// positions the index scan at the cursor. Each of the three queries then reads the page's rows (and
// the root, if it lies among them), whatever the statistics say.
// The status-filtered listing stays a query planned per run: PostgreSQL 15 cannot end a backward
// scan at a row comparison's second column, so the same trick on (integration_id, status, id)
// would read every index entry of the integration for a status it has none of.
const CREATE_TENANT_PAGE = `
  create function tenant_page(integration text, direction text, cursor_id text, row_count int)
  returns table (tenant_id text, tenant_json text)
  language plpgsql stable
  set plan_cache_mode = force_generic_plan
  set enable_sort = off
  set enable_incremental_sort = off
  as $$
  begin
    if direction = 'newest' then
      return query select t.id, t.api_json from tenants t
        where t.integration_id >= integration and t.integration_id <= integration and t.parent_id is not null
        order by t.integration_id desc, t.id desc limit row_count;
    elsif direction = 'older' then
      return query select t.id, t.api_json from tenants t
        where t.integration_id >= integration and (t.integration_id, t.id) < (integration, cursor_id)
          and t.parent_id is not null
        order by t.integration_id desc, t.id desc limit row_count;
    elsif direction = 'newer' then
      return query select t.id, t.api_json from tenants t
        where t.integration_id <= integration and (t.integration_id, t.id) > (integration, cursor_id)
          and t.parent_id is not null
        order by t.integration_id, t.id limit row_count;
    else
      raise exception 'tenant_page: unknown direction %', direction;
    end if;
  end
  $$`;

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql.raw(CREATE_TENANT_PAGE).execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop function tenant_page(text, text, text, int)`.execute(db);
}
