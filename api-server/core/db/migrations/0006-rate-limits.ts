import { type Kysely, sql } from 'kysely';

// One row per (class, principal): the window it is in and how many requests the API nodes have
// reserved in it. Rows are reused window after window, so the table grows with principals, not time.
const STATEMENTS = [
  `
    create table rate_limit_windows (
      bucket text collate "C" primary key,
      window_started_at timestamptz not null,
      used integer not null check (used >= 0)
    )
  `,
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const statement of STATEMENTS) await sql.raw(statement).execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table rate_limit_windows`.execute(db);
}
