/**
 * The chart's NetworkPolicies enforced on real packets (the kubelet's netns mode, hack/k8s/pod-netns.ts),
 * each in the namespace the chart renders it in: with the chart's policies and Services applied, a
 * pod with the runner pods' labels in the sandbox namespace reaches the egress proxy in the release
 * namespace (by pod IP and by its Service's ClusterIP) and nothing else: not the API server's public
 * port nor its resolve listener, not the controller, not another runner, not the proxy's other
 * ports, not PostgreSQL nor the Kubernetes API on the node, not an address outside the pod network;
 * the cluster DNS on port 53 only while `networkPolicy.sandboxDns` says so. Removing the sandbox
 * policy opens every one of those paths, so each assertion can fail. The peers across the two
 * namespaces name the other one: a pod with a runner's labels in the release namespace is not let
 * into the proxy. A pod with the repository-sync Job pods' labels in the sandbox namespace reaches
 * the API server's sync report listener (by pod IP and by its Service) and git hosts, never
 * PostgreSQL nor the API server's other ports: it holds no database credential and has no path to
 * the database either. The pods run a probe
 * program (test/k8s-server/fixtures/net-probe.cjs) standing for the components: the chart's
 * policies select by labels and ports, which is what is held here.
 */
import { networkInterfaces } from 'node:os';
import { once } from 'node:events';
import { createServer, type Server } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKubelet, type Kubelet } from '../../hack/k8s/kubelet.js';
import type { NetworkPolicyObject } from '../../hack/k8s/network-policy-rules.js';
import { probeNetworkMode } from '../../hack/k8s/pod-netns.js';
import { startKubeTestServer, type KubeTestServer } from '../../hack/k8s/server.js';
import type { KubeObject } from '../../hack/k8s/store.js';
import { NAMESPACE, SANDBOX_NAMESPACE, find, ofKind, renderChart, type RenderedObject } from './chart-render.js';

const NET_PROBE = fileURLToPath(new URL('../k8s-server/fixtures/net-probe.cjs', import.meta.url));
const CONTROL_PORT = 9000;
const POLICIES = 'networkpolicies.networking.k8s.io';

type Policy = RenderedObject & NetworkPolicyObject;
type Labels = Record<string, string>;

/** An IPv4 address of this machine off the pod network: what "the internet" is to a pod here. */
function outsideAddress(nodeAddress: string): string | undefined {
  const prefix = nodeAddress.split('.').slice(0, 3).join('.');
  return Object.values(networkInterfaces())
    .flat()
    .find((address) => address && address.family === 'IPv4' && !address.internal && !address.address.startsWith(`${prefix}.`))?.address;
}

const mode = await probeNetworkMode();

describe.runIf(mode === 'netns')("the chart's sandbox NetworkPolicy, enforced on packets", () => {
  let server: KubeTestServer;
  let kubelet: Kubelet;
  let rendered: RenderedObject[];
  let sandboxPolicy: Policy;
  let outside: Server | undefined;
  let outsideIP: string | undefined;
  let proxyClusterIP: string;
  /** The chart's values as rendered: the proxy port, the runner's port, the API server's ports, the proxy's metrics port. */
  const ports = { proxy: 0, sandbox: 0, api: 0, resolve: 0, report: 0, proxyMetrics: 0, controllerMetrics: 0 };
  let syncPolicy: Policy;
  let reportClusterIP: string;

  /** The probe pods' namespaces: runners and sync Jobs where the chart puts them, the rest beside the processes. */
  const namespaceOf: Record<string, string> = {
    runner: SANDBOX_NAMESPACE,
    'runner-2': SANDBOX_NAMESPACE,
    sync: SANDBOX_NAMESPACE,
    dns: 'kube-system',
  };
  const ip = (name: string) => (server.store.get('pods', namespaceOf[name] ?? NAMESPACE, name).status as { podIP: string }).podIP;
  /** Where `helm install -n NAMESPACE` puts a rendered object: its own namespace, else the release's. */
  const installedIn = (object: RenderedObject) => object.metadata.namespace ?? NAMESPACE;
  const ready = (object: KubeObject | undefined) =>
    Boolean(
      (object?.status as { conditions?: Array<{ type: string; status: string }> })?.conditions?.some(
        (c) => c.type === 'Ready' && c.status === 'True',
      ),
    );

  /** A probe pod listening where `listen` says, with the containerPorts (named ones) of the component it stands for. */
  function createPod(name: string, namespace: string, labels: Labels, listen: string[], ports: unknown[] = []): void {
    server.store.create('pods', namespace, {
      metadata: { name, labels },
      spec: {
        containers: [
          {
            name: 'main',
            image: 'net-probe',
            env: [
              { name: 'LISTEN', value: listen.join(',') },
              { name: 'CONTROL_PORT', value: String(CONTROL_PORT) },
            ],
            ports,
            readinessProbe: { tcpSocket: { port: CONTROL_PORT } },
          },
        ],
      },
    });
  }

  /** From inside a pod: the name of who answered, or why nothing did. */
  async function reach(from: string, host: string, port: number, protocol = 'tcp'): Promise<string> {
    await kubelet.networkSynced();
    const response = await fetch(`http://${ip(from)}:${CONTROL_PORT}/connect?host=${host}&port=${port}&protocol=${protocol}`);
    const result = (await response.json()) as { ok: boolean; reply?: string; error?: string };
    return result.ok ? (result.reply ?? '') : `refused: ${result.error}`;
  }

  /**
   * Every path a runner must not take, and who answers it without the sandbox policy (the resolve
   * listener stays closed then too: the API server's own policy admits only the proxy pods there).
   */
  const forbidden = (): Array<[string, string, number, string, string]> => [
    ['the API server public port', ip('api'), ports.api, 'tcp', 'api'],
    ['the resolve listener', ip('api'), ports.resolve, 'tcp', 'refused: timeout'],
    ['the sync report listener', ip('api'), ports.report, 'tcp', 'refused: timeout'],
    ['another runner', ip('runner-2'), ports.sandbox, 'tcp', 'runner-2'],
    ['the controller', ip('controller'), ports.controllerMetrics, 'tcp', 'controller'],
    ["the proxy's metrics port", ip('proxy'), ports.proxyMetrics, 'tcp', 'proxy'],
    ['PostgreSQL on the node', kubelet.nodeAddress, 5432, 'tcp', ''],
    ['the Kubernetes API on the node', kubelet.nodeAddress, Number(new URL(server.url).port), 'tcp', 'kubernetes'],
    ['DNS on another port', ip('dns'), 5353, 'tcp', 'dns'],
    ...(outsideIP
      ? [
          ['an outside address', outsideIP, (outside!.address() as { port: number }).port, 'tcp', 'outside'] as [
            string,
            string,
            number,
            string,
            string,
          ],
        ]
      : []),
  ];

  beforeAll(async () => {
    rendered = await renderChart();
    server = await startKubeTestServer({ namespaces: [NAMESPACE, SANDBOX_NAMESPACE, 'kube-system'] });
    kubelet = await startKubelet({
      server,
      network: 'netns',
      images: { 'net-probe': { command: process.execPath, args: [NET_PROBE], binds: [NET_PROBE] } },
      probePeriodMs: 25,
    });
    outsideIP = outsideAddress(kubelet.nodeAddress);
    if (outsideIP) {
      outside = createServer((socket) => socket.end('outside'));
      outside.listen(0, outsideIP);
      await once(outside, 'listening');
    }
    for (const object of [...ofKind(rendered, 'NetworkPolicy'), ...ofKind(rendered, 'Service')])
      server.store.create(object.kind === 'Service' ? 'services' : POLICIES, installedIn(object), object as unknown as KubeObject);
    expect(installedIn(find(rendered, 'NetworkPolicy', 'acis-sandbox'))).toBe(SANDBOX_NAMESPACE);
    sandboxPolicy = find(rendered, 'NetworkPolicy', 'acis-sandbox') as Policy;
    const apiPolicy = find(rendered, 'NetworkPolicy', 'acis-api') as Policy;
    const proxyPolicy = find(rendered, 'NetworkPolicy', 'acis-egress-proxy') as Policy;
    const [toProxy, ...others] = sandboxPolicy.spec.egress!;
    expect(others).toEqual([]);
    // Where the cluster DNS is, as the chart's policies name it for the pods that may query it.
    const toDns = (find(await renderChart({ set: ['networkPolicy.sandboxDns=true'] }), 'NetworkPolicy', 'acis-sandbox') as Policy).spec
      .egress![1];
    ports.proxy = Number(toProxy!.ports![0]!.port);
    ports.sandbox = Number(sandboxPolicy.spec.ingress![0]!.ports![0]!.port);
    ports.api = Number(apiPolicy.spec.ingress![0]!.ports![0]!.port);
    ports.resolve = Number(apiPolicy.spec.ingress![1]!.ports![0]!.port);
    syncPolicy = find(rendered, 'NetworkPolicy', 'acis-repository-sync') as Policy;
    ports.report = Number(syncPolicy.spec.egress![0]!.ports![0]!.port);
    createPod('sync', SANDBOX_NAMESPACE, syncPolicy.spec.podSelector!.matchLabels!, []);
    const runnerLabels = sandboxPolicy.spec.podSelector!.matchLabels!;
    const dnsPeer = toDns!.to![0]!;
    createPod('runner', SANDBOX_NAMESPACE, runnerLabels, [`tcp:${ports.sandbox}`]);
    createPod('runner-2', SANDBOX_NAMESPACE, runnerLabels, [`tcp:${ports.sandbox}`]);
    createPod('runner-in-release', NAMESPACE, runnerLabels, [`tcp:${ports.sandbox}`]);
    const controllerPolicy = find(rendered, 'NetworkPolicy', 'acis-controller') as Policy;
    ports.controllerMetrics = Number(controllerPolicy.spec.ingress![0]!.ports![0]!.port);
    createPod('controller', NAMESPACE, controllerPolicy.spec.podSelector!.matchLabels!, [`tcp:${ports.controllerMetrics}`]);
    const proxyDeployment = find(rendered, 'Deployment', 'acis-egress-proxy') as RenderedObject & {
      spec: { template: { spec: { containers: Array<{ ports: Array<{ containerPort: number }> }> } } };
    };
    const proxyPorts = proxyDeployment.spec.template.spec.containers[0]!.ports;
    ports.proxyMetrics = proxyPorts.find((port) => port.containerPort !== ports.proxy)!.containerPort;
    createPod(
      'proxy',
      NAMESPACE,
      proxyPolicy.spec.podSelector!.matchLabels!,
      proxyPorts.map((port) => `tcp:${port.containerPort}`),
      proxyPorts,
    );
    const apiPorts = [ports.api, ports.resolve, ports.report];
    createPod(
      'api',
      NAMESPACE,
      apiPolicy.spec.podSelector!.matchLabels!,
      apiPorts.map((port) => `tcp:${port}`),
      // Named as the chart names them: the sync report Service targets its port by name.
      [{ name: 'sync-report', containerPort: ports.report }],
    );
    createPod('dns', 'kube-system', dnsPeer.podSelector!.matchLabels!, ['udp:53', 'tcp:53', 'tcp:5353']);
    for (const name of ['runner', 'runner-2', 'runner-in-release', 'controller', 'sync', 'proxy', 'api', 'dns'])
      await server.store.waitFor('pods', namespaceOf[name] ?? NAMESPACE, name, ready, 30_000);
    const proxyService = find(rendered, 'Service', 'acis-egress-proxy');
    proxyClusterIP = (server.store.get('services', NAMESPACE, proxyService.metadata.name).spec as { clusterIP: string }).clusterIP;
    reportClusterIP = (server.store.get('services', NAMESPACE, 'acis-sync-report').spec as { clusterIP: string }).clusterIP;
  }, 120_000);

  afterAll(async () => {
    await kubelet?.close();
    await server?.close();
    outside?.close();
  });

  it('lets a runner pod reach the egress proxy, by pod IP and by its Service, on the proxy port', async () => {
    expect(kubelet.networkMode).toBe('netns');
    // The outside address is among the paths checked.
    expect(outsideIP).toBeDefined();
    expect(await reach('runner', ip('proxy'), ports.proxy)).toBe('proxy');
    expect(await reach('runner', proxyClusterIP, ports.proxy)).toBe('proxy');
  });

  it('lets the API server reach a runner on its port, and no other pod', async () => {
    expect(await reach('api', ip('runner'), ports.sandbox)).toBe('runner');
    expect(await reach('proxy', ip('runner'), ports.sandbox)).toBe('refused: timeout');
    expect(await reach('controller', ip('runner'), ports.sandbox)).toBe('refused: timeout');
  });

  it("admits across the namespaces only the pods in the one the peers name: a runner's labels in the release namespace do not open the proxy", async () => {
    expect(await reach('runner-in-release', ip('proxy'), ports.proxy)).toBe('refused: timeout');
    expect(await reach('api', ip('runner-in-release'), ports.sandbox)).toBe('refused: timeout');
    expect(await reach('runner', ip('proxy'), ports.proxy)).toBe('proxy');
  });

  it('keeps a runner pod from everything else', async () => {
    const paths = forbidden();
    const reached = await Promise.all(
      paths.map(([what, host, port, protocol]) => reach('runner', host, port, protocol).then((answer) => `${what}: ${answer}`)),
    );
    expect(reached).toEqual(paths.map(([what]) => `${what}: refused: timeout`));
  });

  it('lets a runner query the cluster DNS on port 53 only once networkPolicy.sandboxDns is true (off by default)', async () => {
    expect(await reach('runner', ip('dns'), 53, 'udp')).toBe('refused: timeout');
    expect(await reach('runner', ip('dns'), 53, 'tcp')).toBe('refused: timeout');
    expect(await reach('runner', ip('proxy'), ports.proxy)).toBe('proxy');
    const withDns = find(await renderChart({ set: ['networkPolicy.sandboxDns=true'] }), 'NetworkPolicy', 'acis-sandbox');
    const stored = server.store.get(POLICIES, SANDBOX_NAMESPACE, 'acis-sandbox');
    server.store.update(POLICIES, SANDBOX_NAMESPACE, 'acis-sandbox', { ...stored, spec: withDns.spec } as KubeObject);
    try {
      expect(await reach('runner', ip('dns'), 53, 'udp')).toBe('dns');
      expect(await reach('runner', ip('dns'), 53, 'tcp')).toBe('dns');
    } finally {
      const current = server.store.get(POLICIES, SANDBOX_NAMESPACE, 'acis-sandbox');
      server.store.update(POLICIES, SANDBOX_NAMESPACE, 'acis-sandbox', { ...current, spec: sandboxPolicy.spec } as KubeObject);
    }
  });

  /**
   * Every path a sync Job's pod must not take, and who answers it without the repository-sync policy
   * (runners and the proxy stay closed then too: their own policies admit no sync pod).
   */
  const forbiddenToSync = (): Array<[string, string, number, string]> => [
    ['PostgreSQL on the node', kubelet.nodeAddress, 5432, ''],
    ['the Kubernetes API on the node', kubelet.nodeAddress, Number(new URL(server.url).port), 'kubernetes'],
    ['a runner', ip('runner'), ports.sandbox, 'refused: timeout'],
    ['the egress proxy', ip('proxy'), ports.proxy, 'refused: timeout'],
  ];

  it("lets a sync Job's pod reach the API server's sync report listener, by pod IP and by its Service, and no other API port", async () => {
    expect(await reach('sync', ip('api'), ports.report)).toBe('api');
    expect(await reach('sync', reportClusterIP, ports.report)).toBe('api');
    // The API server's own policy keeps its other ports from sync pods, whatever theirs says.
    expect(await reach('sync', ip('api'), ports.api)).toBe('refused: timeout');
    expect(await reach('sync', ip('api'), ports.resolve)).toBe('refused: timeout');
  });

  it("keeps a sync Job's pod from PostgreSQL, the Kubernetes API, runners and the proxy; removing its policy opens them", async () => {
    const paths = forbiddenToSync();
    const reached = await Promise.all(paths.map(([what, host, port]) => reach('sync', host, port).then((answer) => `${what}: ${answer}`)));
    expect(reached).toEqual(paths.map(([what]) => `${what}: refused: timeout`));
    server.store.delete(POLICIES, SANDBOX_NAMESPACE, 'acis-repository-sync');
    try {
      for (const [what, host, port, answer] of paths) {
        const opened = await reach('sync', host, port);
        // PostgreSQL and the Kubernetes API are host processes: a connection made is what counts.
        if (answer === '' || answer === 'kubernetes') expect(`${what}: ${opened.startsWith('refused')}`).toBe(`${what}: false`);
        else expect(`${what}: ${opened}`).toBe(`${what}: ${answer}`);
      }
    } finally {
      server.store.create(POLICIES, SANDBOX_NAMESPACE, syncPolicy as unknown as KubeObject);
    }
  });

  it('opens every one of those paths once the sandbox policy is removed', async () => {
    server.store.delete(POLICIES, SANDBOX_NAMESPACE, 'acis-sandbox');
    for (const [what, host, port, protocol, answer] of forbidden()) {
      const reached = await reach('runner', host, port, protocol);
      // PostgreSQL and the Kubernetes API are host processes: a connection made is what counts.
      if (answer === '' || answer === 'kubernetes') expect(`${what}: ${reached.startsWith('refused')}`).toBe(`${what}: false`);
      else expect(`${what}: ${reached}`).toBe(`${what}: ${answer}`);
    }
  });
});
