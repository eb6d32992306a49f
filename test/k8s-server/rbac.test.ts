/**
 * Authentication and RBAC as kube-apiserver enforces them: ServiceAccount tokens from the TokenRequest
 * API verified on every request (401 Unauthorized when missing, forged, expired or of a deleted
 * account), Roles and ClusterRoles through RoleBindings and ClusterRoleBindings, resourceNames,
 * subresources and nonResourceURLs, 403 Forbidden worded as the apiserver words it, and kubectl's
 * `auth can-i` / `auth whoami` / `create token` answered for the caller.
 */
import { readFile } from 'node:fs/promises';
import { request as httpsRequest } from 'node:https';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { parse } from 'yaml';
import { kubectl } from '../helpers/kube-tools.js';
import { startKubeTestServer, type KubeTestServer } from '../../hack/k8s/server.js';
import type { KubeObject } from '../../hack/k8s/store.js';

const NAMESPACE = 'team';
const OTHER = 'elsewhere';
const USER = `system:serviceaccount:${NAMESPACE}:reader`;

let server: KubeTestServer;

interface Answer {
  status: number;
  body: any;
}

interface Endpoint {
  url: string;
  ca: string;
  token?: string;
}

/** The server, CA and token a kubeconfig names. */
async function endpointOf(kubeconfigPath: string): Promise<Endpoint> {
  const config = parse(await readFile(kubeconfigPath, 'utf8'));
  return {
    url: config.clusters[0].cluster.server,
    ca: Buffer.from(config.clusters[0].cluster['certificate-authority-data'], 'base64').toString(),
    token: config.users[0].user.token,
  };
}

function call(endpoint: Endpoint, method: string, path: string, body?: unknown, token = endpoint.token): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (token !== undefined) headers.authorization = `Bearer ${token}`;
    const outgoing = httpsRequest(new URL(path, endpoint.url), { method, ca: endpoint.ca, headers }, (incoming) => {
      let text = '';
      incoming.on('data', (chunk) => (text += chunk));
      incoming.on('end', () => resolve({ status: incoming.statusCode ?? 0, body: text.startsWith('{') ? JSON.parse(text) : text }));
    });
    outgoing.on('error', reject);
    outgoing.end(body === undefined ? undefined : JSON.stringify(body));
  });
}

const rbac = (kind: string, namespace: string | undefined, name: string, rest: Record<string, unknown>) => {
  const resource = `${kind.toLowerCase()}s.rbac.authorization.k8s.io`;
  return server.store.create(resource, namespace, {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind,
    metadata: { name },
    ...rest,
  } as unknown as KubeObject);
};
const readerSubject = [{ kind: 'ServiceAccount', name: 'reader', namespace: NAMESPACE }];
const bind = (kind: 'RoleBinding' | 'ClusterRoleBinding', namespace: string | undefined, name: string, roleKind: string, role: string) =>
  rbac(kind, namespace, name, {
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: roleKind, name: role },
    subjects: readerSubject,
  });

let reader: Endpoint;
let readerKubeconfig: string;

beforeAll(async () => {
  server = await startKubeTestServer({ namespaces: [NAMESPACE, OTHER] });
  for (const namespace of [NAMESPACE, OTHER]) {
    server.store.create('configmaps', namespace, { metadata: { name: 'settings' }, data: { a: '1' } } as unknown as KubeObject);
    server.store.create('configmaps', namespace, { metadata: { name: 'private' }, data: { b: '2' } } as unknown as KubeObject);
  }
  server.store.create('serviceaccounts', NAMESPACE, { metadata: { name: 'reader' } } as unknown as KubeObject);
  readerKubeconfig = await server.kubeconfigFor({ namespace: NAMESPACE, serviceAccount: 'reader' });
  reader = await endpointOf(readerKubeconfig);
});
afterAll(() => server.close());
afterEach(() => vi.useRealTimers());

describe('authentication', () => {
  it('names the ServiceAccount, its groups and its token in `kubectl auth whoami`', async () => {
    const whoami = await kubectl(['auth', 'whoami', '-o', 'json'], { kubeconfig: readerKubeconfig });
    expect(whoami.code, whoami.stderr).toBe(0);
    const { userInfo } = JSON.parse(whoami.stdout).status;
    expect(userInfo).toMatchObject({
      username: USER,
      uid: server.store.get('serviceaccounts', NAMESPACE, 'reader').metadata.uid,
      groups: ['system:serviceaccounts', `system:serviceaccounts:${NAMESPACE}`, 'system:authenticated'],
    });
    expect(userInfo.extra['authentication.kubernetes.io/credential-id'][0]).toMatch(/^JTI=[0-9a-f-]{36}$/);
  });

  it('answers 401 Unauthorized without a token, with a forged, expired or unknown one, and for a deleted account', async () => {
    const unauthorized = {
      kind: 'Status',
      apiVersion: 'v1',
      status: 'Failure',
      message: 'Unauthorized',
      reason: 'Unauthorized',
      code: 401,
    };
    const path = `/api/v1/namespaces/${NAMESPACE}/configmaps/settings`;
    // Allowed to read, so what is refused below is the credential.
    rbac('ClusterRole', undefined, 'configmap-reader', { rules: [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get'] }] });
    bind('ClusterRoleBinding', undefined, 'reader-reads-configmaps', 'ClusterRole', 'configmap-reader');
    expect((await call(reader, 'GET', path)).status).toBe(200);

    expect(await call(reader, 'GET', path, undefined, '')).toMatchObject({ status: 401, body: unauthorized });
    expect(await call({ ...reader, token: undefined }, 'GET', path)).toMatchObject({ status: 401, body: unauthorized });
    expect(await call(reader, 'GET', path, undefined, 'not-a-token')).toMatchObject({ status: 401, body: unauthorized });
    // The same claims with another subject: the signature no longer matches.
    const [header, payload, signature] = reader.token!.split('.');
    const claims = JSON.parse(Buffer.from(payload!, 'base64url').toString());
    const forged = Buffer.from(JSON.stringify({ ...claims, sub: 'system:serviceaccount:kube-system:admin' })).toString('base64url');
    expect(await call(reader, 'GET', path, undefined, `${header}.${forged}.${signature}`)).toMatchObject({ status: 401 });

    // Expiry is honoured: an hour and a second later, the token of an hour is refused.
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() + 3601_000);
    expect(await call(reader, 'GET', path)).toMatchObject({ status: 401, body: unauthorized });
    vi.useRealTimers();

    server.store.create('serviceaccounts', NAMESPACE, { metadata: { name: 'short-lived' } } as unknown as KubeObject);
    const shortLived = await endpointOf(await server.kubeconfigFor({ namespace: NAMESPACE, serviceAccount: 'short-lived' }));
    expect((await call(shortLived, 'GET', '/api')).status).toBe(200);
    server.store.delete('serviceaccounts', NAMESPACE, 'short-lived');
    expect(await call(shortLived, 'GET', '/api')).toMatchObject({ status: 401, body: unauthorized });
  });

  it('issues tokens through `kubectl create token` that the server then accepts as the account', async () => {
    const created = await kubectl(['create', 'token', 'reader', '-n', NAMESPACE, '--duration', '20m'], {
      kubeconfig: server.kubeconfigPath,
    });
    expect(created.code, created.stderr).toBe(0);
    const token = created.stdout.trim();
    const claims = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString());
    expect(claims.exp - claims.iat).toBe(1200);
    expect(claims.sub).toBe(USER);
    const review = await call(reader, 'POST', '/apis/authentication.k8s.io/v1/selfsubjectreviews', { kind: 'SelfSubjectReview' }, token);
    expect(review.body.status.userInfo.username).toBe(USER);
    // A token for another audience is not one for this API server.
    const other = await kubectl(['create', 'token', 'reader', '-n', NAMESPACE, '--audience', 'https://vault.example'], {
      kubeconfig: server.kubeconfigPath,
    });
    expect((await call(reader, 'GET', '/api', undefined, other.stdout.trim())).status).toBe(401);
  });

  it('keeps the administrator all-powerful: over plain HTTP as the kubeconfig it writes', async () => {
    const answer = await fetch(`${server.url}/api/v1/namespaces/${NAMESPACE}/secrets`, {
      headers: { authorization: 'Bearer acis-test-token' },
    });
    expect(answer.status).toBe(200);
    expect(await kubectl(['auth', 'can-i', 'delete', 'nodes'], { kubeconfig: server.kubeconfigPath })).toMatchObject({
      code: 0,
      stdout: 'yes\n',
    });
    expect((await fetch(`${server.url}/api/v1/nodes`, { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
  });
});

describe('authorization', () => {
  it('refuses what no rule allows with 403 Forbidden worded as kube-apiserver words it', async () => {
    const secrets = await call(reader, 'GET', `/api/v1/namespaces/${NAMESPACE}/secrets`);
    expect(secrets).toMatchObject({
      status: 403,
      body: {
        kind: 'Status',
        status: 'Failure',
        reason: 'Forbidden',
        code: 403,
        message: `secrets is forbidden: User "${USER}" cannot list resource "secrets" in API group "" in the namespace "${NAMESPACE}"`,
        details: { kind: 'secrets' },
      },
    });
    const lease = await call(reader, 'GET', `/apis/coordination.k8s.io/v1/namespaces/${NAMESPACE}/leases/leader`);
    expect(lease.body.message).toBe(
      `leases.coordination.k8s.io "leader" is forbidden: User "${USER}" cannot get resource "leases" in API group "coordination.k8s.io" in the namespace "${NAMESPACE}"`,
    );
    expect(lease.body.details).toEqual({ name: 'leader', group: 'coordination.k8s.io', kind: 'leases' });
    expect((await call(reader, 'GET', '/api/v1/nodes')).body.message).toBe(
      `nodes is forbidden: User "${USER}" cannot list resource "nodes" in API group "" at the cluster scope`,
    );
    // Paths outside the resources: discovery is every authenticated user's, the rest is not.
    expect((await call(reader, 'GET', '/version')).status).toBe(200);
    expect((await call(reader, 'GET', '/apis')).status).toBe(200);
    expect(await call(reader, 'GET', '/metrics')).toMatchObject({
      status: 403,
      body: { message: `forbidden: User "${USER}" cannot get path "/metrics"` },
    });
    // kubectl prints the server's message.
    const listed = await kubectl(['get', 'secrets'], { kubeconfig: readerKubeconfig });
    expect(listed.code).toBe(1);
    expect(listed.stderr).toContain(
      `Error from server (Forbidden): secrets is forbidden: User "${USER}" cannot list resource "secrets" in API group "" in the namespace "${NAMESPACE}"`,
    );
  });

  it('applies a RoleBinding in its namespace only, a ClusterRoleBinding everywhere, each verb on its own', async () => {
    rbac('Role', NAMESPACE, 'pod-lister', { rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['list', 'delete'] }] });
    bind('RoleBinding', NAMESPACE, 'reader-lists-pods', 'Role', 'pod-lister');
    const pods = (namespace: string) => `/api/v1/namespaces/${namespace}/pods`;
    expect((await call(reader, 'GET', pods(NAMESPACE))).status).toBe(200);
    expect((await call(reader, 'GET', pods(OTHER))).body.message).toContain(
      `cannot list resource "pods" in API group "" in the namespace "${OTHER}"`,
    );
    // list is not watch, delete is not deletecollection.
    expect((await call(reader, 'GET', `${pods(NAMESPACE)}?watch=1`)).body.message).toContain('cannot watch resource "pods"');
    expect((await call(reader, 'DELETE', pods(NAMESPACE))).body.message).toContain('cannot deletecollection resource "pods"');

    // A RoleBinding may name a ClusterRole: its rules then hold in the binding's namespace.
    rbac('ClusterRole', undefined, 'secret-reader', { rules: [{ apiGroups: [''], resources: ['secrets'], verbs: ['*'] }] });
    bind('RoleBinding', OTHER, 'reader-secrets-elsewhere', 'ClusterRole', 'secret-reader');
    expect((await call(reader, 'GET', `/api/v1/namespaces/${OTHER}/secrets`)).status).toBe(200);
    expect((await call(reader, 'GET', `/api/v1/namespaces/${NAMESPACE}/secrets`)).status).toBe(403);
    expect((await call(reader, 'GET', '/api/v1/secrets')).body.message).toContain(
      'cannot list resource "secrets" in API group "" at the cluster scope',
    );

    rbac('ClusterRole', undefined, 'namespace-viewer', { rules: [{ apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'list'] }] });
    expect((await call(reader, 'GET', '/api/v1/namespaces')).status).toBe(403);
    bind('ClusterRoleBinding', undefined, 'reader-views-namespaces', 'ClusterRole', 'namespace-viewer');
    expect((await call(reader, 'GET', '/api/v1/namespaces')).status).toBe(200);
    expect((await call(reader, 'GET', `/api/v1/namespaces/${OTHER}`)).status).toBe(200);
  });

  it('limits a rule with resourceNames to requests naming one of them: never create, list or watch without one', async () => {
    rbac('Role', OTHER, 'one-configmap', {
      rules: [
        { apiGroups: [''], resources: ['configmaps'], resourceNames: ['settings'], verbs: ['get', 'list', 'watch', 'create', 'update'] },
      ],
    });
    bind('RoleBinding', OTHER, 'reader-one-configmap', 'Role', 'one-configmap');
    const configmaps = `/api/v1/namespaces/${OTHER}/configmaps`;
    // configmap-reader (ClusterRoleBinding above) grants get on every config map; this Role adds nothing unnamed.
    expect((await call(reader, 'PUT', `${configmaps}/private`, { metadata: { name: 'private' } })).body.message).toBe(
      `configmaps "private" is forbidden: User "${USER}" cannot update resource "configmaps" in API group "" in the namespace "${OTHER}"`,
    );
    expect((await call(reader, 'GET', configmaps)).body.message).toContain('cannot list resource "configmaps"');
    expect((await call(reader, 'GET', `${configmaps}?fieldSelector=metadata.name%3Dsettings`)).status).toBe(200);
    expect((await call(reader, 'GET', `${configmaps}?fieldSelector=metadata.name%3Dprivate`)).status).toBe(403);
    expect(await call(reader, 'POST', configmaps, { metadata: { name: 'settings-copy' } })).toMatchObject({
      status: 403,
      body: {
        message: `configmaps is forbidden: User "${USER}" cannot create resource "configmaps" in API group "" in the namespace "${OTHER}"`,
      },
    });
    const settings = server.store.get('configmaps', OTHER, 'settings');
    expect((await call(reader, 'PUT', `${configmaps}/settings`, { ...settings, data: { a: '2' } })).status).toBe(200);
  });

  it('tells subresources apart: pods/log, pods/status and */status', async () => {
    server.store.create('pods', NAMESPACE, {
      metadata: { name: 'web' },
      spec: { containers: [{ name: 'main', image: 'nginx' }] },
    } as unknown as KubeObject);
    rbac('Role', NAMESPACE, 'status-writer', {
      rules: [
        { apiGroups: [''], resources: ['pods/log'], verbs: ['get'] },
        { apiGroups: ['*'], resources: ['*/status'], verbs: ['get'] },
      ],
    });
    bind('RoleBinding', NAMESPACE, 'reader-status', 'Role', 'status-writer');
    const pod = `/api/v1/namespaces/${NAMESPACE}/pods/web`;
    expect((await call(reader, 'GET', pod)).body.message).toBe(
      `pods "web" is forbidden: User "${USER}" cannot get resource "pods" in API group "" in the namespace "${NAMESPACE}"`,
    );
    expect((await call(reader, 'GET', `${pod}/status`)).status).toBe(200);
    // Past authorization: a pod on no node has no log yet (400 BadRequest, as on a cluster).
    expect((await call(reader, 'GET', `${pod}/log`)).body).toMatchObject({ code: 400, reason: 'BadRequest' });
    expect((await call(reader, 'PATCH', `${pod}/status`, {})).body.message).toBe(
      `pods "web" is forbidden: User "${USER}" cannot patch resource "pods/status" in API group "" in the namespace "${NAMESPACE}"`,
    );
    expect((await call(reader, 'POST', `${pod}/eviction`, {})).body.message).toContain('cannot create resource "pods/eviction"');
  });

  it('says which bound role is missing, as the RBAC authorizer does', async () => {
    bind('RoleBinding', NAMESPACE, 'reader-ghost', 'Role', 'ghost');
    expect((await call(reader, 'GET', `/apis/batch/v1/namespaces/${NAMESPACE}/jobs`)).body.message).toBe(
      `jobs.batch is forbidden: User "${USER}" cannot list resource "jobs" in API group "batch" in the namespace "${NAMESPACE}": RBAC: role.rbac.authorization.k8s.io "ghost" not found`,
    );
    server.store.delete('rolebindings.rbac.authorization.k8s.io', NAMESPACE, 'reader-ghost');
  });

  it('answers kubectl auth can-i (and --list) by the same rules, for the caller', async () => {
    const canI = (...args: string[]) => kubectl(['auth', 'can-i', ...args], { kubeconfig: readerKubeconfig });
    expect(await canI('list', 'pods')).toMatchObject({ code: 0, stdout: 'yes\n' });
    expect(await canI('list', 'pods', '-n', OTHER)).toMatchObject({ code: 1, stdout: 'no\n' });
    expect(await canI('create', 'deployments.apps')).toMatchObject({ code: 1, stdout: 'no\n' });
    expect(await canI('update', 'configmaps/settings', '-n', OTHER)).toMatchObject({ code: 0, stdout: 'yes\n' });
    expect(await canI('update', 'configmaps/private', '-n', OTHER)).toMatchObject({ code: 1, stdout: 'no\n' });
    expect(await canI('get', 'pods', '--subresource', 'log')).toMatchObject({ code: 0, stdout: 'yes\n' });
    expect(await canI('get', '/version')).toMatchObject({ code: 0, stdout: 'yes\n' });
    expect(await canI('get', '/metrics')).toMatchObject({ code: 1, stdout: 'no\n' });
    const list = await canI('--list');
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(/^pods\s+\[\]\s+\[\]\s+\[list delete\]$/m);
    expect(list.stdout).toMatch(/^selfsubjectaccessreviews\.authorization\.k8s\.io\s+\[\]\s+\[\]\s+\[create\]$/m);
    expect(list.stdout).not.toMatch(/^\*\.\*\s+\[\]\s+\[\]\s+\[\*\]$/m);
    // Someone else's view differs: the administrator may do anything.
    expect(await kubectl(['auth', 'can-i', 'list', 'pods', '-n', OTHER], { kubeconfig: server.kubeconfigPath })).toMatchObject({
      stdout: 'yes\n',
    });
  });
});
