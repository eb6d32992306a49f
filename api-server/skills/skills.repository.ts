import type { Insertable, Selectable, Updateable } from 'kysely';
import type { Db } from '../core/db/database.js';
import type { SkillsTable } from '../core/db/schema.js';

export type SkillRow = Selectable<SkillsTable>;
export type SkillInsert = Insertable<SkillsTable>;

/** Of `skillIds`, those that belong to `repositoryId`. */
export async function skillIdsInRepository(db: Db, repositoryId: string, skillIds: string[]): Promise<Set<string>> {
  if (skillIds.length === 0) return new Set();
  const rows = await db.selectFrom('skills').select('id').where('repository_id', '=', repositoryId).where('id', 'in', skillIds).execute();
  return new Set(rows.map((row) => row.id));
}

/** The ids of every skill of the repository, oldest first. */
export async function listSkillIds(db: Db, repositoryId: string): Promise<string[]> {
  const rows = await db.selectFrom('skills').select('id').where('repository_id', '=', repositoryId).orderBy('id').execute();
  return rows.map((row) => row.id);
}

export function selectSkills(db: Db, repositoryId: string) {
  return db.selectFrom('skills').selectAll().where('repository_id', '=', repositoryId);
}

export function findSkillByName(db: Db, repositoryId: string, name: string): Promise<SkillRow | undefined> {
  return selectSkills(db, repositoryId).where('name', '=', name).executeTakeFirst();
}

/** Inserts unless the (repository, name) is taken; undefined means another skill holds the name. */
export function insertSkillIfAbsent(db: Db, row: SkillInsert): Promise<SkillRow | undefined> {
  return db
    .insertInto('skills')
    .values(row)
    .onConflict((oc) => oc.columns(['repository_id', 'name']).doNothing())
    .returningAll()
    .executeTakeFirst();
}

/** The discovered and manual skills of a repository, keyed by name (a sync reconciles against these). */
export async function skillsByName(db: Db, repositoryId: string): Promise<Map<string, SkillRow>> {
  const rows = await selectSkills(db, repositoryId).execute();
  return new Map(rows.map((row) => [row.name, row]));
}

export async function updateSkill(db: Db, skillId: string, changes: Updateable<SkillsTable>): Promise<void> {
  await db.updateTable('skills').set(changes).where('id', '=', skillId).execute();
}

export async function deleteSkills(db: Db, skillIds: string[]): Promise<void> {
  if (skillIds.length > 0) await db.deleteFrom('skills').where('id', 'in', skillIds).execute();
}

/** The skills of the given ids (any repository), for materialising a run's set. */
export function findSkillsByIds(db: Db, skillIds: string[]): Promise<SkillRow[]> {
  if (skillIds.length === 0) return Promise.resolve([]);
  return db.selectFrom('skills').selectAll().where('id', 'in', skillIds).execute();
}
