/**
 * The kubelet's netns network mode (hack/k8s/pod-netns.ts): Services and NetworkPolicies translated
 * into nftables rules (network-policy-rules.ts, service-proxy.ts), then enforced on real packets
 * between pods in network namespaces of their own. Skipped (said so) where no namespace can be made.
 */
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { createServer, type Server } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKubelet, type Kubelet } from '../../hack/k8s/kubelet.js';
import { directionRules, podRuleset, type NetworkPod, type NetworkView } from '../../hack/k8s/network-policy-rules.js';
import { probeNetworkMode } from '../../hack/k8s/pod-netns.js';
import { startKubeTestServer, type KubeTestServer } from '../../hack/k8s/server.js';
import type { KubeObject } from '../../hack/k8s/store.js';

const NET_PROBE = fileURLToPath(new URL('./fixtures/net-probe.cjs', import.meta.url));
const CONTROL_PORT = 9000;

const pod = (name: string, namespace: string, ip: string, labels: Record<string, string>, ports: NetworkPod['ports'] = []): NetworkPod => ({
  name,
  namespace,
  ip,
  labels,
  ports,
  ready: true,
});

describe('NetworkPolicies and Services as nftables rules', () => {
  const web = pod('web', 'shop', '10.130.1.2', { app: 'web' }, [{ name: 'http', containerPort: 8080 }]);
  const db = pod('db', 'shop', '10.130.1.3', { app: 'db' }, [{ name: 'pg', containerPort: 5432 }]);
  const job = pod('job', 'batch', '10.130.1.4', { app: 'job' });
  const view = (policies: NetworkView['policies'], services: NetworkView['services'] = []): NetworkView => ({
    nodeAddress: '10.130.1.1',
    pods: [web, db, job],
    namespaceLabels: { shop: { tier: 'prod' }, batch: {} },
    policies,
    services,
  });

  it('leaves a pod no policy selects open, and drops what a selecting policy does not allow', () => {
    const denyAll = { metadata: { name: 'deny', namespace: 'shop' }, spec: { podSelector: {}, policyTypes: ['Ingress' as const] } };
    expect(directionRules(view([]), web, 'Ingress')).toEqual([]);
    expect(directionRules(view([denyAll]), web, 'Ingress')).toEqual(['drop']);
    expect(directionRules(view([denyAll]), job, 'Ingress')).toEqual([]);
    expect(directionRules(view([denyAll]), web, 'Egress')).toEqual([]);
  });

  it('translates pod and namespace selectors, ipBlock with except, named ports and endPort', () => {
    const policy = {
      metadata: { name: 'db', namespace: 'shop' },
      spec: {
        podSelector: { matchLabels: { app: 'db' } },
        ingress: [
          { from: [{ podSelector: { matchLabels: { app: 'web' } } }], ports: [{ port: 'pg' }] },
          { from: [{ namespaceSelector: { matchExpressions: [{ key: 'tier', operator: 'DoesNotExist' as const }] } }] },
        ],
        egress: [
          { to: [{ ipBlock: { cidr: '10.0.0.0/8', except: ['10.130.0.0/16'] } }], ports: [{ protocol: 'UDP', port: 53, endPort: 60 }] },
        ],
      },
    };
    expect(directionRules(view([policy]), db, 'Ingress')).toEqual([
      'ip saddr 10.130.1.2 meta l4proto tcp th dport 5432 accept',
      'ip saddr 10.130.1.4 accept',
      'drop',
    ]);
    expect(directionRules(view([policy]), db, 'Egress')).toEqual([
      'ip daddr 10.0.0.0/8 ip daddr != 10.130.0.0/16 meta l4proto udp th dport 53-60 accept',
      'drop',
    ]);
  });

  it('resolves an egress named port on each destination pod, and skips a named port no destination has', () => {
    const policy = {
      metadata: { name: 'web', namespace: 'shop' },
      spec: {
        podSelector: { matchLabels: { app: 'web' } },
        policyTypes: ['Egress' as const],
        egress: [{ ports: [{ port: 'pg' }, { port: 'nope' }] }],
      },
    };
    expect(directionRules(view([policy]), web, 'Egress')).toEqual(['ip daddr 10.130.1.3 meta l4proto tcp th dport 5432 accept', 'drop']);
  });

  it('DNATs a ClusterIP to the ready pods the selector picks, at the named targetPort, and rejects one without endpoints', () => {
    const services = [
      { namespace: 'shop', name: 'web', clusterIP: '10.96.0.20', selector: { app: 'web' }, ports: [{ port: 80, targetPort: 'http' }] },
      { namespace: 'shop', name: 'none', clusterIP: '10.96.0.21', selector: { app: 'gone' }, ports: [{ port: 80 }] },
      { namespace: 'shop', name: 'headless', clusterIP: 'None', selector: { app: 'web' }, ports: [{ port: 80 }] },
    ];
    const ruleset = podRuleset(view([], services), job);
    expect(ruleset).toContain('ip daddr 10.96.0.20 tcp dport 80 dnat ip to numgen random mod 1 map { 0 : 10.130.1.2 . 8080 }');
    expect(ruleset).toContain('ip daddr 10.96.0.21 tcp dport 80 reject');
    expect(ruleset).not.toContain('None');
    expect(ruleset).toContain('ip saddr 10.130.1.1 accept');
  });
});

const mode = await probeNetworkMode();

describe.runIf(mode === 'netns')('pods in network namespaces of their own (netns mode)', () => {
  let server: KubeTestServer;
  let kubelet: Kubelet;
  /** A process of the host on 127.0.0.1, which pods reach at the node address. */
  let hostService: Server;
  let hostPort: number;
  /** A pid no process has: what a crashed test process left under it must be gone once the kubelet starts. */
  const deadPid = findDeadPid();

  const ip = (name: string, namespace = 'default') => (server.store.get('pods', namespace, name).status as { podIP: string }).podIP;
  const ready = (object: KubeObject | undefined) =>
    Boolean(
      (object?.status as { conditions?: Array<{ type: string; status: string }> })?.conditions?.some(
        (c) => c.type === 'Ready' && c.status === 'True',
      ),
    );

  async function runPod(name: string, namespace: string, labels: Record<string, string>, listen = ''): Promise<void> {
    server.store.create('pods', namespace, {
      metadata: { name, labels },
      spec: {
        containers: [
          {
            name: 'main',
            image: 'net-probe',
            env: [
              { name: 'LISTEN', value: listen },
              { name: 'CONTROL_PORT', value: String(CONTROL_PORT) },
            ],
            ports: listen
              .split(',')
              .filter(Boolean)
              .map((entry, index) => ({
                name: `p${index}`,
                containerPort: Number(entry.split(':')[1]),
                protocol: entry.startsWith('udp') ? 'UDP' : 'TCP',
              })),
            readinessProbe: { tcpSocket: { port: CONTROL_PORT } },
          },
        ],
      },
    });
    await server.store.waitFor('pods', namespace, name, ready, 20_000);
  }

  /** Tries a connection from inside a pod; the answer's reply is the name of the pod that answered. */
  async function connect(from: string, host: string, port: number, protocol = 'tcp', namespace = 'default') {
    await kubelet.networkSynced();
    const response = await fetch(`http://${ip(from, namespace)}:${CONTROL_PORT}/connect?host=${host}&port=${port}&protocol=${protocol}`);
    return (await response.json()) as { ok: boolean; reply?: string; error?: string };
  }

  beforeAll(async () => {
    hostService = createServer((socket) => socket.end('host'));
    hostService.listen(0, '127.0.0.1');
    await once(hostService, 'listening');
    hostPort = (hostService.address() as { port: number }).port;
    execFileSync('sh', ['-ec', `ip netns add acis-${deadPid}-7; ip link add acisbr${deadPid} type bridge`]);
    server = await startKubeTestServer({ namespaces: ['team-a', 'team-b'] });
    server.store.patch('namespaces', undefined, 'team-a', 'application/merge-patch+json', { metadata: { labels: { team: 'a' } } });
    kubelet = await startKubelet({
      server,
      network: 'netns',
      images: { 'net-probe': { command: process.execPath, args: [NET_PROBE], binds: [NET_PROBE] } },
      probePeriodMs: 25,
    });
    await Promise.all([
      runPod('client', 'default', { app: 'client' }),
      runPod('backend', 'default', { app: 'backend' }, 'tcp:8080,tcp:8081,udp:5353'),
      runPod('peer', 'team-a', { app: 'peer' }, 'tcp:8080'),
      runPod('stranger', 'team-b', { app: 'peer' }),
    ]);
  }, 60_000);

  afterAll(async () => {
    await kubelet?.close();
    await server?.close();
    hostService?.close();
  });

  it('removes what a crashed process left: its namespaces and bridge', () => {
    expect(execFileSync('ip', ['netns', 'list']).toString()).not.toContain(`acis-${deadPid}-`);
    expect(execFileSync('ip', ['-o', 'link', 'show', 'type', 'bridge']).toString()).not.toContain(`acisbr${deadPid}`);
  });

  it('refuses a node whose pod capacity exceeds its /24, as --max-pods must fit the podCIDR', async () => {
    await expect(
      startKubelet({ server, images: {}, nodeName: 'node-oversized', network: 'netns', allocatable: { pods: 300 } }),
    ).rejects.toThrow('allocatable pods 300 exceed the 253 addresses');
  });

  it('says which mode ran, and gives each pod an IP of its own on the node network', () => {
    expect(kubelet.networkMode).toBe('netns');
    const prefix = kubelet.nodeAddress.replace(/\.1$/, '.');
    for (const name of ['client', 'backend']) expect(ip(name)).toMatch(new RegExp(`^${prefix.replaceAll('.', '\\.')}\\d+$`));
    expect((server.store.get('pods', 'default', 'client').status as { hostIP: string }).hostIP).toBe(kubelet.nodeAddress);
  });

  it('lets pods reach each other, the host at the node address, and a Service by its ClusterIP (named targetPort)', async () => {
    expect(await connect('client', ip('backend'), 8080)).toEqual({ ok: true, reply: 'backend' });
    expect(await connect('client', ip('backend'), 5353, 'udp')).toEqual({ ok: true, reply: 'backend' });
    expect(await connect('client', kubelet.nodeAddress, hostPort)).toEqual({ ok: true, reply: 'host' });
    const service = server.store.create('services', 'default', {
      metadata: { name: 'backend' },
      spec: { selector: { app: 'backend' }, ports: [{ port: 80, targetPort: 'p1' }] },
    });
    const clusterIP = (service.spec as { clusterIP: string }).clusterIP;
    expect(await connect('client', clusterIP, 80)).toEqual({ ok: true, reply: 'backend' });
    server.store.delete('pods', 'default', 'backend');
    await server.store.waitUntil(() => !server.store.find('pods', 'default', 'backend'), 20_000, 'backend gone');
    expect(await connect('client', clusterIP, 80)).toEqual({ ok: false, error: 'ECONNREFUSED' });
    await runPod('backend', 'default', { app: 'backend' }, 'tcp:8080,tcp:8081,udp:5353');
  });

  it('enforces an ingress policy by pod selector and port, then a namespaceSelector added to it', async () => {
    const policy = server.store.create('networkpolicies.networking.k8s.io', 'default', {
      metadata: { name: 'backend' },
      spec: {
        podSelector: { matchLabels: { app: 'backend' } },
        ingress: [{ from: [{ podSelector: { matchLabels: { app: 'client' } } }], ports: [{ port: 8080 }] }],
      },
    });
    expect(await connect('client', ip('backend'), 8080)).toEqual({ ok: true, reply: 'backend' });
    expect(await connect('client', ip('backend'), 8081)).toEqual({ ok: false, error: 'timeout' });
    expect(await connect('peer', ip('backend'), 8080, 'tcp', 'team-a')).toEqual({ ok: false, error: 'timeout' });
    // The node may always reach its pods.
    expect(await (await fetch(`http://${ip('backend')}:${CONTROL_PORT}/`)).text()).toBe('backend');

    const spec = policy.spec as { ingress: Array<{ from: unknown[] }> };
    spec.ingress[0]!.from.push({ namespaceSelector: { matchLabels: { team: 'a' } } });
    server.store.update('networkpolicies.networking.k8s.io', 'default', 'backend', policy);
    expect(await connect('peer', ip('backend'), 8080, 'tcp', 'team-a')).toEqual({ ok: true, reply: 'backend' });
    expect(await connect('stranger', ip('backend'), 8080, 'tcp', 'team-b')).toEqual({ ok: false, error: 'timeout' });

    server.store.delete('networkpolicies.networking.k8s.io', 'default', 'backend');
    expect(await connect('client', ip('backend'), 8081)).toEqual({ ok: true, reply: 'backend' });
  });

  it('enforces an egress ipBlock with except, and egress to the node', async () => {
    server.store.create('networkpolicies.networking.k8s.io', 'default', {
      metadata: { name: 'client' },
      spec: {
        podSelector: { matchLabels: { app: 'client' } },
        policyTypes: ['Egress'],
        egress: [
          { to: [{ ipBlock: { cidr: `${kubelet.nodeAddress}/24`, except: [`${ip('backend')}/32`, `${kubelet.nodeAddress}/32`] } }] },
        ],
      },
    });
    expect(await connect('client', ip('peer', 'team-a'), 8080)).toEqual({ ok: true, reply: 'peer' });
    expect(await connect('client', ip('backend'), 8080)).toEqual({ ok: false, error: 'timeout' });
    expect(await connect('client', kubelet.nodeAddress, hostPort)).toEqual({ ok: false, error: 'timeout' });
    server.store.delete('networkpolicies.networking.k8s.io', 'default', 'client');
    expect(await connect('client', ip('backend'), 8080)).toEqual({ ok: true, reply: 'backend' });
  });
});

function findDeadPid(): number {
  for (let pid = 4_000_000; ; pid++) {
    try {
      process.kill(pid, 0);
    } catch {
      return pid;
    }
  }
}
