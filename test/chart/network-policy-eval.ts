/**
 * NetworkPolicy semantics (networking.k8s.io/v1) as a pure function, so tests can ask of the rendered
 * policies "may this pod open this port on that pod or address?" the way an enforcing CNI answers:
 * a pod selected by no policy of a direction is open in it; a selected pod allows only what some
 * rule of some selecting policy allows; a connection needs the source's egress and, for a pod, the
 * destination's ingress. Peers: podSelector, namespaceSelector (both ANDed when together), ipBlock
 * with except (IPv4 here; pods are matched by ipBlock on their IP as most CNIs do). The same rules
 * are enforced on packets by the kubelet's netns mode (hack/k8s/network-policy-rules.ts,
 * chart-network-policy.test.ts); this evaluator answers without running pods.
 */
import { type LabelSelector, selectsLabels } from '../../hack/k8s/label-selector.js';
import type { Peer, PolicyPort } from '../../hack/k8s/network-policy-rules.js';

export type { LabelSelector };

export interface NetworkPolicy {
  metadata: { name: string; namespace?: string };
  spec: {
    podSelector: LabelSelector;
    policyTypes?: Array<'Ingress' | 'Egress'>;
    ingress?: Array<{ from?: Peer[]; ports?: PolicyPort[] }>;
    egress?: Array<{ to?: Peer[]; ports?: PolicyPort[] }>;
  };
}

export interface PodEndpoint {
  namespace: string;
  labels: Record<string, string>;
  ip: string;
  /** Labels of the pod's namespace beside kubernetes.io/metadata.name. */
  namespaceLabels?: Record<string, string>;
}

export type Destination = PodEndpoint | { ip: string };

/** The selector semantics the kubelet's enforced rules use too (hack/k8s/label-selector.ts). */
export const selects = selectsLabels;

function ipv4(address: string): number | undefined {
  const parts = address.split('.');
  if (parts.length !== 4) return undefined;
  return parts.reduce((sum, part) => sum * 256 + Number(part), 0);
}

export function inCidr(address: string, cidr: string): boolean {
  const [base, bits] = cidr.split('/');
  const ip = ipv4(address);
  const network = ipv4(base!);
  if (ip === undefined || network === undefined) return false; // IPv6 blocks never match IPv4 addresses
  const size = 2 ** (32 - Number(bits));
  return Math.floor(ip / size) === Math.floor(network / size);
}

function isPod(destination: Destination): destination is PodEndpoint {
  return 'labels' in destination;
}

function namespaceLabels(pod: PodEndpoint): Record<string, string> {
  return { ...pod.namespaceLabels, 'kubernetes.io/metadata.name': pod.namespace };
}

function peerMatches(peer: Peer, policyNamespace: string, other: Destination): boolean {
  if (peer.ipBlock) {
    return inCidr(other.ip, peer.ipBlock.cidr) && !(peer.ipBlock.except ?? []).some((except) => inCidr(other.ip, except));
  }
  if (!isPod(other)) return false;
  const namespaceOk = peer.namespaceSelector
    ? selects(peer.namespaceSelector, namespaceLabels(other))
    : other.namespace === policyNamespace;
  const podOk = peer.podSelector ? selects(peer.podSelector, other.labels) : true;
  return namespaceOk && podOk;
}

function portMatches(ports: PolicyPort[] | undefined, port: number, protocol: string): boolean {
  if (!ports || ports.length === 0) return true;
  return ports.some(
    (p) =>
      (p.protocol ?? 'TCP') === protocol &&
      (p.port === undefined || (p.endPort ? port >= Number(p.port) && port <= p.endPort : Number(p.port) === port)),
  );
}

function policyTypes(policy: NetworkPolicy): string[] {
  return policy.spec.policyTypes ?? (policy.spec.egress ? ['Ingress', 'Egress'] : ['Ingress']);
}

function allowedIn(
  policies: NetworkPolicy[],
  direction: 'Ingress' | 'Egress',
  subject: PodEndpoint,
  other: Destination,
  port: number,
  protocol: string,
): boolean {
  const selecting = policies.filter(
    (policy) =>
      (policy.metadata.namespace ?? subject.namespace) === subject.namespace &&
      policyTypes(policy).includes(direction) &&
      selects(policy.spec.podSelector, subject.labels),
  );
  if (selecting.length === 0) return true;
  return selecting.some((policy) => {
    const namespace = policy.metadata.namespace ?? subject.namespace;
    const rules =
      direction === 'Ingress'
        ? (policy.spec.ingress ?? []).map((r) => ({ peers: r.from, ports: r.ports }))
        : (policy.spec.egress ?? []).map((r) => ({ peers: r.to, ports: r.ports }));
    return rules.some(
      (rule) =>
        portMatches(rule.ports, port, protocol) &&
        (!rule.peers || rule.peers.length === 0 || rule.peers.some((peer) => peerMatches(peer, namespace, other))),
    );
  });
}

/** Whether `source` may open `port`/`protocol` on `destination` under `policies`. */
export function connectionAllowed(
  policies: NetworkPolicy[],
  source: PodEndpoint,
  destination: Destination,
  port: number,
  protocol = 'TCP',
): boolean {
  if (!allowedIn(policies, 'Egress', source, destination, port, protocol)) return false;
  return isPod(destination) ? allowedIn(policies, 'Ingress', destination, source, port, protocol) : true;
}
