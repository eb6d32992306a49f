/**
 * ResourceQuota admission, as the real server's quota admission plugin refuses creates: a new pod
 * (or object, for `count/<resource>` and the core count names) that would take a namespace past any
 * of its quotas' `spec.hard` is refused with 403 Forbidden "exceeded quota", and a pod without
 * requests or limits for a tracked compute resource with "must specify". Usage is computed from the
 * objects present (pods that have not ended); `status` of the quotas is not maintained.
 */
import { KubeStatusError } from './errors.js';
import type { ResourceType } from './resources.js';
import { parseQuantity } from '../../kube/quantity.js';
import type { KubeObject, ObjectStore } from './store.js';

interface Container {
  name: string;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
}

const COMPUTE: Record<string, { list: 'requests' | 'limits'; resource: 'cpu' | 'memory' }> = {
  cpu: { list: 'requests', resource: 'cpu' },
  memory: { list: 'requests', resource: 'memory' },
  'requests.cpu': { list: 'requests', resource: 'cpu' },
  'requests.memory': { list: 'requests', resource: 'memory' },
  'limits.cpu': { list: 'limits', resource: 'cpu' },
  'limits.memory': { list: 'limits', resource: 'memory' },
};

const CORE_COUNTS: Record<string, string> = {
  secrets: '/secrets',
  configmaps: '/configmaps',
  services: '/services',
  persistentvolumeclaims: '/persistentvolumeclaims',
};

function containersOf(pod: KubeObject): Container[] {
  return (pod.spec as { containers?: Container[] } | undefined)?.containers ?? [];
}

/** A container's request for a resource; requests default to limits, as the real server defaults them. */
function amount(container: Container, list: 'requests' | 'limits', resource: 'cpu' | 'memory'): string | undefined {
  const limits = container.resources?.limits?.[resource];
  return list === 'limits' ? limits : (container.resources?.requests?.[resource] ?? limits);
}

function podUsage(pod: KubeObject, key: string): number {
  const compute = COMPUTE[key];
  if (!compute) return 0;
  return containersOf(pod).reduce((sum, container) => sum + parseQuantity(amount(container, compute.list, compute.resource)), 0);
}

function format(key: string, value: number): string {
  if (key.endsWith('cpu') || key === 'cpu') return Number.isInteger(value) ? String(value) : `${Math.round(value * 1000)}m`;
  if (key.endsWith('memory') || key === 'memory') return value % 2 ** 20 === 0 ? `${value / 2 ** 20}Mi` : String(value);
  return String(value);
}

function live(pod: KubeObject): boolean {
  const phase = (pod.status as { phase?: string } | undefined)?.phase;
  return phase !== 'Succeeded' && phase !== 'Failed';
}

export function admitQuota(store: ObjectStore, type: ResourceType, namespace: string | undefined, object: KubeObject): void {
  if (!namespace) return;
  const quotas = store.scan('/resourcequotas', namespace);
  if (quotas.length === 0) return;
  const isPod = type.storageKey === '/pods';
  const pods = isPod ? store.scan('/pods', namespace).filter(live) : [];
  const countKeys = new Set([`count/${type.resource}${type.group ? `.${type.group}` : ''}`]);
  for (const [name, storageKey] of Object.entries(CORE_COUNTS)) if (storageKey === type.storageKey) countKeys.add(name);
  if (isPod) countKeys.add('pods');
  for (const quota of quotas) {
    const hard = ((quota.spec as { hard?: Record<string, string> } | undefined)?.hard ?? {}) as Record<string, string>;
    const exceeded: Array<{ key: string; requested: number; used: number; limit: string }> = [];
    const unspecified = new Set<string>();
    for (const [key, limit] of Object.entries(hard)) {
      if (countKeys.has(key)) {
        const used = key === 'pods' ? pods.length : store.scan(type.storageKey, namespace).length;
        if (used + 1 > parseQuantity(limit)) exceeded.push({ key, requested: 1, used, limit });
      } else if (isPod && COMPUTE[key]) {
        const compute = COMPUTE[key]!;
        for (const container of containersOf(object))
          if (amount(container, compute.list, compute.resource) === undefined) unspecified.add(key);
        const requested = podUsage(object, key);
        const used = pods.reduce((sum, pod) => sum + podUsage(pod, key), 0);
        if (used + requested > parseQuantity(limit) + 1e-9) exceeded.push({ key, requested, used, limit });
      }
    }
    const name = object.metadata.name ?? '';
    if (unspecified.size > 0) {
      throw new KubeStatusError(
        403,
        'Forbidden',
        `${type.resource} "${name}" is forbidden: failed quota: ${quota.metadata.name}: must specify ${[...unspecified].sort().join(',')}`,
        { name, kind: type.resource },
      );
    }
    if (exceeded.length > 0) {
      const list = (pick: (entry: (typeof exceeded)[number]) => string) => exceeded.map((entry) => `${entry.key}=${pick(entry)}`).join(',');
      throw new KubeStatusError(
        403,
        'Forbidden',
        `${type.resource} "${name}" is forbidden: exceeded quota: ${quota.metadata.name}, requested: ${list((entry) => format(entry.key, entry.requested))}, used: ${list((entry) => format(entry.key, entry.used))}, limited: ${list((entry) => entry.limit)}`,
        { name, kind: type.resource },
      );
    }
  }
}
