/**
 * One conversation through the chart's installed objects per egress proxy mode: `helm install` into
 * the Kubernetes API test server, then `acis serve`, `acis controller` and (mode `deployment`) the
 * egress proxy as their own processes with exactly the environment their rendered Deployments give
 * their pods (Secrets and fieldRefs resolved as the kubelet would). Only what cannot exist here is
 * replaced: the in-cluster service account's token by a kubeconfig for the same ServiceAccount (whose
 * requests the test server holds to the chart's Roles by RBAC), the emptyDirs and Secret volumes
 * (directories here, with the Secrets' items where the chart mounts them), and Services' addresses,
 * since the test server routes no Services (each test checks the Service selects the pods it stands
 * for). The warm-pool runner pod runs the real runner in the simulated kubelet; the agent talks to
 * the model stub through the egress proxy: the API server's (mode `api-server`,
 * ci/egress-in-api-server-values.yaml) or the proxy's own process, which asks the API server's
 * resolve listener for the run's values (mode `deployment`, the chart's default, installed with no CA
 * of the operator's: the chart generates it). Runner pods trust the proxy's CA: an HTTPS request from
 * the runner pod through the proxy reaches an HTTPS echo server (under a CA of its own, which the proxy
 * trusts upstream). The runner pods, the repository-sync Job's pod and everything that owns them or
 * they own are in the chart's sandbox namespace (`acis-sandboxes`), which the chart creates with Pod
 * Security `restricted` enforced (the test server refuses pods that break it); neither process's
 * ServiceAccount can read a Secret of the release namespace (the database URL, the master key), and
 * no object of the sandbox namespace holds the database URL, the master key, the admin token or the
 * service key.
 */
import { randomBytes } from 'node:crypto';
import { realpathSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ModelStub, startModelStub } from '../../hack/model-stub/model-stub.js';
import { sandboxName } from '../../api-server/sandboxes/kubernetes/decisions.js';
import { type EchoServers, startEchoServers } from '../helpers/echo-servers.js';
import {
  cleanEnv,
  freePort,
  killLeftovers,
  ROOT,
  runAcis,
  startEgressProxyProcess,
  stopAcis,
  type AcisProcess,
} from '../helpers/acis-process.js';
import { helm, kubectl } from '../helpers/kube-tools.js';
import { createGitRepository, type GitHttpServer, manifest, serveGitOverHttp } from '../../hack/git-server.js';
import { deltaText, isTerminal, parseNdjson, readLines, withoutPings } from '../helpers/ndjson.js';
import { createTestDatabase, dropTestDatabase } from '../helpers/test-server.js';
import { startKubelet, type Kubelet } from '../../hack/k8s/kubelet.js';
import { runnerImage } from '../../hack/k8s/runner-image.js';
import { startKubeTestServer, type KubeTestServer } from '../../hack/k8s/server.js';
import type { KubeObject } from '../../hack/k8s/store.js';
import { CHART, EGRESS_IN_API_VALUES, NAMESPACE, SANDBOX_NAMESPACE } from './chart-render.js';
import { containerEnv, createDeploymentCaFiles, podTemplate, type RenderedPodTemplate } from './deployment-pod.js';
import { connectionAllowed, selects, type NetworkPolicy, type PodEndpoint } from './network-policy-eval.js';

const RUNNER_IMAGE = 'acis-runner:chart-conversation';
/** The chart's own image, which repository-sync Jobs run (`acis sync-repository`). */
const ACIS_IMAGE = 'acis:chart-conversation';
const GIT_TOKEN = `ghp_${randomBytes(12).toString('hex')}`;
const API_POD = 'acis-api-6b8c5-r7n2k';
const CONTROLLER_POD = 'acis-controller-7d9f8-x2x4q';
const PROXY_POD = 'acis-egress-proxy-5c7d9-qk2vd';
/** The platform's model key: the stub refuses any other, and no pod or stream line may hold it. */
const PLATFORM_KEY = `sk-platform-${randomBytes(12).toString('hex')}`;
// Pod IPs are unique within one kubelet only and test files run side by side: a port of our own.
const RUNNER_PORT = 20_000 + Math.floor(Math.random() * 40_000);
/** The ConfigMap of the egress CA's certificate runner pods trust: the API server's (mode `api-server`) or the chart's (mode `deployment`). */
const CA_CERT_CONFIGMAP = 'acis-egress-ca';

interface PodObject extends KubeObject {
  spec: {
    containers: Array<{ image: string; env?: Array<{ name: string; value?: string }> }>;
    volumes?: Array<{ configMap?: { name: string } }>;
  };
  status?: { podIP?: string; conditions?: Array<{ type: string; status: string }> };
}

interface SandboxStatus {
  launch?: string;
  podName?: string;
}

interface ServiceObject extends KubeObject {
  spec: { selector: Record<string, string>; ports: Array<{ port: number; targetPort: string }> };
}

type Mode = 'api-server' | 'deployment';

let stub: ModelStub;
/** Upstreams on the "internet" (loopback, which the proxy is told it may reach); HTTPS under a CA of their own. */
let echoServers: EchoServers | undefined;
let httpsEchoPort: number;
let httpsEchoCa: string;
/** A git host on the "internet" requiring a token, and the repositories it serves. */
let git: GitHttpServer;
let gitRoot: string;

beforeAll(async () => {
  gitRoot = await mkdtemp(path.join(tmpdir(), 'acis-chart-git-'));
  git = await serveGitOverHttp(gitRoot, { password: GIT_TOKEN });
  stub = await startModelStub({ apiKey: PLATFORM_KEY });
  echoServers = await startEchoServers('chart conversation echo CA');
  ({ httpsPort: httpsEchoPort, caCertificatePem: httpsEchoCa } = echoServers);
}, 30_000);

afterAll(async () => {
  await stub?.stop();
  echoServers?.close();
  await git?.stop();
  if (gitRoot) await rm(gitRoot, { recursive: true, force: true });
});

describe.each<Mode>(['api-server', 'deployment'])('charts/acis installed with egressProxy.mode %s', (mode) => {
  let server: KubeTestServer;
  let kubelet: Kubelet;
  let databaseUrl: string;
  /** The test's files: the pods' emptyDirs and Secret volumes, each process's kubeconfig. */
  let scratch: string;
  let api: AcisProcess | undefined;
  let controller: AcisProcess | undefined;
  let proxy: AcisProcess | undefined;
  let apiUrl: string;
  let apiTemplate: RenderedPodTemplate;
  let controllerTemplate: RenderedPodTemplate;
  let proxyTemplate: RenderedPodTemplate | undefined;
  let proxyMetricsPort: number;
  /** The proxy process's environment, to start its replacement. */
  let proxyEnvHere: NodeJS.ProcessEnv;
  /** The service key and user of the conversations. */
  let key: string;
  let userId: string;
  /** Kubeconfigs acting as the API server's and the controller's ServiceAccounts. */
  let apiKubeconfig: string;
  let controllerKubeconfig: string;
  /** The API server's environment: the values no object of the sandbox namespace may hold. */
  let apiEnvHere: Record<string, string>;

  const ready = (pod: PodObject) => Boolean(pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
  const poolPods = () =>
    server.store.list('pods', SANDBOX_NAMESPACE, { labelSelector: 'acis.dev/pool=vendor-agent-sdk' }).items as PodObject[];
  const secretValue = (name: string, key: string) => {
    const secret = server.store.get('secrets', NAMESPACE, name) as KubeObject & { data: Record<string, string> };
    return Buffer.from(secret.data[key]!, 'base64').toString();
  };

  beforeAll(async () => {
    databaseUrl = await createTestDatabase();
    scratch = await mkdtemp(path.join(tmpdir(), 'acis-chart-conversation-'));
    server = await startKubeTestServer({ namespaces: [NAMESPACE], bookmarkIntervalMs: 200 });
    kubelet = await startKubelet({
      server,
      images: {
        [RUNNER_IMAGE]: runnerImage(ROOT),
        // The acis image's entrypoint (`acis`) from this checkout; sync Jobs read the test's git host.
        [ACIS_IMAGE]: { command: process.execPath, binds: [ROOT, realpathSync(path.join(ROOT, 'node_modules'))] },
      },
      probePeriodMs: 25,
      allocatable: { cpu: '64', memory: '256Gi', pods: 100 },
      // The API server, proxy and model stub run here as host processes, which the chart's policies
      // (enforced in netns mode) rightly keep runner pods from: they are held on packets by
      // chart-network-policy.test.ts instead.
      network: 'loopback',
    });
  }, 120_000);

  afterAll(async () => {
    if (controller) await stopAcis(controller);
    if (proxy) await stopAcis(proxy);
    if (api) await stopAcis(api);
    killLeftovers();
    await kubelet?.close();
    await server?.close();
    if (databaseUrl) await dropTestDatabase(databaseUrl);
    if (scratch) await rm(scratch, { recursive: true, force: true });
  }, 120_000);

  it("installs, and the API server, the controller (and the egress proxy) start from their Deployments' environment", async () => {
    // Mode api-server: an existing CA Secret, as several API replicas need one. Mode deployment: no CA
    // supplied, the chart generates it.
    if (mode === 'api-server') {
      const ca = await createDeploymentCaFiles();
      server.store.create('secrets', NAMESPACE, {
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'acis-egress-ca', namespace: NAMESPACE },
        data: ca,
      } as unknown as KubeObject);
    }
    // The proxy (whichever process it is in) trusts the echo server's CA upstream, from a file in its
    // pod's /tmp written below, and may reach it on loopback.
    const proxyProcess = mode === 'api-server' ? 'apiServer' : 'egressProxy';
    const [apiPort, proxyPort, resolvePort, reportPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
    proxyMetricsPort = await freePort();
    const [repository, tag] = RUNNER_IMAGE.split(':');
    const [acisRepository, acisTag] = ACIS_IMAGE.split(':');
    // The API server's extra environment after the proxy's CA (in mode api-server its entry 0).
    const apiExtra = mode === 'api-server' ? 1 : 0;
    const modeValues =
      mode === 'api-server'
        ? ['--values', EGRESS_IN_API_VALUES]
        : ['--set', `egressProxy.resolve.port=${resolvePort}`, '--set', `egressProxy.metricsPort=${proxyMetricsPort}`];
    const installed = await helm(
      [
        'install',
        'acis',
        CHART,
        '--namespace',
        NAMESPACE,
        ...modeValues,
        '--set',
        `database.url=${databaseUrl}`,
        '--set',
        `modelBaseUrl=${stub.url}`,
        '--set',
        `secrets.anthropicApiKey=${PLATFORM_KEY}`,
        '--set',
        `runnerImage.repository=${repository}`,
        '--set',
        `runnerImage.tag=${tag}`,
        '--set',
        `sandbox.port=${RUNNER_PORT}`,
        '--set',
        `apiServer.port=${apiPort}`,
        '--set',
        `egressProxy.port=${proxyPort}`,
        '--set',
        `repositorySync.reportPort=${reportPort}`,
        '--set',
        'warmPool.replicas=1',
        '--set',
        `egressProxy.allow=localhost:${httpsEchoPort}`,
        '--set',
        `${proxyProcess}.extraEnv[0].name=ACIS_EGRESS_EXTRA_CA`,
        '--set',
        `${proxyProcess}.extraEnv[0].value=/tmp/echo-ca.pem`,
        '--set',
        `image.repository=${acisRepository}`,
        '--set',
        `image.tag=${acisTag}`,
        // The test's git host is plain HTTP on loopback.
        '--set',
        `apiServer.extraEnv[${apiExtra}].name=ACIS_ALLOW_PLAIN_REPOS`,
        '--set-string',
        `apiServer.extraEnv[${apiExtra}].value=1`,
        '--set',
        `apiServer.extraEnv[${apiExtra + 1}].name=ACIS_REPOSITORY_ALLOW`,
        '--set',
        `apiServer.extraEnv[${apiExtra + 1}].value=127.0.0.1`,
      ],
      { kubeconfig: server.kubeconfigPath, timeoutMs: 90_000 },
    );
    expect(installed.code, installed.stderr).toBe(0);
    // The chart made the sandbox namespace, enforcing Pod Security restricted on every pod created in it.
    expect(server.store.get('namespaces', undefined, SANDBOX_NAMESPACE).metadata.labels).toMatchObject({
      'pod-security.kubernetes.io/enforce': 'restricted',
      'pod-security.kubernetes.io/enforce-version': 'latest',
    });

    // One API replica, as its pod would run: its volumes here, the Secrets' items where the chart mounts them.
    apiTemplate = podTemplate(server, NAMESPACE, 'acis-api');
    const apiContainer = apiTemplate.spec.containers[0]!;
    const apiEnv = await mountVolumes(apiTemplate, containerEnv(server, NAMESPACE, API_POD, apiContainer), path.join(scratch, 'api'));
    if (apiEnv.ACIS_EGRESS_EXTRA_CA) await writeFile(apiEnv.ACIS_EGRESS_EXTRA_CA, httpsEchoCa);
    expect(apiEnv.ACIS_SANDBOX_PROVIDER).toBe('kubernetes');
    if (mode === 'api-server') {
      expect(apiEnv.ACIS_EGRESS_LISTEN).toBe(`0.0.0.0:${proxyPort}`);
      expect(apiEnv.ACIS_EGRESS_RESOLVE_LISTEN).toBeUndefined();
    } else {
      expect(apiEnv.ACIS_EGRESS_RESOLVE_LISTEN).toBe(`0.0.0.0:${resolvePort}`);
      expect(apiEnv.ACIS_EGRESS_LISTEN).toBeUndefined();
      // The API server holds the resolve token and the deployment CA (its own certificate, for the runner
      // links and the resolve listener, comes from it), mounted where its default ACIS_DEPLOYMENT_CA_DIR is.
      expect(apiTemplate.spec.volumes?.map((volume) => volume.secret?.secretName).filter(Boolean)).toEqual([
        'acis-egress-ca-key',
        'acis-egress-resolve',
      ]);
      expect(apiEnv.ACIS_EGRESS_RESOLVE_TLS_NAMES?.split(',')).toContain('acis-egress-resolve');
      // The test server routes no Services: here the proxy dials the API pod as localhost, which its
      // certificate names besides the Service's names.
      apiEnv.ACIS_EGRESS_RESOLVE_TLS_NAMES = `${apiEnv.ACIS_EGRESS_RESOLVE_TLS_NAMES},localhost`;
    }
    // Sync Jobs dial the report listener as localhost here too (the test server routes no Services).
    expect(apiEnv.ACIS_SYNC_REPORT_TLS_NAMES?.split(',')).toContain('acis-sync-report');
    apiEnv.ACIS_SYNC_REPORT_TLS_NAMES = `${apiEnv.ACIS_SYNC_REPORT_TLS_NAMES},localhost`;
    apiEnvHere = apiEnv;
    apiKubeconfig = await server.kubeconfigFor({ namespace: NAMESPACE, serviceAccount: apiTemplate.spec.serviceAccountName });
    api = runAcis(apiContainer.args, { ...cleanEnv(apiEnv), KUBECONFIG: apiKubeconfig });
    apiUrl = `http://127.0.0.1:${apiPort}`;
    await until(
      async () => (await fetch(`${apiUrl}/readyz`).catch(() => undefined))?.status === 200,
      60_000,
      () => `the API server's /readyz:\n${api!.output()}`,
    );

    const proxyService = server.store.get('services', NAMESPACE, 'acis-egress-proxy') as ServiceObject;
    expect(proxyService.spec.ports).toContainEqual(expect.objectContaining({ port: proxyPort, targetPort: 'proxy' }));
    if (mode === 'api-server') {
      expect(selects({ matchLabels: proxyService.spec.selector }, apiTemplate.metadata.labels)).toBe(true);
      expect(apiContainer.ports).toContainEqual(expect.objectContaining({ name: 'proxy', containerPort: proxyPort }));
    } else {
      // The proxy's own pod, as its Deployment runs it (the image's command, from source here).
      proxyTemplate = podTemplate(server, NAMESPACE, 'acis-egress-proxy');
      const proxyContainer = proxyTemplate.spec.containers[0]!;
      expect(proxyContainer.command).toEqual(['node', '/app/dist/egress-proxy/main.js']);
      expect(selects({ matchLabels: proxyService.spec.selector }, proxyTemplate.metadata.labels)).toBe(true);
      expect(proxyContainer.ports).toContainEqual(expect.objectContaining({ name: 'proxy', containerPort: proxyPort }));
      const proxyEnv = await mountVolumes(
        proxyTemplate,
        containerEnv(server, NAMESPACE, PROXY_POD, proxyContainer),
        path.join(scratch, 'proxy'),
      );
      await writeFile(proxyEnv.ACIS_EGRESS_EXTRA_CA!, httpsEchoCa);
      // It holds no database URL and no master key; it reaches the API pods' resolve port through its Service.
      expect(Object.keys(proxyEnv).filter((name) => /DATABASE|MASTER/.test(name))).toEqual([]);
      const resolveService = server.store.get('services', NAMESPACE, 'acis-egress-resolve') as ServiceObject;
      expect(selects({ matchLabels: resolveService.spec.selector }, apiTemplate.metadata.labels)).toBe(true);
      expect(resolveService.spec.ports).toEqual([expect.objectContaining({ port: resolvePort, targetPort: 'egress-resolve' })]);
      expect(apiContainer.ports).toContainEqual(expect.objectContaining({ name: 'egress-resolve', containerPort: resolvePort }));
      expect(proxyEnv.ACIS_EGRESS_RESOLVE_URL).toBe(`https://acis-egress-resolve:${resolvePort}`);
      expect(proxyEnv.ACIS_EGRESS_PORT).toBe(String(proxyPort));
      // Ready as its readiness probe sees it: the proxy port answers.
      proxyEnvHere = { ...cleanEnv(proxyEnv), ACIS_EGRESS_RESOLVE_URL: `https://localhost:${resolvePort}` };
      proxy = await startEgressProxyProcess(proxyEnvHere);
    }

    controllerTemplate = podTemplate(server, NAMESPACE, 'acis-controller');
    const controllerContainer = controllerTemplate.spec.containers[0]!;
    const controllerEnv = containerEnv(server, NAMESPACE, CONTROLLER_POD, controllerContainer);
    // Runner pods are told the proxy's Service name; the test server routes no Services, so the
    // address is that of the pod the Service selects (on the host's network here).
    expect(controllerEnv.ACIS_EGRESS_PROXY_HOST).toBe(`acis-egress-proxy.${NAMESPACE}.svc`);
    expect(controllerEnv.ACIS_EGRESS_CA_CONFIGMAP).toBe(CA_CERT_CONFIGMAP);
    // Sync Job pods, in the sandbox namespace, reach the report Service by a name qualified with the release's.
    expect(controllerEnv.ACIS_SYNC_REPORT_URL).toBe(`https://acis-sync-report.${NAMESPACE}.svc:${reportPort}`);
    controllerKubeconfig = await server.kubeconfigFor({
      namespace: NAMESPACE,
      serviceAccount: controllerTemplate.spec.serviceAccountName,
    });
    controller = runAcis(controllerContainer.args, {
      ...cleanEnv(controllerEnv),
      KUBECONFIG: controllerKubeconfig,
      ACIS_EGRESS_PROXY_HOST: '127.0.0.1',
      // The sync report Service's pods are the API process here; the acis image's entrypoint is `acis`.
      // Over TLS, verified with the deployment CA: by a name the listener's certificate carries.
      ACIS_SYNC_REPORT_URL: `https://localhost:${reportPort}`,
      ACIS_SYNC_COMMAND: [
        process.execPath,
        '--import',
        `file://${path.join(realpathSync(path.join(ROOT, 'node_modules')), 'tsx/dist/loader.mjs')}`,
        path.join(ROOT, 'cli', 'acis.ts'),
      ].join(' '),
      // Not the pod's fixed 9090: test files share this machine's loopback.
      ACIS_CONTROLLER_METRICS_HOST: '127.0.0.1',
      ACIS_CONTROLLER_METRICS_PORT: '0',
    });
    // Ready as the controller sees it too (it writes the pool's status from its own cache), so the
    // first Sandbox adopts it rather than starting cold while that cache catches up.
    const poolReady = () =>
      (
        server.store.get('sandboxwarmpools', SANDBOX_NAMESPACE, 'vendor-agent-sdk') as
          | (KubeObject & { status?: { readyReplicas?: number } })
          | undefined
      )?.status?.readyReplicas === 1;
    await server.store.waitUntil(
      () => poolPods().filter(ready).length === 1 && poolReady(),
      90_000,
      `the chart's warm pool's runner Ready\n${controller.output()}`,
    );
  }, 240_000);

  it('serves a conversation: the reply streams from the warm-pool runner pod, its model calls through the egress proxy the NetworkPolicies let it reach', async () => {
    const poolPodName = poolPods().filter(ready)[0]!.metadata.name!;
    const admin = secretValue('acis-secrets', 'ACIS_ADMIN_TOKEN');
    const integration = await call('POST', '/admin/integrations', admin, { name: 'chart conversation' }, 201);
    key = integration.service_key;
    const tenant = await call('PUT', `/tenants/by-external-id/chart-tenant`, key, { settings: { filler_enabled: false } }, 201);
    const role = await call('POST', `/tenants/${tenant.id}/roles`, key, { name: 'everything', skill_access: { mode: 'all' } }, 201);
    const user = await call('PUT', `/tenants/${tenant.id}/users/by-external-id/chart-user`, key, { role_id: role.id }, 201);
    userId = user.id;
    const conversation = await call(
      'POST',
      '/conversations',
      key,
      { user_id: user.id, runtime: { mode: 'warm', idle_ttl_seconds: 600 } },
      201,
    );

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
    const sandbox = server.store.get('sandboxes', SANDBOX_NAMESPACE, sandboxName(conversation.id)) as KubeObject & {
      status: SandboxStatus;
    };
    expect(sandbox.status).toMatchObject({ launch: 'pool', podName: poolPodName });
    const pod = server.store.get('pods', SANDBOX_NAMESPACE, poolPodName) as PodObject;
    expect(pod.spec.containers[0]!.image).toBe(RUNNER_IMAGE);
    // It trusts the proxy's CA: in mode api-server the operator's, which the API server loaded from where
    // the chart mounts the Secret and published; in mode deployment the one the chart generated.
    const published = server.store.get('configmaps', SANDBOX_NAMESPACE, CA_CERT_CONFIGMAP) as KubeObject & { data: Record<string, string> };
    const caSecret = mode === 'api-server' ? 'acis-egress-ca' : 'acis-egress-ca-key';
    expect(published.data['ca.crt']!.trim()).toBe(secretValue(caSecret, 'ca.crt').trim());
    expect(pod.spec.volumes).toContainEqual(expect.objectContaining({ configMap: expect.objectContaining({ name: CA_CERT_CONFIGMAP }) }));

    // The chart's sandbox policy selects it, lets it reach the proxy pods' proxy port and nothing else,
    // and lets the API pods reach its runner port.
    const policies = [NAMESPACE, SANDBOX_NAMESPACE].flatMap(
      (namespace) => server.store.list('networkpolicies.networking.k8s.io', namespace).items as unknown as NetworkPolicy[],
    );
    const sandboxPolicy = policies.find((policy) => policy.metadata.name === 'acis-sandbox')!;
    expect(selects(sandboxPolicy.spec.podSelector, pod.metadata.labels ?? {})).toBe(true);
    const runnerPod: PodEndpoint = { namespace: SANDBOX_NAMESPACE, labels: pod.metadata.labels ?? {}, ip: pod.status!.podIP! };
    const apiPod: PodEndpoint = { namespace: NAMESPACE, labels: apiTemplate.metadata.labels, ip: '10.244.1.7' };
    const proxyPod: PodEndpoint =
      mode === 'api-server' ? apiPod : { namespace: NAMESPACE, labels: proxyTemplate!.metadata.labels, ip: '10.244.1.8' };
    const portOf = (template: RenderedPodTemplate, name: string) =>
      template.spec.containers[0]!.ports!.find((port) => port.name === name)!.containerPort;
    const proxyPort = portOf(mode === 'api-server' ? apiTemplate : proxyTemplate!, 'proxy');
    expect(connectionAllowed(policies, runnerPod, proxyPod, proxyPort)).toBe(true);
    expect(connectionAllowed(policies, apiPod, runnerPod, RUNNER_PORT)).toBe(true);
    expect(connectionAllowed(policies, runnerPod, { ip: '203.0.113.10' }, 443)).toBe(false);
    // The proxy pods' policy lets them forward the model call to the internet.
    expect(connectionAllowed(policies, proxyPod, { ip: '203.0.113.10' }, 443)).toBe(true);
    expect(connectionAllowed(policies, runnerPod, apiPod, portOf(apiTemplate, 'http'))).toBe(false);
    if (mode === 'deployment') {
      // The proxy learned the run at the API pods' resolve port, which the runner cannot reach.
      const resolvePort = portOf(apiTemplate, 'egress-resolve');
      expect(connectionAllowed(policies, proxyPod, apiPod, resolvePort)).toBe(true);
      expect(connectionAllowed(policies, runnerPod, apiPod, resolvePort)).toBe(false);
      expect(connectionAllowed(policies, proxyPod, apiPod, portOf(apiTemplate, 'http'))).toBe(false);
    }

    // The model call went out through the proxy with the pod's credential; the pod held a placeholder.
    const proxyMetrics = await (
      await fetch(mode === 'api-server' ? `${apiUrl}/metrics` : `http://127.0.0.1:${proxyMetricsPort}/metrics`)
    ).text();
    expect(Number(/^acis_egress_requests_total\{outcome="forwarded"\} (\d+)$/m.exec(proxyMetrics)?.[1])).toBeGreaterThan(0);
    if (mode === 'deployment') {
      // Not through the API server's own (in-process, loopback) proxy.
      expect(await (await fetch(`${apiUrl}/metrics`)).text()).not.toMatch(/^acis_egress_requests_total\{outcome="forwarded"\} [1-9]/m);
    }
    expect(pod.spec.containers[0]!.env).toContainEqual({ name: 'ANTHROPIC_API_KEY', value: '{{secret:ANTHROPIC_API_KEY}}' });
    expect([text, JSON.stringify(pod), kubelet.logs(SANDBOX_NAMESPACE, poolPodName), proxy?.output() ?? ''].join('\n')).not.toContain(
      PLATFORM_KEY,
    );

    // HTTPS from the runner pod through the proxy: the pod accepts the leaf the proxy presents for the host.
    const httpsTurn = await fetch(`${apiUrl}/conversations/${conversation.id}/messages?stream=true`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        // And one request the proxy refuses (a private address): an Event on the Sandbox, written as the API server's ServiceAccount.
        content: `[[tool:Bash ${JSON.stringify({
          command: `curl -sS https://localhost:${httpsEchoPort}/through-the-chart-${mode}; curl -s -o /dev/null http://10.255.255.1:81/denied`,
        })}]]`,
      }),
    });
    expect(httpsTurn.status).toBe(200);
    const httpsText = await httpsTurn.text();
    expect(withoutPings(parseNdjson(httpsText)).at(-1), httpsText).toMatchObject({ type: 'result', subtype: 'success' });
    expect(
      echoServers!.received.map((r) => r.path),
      httpsText,
    ).toContain(`/through-the-chart-${mode}`);
    expect(httpsText).toContain(`echo /through-the-chart-${mode}`);
    const refusal = await server.store.waitUntil(
      () =>
        (
          server.store.list('events', SANDBOX_NAMESPACE).items as Array<KubeObject & { involvedObject: { name: string }; reason: string }>
        ).find((e) => e.involvedObject.name === sandboxName(conversation.id) && e.reason === 'EgressDestinationRefused'),
      30_000,
      'the refusal told on the Sandbox',
    );
    expect((refusal as unknown as { message: string }).message).toContain('10.255.255.1:81');

    expect(
      (await fetch(`${apiUrl}/conversations/${conversation.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${key}` } })).status,
    ).toBe(204);
    await server.store.waitUntil(
      () => !server.store.find('sandboxes', SANDBOX_NAMESPACE, sandboxName(conversation.id)),
      30_000,
      'the Sandbox gone',
    );
  }, 180_000);

  it.runIf(mode === 'deployment')(
    'a turn survives its egress proxy pod going away mid-stream: the model call is retried through the replacement',
    async () => {
      const words = Array.from({ length: 24 }, (_, index) => `word${index + 1}`).join(' ');
      const conversation = await call(
        'POST',
        '/conversations',
        key,
        { user_id: userId, runtime: { mode: 'warm', idle_ttl_seconds: 600 } },
        201,
      );
      const agentCallsBefore = stub.agentRequests().length;
      const response = await fetch(`${apiUrl}/conversations/${conversation.id}/messages?stream=true`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ content: `[[slow: 150]]\n[[reply: ${words}]]` }),
      });
      expect(response.status).toBe(200);
      // At the first text delta the model call is mid-stream through the proxy: its pod dies at once
      // (SIGKILL, no drain) and a replacement takes the Service's place, as the Deployment's other
      // replica or its ReplicaSet's new pod would.
      let replaced: Promise<void> | undefined;
      const lines = withoutPings(
        await readLines(response, (line) => {
          if (!replaced && deltaText([line]) !== '') replaced = replaceProxy();
        }),
      );
      await replaced;
      expect(replaced).toBeDefined();
      const text = JSON.stringify(lines);
      expect(lines.filter(isTerminal), text).toHaveLength(1);
      expect(lines.at(-1), text).toMatchObject({ type: 'result', subtype: 'success', result: words });
      // The cut call and its retry, each a whole request of this turn's prompt.
      const turnCalls = stub
        .agentRequests()
        .slice(agentCallsBefore)
        .filter((body) => JSON.stringify(body).includes(words));
      expect(turnCalls.length).toBeGreaterThanOrEqual(2);
      // What the client saw: the deltas streamed before the cut, then the retried call's from its start
      // (docs/egress-proxy.md, "Availability").
      const streamed = deltaText(lines);
      expect(streamed.endsWith(words), streamed).toBe(true);
      expect(words.startsWith(streamed.slice(0, -words.length).trim()), streamed).toBe(true);
      expect(
        (await fetch(`${apiUrl}/conversations/${conversation.id}`, { method: 'DELETE', headers: { authorization: `Bearer ${key}` } }))
          .status,
      ).toBe(204);
    },
    180_000,
  );

  async function replaceProxy(): Promise<void> {
    const gone = proxy!;
    gone.process.kill('SIGKILL');
    await gone.exited;
    proxy = await startEgressProxyProcess(proxyEnvHere);
  }

  it('syncs a repository as a Job whose pod runs in the sandbox namespace and hands what it found to the API server', async () => {
    await createGitRepository(gitRoot, `skills-${mode}`, { 'pdf/SKILL.md': manifest({ name: 'pdf', description: 'Reads PDFs.' }) });
    const credential = await call('POST', '/credentials', key, { name: `git-${mode}`, type: 'git_pat', secret: GIT_TOKEN }, 201);
    const repository = await call(
      'POST',
      '/repositories',
      key,
      { name: `skills-${mode}`, repo_url: git.url(`skills-${mode}`), credential_id: credential.id },
      201,
    );
    let ended: { sync: { state: string; error: unknown }; skill_count: number } | undefined;
    await until(
      async () => {
        const current = await call('GET', `/repositories/${repository.id}`, key, undefined, 200);
        if (current.sync.state === 'ready' || current.sync.state === 'error') ended = current;
        return ended !== undefined;
      },
      90_000,
      () => `the sync's end\n${controller!.output()}`,
    );
    expect(ended!.sync, JSON.stringify(ended)).toMatchObject({ state: 'ready', error: null });
    expect(ended!.skill_count).toBe(1);
    // Its RepositorySync, Job and pod were in the sandbox namespace, none in the release one.
    const syncName = repository.id.toLowerCase().replace(/_/g, '-');
    expect(server.store.find('repositorysyncs', SANDBOX_NAMESPACE, syncName)).toBeDefined();
    expect(server.store.find('jobs', SANDBOX_NAMESPACE, `${syncName}-1`)).toBeDefined();
    for (const resource of ['repositorysyncs', 'jobs']) expect(server.store.list(resource, NAMESPACE).items, resource).toEqual([]);
    const jobPods = (namespace: string) =>
      server.store
        .list('pods', namespace)
        .items.filter((pod) => pod.metadata.ownerReferences?.some((owner) => owner.kind === 'Job' && owner.name === `${syncName}-1`));
    expect(jobPods(SANDBOX_NAMESPACE)).toHaveLength(1);
    expect(jobPods(NAMESPACE)).toEqual([]);
  }, 120_000);

  it("leaves neither process's ServiceAccount a way to read the release namespace's Secrets, and the API server none to list the sandbox namespace's", async () => {
    const canI = async (kubeconfig: string, ...args: string[]) => {
      const answer = await kubectl(['auth', 'can-i', ...args], { kubeconfig });
      return `${args.join(' ')}: ${answer.stdout.trim()}`;
    };
    const releaseSecrets = ['acis-database', 'acis-secrets', mode === 'api-server' ? 'acis-egress-ca' : 'acis-egress-ca-key'];
    for (const kubeconfig of [apiKubeconfig, controllerKubeconfig]) {
      for (const secret of releaseSecrets)
        expect(await canI(kubeconfig, 'get', `secret/${secret}`, '-n', NAMESPACE)).toBe(`get secret/${secret} -n ${NAMESPACE}: no`);
      for (const verb of ['list', 'watch'])
        for (const namespace of [NAMESPACE, SANDBOX_NAMESPACE])
          expect(await canI(kubeconfig, verb, 'secrets', '-n', namespace)).toBe(`${verb} secrets -n ${namespace}: no`);
    }
    // What each does need, so the answers above are RBAC's and not a broken request.
    expect(await canI(apiKubeconfig, 'get', 'secret/any-runner-token', '-n', SANDBOX_NAMESPACE)).toMatch(/: yes$/);
    expect(await canI(controllerKubeconfig, 'create', 'pods', '-n', SANDBOX_NAMESPACE)).toMatch(/: yes$/);
    expect(await canI(controllerKubeconfig, 'get', 'lease/acis-controller', '-n', NAMESPACE)).toMatch(/: yes$/);
    expect(await canI(controllerKubeconfig, 'create', 'pods', '-n', NAMESPACE)).toMatch(/: no$/);
  });

  it('holds the database URL, the master key, the admin token and the service key in no object of the sandbox namespace', async () => {
    // A conversation holding its Sandbox while the namespace is searched.
    const conversation = await call(
      'POST',
      '/conversations',
      key,
      { user_id: userId, runtime: { mode: 'warm', idle_ttl_seconds: 600 } },
      201,
    );
    const turn = await fetch(`${apiUrl}/conversations/${conversation.id}/messages?stream=true`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ content: 'Hello [[reply: held]]' }),
    });
    expect(withoutPings(parseNdjson(await turn.text())).at(-1)).toMatchObject({ type: 'result', subtype: 'success' });
    const canaries = {
      DATABASE_URL: apiEnvHere.DATABASE_URL!,
      ACIS_MASTER_KEY: apiEnvHere.ACIS_MASTER_KEY!,
      ACIS_ADMIN_TOKEN: apiEnvHere.ACIS_ADMIN_TOKEN!,
      'the service key': key,
      'the platform key': PLATFORM_KEY,
    };
    for (const [name, value] of Object.entries(canaries)) expect(value?.length ?? 0, name).toBeGreaterThan(8);
    const namespaced = server.store.registry.all().filter((type) => type.namespaced);
    const objects = namespaced.flatMap((type) => server.store.list(type, SANDBOX_NAMESPACE).items);
    // Runner pods, their token Secrets, the CA ConfigMap, Sandboxes, the sync's objects and Events at least.
    const kinds = new Set(objects.map((object) => object.kind));
    for (const kind of ['Pod', 'Secret', 'ConfigMap', 'Sandbox', 'SandboxWarmPool', 'RepositorySync', 'Job', 'Event'])
      expect(kinds.has(kind), kind).toBe(true);
    // Secret and ConfigMap data decoded, as a pod mounting them would read it.
    const text = objects
      .map((object) => {
        const data = (object as { data?: Record<string, string> }).data ?? {};
        const decoded = object.kind === 'Secret' ? Object.values(data).map((value) => Buffer.from(value, 'base64').toString()) : [];
        return [JSON.stringify(object), ...decoded].join('\n');
      })
      .join('\n');
    const logs = server.store
      .list('pods', SANDBOX_NAMESPACE)
      .items.map((pod) => kubelet.logs(SANDBOX_NAMESPACE, pod.metadata.name!))
      .join('\n');
    for (const [name, value] of Object.entries(canaries)) expect(`${text}\n${logs}`.includes(value), name).toBe(false);
  });

  it('ran the API server and the controller as their ServiceAccounts, and RBAC refused neither anything', () => {
    for (const account of [apiTemplate.spec.serviceAccountName, controllerTemplate.spec.serviceAccountName]) {
      const made = server.requests.filter((request) => request.user === `system:serviceaccount:${NAMESPACE}:${account}`);
      expect(made.filter((request) => request.resource !== undefined).length, account).toBeGreaterThan(0);
      const refused = made.filter((request) => request.status === 401 || request.status === 403);
      expect(refused.map((r) => `${r.status} ${r.verb} ${r.resource}${r.subresource ? `/${r.subresource}` : ''} ${r.name ?? ''}`)).toEqual(
        [],
      );
    }
  });

  /** A REST call to the API server; fails the test unless it answers `status`. */
  async function call(method: string, urlPath: string, token: string, body: unknown, status: number): Promise<any> {
    const response = await fetch(`${apiUrl}${urlPath}`, {
      method,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await response.text();
    expect(response.status, `${method} ${urlPath}: ${text}`).toBe(status);
    return JSON.parse(text);
  }

  /**
   * Gives the pod's volumes directories under `root` (Secret volumes with their items, as the kubelet
   * writes them) and answers `env` with every path inside a mount, or holding one (a data dir whose
   * subdirectory is a mount), moved to where it is here.
   */
  async function mountVolumes(template: RenderedPodTemplate, env: Record<string, string>, root: string): Promise<Record<string, string>> {
    const mounts = [...(template.spec.containers[0]!.volumeMounts ?? [])].sort((a, b) => a.mountPath.length - b.mountPath.length);
    const here = (mountPath: string) => path.join(root, mountPath);
    for (const mount of mounts) {
      const target = here(mount.mountPath);
      await mkdir(target, { recursive: true });
      const volume = template.spec.volumes?.find((candidate) => candidate.name === mount.name);
      if (!volume?.secret) continue;
      const secret = server.store.get('secrets', NAMESPACE, volume.secret.secretName) as KubeObject & { data: Record<string, string> };
      for (const item of volume.secret.items ?? Object.keys(secret.data).map((key) => ({ key, path: key }))) {
        await writeFile(path.join(target, item.path), Buffer.from(secret.data[item.key]!, 'base64'), { mode: 0o440 });
      }
    }
    const related = (value: string, mountPath: string) =>
      value === mountPath || value.startsWith(`${mountPath}/`) || mountPath.startsWith(`${value}/`);
    return Object.fromEntries(
      Object.entries(env).map(([name, value]) => [name, mounts.some((mount) => related(value, mount.mountPath)) ? here(value) : value]),
    );
  }
});

/** Polls `check` (an HTTP answer has no event to await) until it holds. */
async function until(check: () => Promise<boolean>, timeoutMs: number, what: () => string): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; await new Promise((resolve) => setTimeout(resolve, 100))) {
    if (await check()) return;
  }
  throw new Error(`timed out waiting for ${what()}`);
}
