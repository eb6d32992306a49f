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
  | { kind: 'admin' }
  /** A caller proven by a request signature the handler checks (webhooks), not by a bearer credential. */
  | { kind: 'webhook' };

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
    case 'webhook':
      return 'webhook';
  }
}
