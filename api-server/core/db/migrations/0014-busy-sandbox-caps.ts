import { type Kysely, sql } from 'kysely';

// Caps on the sandboxes busy at once (api-server/runs/busy-caps.ts). A run in progress holds one of
// its tenant's places once `sandbox_admitted`; a run held for capacity (on_capacity=hold) waits
// with it false. Runs in progress when this migration runs were admitted by the rules before it.
// Tenants get the two settings as null (the deployment default), which re-renders their api_json.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table messages add column sandbox_admitted boolean not null default true`.execute(db);
  await sql`update tenants set settings = '{"max_busy_sandboxes": null, "max_busy_sandboxes_per_user": null}'::jsonb || settings`.execute(
    db,
  );
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`update tenants set settings = settings - 'max_busy_sandboxes' - 'max_busy_sandboxes_per_user'`.execute(db);
  await sql`alter table messages drop column sandbox_admitted`.execute(db);
}
