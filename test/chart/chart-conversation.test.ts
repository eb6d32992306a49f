/**
 * One conversation through the chart's installed objects: `helm install` with the egress proxy inside
 * the API server (ci/egress-in-api-server-values.yaml) into the Kubernetes API test server, then
 * `acis serve` and `acis controller` as their own processes with exactly the environment their
 * rendered Deployments give their pods (Secrets and fieldRefs resolved as the kubelet would). Only
 * what cannot exist here is replaced: the kubeconfig for the in-cluster service account, the data
 * emptyDir (with the CA Secret's items where the chart mounts them), and the proxy Service's address,
 * since the test server routes no Services. The warm-pool runner pod runs the real runner in the
 * simulated kubelet; the agent talks to the model stub through the API server's proxy.
 */
import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ModelStub, startModelStub } from '../../hack/model-stub/model-stub.js';
import { sandboxName } from '../../api-server/sandboxes/kubernetes-decisions.js';
import { cleanEnv, freePort, killLeftovers, ROOT, runAcis, stopAcis, type AcisProcess } from '../helpers/acis-process.js';
import { helm } from '../helpers/kube-tools.js';
import { deltaText, isTerminal, parseNdjson, withoutPings } from '../helpers/ndjson.js';
import { createTestDatabase, dropTestDatabase } from '../helpers/test-server.js';
import { startKubelet, type Kubelet } from '../k8s/kubelet.js';
import { runnerImage } from '../k8s/runner-image.js';
import { startKubeTestServer, type KubeTestServer } from '../k8s/server.js';
import type { KubeObject } from '../k8s/store.js';
import { CHART, EGRESS_IN_API_VALUES, NAMESPACE } from './chart-render.js';
import { containerEnv, createDeploymentCaFiles, podTemplate, type RenderedPodTemplate } from './deployment-pod.js';
import { recordingKubeconfig, refused, rulesOf, type RecordingKubeconfig } from './rbac-recorder.js';
import { connectionAllowed, selects, type NetworkPolicy, type PodEndpoint } from './network-policy-eval.js';

const RUNNER_IMAGE = 'acis-runner:chart-conversation';
const API_POD = 'acis-api-6b8c5-r7n2k';
const CONTROLLER_POD = 'acis-controller-7d9f8-x2x4q';
/** The platform's model key: the stub refuses any other, and no pod or stream line may hold it. */
const PLATFORM_KEY = `sk-platform-${randomBytes(12).toString('hex')}`;
// Pod IPs are unique within one kubelet only and test files run side by side: a port of our own.
const RUNNER_PORT = 20_000 + Math.floor(Math.random() * 40_000);

interface PodObject extends KubeObject {
  spec: { containers: Array<{ image: string; env?: Array<{ name: string; value?: string }> }>; volumes?: Array<{ configMap?: { name: string } }> };
  status?: { podIP?: string; conditions?: Array<{ type: string; status: string }> };
}

interface SandboxStatus {
  launch?: string;
  podName?: string;
}

let stub: ModelStub;
let server: KubeTestServer;
let kubelet: Kubelet;
let databaseUrl: string;
/** The test's files: the API pod's data emptyDir, each process's kubeconfig. */
let scratch: string;
let dataDir: string;
let api: AcisProcess | undefined;
let controller: AcisProcess | undefined;
let apiUrl: string;
let apiTemplate: RenderedPodTemplate;
let controllerTemplate: RenderedPodTemplate;
/** Each process's requests to the Kubernetes API, to hold against its service account's Role. */
let apiAccess: RecordingKubeconfig;
let controllerAccess: RecordingKubeconfig;

const ready = (pod: PodObject) => Boolean(pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
const poolPods = () => server.store.list('pods', NAMESPACE, { labelSelector: 'acis.dev/pool=vendor-agent-sdk' }).items as PodObject[];

beforeAll(async () => {
  stub = await startModelStub({ apiKey: PLATFORM_KEY });
  databaseUrl = await createTestDatabase();
  scratch = await mkdtemp(path.join(tmpdir(), 'acis-chart-conversation-'));
  dataDir = path.join(scratch, 'api-data');
  await mkdir(dataDir);
  server = await startKubeTestServer({ namespaces: [NAMESPACE], bookmarkIntervalMs: 200 });
  apiAccess = await recordingKubeconfig(server, path.join(scratch, 'api.kubeconfig'));
  controllerAccess = await recordingKubeconfig(server, path.join(scratch, 'controller.kubeconfig'));
  kubelet = await startKubelet({
    server,
    images: { [RUNNER_IMAGE]: runnerImage(ROOT) },
    probePeriodMs: 25,
    allocatable: { cpu: '64', memory: '256Gi', pods: 100 },
  });
}, 120_000);

afterAll(async () => {
  if (controller) await stopAcis(controller);
  if (api) await stopAcis(api);
  killLeftovers();
  await kubelet?.close();
  await apiAccess?.close();
  await controllerAccess?.close();
  await server?.close();
  await stub?.stop();
  if (databaseUrl) await dropTestDatabase(databaseUrl);
  if (scratch) await rm(scratch, { recursive: true, force: true });
}, 120_000);

describe('charts/acis installed with the egress proxy in the API server', () => {
  it('installs, and the API server and controller start from their Deployments\' environment', async () => {
    // The values file names an existing CA Secret, as three API replicas need one.
    server.store.create('secrets', NAMESPACE, { apiVersion: 'v1', kind: 'Secret', metadata: { name: 'acis-egress-ca', namespace: NAMESPACE }, data: await createDeploymentCaFiles() } as unknown as KubeObject);
    const [apiPort, proxyPort] = [await freePort(), await freePort()];
    const [repository, tag] = RUNNER_IMAGE.split(':');
    const installed = await helm(
      [
        'install', 'acis', CHART, '--namespace', NAMESPACE, '--values', EGRESS_IN_API_VALUES,
        '--set', `database.url=${databaseUrl}`,
        '--set', `modelBaseUrl=${stub.url}`,
        '--set', `secrets.anthropicApiKey=${PLATFORM_KEY}`,
        '--set', `runnerImage.repository=${repository}`, '--set', `runnerImage.tag=${tag}`,
        '--set', `sandbox.port=${RUNNER_PORT}`,
        '--set', `apiServer.port=${apiPort}`,
        '--set', `egressProxy.port=${proxyPort}`,
        '--set', 'warmPool.replicas=1',
      ],
      { kubeconfig: server.kubeconfigPath, timeoutMs: 90_000 },
    );
    expect(installed.code, installed.stderr).toBe(0);

    // One API replica, as its pod would run: the data emptyDir here, the CA Secret's items where the chart mounts them.
    apiTemplate = podTemplate(server, NAMESPACE, 'acis-api');
    const apiContainer = apiTemplate.spec.containers[0]!;
    const apiEnv = containerEnv(server, NAMESPACE, API_POD, apiContainer);
    expect(apiEnv.ACIS_SANDBOX_PROVIDER).toBe('kubernetes');
    expect(apiEnv.ACIS_EGRESS_LISTEN).toBe(`0.0.0.0:${proxyPort}`);
    await mountSecretVolumes(apiTemplate, apiEnv.ACIS_DATA_DIR!);
    api = runAcis(apiContainer.args, { ...cleanEnv(apiEnv), ACIS_DATA_DIR: dataDir, KUBECONFIG: apiAccess.kubeconfigPath });
    apiUrl = `http://127.0.0.1:${apiPort}`;
    await until(async () => (await fetch(`${apiUrl}/readyz`).catch(() => undefined))?.status === 200, 60_000, () => `the API server's /readyz:\n${api!.output()}`);

    controllerTemplate = podTemplate(server, NAMESPACE, 'acis-controller');
    const controllerContainer = controllerTemplate.spec.containers[0]!;
    const controllerEnv = containerEnv(server, NAMESPACE, CONTROLLER_POD, controllerContainer);
    // Runner pods are told the proxy's Service name; the test server routes no Services, so the
    // address is that of the pod the Service selects (the API server's, on the host's network).
    expect(controllerEnv.ACIS_EGRESS_PROXY_HOST).toBe('acis-egress-proxy');
    const proxyService = server.store.get('services', NAMESPACE, 'acis-egress-proxy') as KubeObject & {
      spec: { selector: Record<string, string>; ports: Array<{ port: number; targetPort: string }> };
    };
    expect(selects({ matchLabels: proxyService.spec.selector }, apiTemplate.metadata.labels)).toBe(true);
    expect(proxyService.spec.ports).toContainEqual(expect.objectContaining({ port: proxyPort, targetPort: 'proxy' }));
    expect(apiContainer.ports).toContainEqual(expect.objectContaining({ name: 'proxy', containerPort: proxyPort }));
    controller = runAcis(controllerContainer.args, {
      ...cleanEnv(controllerEnv),
      KUBECONFIG: controllerAccess.kubeconfigPath,
      ACIS_EGRESS_PROXY_HOST: '127.0.0.1',
      // Not the pod's fixed 9090: test files share this machine's loopback.
      ACIS_CONTROLLER_METRICS_HOST: '127.0.0.1',
      ACIS_CONTROLLER_METRICS_PORT: '0',
    });
    await server.store.waitUntil(() => poolPods().filter(ready).length === 1, 90_000, `the chart's warm pool's runner Ready\n${controller.output()}`);
  }, 240_000);

  it('serves a conversation: the reply streams from the warm-pool runner pod the sandbox NetworkPolicy selects', async () => {
    const poolPodName = poolPods().filter(ready)[0]!.metadata.name!;
    const admin = secretValue('acis-secrets', 'ACIS_ADMIN_TOKEN');
    const integration = await call('POST', '/admin/integrations', admin, { name: 'chart conversation' }, 201);
    const key: string = integration.service_key;
    const tenant = await call('PUT', `/tenants/by-external-id/chart-tenant`, key, { settings: { filler_enabled: false } }, 201);
    const role = await call('POST', `/tenants/${tenant.id}/roles`, key, { name: 'everything', skill_access: { mode: 'all' } }, 201);
    const user = await call('PUT', `/tenants/${tenant.id}/users/by-external-id/chart-user`, key, { role_id: role.id }, 201);
    const conversation = await call('POST', '/conversations', key, { user_id: user.id, runtime: { mode: 'warm', idle_ttl_seconds: 600 } }, 201);

    const response = await fetch(`${apiUrl}/conversations/${conversation.id}/messages?stream=true`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ content: 'Hello [[reply: through the chart]]' }),
    });
    expect(response.status).toBe(200);
    const text = await response.text();
    const lines = withoutPings(parseNdjson(text));
    expect(lines[0], text).toMatchObject({ type: 'system', subtype: 'init' });
    expect(deltaText(lines)).toBe('through the chart');
    expect(lines.filter(isTerminal)).toHaveLength(1);
    expect(lines.at(-1)).toMatchObject({ type: 'result', subtype: 'success' });

    // Its Sandbox adopted the pool's pod.
    const sandbox = server.store.get('sandboxes', NAMESPACE, sandboxName(conversation.id)) as KubeObject & { status: SandboxStatus };
    expect(sandbox.status).toMatchObject({ launch: 'pool', podName: poolPodName });
    const pod = server.store.get('pods', NAMESPACE, poolPodName) as PodObject;
    expect(pod.spec.containers[0]!.image).toBe(RUNNER_IMAGE);
    // It trusts the operator's CA: the API server loaded it from where the chart mounts the Secret
    // and published its certificate in the ConfigMap the controller mounts into runner pods.
    const published = server.store.get('configmaps', NAMESPACE, 'acis-egress-ca') as KubeObject & { data: Record<string, string> };
    expect(published.data['ca.crt']!.trim()).toBe(secretValue('acis-egress-ca', 'ca.crt').trim());
    expect(pod.spec.volumes).toContainEqual(expect.objectContaining({ configMap: expect.objectContaining({ name: 'acis-egress-ca' }) }));

    // The chart's sandbox policy selects it, lets it reach the API pods' proxy port and nothing else,
    // and lets the API pods reach its runner port.
    const policies = server.store.list('networkpolicies.networking.k8s.io', NAMESPACE).items as unknown as NetworkPolicy[];
    const sandboxPolicy = policies.find((policy) => policy.metadata.name === 'acis-sandbox')!;
    expect(selects(sandboxPolicy.spec.podSelector, pod.metadata.labels ?? {})).toBe(true);
    const runnerPod: PodEndpoint = { namespace: NAMESPACE, labels: pod.metadata.labels ?? {}, ip: pod.status!.podIP! };
    const apiPod: PodEndpoint = { namespace: NAMESPACE, labels: apiTemplate.metadata.labels, ip: '10.244.1.7' };
    const proxyPort = apiTemplate.spec.containers[0]!.ports!.find((port) => port.name === 'proxy')!.containerPort;
    expect(connectionAllowed(policies, runnerPod, apiPod, proxyPort)).toBe(true);
    expect(connectionAllowed(policies, apiPod, runnerPod, RUNNER_PORT)).toBe(true);
    expect(connectionAllowed(policies, runnerPod, { ip: '203.0.113.10' }, 443)).toBe(false);
    // The API pods' own policy lets their proxy forward the model call to the internet.
    expect(connectionAllowed(policies, apiPod, { ip: '203.0.113.10' }, 443)).toBe(true);
    expect(connectionAllowed(policies, runnerPod, apiPod, apiTemplate.spec.containers[0]!.ports!.find((port) => port.name === 'http')!.containerPort)).toBe(false);

    // The model call went out through the API server's proxy with the pod's credential; the pod held a placeholder.
    const metrics = await (await fetch(`${apiUrl}/metrics`)).text();
    expect(Number(/^acis_egress_requests_total\{outcome="forwarded"\} (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThan(0);
    expect(pod.spec.containers[0]!.env).toContainEqual({ name: 'ANTHROPIC_API_KEY', value: '{{secret:ANTHROPIC_API_KEY}}' });
    expect([text, JSON.stringify(pod), kubelet.logs(NAMESPACE, poolPodName)].join('\n')).not.toContain(PLATFORM_KEY);

    expect((await fetch(`${apiUrl}/conversations/${conversation.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${key}` } })).status).toBe(204);
    await server.store.waitUntil(() => !server.store.find('sandboxes', NAMESPACE, sandboxName(conversation.id)), 30_000, 'the Sandbox gone');
  }, 180_000);

  it('needed no Kubernetes API request its service account\'s Role does not allow', () => {
    expect(apiAccess.requests.length).toBeGreaterThan(0);
    expect(controllerAccess.requests.length).toBeGreaterThan(0);
    expect(refused(rulesOf(server, NAMESPACE, apiTemplate.spec.serviceAccountName), apiAccess.requests)).toEqual([]);
    expect(refused(rulesOf(server, NAMESPACE, controllerTemplate.spec.serviceAccountName), controllerAccess.requests)).toEqual([]);
  });
});

/** A REST call to the API server; fails the test unless it answers `status`. */
async function call(method: string, urlPath: string, token: string, body: unknown, status: number): Promise<any> {
  const response = await fetch(`${apiUrl}${urlPath}`, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const text = await response.text();
  expect(response.status, `${method} ${urlPath}: ${text}`).toBe(status);
  return JSON.parse(text);
}

function secretValue(name: string, key: string): string {
  const secret = server.store.get('secrets', NAMESPACE, name) as KubeObject & { data: Record<string, string> };
  return Buffer.from(secret.data[key]!, 'base64').toString();
}

/** Writes each Secret volume's items under `dataDir` where the template mounts them below the data mount `dataMountPath`. */
async function mountSecretVolumes(template: RenderedPodTemplate, dataMountPath: string): Promise<void> {
  for (const mount of template.spec.containers[0]!.volumeMounts ?? []) {
    const volume = template.spec.volumes?.find((candidate) => candidate.name === mount.name);
    if (!volume?.secret) continue;
    const relative = path.relative(dataMountPath, mount.mountPath);
    if (relative.startsWith('..')) throw new Error(`${mount.mountPath} is outside the data mount ${dataMountPath}`);
    const target = path.join(dataDir, relative);
    await mkdir(target, { recursive: true });
    const secret = server.store.get('secrets', NAMESPACE, volume.secret.secretName) as KubeObject & { data: Record<string, string> };
    for (const item of volume.secret.items ?? Object.keys(secret.data).map((key) => ({ key, path: key }))) {
      await writeFile(path.join(target, item.path), Buffer.from(secret.data[item.key]!, 'base64'), { mode: 0o440 });
    }
  }
}

/** Polls `check` (an HTTP answer has no event to await) until it holds. */
async function until(check: () => Promise<boolean>, timeoutMs: number, what: () => string): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await new Promise((resolve) => setTimeout(resolve, 100))) {
    if (await check()) return;
  }
  throw new Error(`timed out waiting for ${what()}`);
}
