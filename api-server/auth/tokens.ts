import { webcrypto } from 'node:crypto';
import { errors as joseErrors, jwtVerify, SignJWT } from 'jose';
import type { Vault } from '../core/crypto.js';
import type { AppDeps } from '../deps.js';
import type { UserPrincipal } from '../core/principal.js';
import { problems } from '../core/problems.js';

const ISSUER = 'acis';
const AUDIENCE = 'acis:conversations';

export interface IssuedToken {
  token: string;
  expiresAt: Date;
}

/**
 * Platform JWTs are HS256, keyed by a key derived from the master key, so every node verifies them.
 * The key is derived and imported once per vault: HKDF plus a WebCrypto import on every token was
 * about half of the signing cost (see the token-exchange benchmark).
 */
const signingKeys = new WeakMap<Vault, Promise<webcrypto.CryptoKey>>();

function signingKey(deps: Pick<AppDeps, 'vault'>): Promise<webcrypto.CryptoKey> {
  let key = signingKeys.get(deps.vault);
  if (!key) {
    const raw = deps.vault.deriveKey('platform-jwt');
    key = webcrypto.subtle.importKey('raw', raw, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign', 'verify']);
    signingKeys.set(deps.vault, key);
  }
  return key;
}

export async function issueUserToken(
  deps: Pick<AppDeps, 'vault' | 'now' | 'newId'>,
  subject: Omit<UserPrincipal, 'kind'>,
  ttlSeconds: number,
): Promise<IssuedToken> {
  const issuedAt = Math.floor(deps.now().getTime() / 1000);
  const expiresAt = issuedAt + ttlSeconds;
  const token = await new SignJWT({ tid: subject.tenantId, iid: subject.integrationId })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setSubject(subject.userId)
    .setIssuedAt(issuedAt)
    .setExpirationTime(expiresAt)
    .setJti(deps.newId('request').slice(4))
    .sign(await signingKey(deps));
  return { token, expiresAt: new Date(expiresAt * 1000) };
}

export async function verifyUserToken(deps: Pick<AppDeps, 'vault' | 'now'>, token: string): Promise<UserPrincipal> {
  try {
    const { payload } = await jwtVerify(token, await signingKey(deps), {
      issuer: ISSUER,
      audience: AUDIENCE,
      algorithms: ['HS256'],
      currentDate: deps.now(),
      clockTolerance: 0,
    });
    if (typeof payload.sub !== 'string' || typeof payload.tid !== 'string' || typeof payload.iid !== 'string') {
      throw problems.unauthorized('The bearer token is not a platform token.');
    }
    return { kind: 'user', integrationId: payload.iid, tenantId: payload.tid, userId: payload.sub };
  } catch (error) {
    if (error instanceof joseErrors.JWTExpired) throw problems.unauthorized('The platform token has expired.');
    if (error instanceof joseErrors.JOSEError) throw problems.unauthorized('The bearer token is not valid.');
    throw error;
  }
}
