/**
 * Keeps the nftables rules of a kubelet's pods (netns mode) in line with the cluster, as a policy
 * plugin's agent and kube-proxy do on a node: level-triggered, any change of pods, namespaces,
 * NetworkPolicies, Services or Endpoints recomputes every local pod's table from the store
 * (network-policy-rules.ts, service-proxy.ts), and a table is rewritten only when it changed.
 * Changes arriving during a pass make one more pass; `settled()` resolves when none is left.
 */
import type { KubeObjects } from './objects.js';
import { podRuleset, type NetworkPod, type NetworkPolicyObject, type NetworkView } from './network-policy-rules.js';
import type { PodAttachment, PodNetworkHost } from './pod-netns.js';
import type { ServiceView } from './service-proxy.js';
import type { KubeObject } from './store.js';

const WATCHED = new Set(['/pods', '/namespaces', '/services', '/endpoints', 'networking.k8s.io/networkpolicies']);

interface LocalPod {
  attachment: PodAttachment;
  applied?: string;
}

export interface PodNetworkSync {
  /** Starts enforcing for a pod attached to the network; resolves once its rules are in place. */
  add(uid: string, attachment: PodAttachment): Promise<void>;
  remove(uid: string): void;
  /** Resolves when the rules of every local pod reflect the store as it is now. */
  settled(): Promise<void>;
  stop(): void;
}

type PodObject = KubeObject & {
  spec?: { containers?: Array<{ ports?: NetworkPod['ports'] }> };
  status?: { podIP?: string; phase?: string; conditions?: Array<{ type: string; status: string }> };
};

function networkPod(pod: PodObject, ip: string | undefined): NetworkPod | undefined {
  if (!ip || pod.status?.phase === 'Succeeded' || pod.status?.phase === 'Failed') return undefined;
  return {
    namespace: pod.metadata.namespace!,
    name: pod.metadata.name!,
    ip,
    labels: pod.metadata.labels ?? {},
    ports: (pod.spec?.containers ?? []).flatMap((container) => container.ports ?? []),
    ready: !pod.metadata.deletionTimestamp && Boolean(pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')),
  };
}

/** The cluster as the rules see it; local pods by the IP they were attached with (before their status says it). */
export function networkView(objects: KubeObjects, nodeAddress: string, localIPs: Map<string, string>): NetworkView {
  const store = objects.store;
  const endpoints = new Map(store.scan('/endpoints').map((object) => [`${object.metadata.namespace}/${object.metadata.name}`, object]));
  const services: ServiceView[] = store.scan('/services').map((object) => {
    const spec = (object.spec ?? {}) as { clusterIP?: string; selector?: Record<string, string>; ports?: ServiceView['ports'] };
    const subsets = endpoints.get(`${object.metadata.namespace}/${object.metadata.name}`)?.subsets as ServiceView['endpoints'];
    return {
      namespace: object.metadata.namespace!,
      name: object.metadata.name!,
      clusterIP: spec.clusterIP,
      selector: spec.selector,
      ports: spec.ports ?? [],
      endpoints: subsets,
    };
  });
  return {
    nodeAddress,
    pods: (store.scan('/pods') as PodObject[]).flatMap(
      (pod) => networkPod(pod, localIPs.get(pod.metadata.uid!) ?? pod.status?.podIP) ?? [],
    ),
    namespaceLabels: Object.fromEntries(store.scan('/namespaces').map((object) => [object.metadata.name!, object.metadata.labels ?? {}])),
    policies: [...store.scan('networking.k8s.io/networkpolicies')] as unknown as NetworkPolicyObject[],
    services,
  };
}

export function startPodNetworkSync(objects: KubeObjects, host: PodNetworkHost, onError: (error: unknown) => void): PodNetworkSync {
  const local = new Map<string, LocalPod>();
  let dirty = false;
  let pass: Promise<void> | undefined;

  const syncAll = async () => {
    const localIPs = new Map([...local].map(([uid, pod]) => [uid, pod.attachment.ip]));
    const view = networkView(objects, host.nodeAddress, localIPs);
    await Promise.all(
      [...local].map(async ([uid, pod]) => {
        const self = view.pods.find((candidate) => candidate.ip === pod.attachment.ip);
        const object = objects.store.scan('/pods').find((candidate) => candidate.metadata.uid === uid);
        if (!self || !object) return;
        const ruleset = podRuleset(view, self);
        if (ruleset === pod.applied) return;
        await host.applyRules(pod.attachment, ruleset);
        pod.applied = ruleset;
      }),
    );
  };

  const schedule = (): Promise<void> => {
    dirty = true;
    pass ??= (async () => {
      while (dirty) {
        dirty = false;
        await syncAll().catch(onError);
      }
      pass = undefined;
    })();
    return pass;
  };

  const unsubscribe = objects.store.subscribe((change) => {
    if (WATCHED.has(change.storageKey) && local.size > 0) void schedule();
  });

  return {
    add(uid, attachment) {
      local.set(uid, { attachment });
      return schedule();
    },
    remove(uid) {
      local.delete(uid);
    },
    settled: () => pass ?? Promise.resolve(),
    stop: unsubscribe,
  };
}
