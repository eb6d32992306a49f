import { type Kysely, sql } from 'kysely';

// Each tenant keeps its API representation (what `presentTenant` returns, as JSON text) in
// `api_json`, rendered by PostgreSQL whenever the row is inserted or updated, so a list page reads
// stored text. Rendering 21 tenants in the page query (json_build_object, two to_char calls a
// row) cost the database about as much again as the rest of the page's query. The trigger is the
// one place that renders; a change to the tenant's representation changes it in a new migration,
// which re-renders every row with `update tenants set api_json = null`.
const STATEMENTS = [
  `alter table tenants add column api_json text`,
  `create function tenants_render_api_json() returns trigger language plpgsql as $$
   begin
     -- Timestamps as JavaScript's toISOString writes them: UTC, milliseconds truncated.
     new.api_json := json_build_object(
       'object', 'tenant', 'id', new.id, 'external_id', new.external_id, 'name', new.name,
       'status', new.status, 'parent_id', new.parent_id, 'repository_id', new.repository_id,
       'settings', new.settings, 'metadata', new.metadata,
       'created_at', to_char(new.created_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
       'updated_at', to_char(new.updated_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
     )::text;
     return new;
   end
   $$`,
  `create trigger tenants_render_api_json before insert or update on tenants
     for each row execute function tenants_render_api_json()`,
  `update tenants set api_json = null`,
  `alter table tenants alter column api_json set not null`,
];

export async function up(db: Kysely<unknown>): Promise<void> {
  for (const statement of STATEMENTS) await sql.raw(statement).execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`drop trigger tenants_render_api_json on tenants`.execute(db);
  await sql`drop function tenants_render_api_json()`.execute(db);
  await sql`alter table tenants drop column api_json`.execute(db);
}
