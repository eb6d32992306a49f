import { errors as joseErrors, jwtVerify, SignJWT } from 'jose';
import type { AppDeps } from '../core/deps.js';
import type { UserPrincipal } from '../core/principal.js';
import { problems } from '../core/problems.js';

const ISSUER = 'acis';
const AUDIENCE = 'acis:conversations';

export interface IssuedToken {
  token: string;
  expiresAt: Date;
}

/** Platform JWTs are HS256, keyed by a key derived from the master key, so every node verifies them. */
function signingKey(deps: Pick<AppDeps, 'vault'>): Uint8Array {
  return deps.vault.deriveKey('platform-jwt');
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
    .sign(signingKey(deps));
  return { token, expiresAt: new Date(expiresAt * 1000) };
}

export async function verifyUserToken(deps: Pick<AppDeps, 'vault' | 'now'>, token: string): Promise<UserPrincipal> {
  try {
    const { payload } = await jwtVerify(token, signingKey(deps), {
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
