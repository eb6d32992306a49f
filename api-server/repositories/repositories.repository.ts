import type { Selectable } from 'kysely';
import type { Db } from '../core/db/database.js';
import type { RepositoriesTable } from '../core/db/schema.js';

export type RepositoryRow = Selectable<RepositoriesTable>;

/** A repository of the integration's registry, or undefined (missing and foreign look the same). */
export function findRepository(db: Db, integrationId: string, repositoryId: string): Promise<RepositoryRow | undefined> {
  return db
    .selectFrom('repositories')
    .selectAll()
    .where('integration_id', '=', integrationId)
    .where('id', '=', repositoryId)
    .executeTakeFirst();
}
