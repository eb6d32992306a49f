import type { Db } from '../core/db/database.js';

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
