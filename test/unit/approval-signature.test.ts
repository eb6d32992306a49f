import { createHmac, generateKeyPairSync, randomBytes, sign } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  type ApproverKeyMaterial,
  approvalPayload,
  CLOCK_SKEW_SECONDS,
  MAX_EXP_AHEAD_SECONDS,
  verifyApprovalSignature,
} from '../../api-server/approvals/approval-signature.js';

const NOW = 1_800_000_000;
const APPROVAL = 'apr_01ABCDEF';
const secret = randomBytes(32).toString('base64url');
const hmacKey: ApproverKeyMaterial = { id: 'apk_h', tenantId: 'tnt_1', algorithm: 'hmac-sha256', secret, publicKey: null, revoked: false };
const pair = generateKeyPairSync('ed25519');
const edKey: ApproverKeyMaterial = {
  id: 'apk_e',
  tenantId: 'tnt_1',
  algorithm: 'ed25519',
  secret: null,
  publicKey: (pair.publicKey.export({ format: 'jwk' }) as { x: string }).x,
  revoked: false,
};

const mac = (payload: string) => createHmac('sha256', Buffer.from(secret, 'base64url')).update(payload).digest('base64url');

function verify(
  overrides: {
    value?: string;
    exp?: number;
    algorithm?: string;
    key?: ApproverKeyMaterial | undefined;
    decision?: 'approve' | 'deny';
  } = {},
) {
  const exp = overrides.exp ?? NOW + 60;
  const key = 'key' in overrides ? overrides.key : hmacKey;
  return verifyApprovalSignature({
    approvalId: APPROVAL,
    tenantId: 'tnt_1',
    decision: overrides.decision ?? 'approve',
    signature: {
      key_id: key?.id ?? 'apk_missing',
      algorithm: overrides.algorithm ?? key?.algorithm ?? 'hmac-sha256',
      exp,
      value: overrides.value ?? mac(approvalPayload(APPROVAL, 'approve', exp)),
    },
    key,
    nowSeconds: NOW,
  });
}

describe('the signed payload', () => {
  it('is canonical JSON of exactly approval_id, decision and exp: sorted keys, no whitespace', () => {
    expect(approvalPayload(APPROVAL, 'deny', 1700000000)).toBe('{"approval_id":"apr_01ABCDEF","decision":"deny","exp":1700000000}');
  });
});

describe('verifyApprovalSignature', () => {
  it('accepts an HMAC-SHA256 over the canonical payload, keyed by the raw bytes of the base64url secret', () => {
    expect(verify()).toBe(true);
  });

  it('refuses a MAC over another spelling of the same JSON', () => {
    const exp = NOW + 60;
    expect(verify({ value: mac(`{"exp":${exp},"decision":"approve","approval_id":"${APPROVAL}"}`) })).toBe(false);
    expect(verify({ value: mac(`{"approval_id": "${APPROVAL}", "decision": "approve", "exp": ${exp}}`) })).toBe(false);
  });

  it('refuses the other decision, a stale or far exp, an unknown, revoked or foreign key, a wrong algorithm', () => {
    expect(verify({ decision: 'deny' })).toBe(false);
    expect(verify({ exp: NOW })).toBe(false);
    expect(verify({ exp: NOW + MAX_EXP_AHEAD_SECONDS + CLOCK_SKEW_SECONDS + 1 })).toBe(false);
    expect(verify({ exp: NOW + MAX_EXP_AHEAD_SECONDS })).toBe(true);
    expect(verify({ key: undefined })).toBe(false);
    expect(verify({ key: { ...hmacKey, revoked: true } })).toBe(false);
    expect(verify({ key: { ...hmacKey, tenantId: 'tnt_2' } })).toBe(false);
    expect(verify({ algorithm: 'ed25519' })).toBe(false);
  });

  it('refuses values that are not strict base64url', () => {
    const exp = NOW + 60;
    const value = mac(approvalPayload(APPROVAL, 'approve', exp));
    expect(verify({ value: `${value}=` })).toBe(false);
    expect(verify({ value: `${Buffer.from(value, 'base64url').toString('base64').replace(/=+$/, '')}+` })).toBe(false);
    expect(verify({ value: value.slice(0, -2) })).toBe(false);
  });

  it('accepts an Ed25519 signature by the registered public key, and no other', () => {
    const exp = NOW + 60;
    const value = sign(null, Buffer.from(approvalPayload(APPROVAL, 'approve', exp)), pair.privateKey).toString('base64url');
    expect(verify({ key: edKey, exp, value })).toBe(true);
    const stranger = generateKeyPairSync('ed25519');
    const forged = sign(null, Buffer.from(approvalPayload(APPROVAL, 'approve', exp)), stranger.privateKey).toString('base64url');
    expect(verify({ key: edKey, exp, value: forged })).toBe(false);
    expect(verify({ key: edKey, exp, value, decision: 'deny' })).toBe(false);
  });
});
