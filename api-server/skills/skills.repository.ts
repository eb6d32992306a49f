import type { Insertable, Selectable } from 'kysely';
import type { Db } from '../core/db/database.js';
import type { SkillsTable } from '../core/db/schema.js';

export type SkillRow = Selectable<SkillsTable>;
export type SkillInsert = Insertable<SkillsTable>;

/** Of `skillIds`, those that belong to `repositoryId`. */
export async function skillIdsInRepository(db: Db, repositoryId: string, skillIds: string[]): Promise<Set<string>> {
  if (skillIds.length === 0) return new Set();
  const rows = await db
    .selectFrom('skills')
    .select('id')
    .where('repository_id', '=', repositoryId)
    .where('id', 'in', skillIds)
    .execute();
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
