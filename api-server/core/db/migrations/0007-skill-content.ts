import { type Kysely, sql } from 'kysely';

// Skill content every API node and runner can reach, in the database the nodes already share:
// - content_blobs: file contents addressed by their SHA-256, stored once however many commits or
//   repositories hold them;
// - skill_files: which file of which skill directory a synced commit holds. A run reads the files
//   of its repository's `sync_commit` in one statement, so a re-sync landing meanwhile never mixes
//   two commits; rows of commits no longer referenced, and then blobs no file names, are collected
//   after each sync (see repositories/skill-content.ts).
const STATEMENTS = [
  `create table content_blobs (
     digest text primary key,
     data bytea not null,
     size integer not null
   )`,
  `create table skill_files (
     repository_id text not null references repositories (id) on delete cascade,
     commit text not null,
     skill_dir text not null,
     path text not null,
     digest text not null references content_blobs (digest),
     executable boolean not null,
     primary key (repository_id, commit, skill_dir, path)
   )`,
  `create index skill_files_digest on skill_files (digest)`,
];

export async function up(db: Kysely<unknown>): Promise<void> {
  for (const statement of STATEMENTS) await sql.raw(statement).execute(db);
}
