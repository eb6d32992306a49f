import type { Insertable, Selectable, Updateable } from 'kysely';
import type { Db } from '../core/db/database.js';
import type { UsersTable } from '../core/db/schema.js';

export type UserRow = Selectable<UsersTable>;
export type UserInsert = Insertable<UsersTable>;
export type UserUpdate = Updateable<UsersTable>;

/** Data access for users. A user is in an integration when its tenant is. */

export function findUser(db: Db, integrationId: string, userId: string): Promise<UserRow | undefined> {
  return db
    .selectFrom('users')
    .innerJoin('tenants', 'tenants.id', 'users.tenant_id')
    .selectAll('users')
    .where('tenants.integration_id', '=', integrationId)
    .where('users.id', '=', userId)
    .executeTakeFirst();
}

export function findUserByExternalId(db: Db, tenantId: string, externalId: string): Promise<UserRow | undefined> {
  return db.selectFrom('users').selectAll().where('tenant_id', '=', tenantId).where('external_id', '=', externalId).executeTakeFirst();
}

/** Inserts unless the (tenant, external id) is taken; undefined means another writer holds it. */
export function insertUserIfAbsent(db: Db, row: UserInsert): Promise<UserRow | undefined> {
  return db
    .insertInto('users')
    .values(row)
    .onConflict((oc) => oc.columns(['tenant_id', 'external_id']).doNothing())
    .returningAll()
    .executeTakeFirst();
}

export function updateUser(db: Db, userId: string, changes: UserUpdate): Promise<UserRow> {
  return db.updateTable('users').set(changes).where('id', '=', userId).returningAll().executeTakeFirstOrThrow();
}

export async function deleteUser(db: Db, userId: string): Promise<void> {
  await db.deleteFrom('users').where('id', '=', userId).execute();
}

export function listUsersQuery(db: Db, tenantId: string, status: 'active' | 'suspended' | undefined) {
  let q = db.selectFrom('users').selectAll().where('tenant_id', '=', tenantId);
  if (status) q = q.where('status', '=', status);
  return q;
}
