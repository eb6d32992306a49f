/**
 * `helm install` of charts/acis into the Kubernetes API test server (its discovery carries helm), then
 * `acis controller` as its own process with the environment the chart's Deployment gives its pod
 * (the test server runs no Deployment controller): the chart's CRDs are served, its warm pool fills
 * with runner pods through the simulated kubelet, the chart's Lease elects the controller, and the
 * sandbox NetworkPolicy selects the pods the controller really makes.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cleanEnv, killLeftovers, ROOT, runAcis, stopAcis, type AcisProcess } from '../helpers/acis-process.js';
import { helm, kubectl } from '../helpers/kube-tools.js';
import { startKubelet, type Kubelet } from '../k8s/kubelet.js';
import { startKubeTestServer, type KubeTestServer } from '../k8s/server.js';
import type { KubeObject } from '../k8s/store.js';
import { CHART, NAMESPACE } from './chart-render.js';
import { selects, type LabelSelector } from './network-policy-eval.js';

const RUNNER_IMAGE = 'acis-runner:chart-test';
const RUNNER_FIXTURE = path.join(ROOT, 'test', 'controller', 'fixtures', 'runner.cjs');
// Pod IPs are unique within one kubelet only and test files run side by side: a port of our own.
const RUNNER_PORT = 20_000 + Math.floor(Math.random() * 40_000);
const POD_NAME = 'acis-controller-7d9f8-x2x4q';

interface EnvEntry {
  name: string;
  value?: string;
  valueFrom?: { fieldRef?: { fieldPath: string }; secretKeyRef?: { name: string; key: string } };
}

describe('charts/acis: helm install against the Kubernetes API test server', () => {
  let server: KubeTestServer;
  let kubelet: Kubelet;
  let controller: AcisProcess | undefined;

  beforeAll(async () => {
    // No CRDs loaded up front: the chart's crds/ must install them.
    server = await startKubeTestServer({ namespaces: [NAMESPACE], bookmarkIntervalMs: 200 });
    kubelet = await startKubelet({
      server,
      images: { [RUNNER_IMAGE]: { command: process.execPath, args: [RUNNER_FIXTURE], binds: [path.dirname(RUNNER_FIXTURE)] } },
      probePeriodMs: 25,
      allocatable: { cpu: '64', memory: '256Gi', pods: 100 },
    });
  });

  afterAll(async () => {
    if (controller) await stopAcis(controller);
    killLeftovers();
    await kubelet?.close();
    await server?.close();
  });

  it('installs: CRDs served, every object stored, the warm pool filled by the controller the chart configures', async () => {
    const [repository, tag] = RUNNER_IMAGE.split(':');
    const installed = await helm(
      [
        'install', 'acis', CHART, '--namespace', NAMESPACE,
        '--set', `runnerImage.repository=${repository}`, '--set', `runnerImage.tag=${tag}`,
        '--set', `sandbox.port=${RUNNER_PORT}`,
        '--set', 'sandbox.resources.requests.cpu=10m', '--set', 'sandbox.resources.requests.memory=16Mi',
        '--set', 'sandbox.resources.limits.cpu=100m', '--set', 'sandbox.resources.limits.memory=64Mi',
        '--set', 'warmPool.replicas=2',
        '--set', 'database.url=postgres://acis@db.example:5432/acis',
      ],
      { kubeconfig: server.kubeconfigPath, timeoutMs: 90_000 },
    );
    expect(installed.code, installed.stderr).toBe(0);

    for (const crd of ['sandboxes.acis.dev', 'sandboxwarmpools.acis.dev', 'repositorysyncs.acis.dev']) {
      expect(server.store.find('customresourcedefinitions.apiextensions.k8s.io', undefined, crd), crd).toBeDefined();
    }
    for (const [resource, name] of [
      ['deployments.apps', 'acis-api'],
      ['deployments.apps', 'acis-controller'],
      ['deployments.apps', 'acis-egress-proxy'],
      ['networkpolicies.networking.k8s.io', 'acis-sandbox'],
      ['networkpolicies.networking.k8s.io', 'acis-egress-proxy'],
      ['roles.rbac.authorization.k8s.io', 'acis-api'],
      ['roles.rbac.authorization.k8s.io', 'acis-controller'],
      ['poddisruptionbudgets.policy', 'acis-api'],
      ['secrets', 'acis-secrets'],
      ['secrets', 'acis-database'],
      ['sandboxwarmpools', 'vendor-agent-sdk'],
    ] as const) {
      expect(server.store.find(resource, NAMESPACE, name), `${resource}/${name}`).toBeDefined();
    }

    // The controller's pod, as the kubelet would start it from the Deployment: its env resolved.
    const deployment = server.store.get('deployments.apps', NAMESPACE, 'acis-controller') as KubeObject & {
      spec: { template: { spec: { containers: Array<{ args: string[]; env: EnvEntry[] }> } } };
    };
    const container = deployment.spec.template.spec.containers[0]!;
    const env = Object.fromEntries(container.env.map((entry) => [entry.name, resolveEnv(server, entry)]));
    expect(env.ACIS_RUNNER_IMAGE).toBe(RUNNER_IMAGE);
    controller = runAcis(container.args, {
      ...cleanEnv(env),
      KUBECONFIG: server.kubeconfigPath,
      // Not the pod's fixed 9090: test files share this machine's loopback.
      ACIS_CONTROLLER_METRICS_HOST: '127.0.0.1',
      ACIS_CONTROLLER_METRICS_PORT: '0',
      LOG_LEVEL: env.LOG_LEVEL ?? 'info',
    });

    const lease = await server.store.waitFor('leases.coordination.k8s.io', NAMESPACE, 'acis-controller', (object) => Boolean(object), 30_000);
    expect((lease as KubeObject & { spec: { holderIdentity: string } }).spec.holderIdentity).toBe(POD_NAME);

    const pool = await server.store.waitFor(
      'sandboxwarmpools',
      NAMESPACE,
      'vendor-agent-sdk',
      (object) => (object as (KubeObject & { status?: { readyReplicas?: number } }) | undefined)?.status?.readyReplicas === 2,
      60_000,
    );
    expect(pool, controller.output()).toBeDefined();

    const pods = server.store.list('pods', NAMESPACE, { labelSelector: 'acis.dev/pool=vendor-agent-sdk' }).items as Array<
      KubeObject & { spec: { containers: Array<{ image: string; env: EnvEntry[] }> } }
    >;
    expect(pods).toHaveLength(2);
    const policy = server.store.get('networkpolicies.networking.k8s.io', NAMESPACE, 'acis-sandbox') as KubeObject & { spec: { podSelector: LabelSelector } };
    for (const pod of pods) {
      expect(selects(policy.spec.podSelector, pod.metadata.labels ?? {}), pod.metadata.name).toBe(true);
      const podEnv = new Map(pod.spec.containers[0]!.env.map((entry) => [entry.name, entry.value]));
      expect(podEnv.get('HTTPS_PROXY')).toBe('http://acis-egress-proxy:3128');
      expect(pod.spec.containers[0]!.image).toBe(RUNNER_IMAGE);
    }

    const listed = await kubectl(['get', 'sbxpool', '-n', NAMESPACE], { kubeconfig: server.kubeconfigPath });
    expect(listed.stdout).toContain('vendor-agent-sdk');
  });

  it('upgrades in place and keeps the generated master key', async () => {
    const before = server.store.get('secrets', NAMESPACE, 'acis-secrets') as KubeObject & { data: Record<string, string> };
    const upgraded = await helm(
      ['upgrade', 'acis', CHART, '--namespace', NAMESPACE, '--reuse-values', '--set', 'warmPool.replicas=1'],
      { kubeconfig: server.kubeconfigPath, timeoutMs: 90_000 },
    );
    expect(upgraded.code, upgraded.stderr).toBe(0);
    const after = server.store.get('secrets', NAMESPACE, 'acis-secrets') as KubeObject & { data: Record<string, string> };
    expect(after.data.ACIS_MASTER_KEY).toBe(before.data.ACIS_MASTER_KEY);
    expect(after.data.ACIS_ADMIN_TOKEN).toBe(before.data.ACIS_ADMIN_TOKEN);
    await server.store.waitUntil(() => server.store.list('pods', NAMESPACE, { labelSelector: 'acis.dev/pool=vendor-agent-sdk' }).items.length === 1, 30_000, 'the pool shrunk to one pod');
  });
});

/** An env entry's value as the kubelet would compute it for the pod POD_NAME. */
function resolveEnv(server: KubeTestServer, entry: EnvEntry): string {
  if (entry.value !== undefined) return entry.value;
  const fieldPath = entry.valueFrom?.fieldRef?.fieldPath;
  if (fieldPath === 'metadata.namespace') return NAMESPACE;
  if (fieldPath === 'metadata.name') return POD_NAME;
  const secretRef = entry.valueFrom?.secretKeyRef;
  if (secretRef) {
    const secret = server.store.get('secrets', NAMESPACE, secretRef.name) as KubeObject & { data?: Record<string, string> };
    return Buffer.from(secret.data?.[secretRef.key] ?? '', 'base64').toString();
  }
  throw new Error(`cannot resolve env ${entry.name}`);
}
