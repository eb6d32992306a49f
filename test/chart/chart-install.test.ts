/**
 * `helm install` of charts/acis into the Kubernetes API test server (its discovery carries helm), then
 * `acis controller` as its own process with the environment the chart's Deployment gives its pod
 * (the test server runs no Deployment controller): the chart's CRDs are served, its warm pool fills
 * with runner pods (in the sandbox namespace the chart makes) through the simulated kubelet, the
 * chart's Lease (in the release namespace) elects the controller, and the
 * sandbox NetworkPolicy selects the pods the controller really makes. Then the egress proxy's pod, made
 * from its Deployment's template as a ReplicaSet would, runs the compiled proxy (built as the image's
 * Dockerfile builds it) with the chart's environment, volumes and the CA Secret the chart generated
 * (kept across an upgrade, replaced when deleted before one), and becomes Ready.
 */
import { execFile } from 'node:child_process';
import { once } from 'node:events';
import { connect } from 'node:net';
import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanEnv, killLeftovers, ROOT, runAcis, stopAcis, type AcisProcess } from '../helpers/acis-process.js';
import { helm, kubectl } from '../helpers/kube-tools.js';
import { startKubelet, type Kubelet } from '../../hack/k8s/kubelet.js';
import { startKubeTestServer, type KubeTestServer } from '../../hack/k8s/server.js';
import type { KubeObject } from '../../hack/k8s/store.js';
import { CHART, NAMESPACE, SANDBOX_NAMESPACE } from './chart-render.js';
import { containerEnv, podTemplate } from './deployment-pod.js';
import { selects, type LabelSelector } from './network-policy-eval.js';

const run = promisify(execFile);
const RUNNER_IMAGE = 'acis-runner:chart-test';
const ACIS_IMAGE = 'acis:chart-test';
const RUNNER_FIXTURE = path.join(ROOT, 'test', 'controller', 'fixtures', 'runner.cjs');
// The chart's default ports (values.yaml): each pod listens on its own IP, the proxy's 0.0.0.0
// included (kubelet-pod-network.ts), so other processes of the machine cannot hold them.
const PROXY_PORT = 3128;
const PROXY_METRICS_PORT = 9091;
const POD_NAME = 'acis-controller-7d9f8-x2x4q';

describe('charts/acis: helm install against the Kubernetes API test server', () => {
  let server: KubeTestServer;
  let kubelet: Kubelet;
  let controller: AcisProcess | undefined;
  let build: string;

  beforeAll(async () => {
    // The acis image's /app: dist/ compiled as its Dockerfile compiles it, node_modules, package.json.
    build = await mkdtemp(path.join(tmpdir(), 'acis-chart-image-'));
    await run(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.build.json', '--outDir', build], {
      cwd: ROOT,
    });
    const app = [
      { source: build, target: '/app/dist' },
      { source: await realpath(path.join(ROOT, 'node_modules')), target: '/app/node_modules' },
      { source: path.join(ROOT, 'package.json'), target: '/app/package.json' },
    ];
    // No CRDs loaded up front: the chart's crds/ must install them.
    server = await startKubeTestServer({ namespaces: [NAMESPACE], bookmarkIntervalMs: 200 });
    // As docs/install.md has the namespace labelled: the runner and proxy pods must pass Pod Security's restricted profile.
    server.store.patch(
      'namespaces',
      undefined,
      NAMESPACE,
      'application/merge-patch+json',
      JSON.stringify({ metadata: { labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } } }),
    );
    kubelet = await startKubelet({
      server,
      images: {
        [RUNNER_IMAGE]: { command: process.execPath, args: [RUNNER_FIXTURE], binds: [path.dirname(RUNNER_FIXTURE)] },
        [ACIS_IMAGE]: { command: process.execPath, args: ['/app/dist/cli/acis.js', 'serve'], binds: app },
      },
      probePeriodMs: 25,
      allocatable: { cpu: '64', memory: '256Gi', pods: 100 },
    });
  }, 180_000);

  const egressCa = () => egressCaOf(server);

  afterAll(async () => {
    if (controller) await stopAcis(controller);
    killLeftovers();
    await kubelet?.close();
    await server?.close();
    await rm(build, { recursive: true, force: true });
  }, 180_000);

  it('installs: CRDs served, every object stored, the warm pool filled by the controller the chart configures', async () => {
    const [repository, tag] = RUNNER_IMAGE.split(':');
    const installed = await helm(
      [
        'install',
        'acis',
        CHART,
        '--namespace',
        NAMESPACE,
        '--set',
        `runnerImage.repository=${repository}`,
        '--set',
        `runnerImage.tag=${tag}`,
        '--set',
        'sandbox.resources.requests.cpu=10m',
        '--set',
        'sandbox.resources.requests.memory=16Mi',
        '--set',
        'sandbox.resources.limits.cpu=100m',
        '--set',
        'sandbox.resources.limits.memory=64Mi',
        '--set',
        'warmPool.replicas=2',
        '--set',
        'image.repository=acis',
        '--set',
        'image.tag=chart-test',
        '--set',
        'database.url=postgres://acis@db.example:5432/acis',
      ],
      { kubeconfig: server.kubeconfigPath, timeoutMs: 90_000 },
    );
    expect(installed.code, installed.stderr).toBe(0);

    for (const crd of ['sandboxes.acis.dev', 'sandboxwarmpools.acis.dev', 'repositorysyncs.acis.dev']) {
      expect(server.store.find('customresourcedefinitions.apiextensions.k8s.io', undefined, crd), crd).toBeDefined();
    }
    for (const [resource, name, namespace] of [
      ['deployments.apps', 'acis-api', NAMESPACE],
      ['deployments.apps', 'acis-controller', NAMESPACE],
      ['deployments.apps', 'acis-egress-proxy', NAMESPACE],
      ['networkpolicies.networking.k8s.io', 'acis-sandbox', SANDBOX_NAMESPACE],
      ['networkpolicies.networking.k8s.io', 'acis-egress-proxy', NAMESPACE],
      ['roles.rbac.authorization.k8s.io', 'acis-api', SANDBOX_NAMESPACE],
      ['roles.rbac.authorization.k8s.io', 'acis-controller', SANDBOX_NAMESPACE],
      ['roles.rbac.authorization.k8s.io', 'acis-controller-lease', NAMESPACE],
      ['poddisruptionbudgets.policy', 'acis-api', NAMESPACE],
      ['secrets', 'acis-secrets', NAMESPACE],
      ['secrets', 'acis-database', NAMESPACE],
      ['secrets', 'acis-egress-ca-key', NAMESPACE],
      ['configmaps', 'acis-egress-ca', SANDBOX_NAMESPACE],
      ['sandboxwarmpools', 'vendor-agent-sdk', SANDBOX_NAMESPACE],
    ] as const) {
      expect(server.store.find(resource, namespace, name), `${resource}/${name}`).toBeDefined();
    }

    // The controller's pod, as the kubelet would start it from the Deployment: its env resolved, and
    // the identity of its ServiceAccount, held to the chart's Role by the server's RBAC.
    const template = podTemplate(server, NAMESPACE, 'acis-controller');
    const container = template.spec.containers[0]!;
    const env = containerEnv(server, NAMESPACE, POD_NAME, container);
    const controllerKubeconfig = await server.kubeconfigFor({ namespace: NAMESPACE, serviceAccount: template.spec.serviceAccountName });
    expect(env.ACIS_RUNNER_IMAGE).toBe(RUNNER_IMAGE);
    // Runner pods trust the CA the chart generated, with no CA supplied by hand.
    expect(env.ACIS_EGRESS_CA_CONFIGMAP).toBe('acis-egress-ca');
    expect(env.ACIS_EGRESS_PROXY_HOST).toBe(`acis-egress-proxy.${NAMESPACE}.svc`);
    const proxyClusterIP = (server.store.get('services', NAMESPACE, 'acis-egress-proxy').spec as { clusterIP: string }).clusterIP;
    controller = runAcis(container.args, {
      ...cleanEnv(env),
      KUBECONFIG: controllerKubeconfig,
      // The controller resolves the proxy's Service name at start, as the cluster DNS would answer it.
      ACIS_EGRESS_PROXY_HOST: proxyClusterIP,
      // Not the pod's fixed 9090: test files share this machine's loopback.
      ACIS_CONTROLLER_METRICS_HOST: '127.0.0.1',
      ACIS_CONTROLLER_METRICS_PORT: '0',
      LOG_LEVEL: env.LOG_LEVEL ?? 'info',
    });

    const lease = await server.store.waitFor(
      'leases.coordination.k8s.io',
      NAMESPACE,
      'acis-controller',
      (object) => Boolean(object),
      30_000,
    );
    expect((lease as KubeObject & { spec: { holderIdentity: string } }).spec.holderIdentity).toBe(POD_NAME);

    const pool = await server.store.waitFor(
      'sandboxwarmpools',
      SANDBOX_NAMESPACE,
      'vendor-agent-sdk',
      (object) => (object as (KubeObject & { status?: { readyReplicas?: number } }) | undefined)?.status?.readyReplicas === 2,
      60_000,
    );
    expect(pool, controller.output()).toBeDefined();

    const pods = server.store.list('pods', SANDBOX_NAMESPACE, { labelSelector: 'acis.dev/pool=vendor-agent-sdk' }).items as Array<
      KubeObject & {
        spec: {
          containers: Array<{ image: string; env: Array<{ name: string; value?: string }> }>;
          volumes?: Array<{ configMap?: { name: string } }>;
        };
      }
    >;
    expect(pods).toHaveLength(2);
    const policy = server.store.get('networkpolicies.networking.k8s.io', SANDBOX_NAMESPACE, 'acis-sandbox') as KubeObject & {
      spec: { podSelector: LabelSelector };
    };
    for (const pod of pods) {
      expect(selects(policy.spec.podSelector, pod.metadata.labels ?? {}), pod.metadata.name).toBe(true);
      const podEnv = new Map(pod.spec.containers[0]!.env.map((entry) => [entry.name, entry.value]));
      // Each runner pod's own egress credential (its name and the egress token of its token Secret), expanded by the
      // kubelet, toward the proxy's ClusterIP: runner pods have no DNS.
      expect(podEnv.get('HTTPS_PROXY')).toBe(`http://$(POD_NAME):$(ACIS_EGRESS_TOKEN)@${proxyClusterIP}:${PROXY_PORT}`);
      expect(pod.spec.containers[0]!.image).toBe(RUNNER_IMAGE);
      expect(pod.spec.volumes).toContainEqual(expect.objectContaining({ configMap: expect.objectContaining({ name: 'acis-egress-ca' }) }));
    }

    const listed = await kubectl(['get', 'sbxpool', '-n', SANDBOX_NAMESPACE], { kubeconfig: server.kubeconfigPath });
    expect(listed.stdout).toContain('vendor-agent-sdk');
  }, 120_000);

  it("refuses the controller what its Role does not grant: without `create` on pods a Sandbox's pod is Forbidden, and starts once granted", async () => {
    // Everything so far was done as the controller's ServiceAccount, and none of it was refused.
    const controllerUser = `system:serviceaccount:${NAMESPACE}:acis-controller`;
    expect(server.countRequests({ verb: 'create', resource: 'pods' })).toBeGreaterThan(0);
    expect(server.requests.filter((request) => request.resource === 'pods' && request.verb === 'create').map((r) => r.user)).toContain(
      controllerUser,
    );
    expect(server.requests.filter((request) => request.user === controllerUser && request.status === 403)).toEqual([]);

    type Role = KubeObject & { rules: Array<{ apiGroups: string[]; resources: string[]; verbs: string[] }> };
    const role = server.store.get('roles.rbac.authorization.k8s.io', SANDBOX_NAMESPACE, 'acis-controller') as Role;
    const withoutPodCreate = role.rules.map((rule) =>
      rule.resources.includes('pods') ? { ...rule, verbs: rule.verbs.filter((verb) => verb !== 'create') } : rule,
    );
    server.store.update('roles.rbac.authorization.k8s.io', SANDBOX_NAMESPACE, 'acis-controller', { ...role, rules: withoutPodCreate });
    // Resources of its own: no pool pod to adopt, so the controller must create one.
    server.store.create('sandboxes', SANDBOX_NAMESPACE, {
      apiVersion: 'acis.dev/v1alpha1',
      kind: 'Sandbox',
      metadata: { name: 'forbidden-pod', namespace: SANDBOX_NAMESPACE },
      spec: {
        conversationId: 'con_RBACREFUSED0001',
        tenantId: 'tnt_RBACREFUSED01',
        agentType: 'vendor-agent-sdk',
        mode: 'warm',
        resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { cpu: '100m', memory: '64Mi' } },
      },
    } as unknown as KubeObject);
    type SandboxObject = KubeObject & { status?: { phase?: string; conditions?: Array<{ message?: string }> } };
    const forbidden = `pods is forbidden: User "${controllerUser}" cannot create resource "pods" in API group "" in the namespace "${SANDBOX_NAMESPACE}"`;
    const refused = await server.store.waitFor(
      'sandboxes',
      SANDBOX_NAMESPACE,
      'forbidden-pod',
      (object) => Boolean((object as SandboxObject | undefined)?.status?.conditions?.some((c) => c.message?.includes(forbidden))),
      30_000,
    );
    expect(refused, controller!.output()).toBeDefined();
    // Its cold pod is named after it (and its uid): none by its label.
    const itsPods = () => server.store.list('pods', SANDBOX_NAMESPACE, { labelSelector: 'acis.dev/sandbox=forbidden-pod' }).items;
    expect(itsPods()).toEqual([]);

    server.store.update('roles.rbac.authorization.k8s.io', SANDBOX_NAMESPACE, 'acis-controller', {
      ...(server.store.get('roles.rbac.authorization.k8s.io', SANDBOX_NAMESPACE, 'acis-controller') as Role),
      rules: role.rules,
    });
    await server.store.waitUntil(() => itsPods().length === 1, 60_000, 'its pod created');
    server.store.delete('sandboxes', SANDBOX_NAMESPACE, 'forbidden-pod');
    await server.store.waitUntil(() => !server.store.find('sandboxes', SANDBOX_NAMESPACE, 'forbidden-pod'), 30_000, 'the Sandbox gone');
  }, 120_000);

  it('upgrades in place and keeps the generated master key, egress resolve token and egress CA', async () => {
    const before = server.store.get('secrets', NAMESPACE, 'acis-secrets') as KubeObject & { data: Record<string, string> };
    const resolveBefore = server.store.get('secrets', NAMESPACE, 'acis-egress-resolve') as KubeObject & { data: Record<string, string> };
    const caBefore = egressCa();
    expect(caBefore.configMapCert).toBe(caBefore.secretCert);
    const upgraded = await helm(['upgrade', 'acis', CHART, '--namespace', NAMESPACE, '--reuse-values', '--set', 'warmPool.replicas=1'], {
      kubeconfig: server.kubeconfigPath,
      timeoutMs: 90_000,
    });
    expect(upgraded.code, upgraded.stderr).toBe(0);
    const after = server.store.get('secrets', NAMESPACE, 'acis-secrets') as KubeObject & { data: Record<string, string> };
    expect(after.data.ACIS_MASTER_KEY).toBe(before.data.ACIS_MASTER_KEY);
    expect(after.data.ACIS_ADMIN_TOKEN).toBe(before.data.ACIS_ADMIN_TOKEN);
    // The API server and the proxy keep agreeing on it across the roll.
    const resolveAfter = server.store.get('secrets', NAMESPACE, 'acis-egress-resolve') as KubeObject & { data: Record<string, string> };
    expect(resolveAfter.data.token).toBe(resolveBefore.data.token);
    // Runner pods keep trusting what the proxies present.
    expect(egressCa()).toEqual(caBefore);
    await server.store.waitUntil(
      () => server.store.list('pods', SANDBOX_NAMESPACE, { labelSelector: 'acis.dev/pool=vendor-agent-sdk' }).items.length === 1,
      30_000,
      'the pool shrunk to one pod',
    );
  }, 120_000);
  it('rotates the egress CA when its Secret is deleted before an upgrade: a new one in the Secret and the ConfigMap, and the proxies roll', async () => {
    const before = egressCa();
    expect(await kubectl(['delete', 'secret', 'acis-egress-ca-key', '-n', NAMESPACE], { kubeconfig: server.kubeconfigPath })).toMatchObject(
      { code: 0 },
    );
    const upgraded = await helm(['upgrade', 'acis', CHART, '--namespace', NAMESPACE, '--reuse-values'], {
      kubeconfig: server.kubeconfigPath,
      timeoutMs: 90_000,
    });
    expect(upgraded.code, upgraded.stderr).toBe(0);
    const after = egressCa();
    expect(after.secretCert).not.toBe(before.secretCert);
    expect(after.configMapCert).toBe(after.secretCert);
    expect(after.proxyChecksum).not.toBe(before.proxyChecksum);
  }, 120_000);

  it("runs the egress proxy from its Deployment's pod template: the chart's env, volumes and CA, Ready", async () => {
    const deployment = server.store.get('deployments.apps', NAMESPACE, 'acis-egress-proxy') as KubeObject & {
      spec: { template: { metadata: { labels: Record<string, string> }; spec: Record<string, unknown> } };
    };
    const template = deployment.spec.template;
    server.store.create('pods', NAMESPACE, {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'acis-egress-proxy-5c7d9-qk2vd', namespace: NAMESPACE, labels: template.metadata.labels },
      spec: template.spec,
    } as unknown as KubeObject);
    const ready = await server.store.waitFor(
      'pods',
      NAMESPACE,
      'acis-egress-proxy-5c7d9-qk2vd',
      (pod) =>
        Boolean(
          (
            pod as (KubeObject & { status?: { conditions?: Array<{ type: string; status: string }> } }) | undefined
          )?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
        ),
      60_000,
    );
    // Ready means it loaded the CA the chart generated from the mounted Secret: the mount is
    // read-only and the root filesystem too, so it could not have generated one.
    expect(ready).toBeDefined();
    const podIp = (ready as KubeObject & { status: { podIP: string } }).status.podIP;
    const metrics = await fetch(`http://${podIp}:${PROXY_METRICS_PORT}/metrics`);
    expect(metrics.status).toBe(200);
    expect(await metrics.text()).toContain('acis_egress_');
    // A request without run credentials is refused before any run is looked up.
    expect(await proxyStatusLine(podIp, PROXY_PORT, 'GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n')).toMatch(
      /^HTTP\/1\.1 407 /,
    );
    const logged = await logLine(kubelet, 'acis-egress-proxy-5c7d9-qk2vd', '/var/lib/acis-egress/egress-ca/ca.crt');
    expect(logged, kubelet.logs(NAMESPACE, 'acis-egress-proxy-5c7d9-qk2vd')).toBe(true);
  }, 120_000);
});

/** The egress CA's certificate as the chart's Secret and ConfigMap hold it, and the proxy pods' checksum of it. */
function egressCaOf(server: KubeTestServer): { secretCert: string; configMapCert: string; proxyChecksum: string } {
  const secret = server.store.get('secrets', NAMESPACE, 'acis-egress-ca-key') as KubeObject & { data: Record<string, string> };
  const configMap = server.store.get('configmaps', SANDBOX_NAMESPACE, 'acis-egress-ca') as KubeObject & { data: Record<string, string> };
  const deployment = server.store.get('deployments.apps', NAMESPACE, 'acis-egress-proxy') as KubeObject & {
    spec: { template: { metadata: { annotations: Record<string, string> } } };
  };
  expect(Buffer.from(secret.data['ca.key']!, 'base64').toString()).toContain('PRIVATE KEY');
  return {
    secretCert: Buffer.from(secret.data['ca.crt']!, 'base64').toString(),
    configMapCert: configMap.data['ca.crt']!,
    proxyChecksum: deployment.spec.template.metadata.annotations['checksum/egress-ca']!,
  };
}

/** The status line a forward proxy answers `request` with (read to the end of its answer). */
async function proxyStatusLine(host: string, port: number, request: string): Promise<string> {
  const socket = connect(port, host);
  socket.end(request);
  let answer = '';
  socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
  await once(socket, 'close');
  return answer.split('\r\n')[0]!;
}

/**
 * Whether a pod's log gets `text` within a few seconds. The kubelet's logs have no change event, and
 * a line is written a moment after the port it follows opens: look again every 50 ms.
 */
async function logLine(kubelet: Kubelet, pod: string, text: string): Promise<boolean> {
  for (const deadline = Date.now() + 10_000; Date.now() < deadline; await new Promise((resolve) => setTimeout(resolve, 50))) {
    if (kubelet.logs(NAMESPACE, pod).includes(text)) return true;
  }
  return false;
}
