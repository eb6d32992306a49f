import { createHmac, createPublicKey, timingSafeEqual, verify } from 'node:crypto';
import { canonicalJson } from '../core/canonical-json.js';

export type ApprovalDecision = 'approve' | 'deny';
export type ApproverAlgorithm = 'hmac-sha256' | 'ed25519';

export interface ApprovalSignature {
  key_id: string;
  algorithm: string;
  exp: number;
  value: string;
}

/** An approver key as verification needs it: the HMAC secret already unsealed. */
export interface ApproverKeyMaterial {
  id: string;
  tenantId: string;
  algorithm: ApproverAlgorithm;
  /** base64url HMAC secret (hmac-sha256). */
  secret: string | null;
  /** base64url raw 32-byte public key (ed25519). */
  publicKey: string | null;
  revoked: boolean;
}

/** `exp` may be at most this far ahead (the spec recommends 5 minutes), plus clock skew. */
export const MAX_EXP_AHEAD_SECONDS = 5 * 60;
export const CLOCK_SKEW_SECONDS = 30;

/** The signed bytes: canonical JSON of exactly these three keys. */
export function approvalPayload(approvalId: string, decision: ApprovalDecision, exp: number): string {
  return canonicalJson({ approval_id: approvalId, decision, exp });
}

export interface VerifyInput {
  approvalId: string;
  /** The tenant of the approval: only that tenant's approver keys may resolve it. */
  tenantId: string;
  decision: ApprovalDecision;
  signature: ApprovalSignature;
  /** The key named by `signature.key_id`, or undefined when no such key exists. */
  key: ApproverKeyMaterial | undefined;
  nowSeconds: number;
}

/**
 * Whether the assertion is valid. Every failure is the same `false`: the caller answers one 403
 * whatever went wrong, so a probe learns nothing about which part failed.
 */
export function verifyApprovalSignature(input: VerifyInput): boolean {
  const { signature, key } = input;
  if (!key || key.revoked || key.id !== signature.key_id || key.tenantId !== input.tenantId) return false;
  if (key.algorithm !== signature.algorithm) return false;
  if (!Number.isSafeInteger(signature.exp)) return false;
  if (signature.exp <= input.nowSeconds) return false;
  if (signature.exp > input.nowSeconds + MAX_EXP_AHEAD_SECONDS + CLOCK_SKEW_SECONDS) return false;
  const given = decodeBase64Url(signature.value);
  if (!given) return false;
  const payload = Buffer.from(approvalPayload(input.approvalId, input.decision, signature.exp), 'utf8');
  if (key.algorithm === 'hmac-sha256') {
    if (!key.secret) return false;
    const expected = createHmac('sha256', Buffer.from(key.secret, 'base64url')).update(payload).digest();
    return given.length === expected.length && timingSafeEqual(given, expected);
  }
  if (!key.publicKey) return false;
  try {
    const publicKey = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x: key.publicKey }, format: 'jwk' });
    return verify(null, payload, publicKey, given);
  } catch {
    return false;
  }
}

/** Strict base64url (no padding, no other alphabet): a lenient decoder would accept many spellings. */
function decodeBase64Url(value: string): Buffer | undefined {
  if (!/^[A-Za-z0-9_-]+$/.test(value)) return undefined;
  const decoded = Buffer.from(value, 'base64url');
  return decoded.toString('base64url') === value ? decoded : undefined;
}
