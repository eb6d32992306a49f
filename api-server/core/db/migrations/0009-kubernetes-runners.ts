import { type Kysely, sql } from 'kysely';

// Runners in pods (the kubernetes sandbox provider), shared by every API replica:
// - runner_egress: which run a runner pod's egress credential stands for while a turn runs on it
//   (user: the pod's name; the password is kept as a SHA-256 digest), so the egress proxy of any
//   replica resolves it, not only the one hosting the run;
// - conversation_workspaces: a conversation's workspace (a gzipped tar from the runner) when its
//   sandbox goes, unpacked into the next one.
const STATEMENTS = [
  `create table runner_egress (
     runner_id text primary key,
     token_digest bytea not null,
     run_id text not null,
     node_id text not null,
     updated_at timestamptz not null
   )`,
  `create table conversation_workspaces (
     conversation_id text primary key references conversations (id) on delete cascade,
     archive bytea not null,
     updated_at timestamptz not null
   )`,
];

export async function up(db: Kysely<unknown>): Promise<void> {
  for (const statement of STATEMENTS) await sql.raw(statement).execute(db);
}
