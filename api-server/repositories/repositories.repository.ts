import { type Insertable, type Selectable, sql, type Updateable } from 'kysely';
import type { Db } from '../core/db/database.js';
import type { RepositoriesTable } from '../core/db/schema.js';

export type RepositoryRow = Selectable<RepositoriesTable>;
export type RepositoryInsert = Insertable<RepositoriesTable>;
export type RepositoryUpdate = Updateable<RepositoriesTable>;
/** A repository with its computed skill count, as the API shows it. */
export type RepositoryView = RepositoryRow & { skill_count: number };

// Counted on read rather than stored: the skills table is the only truth, and a per-repository
// count is one index range scan (skills_list).
const skillCount = sql<number>`(select count(*)::int from skills where skills.repository_id = repositories.id)`.as(
  'skill_count',
);

/** A repository of the integration's registry, or undefined (missing and foreign look the same). */
export function findRepository(db: Db, integrationId: string, repositoryId: string): Promise<RepositoryRow | undefined> {
  return db
    .selectFrom('repositories')
    .selectAll()
    .where('integration_id', '=', integrationId)
    .where('id', '=', repositoryId)
    .executeTakeFirst();
}

export function selectRepositoryViews(db: Db, integrationId: string) {
  return db
    .selectFrom('repositories')
    .selectAll('repositories')
    .select(skillCount)
    .where('integration_id', '=', integrationId);
}

export function findRepositoryView(db: Db, integrationId: string, repositoryId: string): Promise<RepositoryView | undefined> {
  return selectRepositoryViews(db, integrationId).where('id', '=', repositoryId).executeTakeFirst();
}

export function findRepositoryByName(db: Db, integrationId: string, name: string): Promise<RepositoryRow | undefined> {
  return db
    .selectFrom('repositories')
    .selectAll()
    .where('integration_id', '=', integrationId)
    .where('name', '=', name)
    .executeTakeFirst();
}

/** Inserts unless the (integration, name) is taken; undefined means another repository holds the name. */
export function insertRepositoryIfAbsent(db: Db, row: RepositoryInsert): Promise<RepositoryRow | undefined> {
  return db
    .insertInto('repositories')
    .values(row)
    .onConflict((oc) => oc.columns(['integration_id', 'name']).doNothing())
    .returningAll()
    .executeTakeFirst();
}

/** undefined: the repository was deleted meanwhile. */
export function updateRepository(
  db: Db,
  repositoryId: string,
  changes: RepositoryUpdate,
): Promise<RepositoryView | undefined> {
  return db
    .updateTable('repositories')
    .set(changes)
    .where('id', '=', repositoryId)
    .returningAll()
    .returning(skillCount)
    .executeTakeFirst();
}

export async function deleteRepository(db: Db, repositoryId: string): Promise<void> {
  await db.deleteFrom('repositories').where('id', '=', repositoryId).execute();
}

/** A repository that uses the credential, if any (the oldest, so the answer is stable). */
export async function repositoryUsingCredential(db: Db, credentialId: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('repositories')
    .select('id')
    .where('credential_id', '=', credentialId)
    .orderBy('id')
    .limit(1)
    .executeTakeFirst();
  return row?.id;
}

/** A tenant that has the repository attached, else a role that pins it: what blocks its deletion. */
export async function repositoryDependent(db: Db, repositoryId: string): Promise<string | undefined> {
  const tenant = await db
    .selectFrom('tenants')
    .select('id')
    .where('repository_id', '=', repositoryId)
    .orderBy('id')
    .limit(1)
    .executeTakeFirst();
  if (tenant) return tenant.id;
  const role = await db
    .selectFrom('roles')
    .select('id')
    .where('repository_id', '=', repositoryId)
    .orderBy('id')
    .limit(1)
    .executeTakeFirst();
  return role?.id;
}
