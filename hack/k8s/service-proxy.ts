/**
 * Services' virtual IPs as kube-proxy's nftables mode translates them
 * (https://kubernetes.io/docs/reference/networking/virtual-ips/): a connection to a Service's
 * ClusterIP and port is DNATed to one of its ready endpoints, picked at random (`numgen random`,
 * as kube-proxy's per-Service vmap does), at the targetPort (a named targetPort resolved on each
 * endpoint pod's containerPorts); a Service without ready endpoints rejects ("Services with no
 * endpoints … reject packets"). Endpoints are the ready pods the Service's selector picks in its
 * namespace, as the EndpointSlice controller would list them; a Service without a selector uses its
 * Endpoints object as written (e.g. pointing at the node address, where host processes listen).
 * The rules run in each pod's own network namespace (translation at the source, like Cilium's
 * socket load balancing) rather than on the node, which reaches the same pods by the same rules.
 * Headless Services (clusterIP None) get no rules.
 */
import { selectsLabels } from './label-selector.js';

/** A pod as the network sees it: where it is, what selects it, its named ports, whether it serves. */
export interface NetworkPod {
  namespace: string;
  name: string;
  ip: string;
  labels: Record<string, string>;
  ports: Array<{ name?: string; containerPort: number; protocol?: string }>;
  ready: boolean;
}

export interface ServicePort {
  name?: string;
  protocol?: string;
  port: number;
  targetPort?: number | string;
}

export interface ServiceView {
  namespace: string;
  name: string;
  clusterIP?: string;
  selector?: Record<string, string>;
  ports: ServicePort[];
  /** The Endpoints object's subsets, used when the Service has no selector. */
  endpoints?: Array<{ addresses?: Array<{ ip: string }>; ports?: Array<{ name?: string; port: number; protocol?: string }> }>;
}

/** One Service port's endpoints as address and port. */
export function endpointsOf(service: ServiceView, servicePort: ServicePort, pods: NetworkPod[]): Array<{ ip: string; port: number }> {
  const protocol = servicePort.protocol ?? 'TCP';
  if (service.selector && Object.keys(service.selector).length > 0) {
    const target = servicePort.targetPort ?? servicePort.port;
    return pods
      .filter((pod) => pod.ready && pod.namespace === service.namespace && selectsLabels({ matchLabels: service.selector }, pod.labels))
      .flatMap((pod) => {
        const port =
          typeof target === 'number' || /^\d+$/.test(target)
            ? Number(target)
            : pod.ports.find((candidate) => candidate.name === target && (candidate.protocol ?? 'TCP') === protocol)?.containerPort;
        return port === undefined ? [] : [{ ip: pod.ip, port }];
      });
  }
  return (service.endpoints ?? []).flatMap((subset) => {
    const port = (subset.ports ?? []).find(
      (candidate) => (candidate.name ?? '') === (servicePort.name ?? '') && (candidate.protocol ?? 'TCP') === protocol,
    );
    return port ? (subset.addresses ?? []).map((address) => ({ ip: address.ip, port: port.port })) : [];
  });
}

/** The nat rules translating Service addresses, and the filter rules rejecting those without endpoints. */
export function serviceRules(services: ServiceView[], pods: NetworkPod[]): { translate: string[]; reject: string[] } {
  const translate: string[] = [];
  const reject: string[] = [];
  for (const service of services) {
    if (!service.clusterIP || service.clusterIP === 'None' || service.clusterIP.includes(':')) continue;
    for (const servicePort of service.ports) {
      const match = `ip daddr ${service.clusterIP} ${(servicePort.protocol ?? 'TCP').toLowerCase()} dport ${servicePort.port}`;
      const endpoints = endpointsOf(service, servicePort, pods);
      if (endpoints.length === 0) {
        reject.push(`${match} reject`);
        continue;
      }
      const map = endpoints.map((endpoint, index) => `${index} : ${endpoint.ip} . ${endpoint.port}`).join(', ');
      translate.push(`${match} dnat ip to numgen random mod ${endpoints.length} map { ${map} }`);
    }
  }
  return { translate, reject };
}
