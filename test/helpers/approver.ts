/**
 * What a tenant's human approver does, as the signing contract says: canonical JSON of exactly
 * approval_id, decision and exp, signed with the approver key. Built here from the contract, not
 * from the server's own code, so the tests check the server against it.
 */
import { createHmac } from 'node:crypto';
import { canonicalJson } from '../../api-server/core/canonical-json.js';

export type Decision = 'approve' | 'deny';

/** An `hmac-sha256` assertion by the key `{id, secret}` (its base64url secret as the admin API showed it). */
export function hmacAssertion(
  approvalId: string,
  decision: Decision,
  key: { id: string; secret: string },
  exp = Math.floor(Date.now() / 1000) + 120,
) {
  const payload = canonicalJson({ approval_id: approvalId, decision, exp });
  const value = createHmac('sha256', Buffer.from(key.secret, 'base64url')).update(payload).digest('base64url');
  return { key_id: key.id, algorithm: 'hmac-sha256', exp, value };
}
