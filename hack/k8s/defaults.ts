/**
 * The defaults the real API server fills in on create for the built-in kinds a controller writes
 * (pods, secrets, services, jobs). They matter to tests because a controller that compares the
 * object it wants with the object it reads must ignore what the server adds, as on a cluster.
 */
import type { ResourceType } from './resources.js';
import type { KubeObject } from './store.js';

type Fields = Record<string, unknown>;

/** Service cluster IPs, from 10.96.0.0/12 as kubeadm's default range. */
let nextServiceAddress = 1;

function serviceAddress(): string {
  const address = nextServiceAddress++;
  return `10.96.${(address >> 8) & 255}.${address & 255}`;
}

function imagePullPolicy(image: string): string {
  const name = image.split('@')[0]!;
  const tag = name.lastIndexOf(':') > name.lastIndexOf('/') ? name.slice(name.lastIndexOf(':') + 1) : undefined;
  return !image.includes('@') && (tag === undefined || tag === 'latest') ? 'Always' : 'IfNotPresent';
}

function defaultContainer(container: Fields): void {
  container.imagePullPolicy ??= imagePullPolicy(String(container.image ?? ''));
  container.terminationMessagePath ??= '/dev/termination-log';
  container.terminationMessagePolicy ??= 'File';
  container.resources ??= {};
  for (const port of (container.ports as Fields[] | undefined) ?? []) port.protocol ??= 'TCP';
}

function defaultPodSpec(spec: Fields): void {
  spec.restartPolicy ??= 'Always';
  spec.terminationGracePeriodSeconds ??= 30;
  spec.dnsPolicy ??= 'ClusterFirst';
  spec.schedulerName ??= 'default-scheduler';
  spec.securityContext ??= {};
  spec.serviceAccountName ??= 'default';
  spec.serviceAccount ??= spec.serviceAccountName;
  spec.enableServiceLinks ??= true;
  spec.priority ??= 0;
  spec.preemptionPolicy ??= 'PreemptLowerPriority';
  for (const container of [...((spec.containers as Fields[] | undefined) ?? []), ...((spec.initContainers as Fields[] | undefined) ?? [])])
    defaultContainer(container);
}

export function applyKindDefaults(type: ResourceType, object: KubeObject): void {
  const spec = (object.spec ?? {}) as Fields;
  switch (type.storageKey) {
    case '/pods': {
      object.spec = spec;
      defaultPodSpec(spec);
      // What the DefaultTolerationSeconds admission plugin adds.
      const tolerations = (spec.tolerations as Fields[] | undefined) ?? [];
      for (const key of ['node.kubernetes.io/not-ready', 'node.kubernetes.io/unreachable']) {
        if (!tolerations.some((toleration) => toleration.key === key))
          tolerations.push({ key, operator: 'Exists', effect: 'NoExecute', tolerationSeconds: 300 });
      }
      spec.tolerations = tolerations;
      const containers = (spec.containers as Array<{ resources?: { requests?: object; limits?: object } }> | undefined) ?? [];
      const hasResources = containers.some(
        (container) => Object.keys(container.resources?.requests ?? {}).length + Object.keys(container.resources?.limits ?? {}).length > 0,
      );
      object.status = { phase: 'Pending', qosClass: hasResources ? 'Burstable' : 'BestEffort' };
      return;
    }
    case '/secrets': {
      object.type ??= 'Opaque';
      // As the real API server does: stringData is write-only, merged into data (base64) and never stored.
      const plain = object.stringData as Record<string, string> | undefined;
      if (plain) {
        const data = { ...((object.data as Record<string, string> | undefined) ?? {}) };
        for (const [key, value] of Object.entries(plain)) data[key] = Buffer.from(value).toString('base64');
        object.data = data;
        delete object.stringData;
      }
      return;
    }
    case '/services':
      object.spec = spec;
      spec.type ??= 'ClusterIP';
      spec.sessionAffinity ??= 'None';
      if (spec.clusterIP !== 'None') spec.clusterIP ??= serviceAddress();
      spec.clusterIPs ??= [spec.clusterIP];
      spec.ipFamilies ??= ['IPv4'];
      spec.ipFamilyPolicy ??= 'SingleStack';
      spec.internalTrafficPolicy ??= 'Cluster';
      for (const port of (spec.ports as Fields[] | undefined) ?? []) {
        port.protocol ??= 'TCP';
        port.targetPort ??= port.port;
      }
      object.status = { loadBalancer: {} };
      return;
    case '/namespaces':
      object.status = { phase: 'Active' };
      return;
    case 'batch/jobs': {
      object.spec = spec;
      spec.completions ??= 1;
      spec.parallelism ??= 1;
      spec.backoffLimit ??= 6;
      spec.completionMode ??= 'NonIndexed';
      spec.suspend ??= false;
      const template = (spec.template ?? {}) as Fields;
      spec.template = template;
      const controllerLabels = {
        'batch.kubernetes.io/controller-uid': object.metadata.uid!,
        'batch.kubernetes.io/job-name': object.metadata.name!,
        'controller-uid': object.metadata.uid!,
        'job-name': object.metadata.name!,
      };
      const metadata = (template.metadata ?? {}) as { labels?: Record<string, string> };
      template.metadata = { ...metadata, labels: { ...metadata.labels, ...controllerLabels } };
      spec.selector ??= { matchLabels: { 'batch.kubernetes.io/controller-uid': object.metadata.uid! } };
      defaultPodSpec((template.spec ?? {}) as Fields);
      return;
    }
  }
}
