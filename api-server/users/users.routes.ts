import { defineRoute } from '../define-route.js';
import { mapPage } from '../core/pagination.js';
import { AssignedRoleList } from '../roles/roles.schemas.js';
import { listUserRoles, presentAssignedRole } from '../roles/roles.service.js';
import { TenantIdParams } from '../tenants/tenants.schemas.js';
import {
  ListUsersQuery,
  PatchUserBody,
  TenantUserExternalIdParams,
  UpsertUserBody,
  User,
  UserIdParams,
  UserList,
  UserRolesQuery,
} from './users.schemas.js';
import { getUserInScope, listUsers, patchUser, presentUser, removeUser, upsertUser } from './users.service.js';

const tag = 'Users';
const common = {
  401: { description: 'Missing, unknown or revoked service key' },
  403: { description: 'Not a service key' },
};
const userNotFound = { 404: { description: 'No such user in this integration' } };
const tenantNotFound = { 404: { description: 'No such tenant in this integration' } };

export const userRoutes = [
  defineRoute({
    method: 'put',
    path: '/tenants/:tenant_id/users/by-external-id/:external_id',
    operationId: 'upsertUser',
    summary: 'Get, create or refresh a user of a tenant by its external id (never reactivates a suspended user)',
    tag,
    auth: 'service',
    params: TenantUserExternalIdParams,
    body: UpsertUserBody,
    bodyExample: { email: 'ada@example.com', display_name: 'Ada Lovelace', role_id: 'rol_01JD4Z8K5M2N3P4Q5R6S7T8V9W' },
    responses: {
      200: { description: 'Existed; provided fields merged', schema: User },
      201: { description: 'Created, with the platform bucket attached', schema: User },
      400: { description: 'Bad external id' },
      ...common,
      ...tenantNotFound,
      409: { description: 'The role belongs to another tenant (cross-tenant)' },
      422: { description: 'Invalid body or unknown role' },
    },
    handler: async ({ deps, principal, params, body }) => {
      const { created, user } = await upsertUser(deps, principal, params.tenant_id, params.external_id, body);
      return { status: created ? 201 : 200, body: presentUser(user) };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/tenants/:tenant_id/users',
    operationId: 'listUsers',
    summary: "List a tenant's users, newest first",
    tag,
    auth: 'service',
    params: TenantIdParams,
    query: ListUsersQuery,
    responses: {
      200: { description: 'A page of users', schema: UserList },
      400: { description: 'Bad query' },
      ...common,
      ...tenantNotFound,
    },
    handler: async ({ deps, principal, params, query }) => ({
      status: 200,
      body: mapPage(await listUsers(deps, principal, params.tenant_id, query), presentUser),
    }),
  }),
  defineRoute({
    method: 'get',
    path: '/users/:user_id',
    operationId: 'getUser',
    summary: 'Get a user',
    tag,
    auth: 'service',
    params: UserIdParams,
    responses: { 200: { description: 'The user', schema: User }, ...common, ...userNotFound },
    handler: async ({ deps, principal, params }) => ({
      status: 200,
      body: presentUser(await getUserInScope(deps, principal, params.user_id)),
    }),
  }),
  defineRoute({
    method: 'patch',
    path: '/users/:user_id',
    operationId: 'updateUser',
    summary: 'Update a user: profile, status (suspend or reactivate), role, storage, metadata',
    tag,
    auth: 'service',
    params: UserIdParams,
    body: PatchUserBody,
    bodyExample: { display_name: 'Ada L.', status: 'active' },
    responses: {
      200: { description: 'The updated user', schema: User },
      ...common,
      ...userNotFound,
      409: { description: 'The role belongs to another tenant (cross-tenant)' },
      422: { description: 'Invalid body or unknown role' },
    },
    handler: async ({ deps, principal, params, body }) => ({
      status: 200,
      body: presentUser(await patchUser(deps, principal, params.user_id, body)),
    }),
  }),
  defineRoute({
    method: 'delete',
    path: '/users/:user_id',
    operationId: 'deleteUser',
    summary: 'Deprovision a user',
    tag,
    auth: 'service',
    params: UserIdParams,
    responses: { 204: { description: 'Deleted' }, ...common, ...userNotFound },
    handler: async ({ deps, principal, params }) => {
      await removeUser(deps, principal, params.user_id);
      return { status: 204 };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/users/:user_id/roles',
    operationId: 'listUserRoles',
    summary: "List the user's role (at most one), with the repository it pins",
    tag,
    auth: 'service',
    params: UserIdParams,
    query: UserRolesQuery,
    responses: {
      200: { description: 'A page holding the assigned role, if any', schema: AssignedRoleList },
      400: { description: 'Bad query' },
      ...common,
      ...userNotFound,
    },
    handler: async ({ deps, principal, params, query }) => {
      const user = await getUserInScope(deps, principal, params.user_id);
      return { status: 200, body: mapPage(await listUserRoles(deps, user.id, query), presentAssignedRole) };
    },
  }),
];
