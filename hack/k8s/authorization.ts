/**
 * RBAC as kube-apiserver's authorizers decide it, over the Roles, ClusterRoles, RoleBindings and
 * ClusterRoleBindings stored in this server
 * (https://kubernetes.io/docs/reference/access-authn-authz/rbac/):
 * - `system:masters` is allowed everything before any rule is read (the apiserver's privileged-group
 *   authorizer);
 * - otherwise a request is allowed when a rule of a role bound to the user allows it: ClusterRoleBindings
 *   everywhere, RoleBindings (to a Role of their namespace or a ClusterRole) in their namespace only.
 *   Subjects are a User by name, a Group among the user's groups, or a ServiceAccount by name and
 *   namespace (the binding's when the subject names none);
 * - a rule matches by verb (`*` for any), API group, resource (`*`, `pods/log` for a subresource,
 *   `*` then `/status` for that subresource of any resource) and, when it lists resourceNames, only requests
 *   naming one of them: so never a create, list, watch or deletecollection without a name ("Referring
 *   to resources": such rules cannot restrict create or deletecollection). A list or watch with a
 *   `metadata.name` field selector names that object, as the apiserver's RequestInfo makes it;
 * - a request for a path outside the API's resources (/api, /version, /healthz, …) is matched against
 *   nonResourceURLs (exact, or a prefix ending in `*`) with the HTTP method as verb.
 * Denials are 403 Forbidden worded by the apiserver's responsewriters.forbiddenMessage; roles named by
 * a binding but missing add `RBAC: role.rbac.authorization.k8s.io "x" not found` as the RBAC
 * authorizer's reason does. Aggregated ClusterRoles (aggregationRule) are not computed.
 */
import type { UserInfo } from './authentication.js';
import { KubeStatusError } from './errors.js';
import type { KubeObjects } from './objects.js';
import type { KubeObject } from './store.js';

export interface PolicyRule {
  verbs: string[];
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

/** A request as the authorizer sees it: a resource request, or a path (`path`, no `resource`). */
export interface RequestAttributes {
  user: UserInfo;
  verb: string;
  resource?: string;
  subresource?: string;
  apiGroup?: string;
  namespace?: string;
  name?: string;
  path?: string;
}

export interface Decision {
  allowed: boolean;
  reason: string;
}

interface Subject {
  kind: string;
  name: string;
  namespace?: string;
}

interface Binding extends KubeObject {
  roleRef: { kind: string; name: string };
  subjects?: Subject[];
}

interface RoleObject extends KubeObject {
  rules?: PolicyRule[];
}

const ROLES = 'roles.rbac.authorization.k8s.io';
const CLUSTER_ROLES = 'clusterroles.rbac.authorization.k8s.io';
const ROLE_BINDINGS = 'rolebindings.rbac.authorization.k8s.io';
const CLUSTER_ROLE_BINDINGS = 'clusterrolebindings.rbac.authorization.k8s.io';

/** One binding that applies to the user, with its role's rules (or why they could not be read). */
interface BoundRules {
  source: string;
  rules: PolicyRule[];
  error?: string;
}

export class RbacAuthorizer {
  constructor(private readonly objects: KubeObjects) {}

  authorize(request: RequestAttributes): Decision {
    if (request.user.groups.includes('system:masters')) return { allowed: true, reason: '' };
    const errors: string[] = [];
    for (const bound of this.boundRules(request.user, request.namespace)) {
      if (bound.error) errors.push(bound.error);
      if (bound.rules.some((rule) => ruleAllows(rule, request))) return { allowed: true, reason: `RBAC: allowed by ${bound.source}` };
    }
    return { allowed: false, reason: errors.length ? `RBAC: ${aggregate(errors)}` : '' };
  }

  /** What SelfSubjectRulesReview lists: the rules of every binding of the user that applies in `namespace`. */
  rulesFor(user: UserInfo, namespace: string | undefined): { rules: PolicyRule[]; errors: string[] } {
    const bound = this.boundRules(user, namespace);
    return { rules: bound.flatMap((entry) => entry.rules), errors: bound.flatMap((entry) => (entry.error ? [entry.error] : [])) };
  }

  private boundRules(user: UserInfo, namespace: string | undefined): BoundRules[] {
    const found: BoundRules[] = [];
    for (const binding of this.objects.list(CLUSTER_ROLE_BINDINGS).items as Binding[]) {
      const subject = binding.subjects?.find((candidate) => appliesTo(candidate, user, ''));
      if (!subject || binding.roleRef.kind !== 'ClusterRole') continue;
      const source = `ClusterRoleBinding "${binding.metadata.name}" of ClusterRole "${binding.roleRef.name}" to ${describe(subject, '')}`;
      found.push({ source, ...this.roleRules(binding, undefined) });
    }
    if (!namespace) return found;
    for (const binding of this.objects.list(ROLE_BINDINGS, namespace).items as Binding[]) {
      const subject = binding.subjects?.find((candidate) => appliesTo(candidate, user, namespace));
      if (!subject) continue;
      const { name, namespace: bindingNamespace } = binding.metadata;
      const source = `RoleBinding "${name}/${bindingNamespace}" of ${binding.roleRef.kind} "${binding.roleRef.name}" to ${describe(subject, namespace)}`;
      found.push({ source, ...this.roleRules(binding, namespace) });
    }
    return found;
  }

  private roleRules(binding: Binding, namespace: string | undefined): { rules: PolicyRule[]; error?: string } {
    const { kind, name } = binding.roleRef;
    const role = (kind === 'Role' ? this.objects.find(ROLES, namespace, name) : this.objects.find(CLUSTER_ROLES, undefined, name)) as
      | RoleObject
      | undefined;
    if (!role) return { rules: [], error: `${kind.toLowerCase()}.rbac.authorization.k8s.io "${name}" not found` };
    return { rules: role.rules ?? [] };
  }
}

function appliesTo(subject: Subject, user: UserInfo, bindingNamespace: string): boolean {
  switch (subject.kind) {
    case 'User':
      return subject.name === user.username;
    case 'Group':
      return user.groups.includes(subject.name);
    case 'ServiceAccount':
      return user.username === `system:serviceaccount:${subject.namespace || bindingNamespace}:${subject.name}`;
    default:
      return false;
  }
}

function describe(subject: Subject, bindingNamespace: string): string {
  if (subject.kind === 'ServiceAccount') return `ServiceAccount "${subject.name}/${subject.namespace || bindingNamespace}"`;
  return `${subject.kind} "${subject.name}"`;
}

const has = (list: string[] | undefined, value: string) => Boolean(list?.some((entry) => entry === '*' || entry === value));

export function ruleAllows(rule: PolicyRule, request: RequestAttributes): boolean {
  if (!has(rule.verbs, request.verb)) return false;
  if (request.resource === undefined) {
    const path = request.path ?? '';
    return Boolean(
      rule.nonResourceURLs?.some((url) => url === '*' || url === path || (url.endsWith('*') && path.startsWith(url.slice(0, -1)))),
    );
  }
  if (!has(rule.apiGroups, request.apiGroup ?? '')) return false;
  const combined = request.subresource ? `${request.resource}/${request.subresource}` : request.resource;
  const resourceMatches = rule.resources?.some(
    (entry) => entry === '*' || entry === combined || (request.subresource !== undefined && entry === `*/${request.subresource}`),
  );
  if (!resourceMatches) return false;
  if (!rule.resourceNames?.length) return true;
  return request.name !== undefined && request.name !== '' && rule.resourceNames.includes(request.name);
}

/** utilerrors.NewAggregate's wording: one error as is, several in brackets. */
function aggregate(errors: string[]): string {
  return errors.length === 1 ? errors[0]! : `[${errors.join(', ')}]`;
}

/** The 403 the apiserver answers a denied request with (responsewriters.Forbidden over apierrors.NewForbidden). */
export function forbidden(request: RequestAttributes, reason: string): KubeStatusError {
  const who = `User "${request.user.username}"`;
  let text: string;
  if (request.resource === undefined) text = `${who} cannot ${request.verb} path "${request.path}"`;
  else {
    const resource = request.subresource ? `${request.resource}/${request.subresource}` : request.resource;
    const scope = request.namespace ? `in the namespace "${request.namespace}"` : 'at the cluster scope';
    text = `${who} cannot ${request.verb} resource "${resource}" in API group "${request.apiGroup ?? ''}" ${scope}`;
  }
  if (reason) text = `${text}: ${reason}`;
  const group = request.apiGroup ?? '';
  const qualified = request.resource === undefined ? '' : group ? `${request.resource}.${group}` : request.resource;
  const name = request.name ?? '';
  const message = !qualified
    ? `forbidden: ${text}`
    : name
      ? `${qualified} "${name}" is forbidden: ${text}`
      : `${qualified} is forbidden: ${text}`;
  return new KubeStatusError(403, 'Forbidden', message, { name: name || undefined, group: group || undefined, kind: request.resource });
}

/** Throws the 403 unless the request is allowed. */
export function authorizeOrThrow(authorizer: RbacAuthorizer, request: RequestAttributes): void {
  const decision = authorizer.authorize(request);
  if (!decision.allowed) throw forbidden(request, decision.reason);
}

/** What of a request (http-types.ts' RequestRecord) names its resource. */
interface ResourceRequest {
  verb: string;
  group?: string;
  resource?: string;
  subresource?: string;
  namespace?: string;
  name?: string;
}

/**
 * The attributes of a resource request: a list or watch without a name names the object its
 * `metadata.name` field selector requires, as the apiserver's RequestInfoFactory does.
 */
export function resourceAttributes(user: UserInfo, record: ResourceRequest, query: URLSearchParams): RequestAttributes {
  const selected = /(?:^|,)metadata\.name==?([^,]+)/.exec(query.get('fieldSelector') ?? '')?.[1];
  const listing = record.verb === 'list' || record.verb === 'watch';
  return {
    user,
    verb: record.verb,
    apiGroup: record.group ?? '',
    resource: record.resource,
    subresource: record.subresource,
    namespace: record.namespace,
    name: record.name ?? (listing ? selected : undefined),
  };
}
