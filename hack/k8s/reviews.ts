/**
 * The create-only kinds kubectl asks questions with, answered for the caller's identity by the
 * authenticator and the RBAC authorizer (authentication.ts, authorization.ts):
 * - serviceaccounts/token (authentication.k8s.io/v1 TokenRequest, "Manage Service Accounts": a
 *   token of `spec.expirationSeconds`, default 3600, at least 600), for `kubectl create token`;
 * - SelfSubjectAccessReview (`kubectl auth can-i`): the authorizer's decision and reason;
 * - SelfSubjectRulesReview (`kubectl auth can-i --list`): the rules bound to the caller in the namespace;
 * - SelfSubjectReview (`kubectl auth whoami`): the caller's user.
 * (https://kubernetes.io/docs/reference/access-authn-authz/authorization/#checking-api-access)
 */
import { type Authenticator, ISSUER, type UserInfo } from './authentication.js';
import type { PolicyRule, RbacAuthorizer } from './authorization.js';
import { KubeStatusError } from './errors.js';
import type { KubeObject } from './store.js';

const DEFAULT_TOKEN_SECONDS = 3600;
const MIN_TOKEN_SECONDS = 600;

export function tokenRequest(authenticator: Authenticator, namespace: string, name: string, body: KubeObject): KubeObject {
  const spec = (body.spec ?? {}) as { audiences?: string[]; expirationSeconds?: number };
  const seconds = spec.expirationSeconds || DEFAULT_TOKEN_SECONDS;
  if (seconds < MIN_TOKEN_SECONDS) {
    throw new KubeStatusError(
      422,
      'Invalid',
      `TokenRequest.authentication.k8s.io "${name}" is invalid: spec.expirationSeconds: Invalid value: ${seconds}: may not specify a duration less than 10 minutes`,
    );
  }
  const audiences = spec.audiences?.length ? spec.audiences : [ISSUER];
  const issued = authenticator.issue({ namespace, name }, seconds, audiences);
  return {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    metadata: { name, namespace, creationTimestamp: null },
    spec: { audiences, expirationSeconds: seconds, boundObjectRef: null },
    status: { token: issued.token, expirationTimestamp: new Date(issued.expiresAt * 1000).toISOString().replace(/\.\d+Z$/, 'Z') },
  } as unknown as KubeObject;
}

interface ReviewSpec {
  namespace?: string;
  resourceAttributes?: { namespace?: string; verb?: string; group?: string; resource?: string; subresource?: string; name?: string };
  nonResourceAttributes?: { path?: string; verb?: string };
}

/** The answer to a POST of one of the review kinds by `user`: the request with its status filled in. */
export function review(kind: string, body: KubeObject, user: UserInfo, authorizer: RbacAuthorizer): KubeObject {
  const spec = (body.spec ?? {}) as ReviewSpec;
  const status =
    kind === 'SelfSubjectAccessReview'
      ? accessReview(spec, user, authorizer)
      : kind === 'SelfSubjectRulesReview'
        ? rulesReview(spec, user, authorizer)
        : { userInfo: user };
  return { ...body, metadata: { ...body.metadata, creationTimestamp: null }, status } as unknown as KubeObject;
}

function accessReview(spec: ReviewSpec, user: UserInfo, authorizer: RbacAuthorizer): Record<string, unknown> {
  const resource = spec.resourceAttributes;
  const decision = resource
    ? authorizer.authorize({
        user,
        verb: resource.verb ?? '',
        apiGroup: resource.group ?? '',
        resource: resource.resource ?? '',
        subresource: resource.subresource || undefined,
        namespace: resource.namespace || undefined,
        name: resource.name || undefined,
      })
    : authorizer.authorize({ user, verb: spec.nonResourceAttributes?.verb ?? '', path: spec.nonResourceAttributes?.path ?? '' });
  return decision.reason ? { allowed: decision.allowed, reason: decision.reason } : { allowed: decision.allowed };
}

function rulesReview(spec: ReviewSpec, user: UserInfo, authorizer: RbacAuthorizer): Record<string, unknown> {
  const { rules, errors } = authorizer.rulesFor(user, spec.namespace || undefined);
  const resourceRules = rules
    .filter((rule) => rule.resources?.length)
    .map((rule: PolicyRule) => ({
      verbs: rule.verbs,
      apiGroups: rule.apiGroups ?? [],
      resources: rule.resources,
      ...(rule.resourceNames?.length ? { resourceNames: rule.resourceNames } : {}),
    }));
  const nonResourceRules = rules
    .filter((rule) => rule.nonResourceURLs?.length)
    .map((rule) => ({ verbs: rule.verbs, nonResourceURLs: rule.nonResourceURLs }));
  return {
    resourceRules,
    nonResourceRules,
    incomplete: errors.length > 0,
    ...(errors.length ? { evaluationError: errors.join(', ') } : {}),
  };
}
