/**
 * RBAC as a cluster would apply it to one process. The Kubernetes API test server authorizes nothing
 * and cannot tell its clients apart, so each process gets a kubeconfig of its own pointing at a
 * recording pass-through; afterwards every resource request it made is checked against the rules
 * of the Roles bound to its service account, the way the RBAC authorizer decides.
 */
import { readFile, writeFile } from 'node:fs/promises';
import { createServer, request as forward, type Server } from 'node:http';
import type { KubeTestServer } from '../../hack/k8s/server.js';
import type { KubeObject } from '../../hack/k8s/store.js';

export interface ResourceRequest {
  verb: string;
  group: string;
  /** `resource` or `resource/subresource`, as RBAC rules name them. */
  resource: string;
  name?: string;
  namespace?: string;
}

interface PolicyRule {
  apiGroups?: string[];
  resources?: string[];
  verbs: string[];
  resourceNames?: string[];
}

export interface RecordingKubeconfig {
  kubeconfigPath: string;
  /** The resource requests made through it so far (discovery and other non-resource URLs left out). */
  requests: ResourceRequest[];
  close(): Promise<void>;
}

/** A pass-through to `server` that records what goes through it, and a kubeconfig at `kubeconfigPath` naming it. */
export async function recordingKubeconfig(server: KubeTestServer, kubeconfigPath: string): Promise<RecordingKubeconfig> {
  const upstream = new URL(server.url);
  const requests: ResourceRequest[] = [];
  const recorder: Server = createServer((incoming, outgoing) => {
    const parsed = resourceRequest(incoming.method ?? 'GET', new URL(incoming.url ?? '/', upstream));
    if (parsed) requests.push(parsed);
    const onward = forward(
      { host: upstream.hostname, port: upstream.port, method: incoming.method, path: incoming.url, headers: incoming.headers },
      (answer) => {
        outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(outgoing);
      },
    );
    onward.on('error', () => outgoing.destroy());
    incoming.pipe(onward);
  });
  await new Promise<void>((resolve) => recorder.listen(0, '127.0.0.1', resolve));
  const { port } = recorder.address() as { port: number };
  const original = await readFile(server.kubeconfigPath, 'utf8');
  await writeFile(kubeconfigPath, original.replaceAll(server.url.replace(/\/$/, ''), `http://127.0.0.1:${port}`));
  return {
    kubeconfigPath,
    requests,
    close: () =>
      new Promise((resolve) => {
        recorder.closeAllConnections();
        recorder.close(() => resolve());
      }),
  };
}

/** The RBAC attributes of a request path, or undefined for discovery, /version, /openapi and such. */
function resourceRequest(method: string, url: URL): ResourceRequest | undefined {
  const segments = url.pathname.split('/').filter(Boolean);
  let group: string;
  let rest: string[];
  if (segments[0] === 'api' && segments.length >= 3) [group, rest] = ['', segments.slice(2)];
  else if (segments[0] === 'apis' && segments.length >= 4) [group, rest] = [segments[1]!, segments.slice(3)];
  else return undefined;
  let namespace: string | undefined;
  if (rest[0] === 'namespaces' && rest.length >= 3) [namespace, rest] = [rest[1], rest.slice(2)];
  const [resource, named, subresource] = rest as [string, string | undefined, string | undefined];
  // A list or watch of one object by field selector is authorized against its name, as on a cluster.
  const name = named ?? /(?:^|,)metadata\.name=([^,]+)/.exec(url.searchParams.get('fieldSelector') ?? '')?.[1];
  const watching = ['1', 'true'].includes(url.searchParams.get('watch') ?? '');
  const verb =
    method === 'GET'
      ? watching
        ? 'watch'
        : named
          ? 'get'
          : 'list'
      : (({ POST: 'create', PUT: 'update', PATCH: 'patch', DELETE: named ? 'delete' : 'deletecollection' } as Record<string, string>)[
          method
        ] ?? method.toLowerCase());
  return { verb, group, resource: subresource ? `${resource}/${subresource}` : resource, name, namespace };
}

/** The rules of every Role and ClusterRole bound (in `namespace`) to the service account `account`. */
export function rulesOf(server: KubeTestServer, namespace: string, account: string): PolicyRule[] {
  type Binding = KubeObject & {
    roleRef: { kind: string; name: string };
    subjects?: Array<{ kind: string; name: string; namespace?: string }>;
  };
  const bound = (binding: Binding) =>
    binding.subjects?.some((subject) => subject.kind === 'ServiceAccount' && subject.name === account && subject.namespace === namespace);
  const bindings = [
    ...(server.store.list('rolebindings.rbac.authorization.k8s.io', namespace).items as Binding[]),
    ...(server.store.list('clusterrolebindings.rbac.authorization.k8s.io').items as Binding[]),
  ].filter(bound);
  return bindings.flatMap((binding) => {
    const role = (
      binding.roleRef.kind === 'Role'
        ? server.store.find('roles.rbac.authorization.k8s.io', namespace, binding.roleRef.name)
        : server.store.find('clusterroles.rbac.authorization.k8s.io', undefined, binding.roleRef.name)
    ) as (KubeObject & { rules?: PolicyRule[] }) | undefined;
    return role?.rules ?? [];
  });
}

/** Whether some rule allows the request (a rule with resourceNames never allows an unnamed one, such as create). */
export function allowedBy(rules: PolicyRule[], request: ResourceRequest): boolean {
  const has = (list: string[] | undefined, value: string) => Boolean(list?.includes('*') || list?.includes(value));
  return rules.some(
    (rule) =>
      has(rule.verbs, request.verb) &&
      has(rule.apiGroups, request.group) &&
      has(rule.resources, request.resource) &&
      (!rule.resourceNames?.length || (request.name !== undefined && rule.resourceNames.includes(request.name))),
  );
}

/** The distinct requests no rule allows, as `verb group/resource [name]` lines. */
export function refused(rules: PolicyRule[], requests: ResourceRequest[]): string[] {
  const lines = requests
    .filter((request) => !allowedBy(rules, request))
    .map((r) => `${r.verb} ${r.group || 'core'}/${r.resource}${r.name ? ` ${r.name}` : ''}`);
  return [...new Set(lines)];
}
