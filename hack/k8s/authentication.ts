/**
 * Who a request is, as kube-apiserver's authenticators decide it
 * (https://kubernetes.io/docs/reference/access-authn-authz/authentication/):
 * - the bearer token of the kubeconfig the server writes is the test's administrator, in the group
 *   `system:masters` (as the cluster-admin credentials of a kubeadm cluster are);
 * - a ServiceAccount token issued by the TokenRequest API ("Service account tokens" and "Bound
 *   service account tokens") is a JWT signed by this server's key (ES256, as
 *   `--service-account-signing-key-file` with an ECDSA key signs them), verified on every request:
 *   signature, issuer, audience (the API server's own), not before / expiry, and that the
 *   ServiceAccount it names still exists with the same uid. Its user is
 *   `system:serviceaccount:<ns>:<name>` in `system:serviceaccounts`, `system:serviceaccounts:<ns>` and
 *   `system:authenticated`;
 * - any other token, or none over TLS, is 401 Unauthorized (anonymous requests are off, as
 *   `--anonymous-auth=false` has them).
 * Over plain HTTP kubectl sends no bearer token at all; a request without one there is served as the
 * API server's insecure port served it before 1.20 (`--insecure-port`: no authentication, no
 * authorization), which keeps the tests' admin kubeconfig working over HTTP. ServiceAccount
 * kubeconfigs therefore point at the server's TLS listener.
 */
import { generateKeyPairSync, randomUUID, sign, verify, type KeyObject } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { KubeStatusError } from './errors.js';
import type { KubeObjects } from './objects.js';

export interface UserInfo {
  username: string;
  uid?: string;
  groups: string[];
  extra?: Record<string, string[]>;
}

/** The kubeconfig user the server writes: the administrator the tests start with. */
export const ADMIN_TOKEN = 'acis-test-token';
export const ADMIN: UserInfo = { username: 'acis-test', groups: ['system:masters', 'system:authenticated'] };
/** The issuer and (the default, and only accepted) audience of the tokens this server signs. */
export const ISSUER = 'https://kubernetes.default.svc.cluster.local';

const SIGNING_KEY_ID = 'acis-test';

export interface ServiceAccountRef {
  namespace: string;
  name: string;
}

export interface IssuedToken {
  token: string;
  audiences: string[];
  expiresAt: number;
}

interface Claims {
  aud: string[];
  exp: number;
  iat: number;
  nbf: number;
  iss: string;
  jti: string;
  sub: string;
  'kubernetes.io': { namespace: string; serviceaccount: { name: string; uid: string } };
}

const encode = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

export function unauthorized(): KubeStatusError {
  return new KubeStatusError(401, 'Unauthorized', 'Unauthorized');
}

/** Signs ServiceAccount tokens and tells who a request is. One per server: a restart forgets its tokens. */
export class Authenticator {
  private readonly privateKey: KeyObject;
  private readonly publicKey: KeyObject;

  constructor(private readonly objects: KubeObjects) {
    ({ privateKey: this.privateKey, publicKey: this.publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' }));
  }

  /** A token for the ServiceAccount (which must exist: 404 otherwise), valid `seconds` from now. */
  issue(account: ServiceAccountRef, seconds: number, audiences: string[] = [ISSUER]): IssuedToken {
    const found = this.objects.get('serviceaccounts', account.namespace, account.name);
    const now = Math.floor(Date.now() / 1000);
    const claims: Claims = {
      aud: audiences,
      exp: now + seconds,
      iat: now,
      nbf: now,
      iss: ISSUER,
      jti: randomUUID(),
      sub: serviceAccountUser(account),
      'kubernetes.io': { namespace: account.namespace, serviceaccount: { name: account.name, uid: found.metadata.uid! } },
    };
    const signed = `${encode({ alg: 'ES256', kid: SIGNING_KEY_ID })}.${encode(claims)}`;
    const signature = sign('sha256', Buffer.from(signed), { key: this.privateKey, dsaEncoding: 'ieee-p1363' });
    return { token: `${signed}.${signature.toString('base64url')}`, audiences, expiresAt: claims.exp };
  }

  /** The request's user; throws 401 Unauthorized when its credential is missing (over TLS) or not good. */
  authenticate(request: IncomingMessage): UserInfo {
    const header = request.headers.authorization;
    if (header === undefined) {
      if ((request.socket as TLSSocket).encrypted) throw unauthorized();
      return ADMIN;
    }
    const token = /^Bearer\s+(\S+)$/i.exec(header)?.[1];
    if (token === ADMIN_TOKEN) return ADMIN;
    const user = token === undefined ? undefined : this.serviceAccountUser(token);
    if (!user) throw unauthorized();
    return user;
  }

  private serviceAccountUser(token: string): UserInfo | undefined {
    const claims = this.verifiedClaims(token);
    if (!claims) return undefined;
    const now = Math.floor(Date.now() / 1000);
    if (claims.iss !== ISSUER || !claims.aud?.includes(ISSUER) || !(claims.nbf <= now && now < claims.exp)) return undefined;
    const { namespace, serviceaccount } = claims['kubernetes.io'] ?? {};
    if (!namespace || !serviceaccount) return undefined;
    // "the service account must still exist": a deleted (or recreated) account's tokens stop working.
    const account = this.objects.find('serviceaccounts', namespace, serviceaccount.name);
    if (account?.metadata.uid !== serviceaccount.uid) return undefined;
    return {
      username: serviceAccountUser({ namespace, name: serviceaccount.name }),
      uid: serviceaccount.uid,
      groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'],
      extra: { 'authentication.kubernetes.io/credential-id': [`JTI=${claims.jti}`] },
    };
  }

  private verifiedClaims(token: string): Claims | undefined {
    const [header, payload, signature, ...rest] = token.split('.');
    if (!header || !payload || !signature || rest.length) return undefined;
    const signed = Buffer.from(`${header}.${payload}`);
    const good = verify('sha256', signed, { key: this.publicKey, dsaEncoding: 'ieee-p1363' }, Buffer.from(signature, 'base64url'));
    if (!good) return undefined;
    try {
      return JSON.parse(Buffer.from(payload, 'base64url').toString()) as Claims;
    } catch {
      return undefined;
    }
  }
}

export function serviceAccountUser(account: ServiceAccountRef): string {
  return `system:serviceaccount:${account.namespace}:${account.name}`;
}
