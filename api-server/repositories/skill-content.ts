/**
 * Skill content in the database every API node (and, through them, every runner) shares: each file
 * of each skill directory of a synced commit, its bytes stored once by SHA-256 however many commits
 * or repositories hold them. A sync stores its commit's skill directories before it marks the
 * repository ready, so `sync_commit` never names content that is not there; a run reads the files of
 * its repository's current `sync_commit` in one statement, so a re-sync landing meanwhile never hands
 * it a mix of two commits.
 *
 * Collection: after a sync, the files of commits other than the new one and the one before (a run may
 * have just read that one) are deleted, then the blobs they named that nothing else names. Storing and
 * collecting exclude each other through one exclusive advisory lock, taken before anything is stored
 * and held to the end of the transaction that also collects: a blob a concurrent sync is about to
 * reference is never collected under it, and no transaction holds the lock shared and then waits to
 * hold it exclusively (two syncs doing that at once deadlock).
 */
import { createHash } from 'node:crypto';
import { lstat, readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { type Kysely, sql } from 'kysely';
import type { Database } from '../core/db/schema.js';
import type { Db } from '../core/db/database.js';

/** The most one commit's skill directories may hold, all files together. */
export const MAX_SKILL_CONTENT_BYTES = 64 * 1024 * 1024;
export const MAX_SKILL_FILES = 20_000;
const INSERT_BATCH = 500;
/** pg_advisory_xact_lock key pair: ('acis' as int4, 1 = skill content). */
const CONTENT_LOCK = sql`${0x61636973}::int4, 1::int4`;

export interface SkillFile {
  /** The directory holding the skill's SKILL.md, relative to the repository root ('' for the root). */
  skillDir: string;
  /** The file's path inside skillDir, `/`-separated. */
  path: string;
  data: Buffer;
  executable: boolean;
}

export class SkillContentTooLarge extends Error {
  constructor(limit: string) {
    super(`the skill directories hold more than ${limit}; make them smaller`);
  }
}

/**
 * The files of every directory holding one of `manifestPaths` (the manifests a scan found, valid or
 * not: a manual skill may name any of them), read from a checkout. Only regular files; `.git` skipped.
 */
export async function readSkillDirectories(root: string, manifestPaths: string[]): Promise<SkillFile[]> {
  const dirs = [...new Set(manifestPaths.map((manifest) => skillDirOfManifest(manifest)))];
  const files: SkillFile[] = [];
  let bytes = 0;
  for (const skillDir of dirs) {
    const queue = [''];
    while (queue.length > 0) {
      const relative = queue.shift()!;
      const entries = await readdir(path.join(root, skillDir, relative), { withFileTypes: true });
      for (const entry of entries) {
        const child = relative ? `${relative}/${entry.name}` : entry.name;
        if (entry.isDirectory()) {
          if (entry.name !== '.git') queue.push(child);
          continue;
        }
        if (!entry.isFile()) continue;
        const full = path.join(root, skillDir, child);
        const stat = await lstat(full);
        bytes += stat.size;
        if (bytes > MAX_SKILL_CONTENT_BYTES) throw new SkillContentTooLarge(`${MAX_SKILL_CONTENT_BYTES / 1024 / 1024} MiB`);
        if (files.length >= MAX_SKILL_FILES) throw new SkillContentTooLarge(`${MAX_SKILL_FILES} files`);
        files.push({ skillDir, path: child, data: await readFile(full), executable: (stat.mode & 0o111) !== 0 });
      }
    }
  }
  return files;
}

/**
 * Stores a commit's skill files (idempotent: a commit stored before is left as it is), under the
 * exclusive content lock: the transaction collects next, and a lock taken shared cannot be upgraded
 * without deadlocking against another transaction doing the same.
 */
export async function storeSkillContent(trx: Kysely<Database>, repositoryId: string, commit: string, files: SkillFile[]): Promise<void> {
  await lockSkillContent(trx);
  const blobs = new Map<string, Buffer>();
  const rows = files.map((file) => {
    const digest = createHash('sha256').update(file.data).digest('hex');
    blobs.set(digest, file.data);
    return { repository_id: repositoryId, commit, skill_dir: file.skillDir, path: file.path, digest, executable: file.executable };
  });
  const blobRows = [...blobs].map(([digest, data]) => ({ digest, data, size: data.length }));
  for (let i = 0; i < blobRows.length; i += INSERT_BATCH) {
    await trx
      .insertInto('content_blobs')
      .values(blobRows.slice(i, i + INSERT_BATCH))
      .onConflict((oc) => oc.column('digest').doNothing())
      .execute();
  }
  for (let i = 0; i < rows.length; i += INSERT_BATCH) {
    await trx
      .insertInto('skill_files')
      .values(rows.slice(i, i + INSERT_BATCH))
      .onConflict((oc) => oc.columns(['repository_id', 'commit', 'skill_dir', 'path']).doNothing())
      .execute();
  }
}

/**
 * Deletes the repository's files of every commit but `keep` (all of them when empty) and the blobs
 * left unnamed. Run inside the transaction that stored the new commit (which holds the lock already),
 * so the sync is visible only once collected.
 */
export async function collectSkillContent(
  trx: Kysely<Database>,
  repositoryId: string,
  keep: string[],
): Promise<{ files: number; blobs: number }> {
  await lockSkillContent(trx);
  let remove = trx.deleteFrom('skill_files').where('repository_id', '=', repositoryId);
  if (keep.length > 0) remove = remove.where('commit', 'not in', keep);
  const removed = await remove.returning('digest').execute();
  const digests = [...new Set(removed.map((row) => row.digest))];
  if (digests.length === 0) return { files: 0, blobs: 0 };
  return { files: removed.length, blobs: await deleteUnnamedBlobs(trx, digests) };
}

/** Deletes every blob no file names (after a repository's rows went with it); how many. */
export async function collectUnreferencedBlobs(db: Db): Promise<number> {
  return db.transaction().execute(async (trx) => {
    await lockSkillContent(trx);
    return deleteUnnamedBlobs(trx);
  });
}

/** The content lock, exclusive, to the end of the transaction (taking it again is a no-op). */
async function lockSkillContent(trx: Kysely<Database>): Promise<void> {
  await sql`select pg_advisory_xact_lock(${CONTENT_LOCK})`.execute(trx);
}

/** Deletes the blobs (of `among`, or all) that no file names; how many. Callers hold the exclusive content lock. */
async function deleteUnnamedBlobs(trx: Kysely<Database>, among?: string[]): Promise<number> {
  let remove = trx
    .deleteFrom('content_blobs')
    .where(({ not, exists, selectFrom }) =>
      not(exists(selectFrom('skill_files').select('digest').whereRef('skill_files.digest', '=', 'content_blobs.digest'))),
    );
  if (among) remove = remove.where('digest', 'in', among);
  const deleted = await remove.executeTakeFirst();
  return Number(deleted.numDeletedRows);
}

/**
 * The files of the given skill directories in the repository's current synced commit, read in one
 * statement (the commit and its files together). Empty when the repository has not synced.
 */
export async function loadSkillFiles(db: Db, repositoryId: string, skillDirs: string[]): Promise<SkillFile[]> {
  if (skillDirs.length === 0) return [];
  const rows = await db
    .selectFrom('repositories as r')
    .innerJoin('skill_files as f', (join) => join.onRef('f.repository_id', '=', 'r.id').onRef('f.commit', '=', 'r.sync_commit'))
    .innerJoin('content_blobs as b', 'b.digest', 'f.digest')
    .select(['f.skill_dir', 'f.path', 'f.executable', 'b.data'])
    .where('r.id', '=', repositoryId)
    .where('f.skill_dir', 'in', skillDirs)
    .orderBy('f.skill_dir')
    .orderBy('f.path')
    .execute();
  return rows.map((row) => ({ skillDir: row.skill_dir, path: row.path, data: row.data, executable: row.executable }));
}

/** The skill directory of a manifest path: `skills/pdf/SKILL.md` → `skills/pdf`, `SKILL.md` → ''. */
export function skillDirOfManifest(manifestPath: string): string {
  const dir = path.posix.dirname(manifestPath);
  return dir === '.' ? '' : dir;
}
