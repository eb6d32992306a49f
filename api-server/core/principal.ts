/** Who is calling. Resolved once per request from the bearer credential (see auth/). */
export type Principal =
  | {
      kind: 'service';
      integrationId: string;
      rootTenantId: string;
      serviceKeyId: string;
    }
  | {
      kind: 'user';
      integrationId: string;
      tenantId: string;
      userId: string;
    }
  | { kind: 'admin' };

export type ServicePrincipal = Extract<Principal, { kind: 'service' }>;
export type UserPrincipal = Extract<Principal, { kind: 'user' }>;

/** The idempotency-key owner: keys of two principals never collide. */
export function principalKey(principal: Principal): string {
  switch (principal.kind) {
    case 'service':
      return `integration:${principal.integrationId}`;
    case 'user':
      return `user:${principal.userId}`;
    case 'admin':
      return 'admin';
  }
}
