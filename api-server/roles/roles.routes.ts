import { defineRoute } from '../define-route.js';
import { mapPage } from '../core/pagination.js';
import { TenantIdParams } from '../tenants/tenants.schemas.js';
import { CreateRoleBody, ListRolesQuery, PatchRoleBody, Role, RoleIdParams, RoleList } from './roles.schemas.js';
import { createRole, getRoleInScope, listRoles, patchRole, presentRole, removeRole } from './roles.service.js';

const tag = 'Roles';
const common = {
  401: { description: 'Missing, unknown or revoked service key' },
  403: { description: 'Not a service key' },
};
const roleNotFound = { 404: { description: 'No such role in this integration' } };

export const roleRoutes = [
  defineRoute({
    method: 'post',
    path: '/tenants/:tenant_id/roles',
    operationId: 'createRole',
    summary: 'Create a role in a tenant',
    tag,
    auth: 'service',
    params: TenantIdParams,
    body: CreateRoleBody,
    bodyExample: {
      name: 'analyst',
      description: 'Reads reports',
      skill_access: { mode: 'selected', skill_ids: ['skl_01JD4Z8K5M2N3P4Q5R6S7T8V9W'] },
    },
    idempotent: true,
    responses: {
      201: { description: 'Created', schema: Role },
      ...common,
      404: { description: 'No such tenant in this integration' },
      409: { description: 'Name taken in the tenant (name-conflict, conflicting_resource_id names the holder)' },
      422: { description: "Invalid body, or selected skills outside the tenant's repository" },
    },
    handler: async ({ deps, principal, params, body }) => ({
      status: 201,
      body: presentRole(await createRole(deps, principal, params.tenant_id, body)),
    }),
  }),
  defineRoute({
    method: 'get',
    path: '/tenants/:tenant_id/roles',
    operationId: 'listRoles',
    summary: "List a tenant's roles, newest first (optionally by exact name)",
    tag,
    auth: 'service',
    params: TenantIdParams,
    query: ListRolesQuery,
    responses: {
      200: { description: 'A page of roles', schema: RoleList },
      400: { description: 'Bad query' },
      ...common,
      404: { description: 'No such tenant in this integration' },
    },
    handler: async ({ deps, principal, params, query }) => ({
      status: 200,
      body: mapPage(await listRoles(deps, principal, params.tenant_id, query), presentRole),
    }),
  }),
  defineRoute({
    method: 'get',
    path: '/roles/:role_id',
    operationId: 'getRole',
    summary: 'Get a role',
    tag,
    auth: 'service',
    params: RoleIdParams,
    responses: { 200: { description: 'The role', schema: Role }, ...common, ...roleNotFound },
    handler: async ({ deps, principal, params }) => ({
      status: 200,
      body: presentRole(await getRoleInScope(deps, principal, params.role_id)),
    }),
  }),
  defineRoute({
    method: 'patch',
    path: '/roles/:role_id',
    operationId: 'updateRole',
    summary: 'Update a role: name, description, skill access, metadata (applies to conversations created afterwards)',
    tag,
    auth: 'service',
    params: RoleIdParams,
    body: PatchRoleBody,
    bodyExample: { skill_access: { mode: 'all' } },
    responses: {
      200: { description: 'The updated role', schema: Role },
      ...common,
      ...roleNotFound,
      409: { description: 'Name taken in the tenant (name-conflict)' },
      422: { description: "Invalid body, or selected skills outside the tenant's repository" },
    },
    handler: async ({ deps, principal, params, body }) => ({
      status: 200,
      body: presentRole(await patchRole(deps, principal, params.role_id, body)),
    }),
  }),
  defineRoute({
    method: 'delete',
    path: '/roles/:role_id',
    operationId: 'deleteRole',
    summary: 'Delete a role that no user holds',
    tag,
    auth: 'service',
    params: RoleIdParams,
    responses: {
      204: { description: 'Deleted' },
      ...common,
      ...roleNotFound,
      409: { description: 'A user holds the role (resource-in-use, conflicting_resource_id names one)' },
    },
    handler: async ({ deps, principal, params }) => {
      await removeRole(deps, principal, params.role_id);
      return { status: 204 };
    },
  }),
];
