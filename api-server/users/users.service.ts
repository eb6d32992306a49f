import type { z } from 'zod';
import { isForeignKeyViolation, json } from '../core/db/database.js';
import type { Storage } from '../core/db/schema.js';
import type { AppDeps } from '../deps.js';
import { changedFields, isEmpty } from '../core/merge.js';
import { type PageRequest, paginate } from '../core/pagination.js';
import type { ServicePrincipal } from '../core/principal.js';
import { ProblemError, problems } from '../core/problems.js';
import { findRole } from '../roles/roles.repository.js';
import { getTenantInScope } from '../tenants/tenants.service.js';
import {
  deleteUser,
  findUser,
  findUserByExternalId,
  insertUserIfAbsent,
  listUsersQuery,
  type UserRow,
  updateUser,
} from './users.repository.js';
import type { PatchUserBody, UpsertUserBody, User } from './users.schemas.js';

export function presentUser(row: UserRow): z.output<typeof User> {
  return {
    object: 'user',
    id: row.id,
    tenant_id: row.tenant_id,
    external_id: row.external_id,
    email: row.email,
    display_name: row.display_name,
    status: row.status,
    role_id: row.role_id,
    storage: row.storage,
    metadata: row.metadata,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}

/** The bucket the deployment provisions for every user, under the tenant's prefix. */
function platformStorage(deps: AppDeps, tenantId: string, userId: string): Storage {
  return {
    provider: 'platform',
    bucket_uri: `s3://${deps.config.storageBucket}/tenants/${tenantId}/users/${userId}/`,
  };
}

/** A user whose tenant is in the caller's integration, or 404. */
export async function getUserInScope(deps: AppDeps, principal: ServicePrincipal, userId: string): Promise<UserRow> {
  const user = await findUser(deps.db, principal.integrationId, userId);
  if (!user) throw problems.notFound('user');
  return user;
}

const unknownRole = () => problems.invalid([{ pointer: '/role_id', message: 'no such role' }]);

/**
 * A role to assign must exist in the integration (else 422, as for any unresolvable reference)
 * and belong to the user's own tenant (else 409 cross-tenant: it exists, but elsewhere).
 */
async function checkRole(deps: AppDeps, principal: ServicePrincipal, tenantId: string, roleId: string | null | undefined): Promise<void> {
  if (roleId === undefined || roleId === null) return;
  const role = await findRole(deps.db, principal.integrationId, roleId);
  if (!role) throw unknownRole();
  if (role.tenant_id !== tenantId) {
    throw new ProblemError('cross-tenant', 409, { detail: "The role belongs to another tenant than the user's." });
  }
}

/** Runs a write that may set `role_id`; the role being deleted since `checkRole` reads as unknown. */
async function withRoleReference<T>(roleId: string | null | undefined, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (error) {
    if (typeof roleId === 'string' && isForeignKeyViolation(error)) throw unknownRole();
    throw error;
  }
}

/**
 * Get-or-create-or-refresh by external id within a tenant. Concurrent calls collapse on the unique
 * constraint: one inserts (201), the others merge into the winner's row (200). Status is not an
 * upsert field, so a suspended user stays suspended.
 */
export async function upsertUser(
  deps: AppDeps,
  principal: ServicePrincipal,
  tenantId: string,
  externalId: string,
  body: z.output<typeof UpsertUserBody>,
): Promise<{ created: boolean; user: UserRow }> {
  const tenant = await getTenantInScope(deps, principal, tenantId);
  await checkRole(deps, principal, tenant.id, body.role_id);
  let existing = await findUserByExternalId(deps.db, tenant.id, externalId);
  if (!existing) {
    const id = deps.newId('user');
    const now = deps.now();
    const row = {
      id,
      tenant_id: tenant.id,
      external_id: externalId,
      email: body.email ?? null,
      display_name: body.display_name ?? null,
      status: 'active' as const,
      role_id: body.role_id ?? null,
      storage: json(platformStorage(deps, tenant.id, id)),
      metadata: json(body.metadata ?? {}),
      created_at: now,
      updated_at: now,
    };
    const created = await withRoleReference(body.role_id, () => insertUserIfAbsent(deps.db, row));
    if (created) return { created: true, user: created };
    existing = await findUserByExternalId(deps.db, tenant.id, externalId);
    if (!existing) throw new Error('user vanished between a conflicting insert and its read');
  }
  return { created: false, user: await applyChanges(deps, existing, body) };
}

function resolveStorage(deps: AppDeps, user: UserRow, storage: NonNullable<z.output<typeof PatchUserBody>['storage']>): Storage {
  if (storage.provider === 'external') return { provider: 'external', bucket_uri: storage.bucket_uri };
  const platform = platformStorage(deps, user.tenant_id, user.id);
  if (storage.bucket_uri !== undefined && storage.bucket_uri !== platform.bucket_uri) {
    throw problems.invalid([
      { pointer: '/storage/bucket_uri', message: 'the platform bucket is fixed: omit bucket_uri or send its current value' },
    ]);
  }
  return platform;
}

export async function patchUser(
  deps: AppDeps,
  principal: ServicePrincipal,
  userId: string,
  body: z.output<typeof PatchUserBody>,
): Promise<UserRow> {
  const user = await getUserInScope(deps, principal, userId);
  await checkRole(deps, principal, user.tenant_id, body.role_id);
  const storage = body.storage ? resolveStorage(deps, user, body.storage) : undefined;
  return applyChanges(deps, user, { ...body, storage });
}

async function applyChanges(
  deps: AppDeps,
  user: UserRow,
  patch: {
    email?: string | null;
    display_name?: string | null;
    status?: 'active' | 'suspended';
    role_id?: string | null;
    storage?: Storage | undefined;
    metadata?: Record<string, string>;
  },
): Promise<UserRow> {
  const changes = changedFields(user, patch);
  if (isEmpty(changes)) return user;
  return withRoleReference(changes.role_id, () =>
    updateUser(deps.db, user.id, {
      ...(changes.email !== undefined && { email: changes.email }),
      ...(changes.display_name !== undefined && { display_name: changes.display_name }),
      ...(changes.status !== undefined && { status: changes.status }),
      ...(changes.role_id !== undefined && { role_id: changes.role_id }),
      ...(changes.storage !== undefined && { storage: json(changes.storage) }),
      ...(changes.metadata !== undefined && { metadata: json(changes.metadata) }),
      updated_at: deps.now(),
    }),
  );
}

export async function removeUser(deps: AppDeps, principal: ServicePrincipal, userId: string): Promise<void> {
  const user = await getUserInScope(deps, principal, userId);
  await deleteUser(deps.db, user.id);
}

export async function listUsers(
  deps: AppDeps,
  principal: ServicePrincipal,
  tenantId: string,
  query: PageRequest & { status?: 'active' | 'suspended' | undefined },
) {
  const tenant = await getTenantInScope(deps, principal, tenantId);
  return paginate(listUsersQuery(deps.db, tenant.id, query.status), 'id', query);
}
