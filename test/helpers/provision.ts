import { randomBytes } from 'node:crypto';
import type { TestServer } from './test-server.js';

export const unique = (label: string) => `${label}-${randomBytes(4).toString('hex')}`;

export interface ProvisionedUser {
  tenantId: string;
  tenantExternalId: string;
  userId: string;
  userExternalId: string;
  roleId: string;
}

/** A tenant with a role and a user holding it, through the API (the host's cold path). */
export async function provisionUser(
  t: TestServer,
  serviceKey: string,
  options: { tenantId?: string; settings?: object } = {},
): Promise<ProvisionedUser> {
  const expect2xx = (res: { status: number; text: string }, what: string) => {
    if (res.status >= 300) throw new Error(`${what} failed: ${res.status} ${res.text}`);
  };
  let tenantId = options.tenantId;
  let tenantExternalId = unique('test:tenant');
  if (tenantId) {
    const tenant = await t.request('GET', `/tenants/${tenantId}`, { token: serviceKey });
    expect2xx(tenant, 'tenant read');
    tenantExternalId = tenant.body.external_id as string;
  } else {
    const tenant = await t.request('PUT', `/tenants/by-external-id/${tenantExternalId}`, {
      token: serviceKey,
      body: options.settings ? { settings: options.settings } : {},
    });
    expect2xx(tenant, 'tenant upsert');
    tenantId = tenant.body.id as string;
  }
  const role = await t.request('POST', `/tenants/${tenantId}/roles`, {
    token: serviceKey,
    body: { name: unique('role'), skill_access: { mode: 'all' } },
  });
  expect2xx(role, 'role create');
  const userExternalId = unique('test:user');
  const user = await t.request('PUT', `/tenants/${tenantId}/users/by-external-id/${userExternalId}`, {
    token: serviceKey,
    body: { role_id: role.body.id },
  });
  expect2xx(user, 'user upsert');
  return { tenantId, tenantExternalId, userId: user.body.id, userExternalId, roleId: role.body.id };
}

/** A platform JWT for the user. */
export async function userToken(t: TestServer, serviceKey: string, user: ProvisionedUser): Promise<string> {
  const res = await t.request('POST', '/auth/token-exchange', {
    token: serviceKey,
    body: { tenant_external_id: user.tenantExternalId, user_external_id: user.userExternalId },
  });
  if (res.status !== 200) throw new Error(`token exchange failed: ${res.status} ${res.text}`);
  return res.body.token as string;
}

/**
 * Waits until the repository's sync has ended (the one started at registration, or a later one) and
 * answers the repository as the API shows it: state `ready` or `error`.
 */
export async function syncEnded(t: TestServer, serviceKey: string, repositoryId: string): Promise<any> {
  for (let i = 0; i < 1200; i++) {
    const res = await t.request<any>('GET', `/repositories/${repositoryId}`, { token: serviceKey });
    if (res.body.sync.state === 'ready' || res.body.sync.state === 'error') return res.body;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error(`the sync of ${repositoryId} did not end`);
}
