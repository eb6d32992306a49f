/**
 * NetworkPolicies (networking.k8s.io/v1) as nftables rules for one pod, the way a policy-enforcing
 * network plugin programs them at each pod's interface
 * (https://kubernetes.io/docs/concepts/services-networking/network-policies/):
 * - "By default, a pod is non-isolated for egress/ingress": a pod no policy of a direction selects
 *   has no rules in it; a selected pod allows only the union of the rules of the policies selecting
 *   it ("Network policies do not conflict; they are additive"), and drops the rest.
 * - policyTypes default to Ingress, plus Egress when the policy has egress rules.
 * - Peers: podSelector (in the policy's namespace), namespaceSelector (with podSelector: both must
 *   match), ipBlock with except (matched on pod IPs too, as most plugins do). A rule without peers
 *   matches every peer; a rule without ports every port. Ports: protocol (TCP default), number or
 *   named port (resolved on the destination pod's containerPorts), endPort.
 * - Replies of allowed connections pass ("the reply traffic … is implicitly allowed"): conntrack.
 * - "traffic to and from the node where a Pod is running is always allowed": pods cannot block
 *   their node (kubelet probes), so the node address is accepted on ingress. Egress to the node
 *   (the host's processes) is subject to egress policy, as Calico and Cilium do by default.
 * Egress rules run after the Service translation (service-proxy.ts), so they see the pod a Service
 * address was translated to, as plugins evaluate them.
 */
import { selectsLabels, type LabelSelector } from './label-selector.js';
import { type NetworkPod, serviceRules, type ServiceView } from './service-proxy.js';

/** A NetworkPolicyPeer (networking.k8s.io/v1). */
export interface Peer {
  podSelector?: LabelSelector;
  namespaceSelector?: LabelSelector;
  ipBlock?: { cidr: string; except?: string[] };
}

/** A NetworkPolicyPort. */
export interface PolicyPort {
  protocol?: string;
  port?: number | string;
  endPort?: number;
}

export interface NetworkPolicyObject {
  metadata: { name?: string; namespace?: string };
  spec: {
    podSelector?: LabelSelector;
    policyTypes?: Array<'Ingress' | 'Egress'>;
    ingress?: Array<{ from?: Peer[]; ports?: PolicyPort[] }>;
    egress?: Array<{ to?: Peer[]; ports?: PolicyPort[] }>;
  };
}

export type { NetworkPod };

/** What the rules of one pod are computed from: the cluster's pods, namespaces' labels, policies and Services. */
export interface NetworkView {
  /** The node's address as pods see it (the host's end of their link). */
  nodeAddress: string;
  pods: NetworkPod[];
  namespaceLabels: Record<string, Record<string, string>>;
  policies: NetworkPolicyObject[];
  services: ServiceView[];
}

type Direction = 'Ingress' | 'Egress';

/** The nftables table each pod's network namespace holds. */
export const POD_TABLE = 'acis-pod';

export function policyTypes(policy: NetworkPolicyObject): Direction[] {
  return policy.spec.policyTypes ?? (policy.spec.egress ? ['Ingress', 'Egress'] : ['Ingress']);
}

function selecting(view: NetworkView, pod: NetworkPod, direction: Direction): NetworkPolicyObject[] {
  return view.policies.filter(
    (policy) =>
      policy.metadata.namespace === pod.namespace &&
      policyTypes(policy).includes(direction) &&
      selectsLabels(policy.spec.podSelector ?? {}, pod.labels),
  );
}

function namespaceLabels(view: NetworkView, namespace: string): Record<string, string> {
  return { ...view.namespaceLabels[namespace], 'kubernetes.io/metadata.name': namespace };
}

/** The pods a pod/namespace peer selects ("podSelector … selects particular Pods in the same namespace as the NetworkPolicy"). */
function peerPods(view: NetworkView, peer: Peer, policyNamespace: string): NetworkPod[] {
  return view.pods.filter(
    (other) =>
      (peer.namespaceSelector
        ? selectsLabels(peer.namespaceSelector, namespaceLabels(view, other.namespace))
        : other.namespace === policyNamespace) && selectsLabels(peer.podSelector ?? {}, other.labels),
  );
}

const protocolOf = (protocol: string | undefined) => (protocol ?? 'TCP').toLowerCase();

/** The destination port match of a policy port, given the port numbers a named port resolves to on the destination. */
function portMatch(port: PolicyPort, resolved: number | undefined): string | undefined {
  const l4 = `meta l4proto ${protocolOf(port.protocol)}`;
  if (port.port === undefined) return l4;
  if (resolved === undefined) return undefined;
  return `${l4} th dport ${port.endPort ? `${resolved}-${port.endPort}` : resolved}`;
}

/** A named port's number on a pod ("port … can be either a numerical or named port on a pod"), or the number itself. */
function resolvePort(port: PolicyPort, pod: NetworkPod | undefined): number | undefined {
  if (typeof port.port === 'number') return port.port;
  if (port.port === undefined) return undefined;
  if (/^\d+$/.test(port.port)) return Number(port.port);
  return pod?.ports.find((candidate) => candidate.name === port.port && protocolOf(candidate.protocol) === protocolOf(port.protocol))
    ?.containerPort;
}

const set = (items: string[]) => (items.length === 1 ? items[0]! : `{ ${items.join(', ')} }`);

/** The address matches of a rule's peers, from the point of view of `field` (`saddr` for ingress, `daddr` for egress). */
function peerMatches(
  view: NetworkView,
  peers: Peer[] | undefined,
  namespace: string,
  field: 'saddr' | 'daddr',
): Array<{ match: string; pods: NetworkPod[] | undefined }> {
  if (!peers || peers.length === 0) return [{ match: '', pods: undefined }];
  return peers.flatMap((peer) => {
    if (peer.ipBlock) {
      const except = peer.ipBlock.except ?? [];
      if (peer.ipBlock.cidr.includes(':')) return []; // IPv6 blocks: pods here have IPv4 addresses only
      const excluded = except.filter((cidr) => !cidr.includes(':'));
      return [{ match: `ip ${field} ${peer.ipBlock.cidr}${excluded.length ? ` ip ${field} != ${set(excluded)}` : ''} `, pods: [] }];
    }
    const pods = peerPods(view, peer, namespace);
    return pods.length ? [{ match: `ip ${field} ${set(pods.map((pod) => pod.ip))} `, pods }] : [];
  });
}

/** The accept rules one policy rule gives a pod in a direction. */
function ruleLines(
  view: NetworkView,
  pod: NetworkPod,
  direction: Direction,
  namespace: string,
  rule: { peers?: Peer[]; ports?: PolicyPort[] },
): string[] {
  const field = direction === 'Ingress' ? 'saddr' : 'daddr';
  const lines: string[] = [];
  for (const peer of peerMatches(view, rule.peers, namespace, field)) {
    if (!rule.ports || rule.ports.length === 0) {
      lines.push(`${peer.match}accept`);
      continue;
    }
    for (const port of rule.ports) {
      if (direction === 'Ingress' || typeof port.port !== 'string' || /^\d+$/.test(port.port)) {
        // Ingress ports are the pod's own; numbers need no destination.
        const match = portMatch(port, resolvePort(port, direction === 'Ingress' ? pod : undefined));
        if (match) lines.push(`${peer.match}${match} accept`);
        continue;
      }
      // An egress named port: per destination pod that has it (ipBlock peers have none).
      const destinations = peer.pods ?? view.pods;
      for (const destination of destinations) {
        const match = portMatch(port, resolvePort(port, destination));
        if (match) lines.push(`${peer.match}ip daddr ${destination.ip} ${match} accept`);
      }
    }
  }
  return lines;
}

/** The filter lines of one direction: nothing when no policy selects the pod, else its allowances and a drop. */
export function directionRules(view: NetworkView, pod: NetworkPod, direction: Direction): string[] {
  const policies = selecting(view, pod, direction);
  if (policies.length === 0) return [];
  const lines = policies.flatMap((policy) => {
    const rules =
      direction === 'Ingress'
        ? (policy.spec.ingress ?? []).map((rule) => ({ peers: rule.from, ports: rule.ports }))
        : (policy.spec.egress ?? []).map((rule) => ({ peers: rule.to, ports: rule.ports }));
    return rules.flatMap((rule) => ruleLines(view, pod, direction, policy.metadata.namespace!, rule));
  });
  return [...new Set(lines), 'drop'];
}

/** The whole table of a pod's network namespace: Service translation, egress and ingress filters. Replaces the previous one atomically. */
export function podRuleset(view: NetworkView, pod: NetworkPod): string {
  const services = serviceRules(view.services, view.pods);
  const indent = (lines: string[]) => lines.map((line) => `    ${line}`).join('\n');
  return `table inet ${POD_TABLE} {}
delete table inet ${POD_TABLE}
table inet ${POD_TABLE} {
  chain services {
    type nat hook output priority -100; policy accept;
${indent(services.translate)}
  }
  chain egress {
    type filter hook output priority 0; policy accept;
${indent(services.reject)}
    ct state established,related accept
    oifname "lo" accept
${indent(directionRules(view, pod, 'Egress'))}
  }
  chain ingress {
    type filter hook input priority 0; policy accept;
    ct state established,related accept
    iifname "lo" accept
    ip saddr ${view.nodeAddress} accept
${indent(directionRules(view, pod, 'Ingress'))}
  }
}
`;
}
