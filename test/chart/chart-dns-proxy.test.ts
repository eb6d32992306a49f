/**
 * The cluster DNS every NetworkPolicy with a DNS rule allows, as values (kube-dns by default, NodeLocal
 * DNSCache's link-local address, OpenShift's DNS pods on 5353), asked of the rendered policies the way
 * an enforcing CNI answers (network-policy-eval.ts); and the egress proxy's availability: two replicas,
 * a PodDisruptionBudget, spread across nodes and zones.
 */
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { CHART, find, lintChart, NAMESPACE, ofKind, renderChart, type RenderedObject, templateChart } from './chart-render.js';
import { schemaProblems } from './kube-schema.js';
import { connectionAllowed, type NetworkPolicy, type PodEndpoint, selects } from './network-policy-eval.js';

const NODELOCAL_VALUES = path.join(CHART, 'ci', 'nodelocal-dns-values.yaml');
const OPENSHIFT_VALUES = path.join(CHART, 'ci', 'openshift-dns-values.yaml');
/** The policies whose pods resolve names: the proxy's, the API's, the syncs' (the sandbox's only with networkPolicy.sandboxDns). */
const WITH_DNS = ['acis-api', 'acis-egress-proxy', 'acis-repository-sync'];
const WITH_SANDBOX_DNS = [...WITH_DNS, 'acis-sandbox'];
const SANDBOX_DNS = ['networkPolicy.sandboxDns=true'];

const kubeDns: PodEndpoint = { namespace: 'kube-system', ip: '10.244.0.2', labels: { 'k8s-app': 'kube-dns' } };
const openshiftDns: PodEndpoint = {
  namespace: 'openshift-dns',
  ip: '10.128.0.9',
  labels: { 'dns.operator.openshift.io/daemonset-dns': 'default' },
};
const nodeLocalCache = { ip: '169.254.20.10' };

/** The rendered policies where `helm install -n NAMESPACE` puts them: the release namespace unless they name one. */
const policiesOf = (objects: RenderedObject[]) =>
  (ofKind(objects, 'NetworkPolicy') as unknown as NetworkPolicy[]).map((policy) => ({
    ...policy,
    metadata: { ...policy.metadata, namespace: policy.metadata.namespace ?? NAMESPACE },
  }));
/** A pod each DNS-using policy selects: its podSelector's labels, in the policy's namespace. */
const subjects = (policies: NetworkPolicy[], names = WITH_SANDBOX_DNS) =>
  names.map((name): [string, PodEndpoint] => {
    const policy = policies.find((candidate) => candidate.metadata.name === name);
    if (!policy) throw new Error(`no NetworkPolicy ${name}`);
    return [name, { namespace: policy.metadata.namespace!, ip: '10.244.1.50', labels: policy.spec.podSelector.matchLabels ?? {} }];
  });
const resolves = (policies: NetworkPolicy[], pod: PodEndpoint, dns: PodEndpoint | { ip: string }, port: number) =>
  connectionAllowed(policies, pod, dns, port, 'UDP') && connectionAllowed(policies, pod, dns, port, 'TCP');

describe('charts/acis: the cluster DNS in the NetworkPolicies', () => {
  it.each([
    ['NodeLocal DNSCache', NODELOCAL_VALUES],
    ['OpenShift', OPENSHIFT_VALUES],
  ])('with the %s example, lints strictly and renders policies valid against the Kubernetes schema', async (_name, file) => {
    const lint = await lintChart({ valuesFiles: [file] });
    expect(lint.code, lint.stdout + lint.stderr).toBe(0);
    const policies = ofKind(await renderChart({ valuesFiles: [file] }), 'NetworkPolicy');
    expect(policies.flatMap((policy) => schemaProblems(policy))).toEqual([]);
  });

  it('by default, lets every policy with a DNS rule reach kube-dns on 53 (UDP and TCP), and only that there; runners none', async () => {
    const policies = policiesOf(await renderChart());
    const withUdp = policies.filter((policy) =>
      (policy.spec.egress ?? []).some((rule) => rule.ports?.some((port) => port.protocol === 'UDP')),
    );
    expect(withUdp.map((policy) => policy.metadata.name).sort()).toEqual(WITH_DNS);
    const [[, runner]] = subjects(policies, ['acis-sandbox']) as [[string, PodEndpoint]];
    expect(connectionAllowed(policies, runner, kubeDns, 53, 'UDP')).toBe(false);
    expect(connectionAllowed(policies, runner, kubeDns, 53, 'TCP')).toBe(false);
    const withSandboxDns = policiesOf(await renderChart({ set: SANDBOX_DNS }));
    expect(resolves(withSandboxDns, runner, kubeDns, 53)).toBe(true);
    for (const [name, pod] of subjects(policies, WITH_DNS)) {
      expect(resolves(policies, pod, kubeDns, 53), name).toBe(true);
      expect(connectionAllowed(policies, pod, kubeDns, 5353, 'UDP'), name).toBe(false);
      expect(connectionAllowed(policies, pod, { ...kubeDns, labels: { 'k8s-app': 'other' } }, 53, 'UDP'), name).toBe(false);
      expect(connectionAllowed(policies, pod, nodeLocalCache, 53, 'UDP'), name).toBe(false);
    }
  });

  it("with NodeLocal DNSCache's address, lets them reach the cache on 53 and kube-dns still, not the rest of link-local", async () => {
    const policies = policiesOf(await renderChart({ valuesFiles: [NODELOCAL_VALUES], set: SANDBOX_DNS }));
    for (const [name, pod] of subjects(policies)) {
      expect(resolves(policies, pod, nodeLocalCache, 53), name).toBe(true);
      expect(resolves(policies, pod, kubeDns, 53), name).toBe(true);
      expect(connectionAllowed(policies, pod, nodeLocalCache, 80), name).toBe(false);
      expect(connectionAllowed(policies, pod, { ip: '169.254.169.254' }, 53, 'UDP'), name).toBe(false);
    }
  });

  it("with OpenShift's DNS, lets them reach its pods on 5353 and kube-dns no longer", async () => {
    const policies = policiesOf(await renderChart({ valuesFiles: [OPENSHIFT_VALUES], set: SANDBOX_DNS }));
    for (const [name, pod] of subjects(policies)) {
      expect(resolves(policies, pod, openshiftDns, 5353), name).toBe(true);
      expect(connectionAllowed(policies, pod, openshiftDns, 53, 'UDP'), name).toBe(false);
      expect(connectionAllowed(policies, pod, kubeDns, 53, 'UDP'), name).toBe(false);
    }
  });

  it('without DNS for runners (egressProxy.clusterIP, even with sandboxDns), the sandbox reaches no DNS while the others still do', async () => {
    const policies = policiesOf(
      await renderChart({ valuesFiles: [NODELOCAL_VALUES], set: [...SANDBOX_DNS, 'egressProxy.clusterIP=10.96.100.10'] }),
    );
    for (const [name, pod] of subjects(policies)) {
      const expected = name !== 'acis-sandbox';
      expect(connectionAllowed(policies, pod, kubeDns, 53, 'UDP'), name).toBe(expected);
      expect(connectionAllowed(policies, pod, nodeLocalCache, 53, 'UDP'), name).toBe(expected);
    }
  });

  it.each([
    ['networkPolicy.dns.ports[0]=0', '/networkPolicy/dns/ports/0'],
    ['networkPolicy.dns.ports[0]=dns', '/networkPolicy/dns/ports/0'],
    ['networkPolicy.dns.ipBlocks[0]=169.254.20.10', '/networkPolicy/dns/ipBlocks/0'],
    ['networkPolicy.dns.podSelector.k8s-app=kube-dns', "additional properties 'k8s-app' not allowed"],
    ['networkPolicy.dns.namespaceSelector.matchExpressions[0].key=team', '/networkPolicy/dns/namespaceSelector/matchExpressions/0'],
  ])('refuses %s', async (pair, message) => {
    const result = await templateChart({ set: [pair] });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain("values don't meet the specifications of the schema");
    expect(result.stderr).toContain(message);
  });

  it('refuses a DNS rule naming neither pods nor addresses, which would open the DNS ports to anywhere', async () => {
    const result = await templateChart({ set: ['networkPolicy.dns.namespaceSelector=null', 'networkPolicy.dns.podSelector=null'] });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('networkPolicy.dns: name the cluster DNS by namespaceSelector/podSelector or ipBlocks');
  });
});

describe("charts/acis: the egress proxy's availability", () => {
  const podLabels = (deployment: RenderedObject) =>
    (deployment.spec as { template: { metadata: { labels: Record<string, string> } } }).template.metadata.labels;

  it('runs two replicas by default, a PodDisruptionBudget keeping one, spread across nodes and zones', async () => {
    const objects = await renderChart();
    const proxy = find(objects, 'Deployment', 'acis-egress-proxy');
    expect((proxy.spec as { replicas: number }).replicas).toBe(2);
    expect([proxy, find(objects, 'PodDisruptionBudget', 'acis-egress-proxy')].flatMap((object) => schemaProblems(object))).toEqual([]);
    const budget = find(objects, 'PodDisruptionBudget', 'acis-egress-proxy').spec as {
      minAvailable: number;
      selector: { matchLabels: Record<string, string> };
    };
    expect(budget.minAvailable).toBe(1);
    expect(selects(budget.selector, podLabels(proxy))).toBe(true);
    // It covers the proxy pods alone: the API's own budget does not select them, nor this one the API's.
    expect(selects(budget.selector, podLabels(find(objects, 'Deployment', 'acis-api')))).toBe(false);
    const spread = (proxy.spec as { template: { spec: { topologySpreadConstraints: Array<Record<string, unknown>> } } }).template.spec
      .topologySpreadConstraints;
    expect(spread.map((constraint) => [constraint.topologyKey, constraint.whenUnsatisfiable, constraint.maxSkew])).toEqual([
      ['kubernetes.io/hostname', 'ScheduleAnyway', 1],
      ['topology.kubernetes.io/zone', 'ScheduleAnyway', 1],
    ]);
    for (const constraint of spread) {
      expect(selects(constraint.labelSelector as { matchLabels: Record<string, string> }, podLabels(proxy))).toBe(true);
      expect(
        selects(constraint.labelSelector as { matchLabels: Record<string, string> }, podLabels(find(objects, 'Deployment', 'acis-api'))),
      ).toBe(false);
    }
  });

  it('renders no budget with one replica (it would block every drain) or with the proxy in the API server', async () => {
    const one = await renderChart({ set: ['egressProxy.replicas=1'] });
    expect(ofKind(one, 'PodDisruptionBudget').map((budget) => budget.metadata.name)).toEqual(['acis-api']);
    const inApi = await renderChart({ set: ['egressProxy.mode=api-server', 'apiServer.replicas=1', 'egressProxy.ca.existingSecret=ca'] });
    expect(ofKind(inApi, 'PodDisruptionBudget').map((budget) => budget.metadata.name)).toEqual(['acis-api']);
  });

  it('keeps a labelSelector given with a spread constraint, and refuses one without its topologyKey', async () => {
    const own = { matchLabels: { tier: 'egress' } };
    const objects = await renderChart({
      set: [
        'egressProxy.topologySpreadConstraints[0].maxSkew=2',
        'egressProxy.topologySpreadConstraints[0].topologyKey=kubernetes.io/hostname',
        'egressProxy.topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule',
        'egressProxy.topologySpreadConstraints[0].labelSelector.matchLabels.tier=egress',
      ],
    });
    const spread = (
      find(objects, 'Deployment', 'acis-egress-proxy').spec as { template: { spec: { topologySpreadConstraints: unknown[] } } }
    ).template.spec.topologySpreadConstraints;
    expect(spread).toEqual([{ maxSkew: 2, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'DoNotSchedule', labelSelector: own }]);
    const refused = await templateChart({ set: ['egressProxy.topologySpreadConstraints[0].maxSkew=1'] });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('/egressProxy/topologySpreadConstraints/0');
  });
});
