import type { Insertable, Selectable, Updateable } from 'kysely';
import type { Db } from '../core/db/database.js';
import type { RolesTable } from '../core/db/schema.js';

export type RoleRow = Selectable<RolesTable>;
export type RoleInsert = Insertable<RolesTable>;
export type RoleUpdate = Updateable<RolesTable>;

/** Data access for roles. A role is in an integration when its tenant is. */

export function findRole(db: Db, integrationId: string, roleId: string): Promise<RoleRow | undefined> {
  return db
    .selectFrom('roles')
    .innerJoin('tenants', 'tenants.id', 'roles.tenant_id')
    .selectAll('roles')
    .where('tenants.integration_id', '=', integrationId)
    .where('roles.id', '=', roleId)
    .executeTakeFirst();
}

export function findRoleByName(db: Db, tenantId: string, name: string): Promise<RoleRow | undefined> {
  return db.selectFrom('roles').selectAll().where('tenant_id', '=', tenantId).where('name', '=', name).executeTakeFirst();
}

/** Inserts unless the name is taken in the tenant; undefined means another role holds it. */
export function insertRoleIfNameFree(db: Db, row: RoleInsert): Promise<RoleRow | undefined> {
  return db
    .insertInto('roles')
    .values(row)
    .onConflict((oc) => oc.columns(['tenant_id', 'name']).doNothing())
    .returningAll()
    .executeTakeFirst();
}

export function updateRole(db: Db, roleId: string, changes: RoleUpdate): Promise<RoleRow> {
  return db.updateTable('roles').set(changes).where('id', '=', roleId).returningAll().executeTakeFirstOrThrow();
}

export async function deleteRole(db: Db, roleId: string): Promise<void> {
  await db.deleteFrom('roles').where('id', '=', roleId).execute();
}

/** Some user holding the role (the dependent a refused delete names), or undefined. */
export async function findRoleHolder(db: Db, roleId: string): Promise<string | undefined> {
  const row = await db.selectFrom('users').select('id').where('role_id', '=', roleId).orderBy('id').limit(1).executeTakeFirst();
  return row?.id;
}

export function listRolesQuery(db: Db, tenantId: string, name: string | undefined) {
  let q = db.selectFrom('roles').selectAll().where('tenant_id', '=', tenantId);
  if (name !== undefined) q = q.where('name', '=', name);
  return q;
}

/** The role a user holds, as a (0 or 1 row) query to paginate. */
export function userRolesQuery(db: Db, userId: string) {
  return db.selectFrom('roles').innerJoin('users', 'users.role_id', 'roles.id').selectAll('roles').where('users.id', '=', userId);
}
