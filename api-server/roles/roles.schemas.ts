import { z } from 'zod';
import { listQuery } from '../core/pagination.js';
import { IdParam, ListOf, Metadata, Name, Timestamp } from '../core/schemas.js';

/** Ours (the spec sets none): bounds the `in (...)` lookup that validates the ids. */
export const MAX_SELECTED_SKILLS = 1000;

export const SkillAccess = z
  .discriminatedUnion('mode', [
    z.object({ mode: z.literal('all') }),
    z.object({
      mode: z.literal('selected'),
      skill_ids: z.array(z.string().min(1).max(100)).max(MAX_SELECTED_SKILLS),
    }),
  ])
  .meta({
    id: 'SkillAccess',
    description: "`all`: every skill of the tenant's effective repository; `selected`: only the listed skills of it.",
  });

const roleFields = {
  object: z.literal('role'),
  id: z.string(),
  tenant_id: z.string(),
  name: z.string(),
  description: z.string().nullable(),
  skill_access: SkillAccess,
};

export const Role = z.object({ ...roleFields, metadata: Metadata, created_at: Timestamp, updated_at: Timestamp }).meta({ id: 'Role' });

export const RoleList = ListOf(Role);

/** A role as `GET /users/{user_id}/roles` lists it: with the pinned repository, without metadata. */
export const AssignedRole = z
  .object({
    ...roleFields,
    repository_id: z
      .string()
      .nullable()
      .describe('The repository the role is pinned to (set by `selected` skill access); null means the tenant default.'),
    created_at: Timestamp,
    updated_at: Timestamp,
  })
  .meta({ id: 'AssignedRole' });

export const AssignedRoleList = ListOf(AssignedRole);

const Description = z.string().max(10_000);

export const CreateRoleBody = z.object({
  name: Name,
  description: Description.nullable().optional(),
  skill_access: SkillAccess.default({ mode: 'all' }),
  metadata: Metadata.optional(),
});

export const PatchRoleBody = z.object({
  name: Name.optional(),
  description: Description.nullable().optional(),
  skill_access: SkillAccess.optional(),
  metadata: Metadata.optional(),
});

export const ListRolesQuery = listQuery('role', { name: z.string().trim().min(1).max(255).optional() });

export const RoleIdParams = z.object({ role_id: IdParam });
