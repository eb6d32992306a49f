import { defineRoute } from '../define-route.js';
import { pageJson } from '../core/pagination.js';
import {
  AttachRepositoryBody,
  CreateTenantBody,
  ListTenantsQuery,
  PatchTenantBody,
  Tenant,
  TenantExternalIdParams,
  TenantIdParams,
  TenantList,
  UpsertTenantBody,
} from './tenants.schemas.js';
import {
  attachRepository,
  createTenant,
  getTenantByExternalId,
  getTenantInScope,
  listTenants,
  patchTenant,
  presentTenant,
  removeTenant,
  upsertTenant,
} from './tenants.service.js';

const tag = 'Tenants';
const common = {
  401: { description: 'Missing, unknown or revoked service key' },
  403: { description: 'Not a service key' },
};
const notFound = { 404: { description: 'No such tenant in this integration' } };

export const tenantRoutes = [
  defineRoute({
    method: 'post',
    path: '/tenants',
    operationId: 'createTenant',
    summary: 'Create a tenant',
    tag,
    auth: 'service',
    body: CreateTenantBody,
    bodyExample: {
      name: 'Acme Corp',
      external_id: 'acme-corp',
      settings: { filler_enabled: true, max_idle_ttl_seconds: 3600 },
      metadata: { plan: 'enterprise' },
    },
    idempotent: true,
    responses: {
      201: { description: 'Created', schema: Tenant },
      ...common,
      409: { description: 'external_id taken (external-id-conflict)' },
      422: { description: 'Invalid body' },
    },
    handler: async ({ deps, principal, body }) => ({
      status: 201,
      body: presentTenant(await createTenant(deps, principal, body)),
    }),
  }),
  defineRoute({
    method: 'get',
    path: '/tenants',
    operationId: 'listTenants',
    summary: 'List the tenants under the integration root, newest first',
    tag,
    auth: 'service',
    query: ListTenantsQuery,
    responses: { 200: { description: 'A page of tenants', schema: TenantList }, 400: { description: 'Bad query' }, ...common },
    handler: async ({ deps, principal, query }) => ({
      status: 200,
      body: pageJson(await listTenants(deps, principal, query)),
      contentType: 'application/json',
    }),
  }),
  defineRoute({
    method: 'put',
    path: '/tenants/by-external-id/:external_id',
    operationId: 'upsertTenant',
    summary: 'Get, create or refresh a tenant by its external id',
    tag,
    auth: 'service',
    params: TenantExternalIdParams,
    body: UpsertTenantBody,
    bodyExample: { name: 'Acme Corp', settings: { max_concurrent_warm: 5 }, metadata: { plan: 'enterprise' } },
    responses: {
      200: { description: 'Existed (warm path); provided fields merged', schema: Tenant },
      201: { description: 'Created (cold path)', schema: Tenant },
      ...common,
      422: { description: 'Invalid body' },
    },
    handler: async ({ deps, principal, params, body }) => {
      const { created, tenant } = await upsertTenant(deps, principal, params.external_id, body);
      return { status: created ? 201 : 200, body: tenant, contentType: 'application/json' };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/tenants/by-external-id/:external_id',
    operationId: 'getTenantByExternalId',
    summary: 'Get a tenant by its external id',
    tag,
    auth: 'service',
    params: TenantExternalIdParams,
    responses: { 200: { description: 'The tenant', schema: Tenant }, ...common, ...notFound },
    handler: async ({ deps, principal, params }) => ({
      status: 200,
      body: presentTenant(await getTenantByExternalId(deps, principal, params.external_id)),
    }),
  }),
  defineRoute({
    method: 'delete',
    path: '/tenants/by-external-id/:external_id',
    operationId: 'deleteTenantByExternalId',
    summary: 'Deprovision a tenant (and its users, roles and child tenants) by external id',
    tag,
    auth: 'service',
    params: TenantExternalIdParams,
    responses: { 204: { description: 'Deleted' }, ...common, ...notFound },
    handler: async ({ deps, principal, params }) => {
      await removeTenant(deps, principal, await getTenantByExternalId(deps, principal, params.external_id));
      return { status: 204 };
    },
  }),
  defineRoute({
    method: 'get',
    path: '/tenants/:tenant_id',
    operationId: 'getTenant',
    summary: 'Get a tenant',
    tag,
    auth: 'service',
    params: TenantIdParams,
    responses: { 200: { description: 'The tenant', schema: Tenant }, ...common, ...notFound },
    handler: async ({ deps, principal, params }) => ({
      status: 200,
      body: presentTenant(await getTenantInScope(deps, principal, params.tenant_id)),
    }),
  }),
  defineRoute({
    method: 'patch',
    path: '/tenants/:tenant_id',
    operationId: 'updateTenant',
    summary: 'Update a tenant: name, status (suspend or reactivate), settings, metadata',
    tag,
    auth: 'service',
    params: TenantIdParams,
    body: PatchTenantBody,
    bodyExample: { status: 'suspended' },
    responses: {
      200: { description: 'The updated tenant', schema: Tenant },
      ...common,
      ...notFound,
      422: { description: 'Invalid body' },
    },
    handler: async ({ deps, principal, params, body }) => ({
      status: 200,
      body: presentTenant(await patchTenant(deps, principal, params.tenant_id, body)),
    }),
  }),
  defineRoute({
    method: 'delete',
    path: '/tenants/:tenant_id',
    operationId: 'deleteTenant',
    summary: 'Deprovision a tenant (and its users, roles and child tenants)',
    tag,
    auth: 'service',
    params: TenantIdParams,
    responses: { 204: { description: 'Deleted' }, ...common, ...notFound },
    handler: async ({ deps, principal, params }) => {
      await removeTenant(deps, principal, await getTenantInScope(deps, principal, params.tenant_id));
      return { status: 204 };
    },
  }),
  defineRoute({
    method: 'put',
    path: '/tenants/:tenant_id/repository',
    operationId: 'attachTenantRepository',
    summary: "Assign the tenant's skill repository",
    tag,
    auth: 'service',
    params: TenantIdParams,
    body: AttachRepositoryBody,
    bodyExample: { repository_id: 'rep_01JD4Z8K5M2N3P4Q5R6S7T8V9W' },
    responses: {
      200: { description: 'The tenant with its repository', schema: Tenant },
      ...common,
      ...notFound,
      422: { description: 'Invalid body or unknown repository' },
    },
    handler: async ({ deps, principal, params, body }) => ({
      status: 200,
      body: presentTenant(await attachRepository(deps, principal, params.tenant_id, body.repository_id)),
    }),
  }),
  defineRoute({
    method: 'delete',
    path: '/tenants/:tenant_id/repository',
    operationId: 'detachTenantRepository',
    summary: "Remove the tenant's own repository assignment (it then inherits its nearest ancestor's)",
    tag,
    auth: 'service',
    params: TenantIdParams,
    responses: { 200: { description: 'The tenant', schema: Tenant }, ...common, ...notFound },
    handler: async ({ deps, principal, params }) => ({
      status: 200,
      body: presentTenant(await attachRepository(deps, principal, params.tenant_id, null)),
    }),
  }),
];
