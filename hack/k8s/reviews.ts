/**
 * The create-only kinds kubectl asks questions with, answered as a cluster answers a client allowed
 * everything (this server authenticates no one and enforces no RBAC; its kubeconfig's user is
 * `acis-test`):
 * - serviceaccounts/token (authentication.k8s.io/v1 TokenRequest, "Manage Service Accounts": a
 *   token of `spec.expirationSeconds`, default 3600, at least 600), for `kubectl create token`; the
 *   token has a JWT's shape and claims but a signature nothing verifies;
 * - SelfSubjectAccessReview (`kubectl auth can-i`): allowed;
 * - SelfSubjectRulesReview (`kubectl auth can-i --list`): every verb on everything;
 * - SelfSubjectReview (`kubectl auth whoami`): the kubeconfig's user.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { KubeStatusError } from './errors.js';
import type { KubeObjects } from './objects.js';
import type { KubeObject } from './store.js';

const USER = { username: 'acis-test', groups: ['system:masters', 'system:authenticated'] };
const DEFAULT_TOKEN_SECONDS = 3600;
const MIN_TOKEN_SECONDS = 600;

const base64url = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

export function tokenRequest(objects: KubeObjects, namespace: string, name: string, body: KubeObject): KubeObject {
  const account = objects.get('serviceaccounts', namespace, name);
  const spec = (body.spec ?? {}) as { audiences?: string[]; expirationSeconds?: number };
  const seconds = spec.expirationSeconds || DEFAULT_TOKEN_SECONDS;
  if (seconds < MIN_TOKEN_SECONDS) {
    throw new KubeStatusError(
      422,
      'Invalid',
      `TokenRequest.authentication.k8s.io "${name}" is invalid: spec.expirationSeconds: Invalid value: ${seconds}: may not specify a duration less than 10 minutes`,
    );
  }
  const now = Math.floor(Date.now() / 1000);
  const audiences = spec.audiences?.length ? spec.audiences : ['https://kubernetes.default.svc.cluster.local'];
  const claims = {
    aud: audiences,
    exp: now + seconds,
    iat: now,
    iss: 'https://kubernetes.default.svc.cluster.local',
    jti: randomUUID(),
    sub: `system:serviceaccount:${namespace}:${name}`,
    'kubernetes.io': { namespace, serviceaccount: { name, uid: account.metadata.uid } },
  };
  const token = `${base64url({ alg: 'RS256', kid: 'acis-test' })}.${base64url(claims)}.${randomBytes(32).toString('base64url')}`;
  return {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    metadata: { name, namespace, creationTimestamp: null },
    spec: { audiences, expirationSeconds: seconds, boundObjectRef: null },
    status: { token, expirationTimestamp: new Date((now + seconds) * 1000).toISOString().replace(/\.\d+Z$/, 'Z') },
  } as unknown as KubeObject;
}

/** The answer to a POST of one of the review kinds: the request with its status filled in. */
export function review(kind: string, body: KubeObject): KubeObject {
  const status: Record<string, unknown> =
    kind === 'SelfSubjectAccessReview'
      ? { allowed: true, reason: 'this test server enforces no authorization' }
      : kind === 'SelfSubjectRulesReview'
        ? {
            resourceRules: [{ verbs: ['*'], apiGroups: ['*'], resources: ['*'] }],
            nonResourceRules: [{ verbs: ['*'], nonResourceURLs: ['*'] }],
            incomplete: false,
          }
        : { userInfo: USER };
  return { ...body, metadata: { ...body.metadata, creationTimestamp: null }, status } as unknown as KubeObject;
}
