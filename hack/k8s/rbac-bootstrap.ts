/**
 * The default roles and bindings kube-apiserver reconciles at start that the tests' clients meet
 * ("Default roles and role bindings", https://kubernetes.io/docs/reference/access-authn-authz/rbac/#default-roles-and-role-bindings):
 * cluster-admin for `system:masters`, and for every authenticated user discovery
 * (`system:discovery`), the self-subject reviews (`system:basic-user`) and the public info
 * (`system:public-info-viewer`, unauthenticated users too). Stored as ordinary objects, so a test may
 * read or remove them as on a cluster.
 */
import type { PolicyRule } from './authorization.js';
import type { KubeObjects } from './objects.js';

const BOOTSTRAP_METADATA = {
  labels: { 'kubernetes.io/bootstrapping': 'rbac-defaults' },
  annotations: { 'rbac.authorization.kubernetes.io/autoupdate': 'true' },
};

const PUBLIC_INFO = ['/healthz', '/livez', '/readyz', '/version', '/version/'];

const ROLES: Array<{ name: string; rules: PolicyRule[]; groups: string[] }> = [
  {
    name: 'cluster-admin',
    rules: [
      { apiGroups: ['*'], resources: ['*'], verbs: ['*'] },
      { nonResourceURLs: ['*'], verbs: ['*'] },
    ],
    groups: ['system:masters'],
  },
  {
    name: 'system:discovery',
    rules: [{ nonResourceURLs: ['/api', '/api/*', '/apis', '/apis/*', '/openapi', '/openapi/*', ...PUBLIC_INFO], verbs: ['get'] }],
    groups: ['system:authenticated'],
  },
  {
    name: 'system:basic-user',
    rules: [
      { apiGroups: ['authorization.k8s.io'], resources: ['selfsubjectaccessreviews', 'selfsubjectrulesreviews'], verbs: ['create'] },
      { apiGroups: ['authentication.k8s.io'], resources: ['selfsubjectreviews'], verbs: ['create'] },
    ],
    groups: ['system:authenticated'],
  },
  {
    name: 'system:public-info-viewer',
    rules: [{ nonResourceURLs: PUBLIC_INFO, verbs: ['get'] }],
    groups: ['system:authenticated', 'system:unauthenticated'],
  },
];

export function createBootstrapPolicy(objects: KubeObjects): void {
  for (const role of ROLES) {
    const metadata = { name: role.name, ...BOOTSTRAP_METADATA };
    objects.create('clusterroles.rbac.authorization.k8s.io', undefined, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: structuredClone(metadata),
      rules: role.rules,
    });
    objects.create('clusterrolebindings.rbac.authorization.k8s.io', undefined, {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: structuredClone(metadata),
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role.name },
      subjects: role.groups.map((name) => ({ apiGroup: 'rbac.authorization.k8s.io', kind: 'Group', name })),
    });
  }
}
