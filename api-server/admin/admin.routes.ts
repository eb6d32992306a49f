import { defineRoute } from '../define-route.js';
import {
  ApproverKeyIdParams,
  CreateApproverKeyBody,
  CreatedApproverKey,
  CreatedIntegration,
  CreatedServiceKey,
  CreateIntegrationBody,
  IntegrationIdParams,
  ServiceKeyIdParams,
  TenantIdParams,
} from './admin.schemas.js';
import {
  adminCreateApproverKey,
  adminCreateIntegration,
  adminCreateServiceKey,
  adminRevokeApproverKey,
  adminRevokeServiceKey,
} from './admin.service.js';

const tag = 'Admin';
const unauthorized = { 401: { description: 'Missing or wrong admin token' } };

export const adminRoutes = [
  defineRoute({
    method: 'post',
    path: '/admin/integrations',
    operationId: 'adminCreateIntegration',
    summary: 'Create an integration: a root tenant and its first service key (shown once)',
    tag,
    auth: 'admin',
    body: CreateIntegrationBody,
    bodyExample: { name: 'Acme host product' },
    responses: { 201: { description: 'Created', schema: CreatedIntegration }, ...unauthorized, 422: { description: 'Invalid body' } },
    handler: async ({ deps, body }) => ({ status: 201, body: await adminCreateIntegration(deps, body.name) }),
  }),
  defineRoute({
    method: 'post',
    path: '/admin/integrations/:integration_id/service-keys',
    operationId: 'adminCreateServiceKey',
    summary: 'Issue another service key for an integration (key rotation)',
    tag,
    auth: 'admin',
    params: IntegrationIdParams,
    responses: {
      201: { description: 'Created', schema: CreatedServiceKey },
      ...unauthorized,
      404: { description: 'No such integration' },
    },
    handler: async ({ deps, params }) => ({ status: 201, body: await adminCreateServiceKey(deps, params.integration_id) }),
  }),
  defineRoute({
    method: 'delete',
    path: '/admin/service-keys/:service_key_id',
    operationId: 'adminRevokeServiceKey',
    summary: 'Revoke a service key',
    tag,
    auth: 'admin',
    params: ServiceKeyIdParams,
    responses: { 204: { description: 'Revoked' }, ...unauthorized, 404: { description: 'No such active key' } },
    handler: async ({ deps, params }) => {
      await adminRevokeServiceKey(deps, params.service_key_id);
      return { status: 204 };
    },
  }),
  defineRoute({
    method: 'post',
    path: '/admin/tenants/:tenant_id/approver-keys',
    operationId: 'adminCreateApproverKey',
    summary: 'Register an approver key for a tenant (HMAC secret shown once, or an Ed25519 public key)',
    tag,
    auth: 'admin',
    params: TenantIdParams,
    body: CreateApproverKeyBody,
    bodyExample: { algorithm: 'hmac-sha256' },
    responses: {
      201: { description: 'Created', schema: CreatedApproverKey },
      ...unauthorized,
      404: { description: 'No such tenant' },
      422: { description: 'Invalid body' },
    },
    handler: async ({ deps, params, body }) => ({
      status: 201,
      body: await adminCreateApproverKey(deps, params.tenant_id, body),
    }),
  }),
  defineRoute({
    method: 'delete',
    path: '/admin/approver-keys/:approver_key_id',
    operationId: 'adminRevokeApproverKey',
    summary: 'Revoke an approver key',
    tag,
    auth: 'admin',
    params: ApproverKeyIdParams,
    responses: { 204: { description: 'Revoked' }, ...unauthorized, 404: { description: 'No such active key' } },
    handler: async ({ deps, params }) => {
      await adminRevokeApproverKey(deps, params.approver_key_id);
      return { status: 204 };
    },
  }),
];
