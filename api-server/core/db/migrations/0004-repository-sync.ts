import { type Kysely, sql } from 'kysely';

// The state a repository sync needs beyond the spec's `sync` object:
// - sync_warnings: what the last scan skipped (invalid manifests, names held by manual skills);
// - sync_commit: the commit whose content runs materialise skills from;
// - sync_claim / sync_node_id / sync_started_at: who runs the sync in flight. A sync is claimed by one
//   conditional update (state <> 'syncing'), so two API nodes cannot both start one, and one whose node
//   stopped beating is taken over (see repositories/sync.ts).
const STATEMENTS = [
  `alter table repositories add column sync_warnings jsonb not null default '[]'::jsonb`,
  `alter table repositories add column sync_commit text`,
  `alter table repositories add column sync_claim text`,
  `alter table repositories add column sync_node_id text`,
  `alter table repositories add column sync_started_at timestamptz`,
  `create index repositories_syncing on repositories (sync_node_id) where sync_state = 'syncing'`,
];

export async function up(db: Kysely<unknown>): Promise<void> {
  for (const statement of STATEMENTS) await sql.raw(statement).execute(db);
}
