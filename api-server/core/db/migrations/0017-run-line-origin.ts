import { type Kysely, sql } from 'kysely';

// `link_seq`: the number, on the runner's link, of the runner line a stored run line came from (null
// for the platform's own lines). A replica taking a run over after its host died resumes the runner's
// link after the highest one stored, so it neither repeats nor loses a line (api-server/runs/takeover.ts).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`alter table run_lines add column link_seq integer`.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`alter table run_lines drop column link_seq`.execute(db);
}
