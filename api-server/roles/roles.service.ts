import type { z } from 'zod';
import { isForeignKeyViolation, isUniqueViolation, json } from '../core/db/database.js';
import type { SkillAccess as StoredSkillAccess } from '../core/db/schema.js';
import type { AppDeps } from '../deps.js';
import { changedFields, isEmpty } from '../core/merge.js';
import { type PageRequest, paginate } from '../core/pagination.js';
import type { ServicePrincipal } from '../core/principal.js';
import { problems } from '../core/problems.js';
import { skillIdsInRepository } from '../skills/skills.repository.js';
import { effectiveRepositoryId } from '../tenants/tenants.repository.js';
import { getTenantInScope } from '../tenants/tenants.service.js';
import {
  deleteRole,
  findRole,
  findRoleByName,
  findRoleHolder,
  insertRoleIfNameFree,
  listRolesQuery,
  type RoleRow,
  updateRole,
  userRolesQuery,
} from './roles.repository.js';
import type { AssignedRole, CreateRoleBody, PatchRoleBody, Role, SkillAccess } from './roles.schemas.js';

export function presentRole(row: RoleRow): z.output<typeof Role> {
  return {
    object: 'role',
    id: row.id,
    tenant_id: row.tenant_id,
    name: row.name,
    description: row.description,
    skill_access: row.skill_access,
    metadata: row.metadata,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

export function presentAssignedRole(row: RoleRow): z.output<typeof AssignedRole> {
  return {
    object: 'role',
    id: row.id,
    tenant_id: row.tenant_id,
    name: row.name,
    description: row.description,
    skill_access: row.skill_access,
    repository_id: row.repository_id,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

/** A role whose tenant is in the caller's integration, or 404. */
export async function getRoleInScope(deps: AppDeps, principal: ServicePrincipal, roleId: string): Promise<RoleRow> {
  const role = await findRole(deps.db, principal.integrationId, roleId);
  if (!role) throw problems.notFound('role');
  return role;
}

/**
 * Validates skill access against the tenant's effective repository (its own or its nearest
 * ancestor's) and decides what the role pins: `selected` ids only mean something within one
 * repository, so the role keeps that repository; `all` follows the tenant default (null).
 * Pointers index the ids as sent; duplicates are dropped for storage.
 */
async function resolveSkillAccess(
  deps: AppDeps,
  tenantId: string,
  access: z.output<typeof SkillAccess>,
): Promise<{ skill_access: StoredSkillAccess; repository_id: string | null }> {
  if (access.mode === 'all') return { skill_access: { mode: 'all' }, repository_id: null };
  const unique = [...new Set(access.skill_ids)];
  const repositoryId = await effectiveRepositoryId(deps.db, tenantId);
  const known = repositoryId ? await skillIdsInRepository(deps.db, repositoryId, unique) : new Set<string>();
  const message = repositoryId ? "not a skill of the tenant's repository" : 'the tenant has no repository';
  const errors = access.skill_ids.flatMap((id, index) => (known.has(id) ? [] : [{ pointer: `/skill_access/skill_ids/${index}`, message }]));
  if (errors.length > 0) throw problems.invalid(errors);
  return { skill_access: { mode: 'selected', skill_ids: unique }, repository_id: repositoryId };
}

async function nameConflict(deps: AppDeps, tenantId: string, name: string) {
  const holder = await findRoleByName(deps.db, tenantId, name);
  // The holder can only be missing if it was renamed or deleted in between; the retry then succeeds.
  return holder ? problems.nameConflict(holder.id, 'A role with this name exists in the tenant.') : undefined;
}

export async function createRole(
  deps: AppDeps,
  principal: ServicePrincipal,
  tenantId: string,
  body: z.output<typeof CreateRoleBody>,
): Promise<RoleRow> {
  const tenant = await getTenantInScope(deps, principal, tenantId);
  const access = await resolveSkillAccess(deps, tenant.id, body.skill_access);
  const now = deps.now();
  const row = {
    id: deps.newId('role'),
    tenant_id: tenant.id,
    name: body.name,
    description: body.description ?? null,
    skill_access: json(access.skill_access),
    repository_id: access.repository_id,
    metadata: json(body.metadata ?? {}),
    created_at: now,
    updated_at: now,
  };
  for (let attempt = 0; attempt < 3; attempt++) {
    const created = await insertRoleIfNameFree(deps.db, row);
    if (created) return created;
    const conflict = await nameConflict(deps, tenant.id, row.name);
    if (conflict) throw conflict;
  }
  throw new Error('role name kept conflicting with a role that could not be read');
}

export async function patchRole(
  deps: AppDeps,
  principal: ServicePrincipal,
  roleId: string,
  body: z.output<typeof PatchRoleBody>,
): Promise<RoleRow> {
  const role = await getRoleInScope(deps, principal, roleId);
  const { skill_access, ...rest } = body;
  // Re-sent skill access is validated again and re-pins the repository the tenant has now.
  const access = skill_access ? await resolveSkillAccess(deps, role.tenant_id, skill_access) : undefined;
  const changes = changedFields(role, { ...rest, ...access });
  if (isEmpty(changes)) return role;
  try {
    return await updateRole(deps.db, role.id, {
      ...(changes.name !== undefined && { name: changes.name }),
      ...(changes.description !== undefined && { description: changes.description }),
      ...(changes.skill_access !== undefined && { skill_access: json(changes.skill_access) }),
      ...(changes.repository_id !== undefined && { repository_id: changes.repository_id }),
      ...(changes.metadata !== undefined && { metadata: json(changes.metadata) }),
      updated_at: deps.now(),
    });
  } catch (error) {
    if (isUniqueViolation(error) && changes.name !== undefined) {
      throw (await nameConflict(deps, role.tenant_id, changes.name)) ?? error;
    }
    throw error;
  }
}

/** Refused while a user holds the role (users reference roles; a role is never silently unassigned). */
export async function removeRole(deps: AppDeps, principal: ServicePrincipal, roleId: string): Promise<void> {
  const role = await getRoleInScope(deps, principal, roleId);
  const inUse = (userId: string) => problems.inUse(userId, 'The role is assigned to a user; reassign or clear it first.');
  const holder = await findRoleHolder(deps.db, role.id);
  if (holder) throw inUse(holder);
  try {
    await deleteRole(deps.db, role.id);
  } catch (error) {
    // A user was assigned the role between the check and the delete.
    const late = isForeignKeyViolation(error) ? await findRoleHolder(deps.db, role.id) : undefined;
    throw late ? inUse(late) : error;
  }
}

export async function listRoles(
  deps: AppDeps,
  principal: ServicePrincipal,
  tenantId: string,
  query: PageRequest & { name?: string | undefined },
) {
  const tenant = await getTenantInScope(deps, principal, tenantId);
  return paginate(listRolesQuery(deps.db, tenant.id, query.name), 'id', query);
}

/** The user's role as a page (0 or 1 item); the caller has checked the user is in scope. */
export function listUserRoles(deps: AppDeps, userId: string, page: PageRequest) {
  return paginate(userRolesQuery(deps.db, userId), 'roles.id', page);
}
