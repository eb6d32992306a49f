/**
 * charts/acis rendered by the real helm: lint, every object valid against the Kubernetes schemas (or
 * its CRD), and the properties that matter: restricted pods, NetworkPolicies that let through only
 * the flows the design names, least RBAC, values refused by the schema, CRDs identical to crds/.
 */
import { createHash, createPrivateKey, X509Certificate } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { loadConfig } from '../../api-server/config.js';
import { loadControllerConfig } from '../../controller/config.js';
import { loadEgressConfig } from '../../egress-proxy/egress-config.js';
import { ROOT } from '../helpers/acis-process.js';
import { pruneAndDefault, validateAgainstSchema, type JsonSchema } from '../../hack/k8s/schema-validation.js';
import {
  CHART,
  EGRESS_IN_API_VALUES,
  find,
  KIND_VALUES,
  lintChart,
  NAMESPACE,
  offlineHelm,
  ofKind,
  PRODUCTION_VALUES,
  renderChart,
  type RenderedObject,
  SANDBOX_NAMESPACE,
  templateChart,
  TRIAL_VALUES,
} from './chart-render.js';
import { schemaProblems } from './kube-schema.js';
import { connectionAllowed, type NetworkPolicy, type PodEndpoint, selects } from './network-policy-eval.js';

interface Container {
  name: string;
  image: string;
  args?: string[];
  env?: Array<{ name: string; value?: string; valueFrom?: Record<string, unknown> }>;
  securityContext?: Record<string, unknown>;
}
interface PodSpec {
  securityContext?: Record<string, unknown>;
  containers: Container[];
  initContainers?: Container[];
  automountServiceAccountToken?: boolean;
  hostNetwork?: boolean;
  hostPID?: boolean;
  hostIPC?: boolean;
  volumes?: Array<Record<string, unknown>>;
}
interface RbacRule {
  apiGroups: string[];
  resources: string[];
  verbs: string[];
  resourceNames?: string[];
}

const podSpecOf = (object: RenderedObject) => (object.spec as { template: { spec: PodSpec } }).template.spec;
const podLabelsOf = (object: RenderedObject) =>
  (object.spec as { template: { metadata: { labels: Record<string, string> } } }).template.metadata.labels;
const envOf = (container: Container) => new Map((container.env ?? []).map((entry) => [entry.name, entry]));
const WORKLOADS = ['Deployment', 'StatefulSet', 'DaemonSet', 'Job'];
/** The rendered NetworkPolicies where `helm install -n NAMESPACE` puts them: the release namespace unless they name one. */
const installedPolicies = (objects: RenderedObject[]) =>
  (ofKind(objects, 'NetworkPolicy') as unknown as NetworkPolicy[]).map((policy) => ({
    ...policy,
    metadata: { ...policy.metadata, namespace: policy.metadata.namespace ?? NAMESPACE },
  }));

async function crdSchemas(): Promise<Map<string, JsonSchema>> {
  const schemas = new Map<string, JsonSchema>();
  for (const file of await readdir(path.join(CHART, 'crds'))) {
    const crd = parse(await readFile(path.join(CHART, 'crds', file), 'utf8')) as {
      spec: { group: string; names: { kind: string }; versions: Array<{ name: string; schema: { openAPIV3Schema: JsonSchema } }> };
    };
    for (const version of crd.spec.versions)
      schemas.set(`${crd.spec.group}/${version.name} ${crd.spec.names.kind}`, version.schema.openAPIV3Schema);
  }
  return schemas;
}

/** Problems of every rendered object: built-ins against the Kubernetes schema, ours against the CRDs. */
async function validationProblems(objects: RenderedObject[]): Promise<string[]> {
  const crds = await crdSchemas();
  return objects.flatMap((object) => {
    const where = `${object.kind}/${object.metadata.name}`;
    const crd = crds.get(`${object.apiVersion} ${object.kind}`);
    if (crd) {
      const copy = structuredClone(object) as unknown as Parameters<typeof pruneAndDefault>[0];
      const unknown = pruneAndDefault(copy, crd).map((field) => `unknown field ${field}`);
      const invalid = validateAgainstSchema(copy, crd).map((cause) => `${cause.field}: ${cause.message}`);
      return [...unknown, ...invalid].map((problem) => `${where}: ${problem}`);
    }
    if (object.apiVersion === 'monitoring.coreos.com/v1') return []; // the Prometheus operator's kind: checked below
    return schemaProblems(object).map((problem) => `${where}: ${problem}`);
  });
}

describe('charts/acis: helm lint --strict', () => {
  it.each([
    ['default values', []],
    ['the production-like values', [PRODUCTION_VALUES]],
    ['the trial values', [TRIAL_VALUES]],
    ['the kind walk-through values', [KIND_VALUES]],
    ['the egress proxy in the API server', [EGRESS_IN_API_VALUES]],
  ])('passes with %s', async (_name, valuesFiles) => {
    const result = await lintChart({ valuesFiles });
    expect(result.code, result.stdout + result.stderr).toBe(0);
    expect(result.stdout).toContain('0 chart(s) failed');
  });
});

describe.each([
  ['default values', [] as string[]],
  ['production-like values', [PRODUCTION_VALUES]],
  ['trial values', [TRIAL_VALUES]],
  ['kind walk-through values', [KIND_VALUES]],
  ['the egress proxy in the API server', [EGRESS_IN_API_VALUES]],
])('charts/acis: helm template with %s', (_name, valuesFiles) => {
  let objects: RenderedObject[];
  beforeAll(async () => {
    objects = await renderChart({ valuesFiles });
  });

  it('renders objects that are valid against the Kubernetes schemas and the CRDs', async () => {
    expect(objects.length).toBeGreaterThan(15);
    expect(await validationProblems(objects)).toEqual([]);
  });

  it('renders the processes, their Services and ServiceAccounts, and a default warm pool', () => {
    const ownProxy = objects.some((object) => object.kind === 'Deployment' && object.metadata.name === 'acis-egress-proxy');
    const processes = ownProxy ? ['acis-api', 'acis-controller', 'acis-egress-proxy'] : ['acis-api', 'acis-controller'];
    for (const name of processes) find(objects, 'Deployment', name);
    for (const name of ['acis-api', 'acis-controller-metrics', 'acis-egress-proxy']) find(objects, 'Service', name);
    for (const name of processes) find(objects, 'ServiceAccount', name);
    if (ownProxy) {
      // The proxy's runs come from the API pods' resolve port, through a Service of its own (not the API's).
      const resolve = find(objects, 'Service', 'acis-egress-resolve').spec as {
        selector: Record<string, string>;
        ports: Array<{ port: number; targetPort: string }>;
      };
      expect(selects({ matchLabels: resolve.selector }, podLabelsOf(find(objects, 'Deployment', 'acis-api')))).toBe(true);
      const apiPorts = (
        podSpecOf(find(objects, 'Deployment', 'acis-api')).containers[0] as Container & {
          ports: Array<{ name: string; containerPort: number }>;
        }
      ).ports;
      const resolvePort = apiPorts.find((port) => port.name === resolve.ports[0]!.targetPort)!.containerPort;
      expect(resolve.ports).toEqual([expect.objectContaining({ port: resolvePort, targetPort: 'egress-resolve' })]);
      const proxyEnv = envOf(podSpecOf(find(objects, 'Deployment', 'acis-egress-proxy')).containers[0]!);
      expect(proxyEnv.get('ACIS_EGRESS_RESOLVE_URL')?.value).toBe(`https://acis-egress-resolve:${resolvePort}`);
      // The listener's certificate names the Service every way the proxy may dial it.
      const apiEnv = envOf(podSpecOf(find(objects, 'Deployment', 'acis-api')).containers[0]!);
      expect(apiEnv.get('ACIS_EGRESS_RESOLVE_TLS_NAMES')?.value?.split(',')).toEqual([
        'acis-egress-resolve',
        'acis-egress-resolve.acis',
        'acis-egress-resolve.acis.svc',
        'acis-egress-resolve.acis.svc.cluster.local',
      ]);
      const apiService = find(objects, 'Service', 'acis-api').spec as { ports: Array<{ targetPort: string }> };
      expect(apiService.ports.map((port) => port.targetPort)).toEqual(['http']);
    }
    expect(find(objects, 'SandboxWarmPool', 'vendor-agent-sdk').spec).toMatchObject({ agentType: 'vendor-agent-sdk' });
  });

  it('runs every pod under Pod Security "restricted", non-root, with a read-only root filesystem', () => {
    const workloads = objects.filter((object) => WORKLOADS.includes(object.kind));
    expect(workloads.length).toBeGreaterThanOrEqual(2);
    for (const workload of workloads) {
      const pod = podSpecOf(workload);
      const where = `${workload.kind}/${workload.metadata.name}`;
      expect(pod.securityContext, where).toMatchObject({ runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
      expect(pod.securityContext!.runAsUser, where).toBeGreaterThan(0);
      expect(
        [pod.hostNetwork, pod.hostPID, pod.hostIPC].every((flag) => !flag),
        where,
      ).toBe(true);
      expect(pod.volumes?.every((volume) => !('hostPath' in volume)) ?? true, where).toBe(true);
      for (const container of [...pod.containers, ...(pod.initContainers ?? [])]) {
        expect(container.securityContext, `${where} ${container.name}`).toEqual({
          runAsNonRoot: true,
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          privileged: false,
          capabilities: { drop: ['ALL'] },
          seccompProfile: { type: 'RuntimeDefault' },
        });
      }
    }
  });

  it('mounts a service-account token only where the Kubernetes API is used', () => {
    const tokenHolders = objects
      .filter((object) => WORKLOADS.includes(object.kind) && podSpecOf(object).automountServiceAccountToken !== false)
      .map((object) => object.metadata.name)
      .sort();
    expect(tokenHolders).toEqual(['acis-api', 'acis-controller']);
    for (const account of ofKind(objects, 'ServiceAccount'))
      expect(account.automountServiceAccountToken, account.metadata.name).toBe(false);
  });

  it('gives the API server readiness on /readyz, liveness on /healthz and the kubernetes provider', () => {
    const api = find(objects, 'Deployment', 'acis-api');
    const container = podSpecOf(api).containers[0]! as Container & {
      readinessProbe: { httpGet: { path: string } };
      livenessProbe: { httpGet: { path: string } };
    };
    expect(container.readinessProbe.httpGet.path).toBe('/readyz');
    expect(container.livenessProbe.httpGet.path).toBe('/healthz');
    const env = envOf(container);
    expect(env.get('ACIS_SANDBOX_PROVIDER')?.value).toBe('kubernetes');
    const controllerEnv = envOf(podSpecOf(find(objects, 'Deployment', 'acis-controller')).containers[0]!);
    expect(Number(env.get('ACIS_SANDBOX_READY_TIMEOUT_SECONDS')?.value)).toBeGreaterThan(
      Number(controllerEnv.get('ACIS_SANDBOX_START_TIMEOUT_SECONDS')?.value),
    );
    expect(env.get('ACIS_K8S_NAMESPACE')?.valueFrom).toEqual({ fieldRef: { fieldPath: 'metadata.namespace' } });
    expect(env.get('ACIS_REPOSITORY_SYNC_RUNNER')?.value).toBe('kubernetes');
    for (const name of ['DATABASE_URL', 'ACIS_MASTER_KEY', 'ACIS_ADMIN_TOKEN'])
      expect(env.get(name)?.valueFrom, name).toHaveProperty('secretKeyRef');
    // A secret value is never written into a pod spec (a `_FILE` names where a Secret is mounted).
    for (const entry of env.values())
      if (/KEY|TOKEN|PASSWORD|DATABASE_URL/.test(entry.name) && !entry.name.endsWith('_FILE'))
        expect(entry.value, entry.name).toBeUndefined();
  });

  it("points the controller at the chart's own Services, images and Lease; it names no database Secret", () => {
    const controller = find(objects, 'Deployment', 'acis-controller');
    expect(controller.spec).toMatchObject({ replicas: expect.any(Number) });
    const env = envOf(podSpecOf(controller).containers[0]!);
    const proxyHost = env.get('ACIS_EGRESS_PROXY_HOST')!.value!;
    const proxy = find(objects, 'Service', 'acis-egress-proxy');
    const proxyService = proxy.spec as { clusterIP?: string; ports: Array<{ name: string; port: number }> };
    // By a name runner pods resolve from their own namespace (with sandbox DNS on), or a fixed address.
    expect([`${proxy.metadata.name}.${NAMESPACE}.svc`, proxyService.clusterIP]).toContain(proxyHost);
    expect(env.get('ACIS_EGRESS_PROXY_PORT')!.value).toBe(String(proxyService.ports.find((p) => p.name === 'proxy')!.port));
    const apiContainer = podSpecOf(find(objects, 'Deployment', 'acis-api')).containers[0]! as Container & {
      ports: Array<{ name: string; containerPort: number }>;
    };
    const api = envOf(apiContainer);
    const databaseSecret = (api.get('DATABASE_URL')!.valueFrom as { secretKeyRef: { name: string } }).secretKeyRef.name;
    // Sync Jobs hold no database credential: the controller has none to hand them, and no name of one.
    expect(env.has('ACIS_DATABASE_SECRET')).toBe(false);
    expect(JSON.stringify(controller)).not.toContain(databaseSecret);
    expect(JSON.stringify(controller)).not.toContain('DATABASE_URL');
    // They hand their results to the API server's sync report listener, through its own Service.
    const reportUrl = new URL(env.get('ACIS_SYNC_REPORT_URL')!.value!);
    const reportService = find(objects, 'Service', 'acis-sync-report').spec as {
      selector: Record<string, string>;
      ports: Array<{ port: number; targetPort: string }>;
    };
    expect(reportUrl.hostname).toBe(`acis-sync-report.${NAMESPACE}.svc`);
    // Over HTTPS: the listener's certificate names the Service every way a Job may dial it, and the
    // Jobs verify it with the deployment CA's ConfigMap, which the controller is given.
    expect(reportUrl.protocol).toBe('https:');
    expect(api.get('ACIS_SYNC_REPORT_TLS_NAMES')?.value?.split(',')).toEqual([
      'acis-sync-report',
      `acis-sync-report.${NAMESPACE}`,
      `acis-sync-report.${NAMESPACE}.svc`,
      `acis-sync-report.${NAMESPACE}.svc.cluster.local`,
    ]);
    expect(env.get('ACIS_EGRESS_CA_CONFIGMAP')?.value).toBeTruthy();
    expect(Number(reportUrl.port)).toBe(reportService.ports[0]!.port);
    expect(selects({ matchLabels: reportService.selector }, podLabelsOf(find(objects, 'Deployment', 'acis-api')))).toBe(true);
    const reportPort = apiContainer.ports.find((port) => port.name === reportService.ports[0]!.targetPort)!.containerPort;
    expect(api.get('ACIS_SYNC_REPORT_LISTEN')!.value).toBe(`0.0.0.0:${reportPort}`);
    expect(reportPort).not.toBe(Number(api.get('PORT')!.value));
    expect(env.get('ACIS_SYNC_IMAGE')!.value).toBe(podSpecOf(controller).containers[0]!.image);
    const leaseRule = (find(objects, 'Role', 'acis-controller-lease').rules as RbacRule[]).find((rule) => rule.resourceNames)!;
    expect(leaseRule.resourceNames).toEqual([env.get('ACIS_CONTROLLER_LEASE_NAME')!.value]);
  });
});

describe('charts/acis: NetworkPolicies', () => {
  const ns = { namespace: NAMESPACE };
  const sandboxNs = { namespace: SANDBOX_NAMESPACE };
  const runner: PodEndpoint = {
    ...sandboxNs,
    ip: '10.244.1.10',
    labels: {
      'app.kubernetes.io/managed-by': 'acis-controller',
      'app.kubernetes.io/component': 'runner',
      'acis.dev/pool': 'vendor-agent-sdk',
    },
  };
  const otherRunner: PodEndpoint = { ...runner, ip: '10.244.1.11' };
  const sync: PodEndpoint = {
    ...sandboxNs,
    ip: '10.244.1.12',
    labels: { 'app.kubernetes.io/managed-by': 'acis-controller', 'app.kubernetes.io/component': 'repository-sync' },
  };
  const stranger: PodEndpoint = { ...ns, ip: '10.244.1.13', labels: { app: 'something-else' } };
  const strangerElsewhere: PodEndpoint = { namespace: 'other', ip: '10.244.2.13', labels: runner.labels };
  /** Runner-looking pods in the release namespace, where the chart's policies do not expect them. */
  const runnerInRelease: PodEndpoint = { ...runner, ...ns, ip: '10.244.1.14' };
  const dns: PodEndpoint = { namespace: 'kube-system', ip: '10.244.0.2', labels: { 'k8s-app': 'kube-dns' } };
  const internet = { ip: '140.82.112.3' };
  const metadata = { ip: '169.254.169.254' };
  const serviceIp = { ip: '10.96.0.1' };
  const privateHost = { ip: '192.168.1.20' };

  let policies: NetworkPolicy[];
  let production: NetworkPolicy[];
  let component: (name: string, ip: string, objects: RenderedObject[]) => PodEndpoint;
  let api: PodEndpoint, proxy: PodEndpoint, controller: PodEndpoint;

  beforeAll(async () => {
    const objects = await renderChart();
    const productionObjects = await renderChart({ valuesFiles: [PRODUCTION_VALUES] });
    policies = installedPolicies(objects);
    production = installedPolicies(productionObjects);
    component = (name, ip, from) => ({ ...ns, ip, labels: podLabelsOf(find(from, 'Deployment', name)) });
    api = component('acis-api', '10.244.1.2', objects);
    proxy = component('acis-egress-proxy', '10.244.1.3', objects);
    controller = component('acis-controller', '10.244.1.4', objects);
  });

  it('select the pods they are about: runners, sync Jobs and each process', () => {
    const selected = (pod: PodEndpoint) =>
      policies.filter((policy) => selects(policy.spec.podSelector, pod.labels)).map((policy) => policy.metadata.name);
    expect(selected(runner)).toEqual(['acis-sandbox']);
    expect(selected(sync)).toEqual(['acis-repository-sync']);
    expect(selected(api)).toEqual(['acis-api']);
    expect(selected(proxy)).toEqual(['acis-egress-proxy']);
    expect(selected(controller)).toEqual(['acis-controller']);
    for (const policy of policies) expect(policy.spec.policyTypes, policy.metadata.name).toEqual(['Ingress', 'Egress']);
  });

  it('let a sandbox reach the egress proxy pods on the proxy port, and nothing else: not even DNS', () => {
    expect(connectionAllowed(policies, runner, proxy, 3128)).toBe(true);
    expect(connectionAllowed(policies, runner, dns, 53, 'UDP')).toBe(false);
    expect(connectionAllowed(policies, runner, dns, 53, 'TCP')).toBe(false);
    expect(connectionAllowed(policies, runner, proxy, 9091)).toBe(false);
    expect(connectionAllowed(policies, runner, api, 8080)).toBe(false);
    expect(connectionAllowed(policies, runner, otherRunner, 7070)).toBe(false);
    expect(connectionAllowed(policies, runner, controller, 9090)).toBe(false);
    expect(connectionAllowed(policies, runner, dns, 80)).toBe(false);
    // A runner ignoring its proxy variables gets nowhere.
    for (const destination of [internet, metadata, serviceIp, privateHost]) {
      for (const port of [80, 443, 53])
        expect(connectionAllowed(policies, runner, destination, port), `${destination.ip}:${port}`).toBe(false);
    }
  });

  it('are in the namespace of the pods they select: runners and sync Jobs in the sandbox namespace, the processes in the release one', () => {
    const where = Object.fromEntries(policies.map((policy) => [policy.metadata.name, policy.metadata.namespace]));
    expect(where).toEqual({
      'acis-api': NAMESPACE,
      'acis-controller': NAMESPACE,
      'acis-egress-proxy': NAMESPACE,
      'acis-sandbox': SANDBOX_NAMESPACE,
      'acis-repository-sync': SANDBOX_NAMESPACE,
    });
    // The peers across the two namespaces name the other one: a pod with the same labels in the wrong one gets nowhere.
    expect(connectionAllowed(policies, runnerInRelease, proxy, 3128)).toBe(false);
    expect(connectionAllowed(policies, api, runnerInRelease, 7070)).toBe(false);
  });

  it('let only the API server into a sandbox, on the runner port', () => {
    expect(connectionAllowed(policies, api, runner, 7070)).toBe(true);
    expect(connectionAllowed(policies, api, runner, 22)).toBe(false);
    expect(connectionAllowed(policies, stranger, runner, 7070)).toBe(false);
    expect(connectionAllowed(policies, strangerElsewhere, runner, 7070)).toBe(false);
    expect(connectionAllowed(policies, proxy, runner, 7070)).toBe(false);
    expect(connectionAllowed(policies, controller, runner, 7070)).toBe(false);
  });

  it('with a fixed proxy ClusterIP, leave sandboxes no DNS at all', () => {
    expect(connectionAllowed(production, runner, dns, 53, 'UDP')).toBe(false);
    expect(connectionAllowed(production, runner, { ...proxy, labels: proxy.labels }, 3128)).toBe(true);
  });

  it('let the egress proxy reach the internet but not the cluster, private or metadata ranges', () => {
    expect(connectionAllowed(policies, proxy, internet, 443)).toBe(true);
    expect(connectionAllowed(policies, proxy, internet, 80)).toBe(true);
    expect(connectionAllowed(policies, proxy, dns, 53, 'UDP')).toBe(true);
    for (const destination of [metadata, serviceIp, privateHost, { ip: '172.20.0.5' }, { ip: '100.64.0.1' }, api, runner]) {
      expect(connectionAllowed(policies, proxy, destination, 443), destination.ip).toBe(false);
    }
    expect(connectionAllowed(policies, stranger, proxy, 3128)).toBe(false);
  });

  it("let the egress proxy pods, and only they, reach the API pods' resolve port, and the proxy no other API port", () => {
    for (const set of [policies, production]) {
      expect(connectionAllowed(set, proxy, api, 8081)).toBe(true);
      expect(connectionAllowed(set, proxy, api, 8080)).toBe(false);
      for (const source of [runner, stranger, strangerElsewhere, controller, sync])
        expect(connectionAllowed(set, source, api, 8081), source.ip).toBe(false);
    }
    const proxyElsewhere: PodEndpoint = { ...proxy, namespace: 'other', ip: '10.244.2.3' };
    expect(connectionAllowed(policies, proxyElsewhere, api, 8081)).toBe(false);
  });

  it('let the API server reach PostgreSQL, the Kubernetes API and HTTPS, where the production values narrow them', () => {
    expect(connectionAllowed(policies, api, { ip: '10.20.0.15' }, 5432)).toBe(true);
    expect(connectionAllowed(policies, api, { ip: '10.0.0.10' }, 6443)).toBe(true);
    expect(connectionAllowed(policies, api, internet, 443)).toBe(true);
    expect(connectionAllowed(policies, api, internet, 80)).toBe(false);
    expect(connectionAllowed(policies, api, metadata, 80)).toBe(false);
    expect(connectionAllowed(production, api, { ip: '10.20.0.15' }, 5432)).toBe(true);
    expect(connectionAllowed(production, api, { ip: '10.20.0.16' }, 5432)).toBe(false);
    expect(connectionAllowed(production, api, { ip: '10.0.0.10' }, 6443)).toBe(true);
    expect(connectionAllowed(production, api, { ip: '10.0.0.11' }, 6443)).toBe(false);
    const ingressController: PodEndpoint = { namespace: 'ingress-nginx', ip: '10.244.3.3', labels: {} };
    expect(connectionAllowed(production, ingressController, { ...api }, 8080)).toBe(true);
    expect(connectionAllowed(production, stranger, { ...api }, 8080)).toBe(false);
  });

  it("let the controller reach the Kubernetes API only, and sync Jobs git hosts and the API pods' sync report port, never PostgreSQL", () => {
    expect(connectionAllowed(production, controller, { ip: '10.0.0.10' }, 443)).toBe(true);
    expect(connectionAllowed(production, controller, internet, 443)).toBe(false);
    expect(connectionAllowed(production, controller, runner, 7070)).toBe(false);
    expect(connectionAllowed(policies, sync, internet, 443)).toBe(true);
    expect(connectionAllowed(policies, sync, internet, 22)).toBe(true);
    expect(connectionAllowed(policies, sync, internet, 80)).toBe(false);
    expect(connectionAllowed(policies, sync, metadata, 80)).toBe(false);
    for (const set of [policies, production]) {
      expect(connectionAllowed(set, sync, api, 8082)).toBe(true);
      for (const port of [8080, 8081, 9090]) expect(connectionAllowed(set, sync, api, port), `api:${port}`).toBe(false);
      for (const database of [{ ip: '10.20.0.15' }, { ip: '140.82.112.3' }, { ...ns, ip: '10.244.1.20', labels: {} }])
        expect(connectionAllowed(set, sync, database, 5432), database.ip).toBe(false);
      expect(connectionAllowed(set, sync, runner, 7070)).toBe(false);
      // Only sync Jobs reach the sync report port.
      const syncElsewhere: PodEndpoint = { ...sync, namespace: 'other', ip: '10.244.2.12' };
      for (const source of [runner, stranger, strangerElsewhere, syncElsewhere, controller, proxy])
        expect(connectionAllowed(set, source, api, 8082), source.ip).toBe(false);
    }
    expect(connectionAllowed(policies, stranger, sync, 8080)).toBe(false);
  });

  it('with the egress proxy in the API server, let sandboxes reach the API pods on the proxy port only', async () => {
    const objects = await renderChart({ valuesFiles: [EGRESS_IN_API_VALUES] });
    const inApi = installedPolicies(objects);
    expect(inApi.map((policy) => policy.metadata.name)).not.toContain('acis-egress-proxy');
    // No resolve listener, Service or token: the proxy is in the API server.
    expect(objects.filter((object) => object.metadata.name === 'acis-egress-resolve')).toEqual([]);
    expect(connectionAllowed(inApi, stranger, api, 8081)).toBe(false);
    const service = find(objects, 'Service', 'acis-egress-proxy').spec as {
      selector: Record<string, string>;
      ports: Array<{ port: number }>;
    };
    expect(selects({ matchLabels: service.selector }, api.labels)).toBe(true);
    expect(connectionAllowed(inApi, runner, api, 3128)).toBe(true);
    expect(connectionAllowed(inApi, runner, api, 8080)).toBe(false);
    expect(connectionAllowed(inApi, stranger, api, 3128)).toBe(false);
    expect(connectionAllowed(inApi, api, internet, 80)).toBe(true);
    for (const destination of [metadata, serviceIp, privateHost])
      expect(connectionAllowed(inApi, api, destination, 80), destination.ip).toBe(false);
    for (const destination of [internet, metadata, otherRunner, controller])
      expect(connectionAllowed(inApi, runner, destination, 443)).toBe(false);
    const container = podSpecOf(find(objects, 'Deployment', 'acis-api')).containers[0]! as Container & {
      volumeMounts: Array<{ name: string; mountPath: string }>;
    };
    expect(envOf(container).get('ACIS_EGRESS_LISTEN')?.value).toBe('0.0.0.0:3128');
    expect(envOf(container).has('ACIS_EGRESS_RESOLVE_LISTEN')).toBe(false);
    expect(container.volumeMounts).toContainEqual(expect.objectContaining({ name: 'egress-ca', mountPath: '/var/lib/acis/egress-ca' }));
    const refused = await templateChart({ set: ['egressProxy.mode=api-server', 'apiServer.replicas=2'] });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('egressProxy.ca.existingSecret');
  });

  it('let only the API server into the trial PostgreSQL: sync Jobs hold no database credential', async () => {
    const trial = await renderChart({ valuesFiles: [TRIAL_VALUES] });
    const trialPolicies = installedPolicies(trial);
    const postgres: PodEndpoint = { ...ns, ip: '10.244.1.20', labels: podLabelsOf(find(trial, 'StatefulSet', 'acis-postgresql')) };
    expect(connectionAllowed(trialPolicies, api, postgres, 5432)).toBe(true);
    expect(connectionAllowed(trialPolicies, sync, postgres, 5432)).toBe(false);
    expect(connectionAllowed(trialPolicies, runner, postgres, 5432)).toBe(false);
    expect(connectionAllowed(trialPolicies, proxy, postgres, 5432)).toBe(false);
    expect(connectionAllowed(trialPolicies, stranger, postgres, 5432)).toBe(false);
    expect(connectionAllowed(trialPolicies, api, { ip: '10.20.0.15' }, 5432)).toBe(false);
  });
});

describe('charts/acis: the sandbox namespace', () => {
  /** Where each object goes on `helm install -n NAMESPACE`. */
  const placed = (objects: RenderedObject[]) =>
    Object.fromEntries(
      objects
        .filter((object) => object.kind !== 'Namespace')
        .map((o) => [`${o.kind}/${o.metadata.name}`, o.metadata.namespace ?? NAMESPACE]),
    );

  it('is `<release>-sandboxes` by default, made by the chart with Pod Security restricted enforced', async () => {
    const objects = await renderChart();
    expect(ofKind(objects, 'Namespace')).toEqual([
      expect.objectContaining({
        metadata: expect.objectContaining({
          name: SANDBOX_NAMESPACE,
          labels: expect.objectContaining({
            'pod-security.kubernetes.io/enforce': 'restricted',
            'pod-security.kubernetes.io/enforce-version': 'latest',
            'pod-security.kubernetes.io/warn': 'restricted',
            'pod-security.kubernetes.io/audit': 'restricted',
          }),
        }),
      }),
    ]);
    // What owns or is owned by sandbox pods is beside them; the credentials and the Lease's Role are not.
    expect(placed(objects)).toMatchObject({
      'SandboxWarmPool/vendor-agent-sdk': SANDBOX_NAMESPACE,
      'ConfigMap/acis-egress-ca': SANDBOX_NAMESPACE,
      'NetworkPolicy/acis-sandbox': SANDBOX_NAMESPACE,
      'NetworkPolicy/acis-repository-sync': SANDBOX_NAMESPACE,
      'Role/acis-api': SANDBOX_NAMESPACE,
      'Role/acis-controller': SANDBOX_NAMESPACE,
      'Role/acis-controller-lease': NAMESPACE,
      'Secret/acis-egress-ca-key': NAMESPACE,
      'Secret/acis-egress-resolve': NAMESPACE,
      'Deployment/acis-api': NAMESPACE,
    });
    const secretsInSandboxes = objects.filter((o) => o.kind === 'Secret' && o.metadata.namespace === SANDBOX_NAMESPACE);
    expect(secretsInSandboxes).toEqual([]);
  });

  it('takes a name and podSecurity, or a namespace made by the operator (create=false: no Namespace, no labels)', async () => {
    const named = await renderChart({ set: ['sandboxNamespace.name=agents', 'sandboxNamespace.podSecurity=baseline'] });
    expect(find(named, 'Namespace', 'agents').metadata.labels).toMatchObject({ 'pod-security.kubernetes.io/enforce': 'baseline' });
    expect(placed(named)['SandboxWarmPool/vendor-agent-sdk']).toBe('agents');
    const theirs = await renderChart({ set: ['sandboxNamespace.name=agents', 'sandboxNamespace.create=false'] });
    expect(ofKind(theirs, 'Namespace')).toEqual([]);
    expect(placed(theirs)['Role/acis-controller']).toBe('agents');
  });

  it('keeps the layout of earlier versions in the release namespace only with create=false (the chart never labels the namespace it is installed in)', async () => {
    const refused = await templateChart({ set: [`sandboxNamespace.name=${NAMESPACE}`] });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('sandboxNamespace.create=false');
    const together = await renderChart({ set: [`sandboxNamespace.name=${NAMESPACE}`, 'sandboxNamespace.create=false'] });
    expect(ofKind(together, 'Namespace')).toEqual([]);
    expect(new Set(Object.values(placed(together)))).toEqual(new Set([NAMESPACE]));
  });
});

describe('charts/acis: RBAC', () => {
  let objects: RenderedObject[];
  beforeAll(async () => {
    objects = await renderChart();
  });

  it('gives the controller exactly controller/rbac.yaml, with the Lease named as the chart names it', async () => {
    const reference = parseAllDocuments(await readFile(path.join(ROOT, 'controller', 'rbac.yaml'), 'utf8')).map(
      (document) => document.toJS() as RenderedObject,
    );
    for (const name of ['acis-controller', 'acis-controller-lease']) {
      const expected = (find(reference, 'Role', name).rules as RbacRule[]).map((rule) =>
        rule.resourceNames ? { ...rule, resourceNames: ['acis-controller'] } : rule,
      );
      expect(find(objects, 'Role', name).rules, name).toEqual(expected);
    }
  });

  it('grants in the release namespace only the Lease: no Role there reaches a Secret (master key, database, CA key)', () => {
    const inRelease = ofKind(objects, 'Role').filter((role) => (role.metadata.namespace ?? NAMESPACE) === NAMESPACE);
    expect(inRelease.map((role) => role.metadata.name)).toEqual(['acis-controller-lease']);
    expect((inRelease[0]!.rules as RbacRule[]).flatMap((rule) => rule.resources)).toEqual(['leases', 'leases']);
    const inSandboxes = ofKind(objects, 'Role').filter((role) => role.metadata.namespace === SANDBOX_NAMESPACE);
    expect(inSandboxes.map((role) => role.metadata.name).sort()).toEqual(['acis-api', 'acis-controller']);
    // There, Secrets are read only by name (the runner tokens) and never listed or watched.
    for (const role of inSandboxes) {
      const secretVerbs = (role.rules as RbacRule[]).filter((rule) => rule.resources.includes('secrets')).flatMap((rule) => rule.verbs);
      expect(
        secretVerbs.filter((verb) => ['list', 'watch', '*'].includes(verb)),
        role.metadata.name,
      ).toEqual([]);
    }
  });

  it('gives the API server Sandboxes, a read-only watch of pods, the runner token Secrets by name, Events (its runners’ egress refusals), RepositorySyncs and the sync credential Secrets, never writes to pods, status or lists of Secrets', () => {
    const rules = find(objects, 'Role', 'acis-api').rules as RbacRule[];
    expect(rules).toEqual([
      { apiGroups: ['acis.dev'], resources: ['sandboxes'], verbs: ['get', 'list', 'watch', 'create', 'patch', 'delete'] },
      { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] },
      { apiGroups: [''], resources: ['secrets'], verbs: ['get'] },
      { apiGroups: [''], resources: ['events'], verbs: ['create', 'patch'] },
      { apiGroups: ['acis.dev'], resources: ['repositorysyncs'], verbs: ['get', 'create', 'update', 'delete'] },
      { apiGroups: ['acis.dev'], resources: ['repositorysyncs/finalizers'], verbs: ['update'] },
      { apiGroups: [''], resources: ['secrets'], verbs: ['create', 'update'] },
    ]);
  });

  it("binds each Role, in its own namespace, to its process's ServiceAccount in the release namespace (no ClusterRole)", () => {
    expect(ofKind(objects, 'ClusterRole')).toEqual([]);
    expect(ofKind(objects, 'ClusterRoleBinding')).toEqual([]);
    const bindings = ofKind(objects, 'RoleBinding');
    expect(bindings.map((binding) => binding.metadata.name).sort()).toEqual(['acis-api', 'acis-controller', 'acis-controller-lease']);
    for (const binding of bindings) {
      const { roleRef, subjects } = binding as unknown as {
        roleRef: { kind: string; name: string };
        subjects: Array<{ kind: string; name: string; namespace: string }>;
      };
      expect(roleRef).toMatchObject({ kind: 'Role', name: binding.metadata.name });
      expect(binding.metadata.namespace).toBe(find(objects, 'Role', roleRef.name).metadata.namespace);
      const account = binding.metadata.name.replace(/-lease$/, '');
      expect(subjects).toEqual([{ kind: 'ServiceAccount', name: account, namespace: NAMESPACE }]);
      expect(find(objects, 'ServiceAccount', account).metadata.namespace ?? NAMESPACE).toBe(NAMESPACE);
    }
  });

  it("drops the API server's sync rules when syncs run in process", async () => {
    const inProcess = await renderChart({ set: ['repositorySync.jobs=false'] });
    expect((find(inProcess, 'Role', 'acis-api').rules as RbacRule[]).map((rule) => rule.resources)).toEqual([
      ['sandboxes'],
      ['pods'],
      ['secrets'],
      ['events'],
    ]);
    expect(ofKind(inProcess, 'NetworkPolicy').map((policy) => policy.metadata.name)).not.toContain('acis-repository-sync');
    // No sync report listener, Service or ingress to it either.
    expect(inProcess.filter((object) => object.metadata.name === 'acis-sync-report')).toEqual([]);
    expect(envOf(podSpecOf(find(inProcess, 'Deployment', 'acis-api')).containers[0]!).has('ACIS_SYNC_REPORT_LISTEN')).toBe(false);
  });
});

describe("charts/acis: values.schema.json and the chart's own refusals", () => {
  it.each([
    ['apiServer.replicas=two', '/apiServer/replicas'],
    ['networkPolicy.enabled=yes', '/networkPolicy/enabled'],
    ['egressProxy.port=99999', '/egressProxy/port'],
    ['logLevel=loud', '/logLevel'],
    ['secrets.adminToken=short', '/secrets/adminToken'],
    ['secrets.masterKey=not-base64', '/secrets/masterKey'],
    ['database.url=mysql://x', '/database/url'],
    ['networkPolicy.clusterCIDRs[0]=everything', '/networkPolicy/clusterCIDRs/0'],
    ['apiServer.replica=3', "additional properties 'replica' not allowed"],
    ['egressProxy.resolve.port=0', '/egressProxy/resolve/port'],
    ['repositorySync.reportPort=70000', '/repositorySync/reportPort'],
    ['sandbox.runtimeClassName=gVisor', '/sandbox/runtimeClassName'],
    ['sandbox.podLabels.acis\\.dev/tenant=x', "invalid propertyName 'acis.dev/tenant'"],
    ['sandbox.podAnnotations.app\\.kubernetes\\.io/managed-by=x', "invalid propertyName 'app.kubernetes.io/managed-by'"],
    ['sandbox.tolerations[0].effect=Sometimes', '/sandbox/tolerations/0/effect'],
    ['sandbox.affinity.nodeAffinty.x=y', "additional properties 'nodeAffinty' not allowed"],
  ])('refuses %s', async (pair, message) => {
    const result = await templateChart({ set: [pair] });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain("values don't meet the specifications of the schema");
    expect(result.stderr).toContain(message);
  });

  it('refuses a quoted number where an integer is expected', async () => {
    const quoted = await offlineHelm(['template', 'acis', CHART, '--set-string', 'controller.replicas=2']);
    expect(quoted.code).not.toBe(0);
    expect(quoted.stderr).toContain('/controller/replicas');
  });

  it('refuses a resolve port that is the API port', async () => {
    const result = await templateChart({ set: ['egressProxy.resolve.port=8080'] });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('egressProxy.resolve.port must differ from apiServer.port');
  });

  it.each([
    ['repositorySync.reportPort=8080', []],
    ['repositorySync.reportPort=8081', []],
    ['repositorySync.reportPort=3128', [EGRESS_IN_API_VALUES]],
  ])('refuses a sync report port that is another port of the API pod (%s)', async (pair, valuesFiles) => {
    const result = await templateChart({ set: [pair], valuesFiles });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('repositorySync.reportPort must differ');
    // Without sync Jobs there is no listener to collide.
    expect((await templateChart({ set: [pair, 'repositorySync.jobs=false'], valuesFiles })).code).toBe(0);
  });
});

describe("charts/acis: the egress proxy's deployment CA", () => {
  const dataOf = (object: RenderedObject) => (object as unknown as { data: Record<string, string> }).data;
  const secretVolumesOf = (deployment: RenderedObject) =>
    (podSpecOf(deployment).volumes ?? [])
      .map((volume) => (volume.secret as { secretName?: string } | undefined)?.secretName)
      .filter(Boolean);
  const caConfigMapEnv = (objects: RenderedObject[]) =>
    envOf(podSpecOf(find(objects, 'Deployment', 'acis-controller')).containers[0]!).get('ACIS_EGRESS_CA_CONFIGMAP')?.value;

  it('with default values, is generated into a Secret every proxy replica mounts, its certificate alone in the ConfigMap the controller names', async () => {
    const objects = await renderChart({ set: ['egressProxy.replicas=3'] });
    const secret = dataOf(find(objects, 'Secret', 'acis-egress-ca-key'));
    const cert = Buffer.from(secret['ca.crt']!, 'base64').toString();
    const key = Buffer.from(secret['ca.key']!, 'base64').toString();
    const root = new X509Certificate(cert);
    expect(root.ca).toBe(true);
    expect(root.checkPrivateKey(createPrivateKey(key))).toBe(true);
    expect(createPrivateKey(key).asymmetricKeyDetails).toEqual({ namedCurve: 'prime256v1' });

    const configMap = find(objects, 'ConfigMap', 'acis-egress-ca');
    expect(dataOf(configMap)).toEqual({ 'ca.crt': cert });
    expect(caConfigMapEnv(objects)).toBe('acis-egress-ca');

    // Every replica reads the one CA from the Secret, read-only, where the proxy looks for it.
    const proxy = find(objects, 'Deployment', 'acis-egress-proxy');
    expect((proxy.spec as { replicas: number }).replicas).toBe(3);
    const spec = podSpecOf(proxy);
    expect(spec.volumes).toContainEqual({
      name: 'ca',
      secret: expect.objectContaining({
        secretName: 'acis-egress-ca-key',
        items: [
          { key: 'ca.crt', path: 'ca.crt' },
          { key: 'ca.key', path: 'ca.key' },
        ],
      }),
    });
    const mounts = (spec.containers[0] as Container & { volumeMounts: Array<{ name: string; mountPath: string; readOnly?: boolean }> })
      .volumeMounts;
    expect(mounts).toContainEqual({ name: 'ca', mountPath: '/var/lib/acis-egress/egress-ca', readOnly: true });
    const dataDir = envOf(spec.containers[0]!).get('ACIS_DATA_DIR')!.value!;
    expect(path.join(dataDir, 'egress-ca')).toBe('/var/lib/acis-egress/egress-ca');
    // A new CA rolls the proxies.
    const annotations = (proxy.spec as { template: { metadata: { annotations: Record<string, string> } } }).template.metadata.annotations;
    expect(annotations['checksum/egress-ca']).toBe(createHash('sha256').update(cert).digest('hex'));

    // The key is the proxy's and the API server's (its own certificate, for the runner links and the
    // resolve listener, comes from it): in no ConfigMap, in no other object, mounted by no other pod.
    for (const map of ofKind(objects, 'ConfigMap')) expect(JSON.stringify(map), map.metadata.name).not.toContain('PRIVATE KEY');
    const elsewhere = JSON.stringify(
      objects.filter((object) => !(object.kind === 'Secret' && object.metadata.name === 'acis-egress-ca-key')),
    );
    expect(elsewhere).not.toContain(secret['ca.key']);
    expect(elsewhere).not.toContain(key.split('\n')[1]);
    const mounting = ofKind(objects, 'Deployment').filter((deployment) => secretVolumesOf(deployment).includes('acis-egress-ca-key'));
    expect(mounting.map((deployment) => deployment.metadata.name).sort()).toEqual(['acis-api', 'acis-egress-proxy']);
  });

  it('is a new one on each install without a cluster to look it up in', async () => {
    const first = dataOf(find(await renderChart(), 'Secret', 'acis-egress-ca-key'))['ca.crt'];
    const second = dataOf(find(await renderChart(), 'Secret', 'acis-egress-ca-key'))['ca.crt'];
    expect(first).not.toBe(second);
  });

  it("with a CA Secret of the operator's, is theirs: no Secret or ConfigMap of the chart's, the controller names their ConfigMap (or none)", async () => {
    const production = await renderChart({ valuesFiles: [PRODUCTION_VALUES] });
    expect(production.filter((object) => object.metadata.name.startsWith('acis-egress-ca'))).toEqual([]);
    expect(secretVolumesOf(find(production, 'Deployment', 'acis-egress-proxy'))).toContain('acis-egress-ca');
    expect(caConfigMapEnv(production)).toBe('acis-egress-ca-cert');
    const annotations = (
      find(production, 'Deployment', 'acis-egress-proxy').spec as { template: { metadata: { annotations: Record<string, string> } } }
    ).template.metadata.annotations;
    expect(annotations['checksum/egress-ca']).toBeUndefined();

    const withoutConfigMap = await renderChart({ set: ['egressProxy.ca.existingSecret=my-ca'] });
    expect(withoutConfigMap.filter((object) => object.metadata.name.startsWith('acis-egress-ca'))).toEqual([]);
    expect(caConfigMapEnv(withoutConfigMap)).toBeUndefined();
  });

  it("in mode api-server, is the API server's to publish: the chart renders none", async () => {
    const inApi = await renderChart({ set: ['egressProxy.mode=api-server', 'apiServer.replicas=1'] });
    expect(
      inApi.filter((object) => ['Secret', 'ConfigMap'].includes(object.kind) && object.metadata.name.startsWith('acis-egress-ca')),
    ).toEqual([]);
    expect(caConfigMapEnv(inApi)).toBe('acis-egress-ca');
  });
});

describe('charts/acis: Secrets', () => {
  it('writes the master key and admin token given (generated ones: chart-gitops.test.ts), and keeps secret values out of everything else', async () => {
    const objects = await renderChart({
      valuesFiles: [TRIAL_VALUES],
      set: [`secrets.masterKey=${Buffer.alloc(32, 3).toString('base64')}`, 'secrets.adminToken=admin-token-0123456789'],
    });
    const secrets = find(objects, 'Secret', 'acis-secrets') as unknown as {
      data: Record<string, string>;
      metadata: { annotations: Record<string, string> };
    };
    const masterKey = Buffer.from(Buffer.from(secrets.data.ACIS_MASTER_KEY!, 'base64').toString(), 'base64');
    expect(masterKey.length).toBe(32);
    expect(Buffer.from(secrets.data.ACIS_ADMIN_TOKEN!, 'base64').toString().length).toBeGreaterThanOrEqual(16);
    expect(secrets.metadata.annotations['helm.sh/resource-policy']).toBe('keep');
    const database = Buffer.from(
      (find(objects, 'Secret', 'acis-database') as unknown as { data: { DATABASE_URL: string } }).data.DATABASE_URL,
      'base64',
    ).toString();
    const password = Buffer.from(
      (find(objects, 'Secret', 'acis-postgresql') as unknown as { data: { POSTGRES_PASSWORD: string } }).data.POSTGRES_PASSWORD,
      'base64',
    ).toString();
    expect(database).toBe(`postgres://acis:${password}@acis-postgresql:5432/acis`);
    // The egress resolve token, generated too, is mounted as a file into the API server and the proxy only.
    const resolveToken = Buffer.from(
      (find(objects, 'Secret', 'acis-egress-resolve') as unknown as { data: { token: string } }).data.token,
      'base64',
    ).toString();
    expect(resolveToken.length).toBeGreaterThanOrEqual(32);
    const mountingResolveToken = ofKind(objects, 'Deployment')
      .filter((deployment) =>
        (podSpecOf(deployment).volumes ?? []).some(
          (volume) => (volume.secret as { secretName?: string } | undefined)?.secretName === 'acis-egress-resolve',
        ),
      )
      .map((deployment) => deployment.metadata.name);
    expect(mountingResolveToken.sort()).toEqual(['acis-api', 'acis-egress-proxy']);
    const elsewhere = JSON.stringify(objects.filter((object) => object.kind !== 'Secret'));
    for (const value of [
      password,
      secrets.data.ACIS_MASTER_KEY!,
      Buffer.from(secrets.data.ACIS_ADMIN_TOKEN!, 'base64').toString(),
      resolveToken,
    ])
      expect(elsewhere).not.toContain(value);
  });

  it('rolls the pods when a secret value given to the chart changes, not on a plain re-render', async () => {
    const checksum = async (set: string[]) => {
      const api = find(await renderChart({ set }), 'Deployment', 'acis-api');
      return (api.spec as { template: { metadata: { annotations: Record<string, string> } } }).template.metadata.annotations[
        'checksum/secrets'
      ];
    };
    const masterKey = `secrets.masterKey=${Buffer.alloc(32, 9).toString('base64')}`;
    const first = await checksum([masterKey, 'secrets.adminToken=admin-token-0123456789']);
    expect(first).toMatch(/^[0-9a-f]{64}$/);
    expect(await checksum([masterKey, 'secrets.adminToken=admin-token-0123456789'])).toBe(first);
    expect(await checksum([masterKey, 'secrets.adminToken=admin-token-9876543210'])).not.toBe(first);
  });

  it('writes no Secret of its own when given existing ones', async () => {
    const objects = await renderChart({ valuesFiles: [PRODUCTION_VALUES] });
    expect(ofKind(objects, 'Secret')).toEqual([]);
    const env = envOf(podSpecOf(find(objects, 'Deployment', 'acis-api')).containers[0]!);
    expect(env.get('ACIS_MASTER_KEY')!.valueFrom).toEqual({ secretKeyRef: { name: 'acis-keys', key: 'ACIS_MASTER_KEY' } });
    expect(env.get('DATABASE_URL')!.valueFrom).toEqual({ secretKeyRef: { name: 'acis-database-url', key: 'DATABASE_URL' } });
  });
});

describe('charts/acis: ServiceMonitors and scrape annotations', () => {
  it('scrapes each process on a port its Service names', async () => {
    const objects = await renderChart({ valuesFiles: [PRODUCTION_VALUES] });
    const monitors = ofKind(objects, 'ServiceMonitor');
    expect(monitors.map((monitor) => monitor.metadata.name).sort()).toEqual(['acis-api-server', 'acis-controller', 'acis-egress-proxy']);
    for (const monitor of monitors) {
      const spec = monitor.spec as { selector: { matchLabels: Record<string, string> }; endpoints: Array<{ port: string }> };
      const services = ofKind(objects, 'Service').filter((service) => selects(spec.selector, service.metadata.labels ?? {}));
      expect(services, monitor.metadata.name).toHaveLength(1);
      const ports = (services[0]!.spec as { ports: Array<{ name: string }> }).ports.map((port) => port.name);
      expect(ports).toContain(spec.endpoints[0]!.port);
    }
    const defaults = await renderChart();
    for (const deployment of ofKind(defaults, 'Deployment')) {
      const annotations = (deployment.spec as { template: { metadata: { annotations: Record<string, string> } } }).template.metadata
        .annotations;
      expect(annotations['prometheus.io/scrape'], deployment.metadata.name).toBe('true');
    }
  });
});

describe('charts/acis: CRDs', () => {
  it('ships crds/ identical, file for file, to the top-level crds/', async () => {
    const chartFiles = (await readdir(path.join(CHART, 'crds'))).sort();
    const topFiles = (await readdir(path.join(ROOT, 'crds'), { withFileTypes: true }))
      .filter((entry) => entry.isFile())
      .map((entry) => entry.name)
      .sort();
    expect(chartFiles).toEqual(topFiles);
    for (const file of topFiles) {
      expect(await readFile(path.join(CHART, 'crds', file), 'utf8'), file).toBe(await readFile(path.join(ROOT, 'crds', file), 'utf8'));
    }
  });
});

describe('charts/acis: values.yaml', () => {
  it('comments every value (above it, above its group of keys, or above the section holding it)', async () => {
    const lines = (await readFile(path.join(CHART, 'values.yaml'), 'utf8')).split('\n');
    const uncommented: string[] = [];
    lines.forEach((line, index) => {
      const key = /^(\s*)([A-Za-z][\w./-]*):\s*(\S.*)?$/.exec(line);
      if (!key || key[3] === undefined) return; // section headers: their values are checked
      let indent = key[1]!.length;
      for (let above = index - 1; above >= 0; above -= 1) {
        const previous = lines[above]!;
        if (previous.trim().startsWith('#')) return;
        const other = /^(\s*)[A-Za-z][\w./-]*:\s*(\S.*)?$/.exec(previous);
        if (!other) break;
        const otherIndent = other[1]!.length;
        if (otherIndent > indent) continue; // inside an earlier sibling
        if (otherIndent === indent) continue; // a sibling of the same group
        if (other[2] !== undefined) break; // a value, not the section holding this one
        indent = otherIndent; // the section header: its comment covers what it holds
      }
      uncommented.push(`${index + 1}: ${line.trim()}`);
    });
    expect(uncommented).toEqual([]);
  });
});

describe('charts/acis: the environment each Deployment gives its process', () => {
  let objects: RenderedObject[];
  beforeAll(async () => {
    objects = await renderChart({
      valuesFiles: [TRIAL_VALUES],
      set: [
        'secrets.metricsToken=metrics-token-0123456789',
        `secrets.masterKey=${Buffer.alloc(32, 5).toString('base64')}`,
        'secrets.adminToken=admin-token-0123456789',
      ],
    });
  });

  /** A container's env as the kubelet would resolve it from the rendered Secrets and ConfigMaps. */
  function resolvedEnv(deployment: string): Record<string, string> {
    const env: Record<string, string> = {};
    for (const entry of podSpecOf(find(objects, 'Deployment', deployment)).containers[0]!.env ?? []) {
      const from = entry.valueFrom as
        | { fieldRef?: { fieldPath: string }; secretKeyRef?: { name: string; key: string; optional?: boolean } }
        | undefined;
      if (entry.value !== undefined) env[entry.name] = entry.value;
      else if (from?.fieldRef) env[entry.name] = from.fieldRef.fieldPath === 'metadata.namespace' ? NAMESPACE : `${deployment}-pod`;
      else if (from?.secretKeyRef) {
        const secret = find(objects, 'Secret', from.secretKeyRef.name) as unknown as { data: Record<string, string> };
        const value = secret.data[from.secretKeyRef.key];
        if (value === undefined && !from.secretKeyRef.optional)
          throw new Error(`${entry.name}: ${from.secretKeyRef.name} has no ${from.secretKeyRef.key}`);
        if (value !== undefined) env[entry.name] = Buffer.from(value, 'base64').toString();
      }
    }
    return env;
  }

  it('acis serve accepts its environment', () => {
    const config = loadConfig(resolvedEnv('acis-api'));
    expect(config).toMatchObject({
      host: '0.0.0.0',
      port: 8080,
      repositorySyncRunner: 'kubernetes',
      k8sSandboxNamespace: SANDBOX_NAMESPACE,
      shutdownGraceSeconds: 25,
    });
    expect(config.syncJobDeadlineSeconds).toBe(loadControllerConfig(resolvedEnv('acis-controller')).syncJobDeadlineSeconds);
    expect(Buffer.from(config.masterKey!, 'base64')).toHaveLength(32);
    expect(config.databaseUrl).toMatch(/^postgres:\/\/acis:[^@]+@acis-postgresql:5432\/acis$/);
    expect(config.metricsToken).toBe('metrics-token-0123456789');
  });

  it('acis controller accepts its environment', () => {
    const config = loadControllerConfig(resolvedEnv('acis-controller'));
    expect(config).toMatchObject({
      namespace: NAMESPACE,
      sandboxNamespace: SANDBOX_NAMESPACE,
      runnerPort: 7070,
      egressProxyHost: `acis-egress-proxy.${NAMESPACE}.svc`,
      egressProxyPort: 3128,
      leaseName: 'acis-controller',
      syncReportUrl: `https://acis-sync-report.${NAMESPACE}.svc:8082`,
      identity: 'acis-controller-pod',
    });
  });

  it("hands the chart's image pull Secrets to the controller for the pods it creates, none when there are none", async () => {
    const controllerEnv = (rendered: RenderedObject[]) => envOf(podSpecOf(find(rendered, 'Deployment', 'acis-controller')).containers[0]!);
    const production = await renderChart({ valuesFiles: [PRODUCTION_VALUES] });
    expect(controllerEnv(production).get('ACIS_IMAGE_PULL_SECRETS')!.value).toBe('registry-example-com');
    const two = await renderChart({ set: ['imagePullSecrets={registry-a,registry-b}'] });
    const value = controllerEnv(two).get('ACIS_IMAGE_PULL_SECRETS')!.value!;
    expect(loadControllerConfig({ ACIS_IMAGE_PULL_SECRETS: value }).imagePullSecrets).toEqual(['registry-a', 'registry-b']);
    expect(controllerEnv(objects).has('ACIS_IMAGE_PULL_SECRETS')).toBe(false);
  });

  it('hands the runner pod template (RuntimeClass, scheduling, labels, annotations) to the controller, which puts it on runner pods', async () => {
    const rendered = await renderChart({
      set: [
        'sandbox.runtimeClassName=gvisor',
        'sandbox.nodeSelector.sandbox\\.example\\.com/role=isolated',
        'sandbox.tolerations[0].key=sandbox.example.com/isolated',
        'sandbox.tolerations[0].operator=Exists',
        'sandbox.tolerations[0].effect=NoSchedule',
        'sandbox.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=zone',
        'sandbox.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists',
        'sandbox.podLabels.team=agents',
        'sandbox.podAnnotations.example\\.com/owner=platform team',
      ],
    });
    // The variables with a value in the manifest (the others come from the pod's fields and Secrets).
    const valuesOf = (objects: RenderedObject[]) =>
      Object.fromEntries(
        (podSpecOf(find(objects, 'Deployment', 'acis-controller')).containers[0]!.env ?? [])
          .filter((entry) => entry.value !== undefined)
          .map((entry) => [entry.name, entry.value]),
      );
    const config = loadControllerConfig(valuesOf(rendered));
    expect(config.runnerPodTemplate).toEqual({
      runtimeClassName: 'gvisor',
      nodeSelector: { 'sandbox.example.com/role': 'isolated' },
      tolerations: [{ key: 'sandbox.example.com/isolated', operator: 'Exists', effect: 'NoSchedule' }],
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [{ matchExpressions: [{ key: 'zone', operator: 'Exists' }] }],
          },
        },
      },
      labels: { team: 'agents' },
      annotations: { 'example.com/owner': 'platform team' },
    });
    // By default: no RuntimeClass, nothing extra.
    const plain = loadControllerConfig(valuesOf(objects));
    expect(plain.runnerPodTemplate).toEqual({
      runtimeClassName: undefined,
      nodeSelector: {},
      tolerations: [],
      affinity: {},
      labels: {},
      annotations: {},
    });
  });

  it('the egress proxy accepts its environment', () => {
    const config = loadEgressConfig(resolvedEnv('acis-egress-proxy'));
    expect(config).toMatchObject({
      host: '0.0.0.0',
      port: 3128,
      metricsPort: 9091,
      caDir: '/var/lib/acis-egress/egress-ca',
      metricsToken: 'metrics-token-0123456789',
    });
    // Runs from the API server's resolve listener, through its Service, with the token the API server reads too.
    expect(config.runs).toEqual({
      source: 'api',
      url: 'https://acis-egress-resolve:8081',
      token: { file: '/etc/acis/egress-resolve/token' },
    });
    expect(loadConfig(resolvedEnv('acis-api')).egressResolve).toMatchObject({
      listen: { host: '0.0.0.0', port: 8081 },
      token: { file: '/etc/acis/egress-resolve/token' },
    });
    // The API server's certificate comes from the deployment CA the chart mounts where the proxy's is.
    expect(loadConfig(resolvedEnv('acis-api')).deploymentCaDir).toBe('/var/lib/acis/egress-ca');
  });
});
