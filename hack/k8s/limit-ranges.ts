/**
 * The LimitRanger admission plugin for pods, as "Limit Ranges" (concepts/policy/limit-range)
 * describes it (plugin/pkg/admission/limitranger):
 * - mutating, on create: a container without a limit (request) for a resource gets the range's
 *   `type: Container` `default` (`defaultRequest`), and the pod the `kubernetes.io/limit-ranger`
 *   annotation saying so;
 * - validating: per Container (`type: Container`) and for the whole pod (`type: Pod`: the sum of its
 *   containers, or an init container's when larger), a request under `min`, a limit over `max` (or
 *   no limit where `max` is set), or a limit more than `maxLimitRequestRatio` times the request (or
 *   either missing) is 403 Forbidden with the plugin's wording (`maximum cpu usage per Container is
 *   2, but limit is 3`, `cpu max limit to request ratio per Pod is 2, but provided ratio is 4.000000`).
 * Not applied: `PersistentVolumeClaim` limits; the default request from a default limit when no
 * defaultRequest is set; pod overhead.
 */
import { KubeStatusError } from './errors.js';
import { parseQuantity } from '../../kube/quantity.js';
import type { KubeObject, ObjectStore } from './store.js';

type Resources = Record<string, string>;

interface ContainerLimits {
  type: string;
  default?: Resources;
  defaultRequest?: Resources;
  min?: Resources;
  max?: Resources;
  maxLimitRequestRatio?: Resources;
}

interface Container {
  name: string;
  resources?: { requests?: Resources; limits?: Resources };
}

function limitsOfType(store: ObjectStore, namespace: string, type: 'Container' | 'Pod'): ContainerLimits[] {
  return store
    .scan('/limitranges', namespace)
    .flatMap((range) => ((range.spec as { limits?: ContainerLimits[] } | undefined)?.limits ?? []).filter((limit) => limit.type === type));
}

function containersOf(pod: KubeObject): Container[] {
  const spec = (pod.spec ?? {}) as { containers?: Container[]; initContainers?: Container[] };
  return [...(spec.initContainers ?? []), ...(spec.containers ?? [])];
}

/** The mutating half: defaults filled in, and the annotation naming what was set. */
export function defaultFromLimitRanges(store: ObjectStore, namespace: string, pod: KubeObject): void {
  const set: string[] = [];
  for (const limits of limitsOfType(store, namespace, 'Container')) {
    for (const container of containersOf(pod)) {
      container.resources ??= {};
      const resources = container.resources;
      resources.requests ??= {};
      resources.limits ??= {};
      const requested = fill(resources.requests, limits.defaultRequest);
      const limited = fill(resources.limits, limits.default);
      if (requested.length) set.push(`${requested.join(', ')} request for container ${container.name}`);
      if (limited.length) set.push(`${limited.join(', ')} limit for container ${container.name}`);
      if (Object.keys(resources.requests).length === 0) delete resources.requests;
      if (Object.keys(resources.limits).length === 0) delete resources.limits;
    }
  }
  if (set.length === 0) return;
  pod.metadata.annotations = { ...pod.metadata.annotations, 'kubernetes.io/limit-ranger': `LimitRanger plugin set: ${set.join('; ')}` };
}

/** Sets what `defaults` has and `list` lacks; the names of what it set. */
function fill(list: Resources, defaults: Resources | undefined): string[] {
  const missing = Object.keys(defaults ?? {}).filter((resource) => list[resource] === undefined);
  for (const resource of missing) list[resource] = defaults![resource]!;
  return missing;
}

/** The validating half: min, max and ratio per container and per pod, every violation in one 403. */
export function admitLimitRanges(store: ObjectStore, namespace: string, pod: KubeObject): void {
  const problems: string[] = [];
  for (const limits of limitsOfType(store, namespace, 'Container')) {
    for (const container of containersOf(pod)) problems.push(...violations('Container', limits, container.resources ?? {}));
  }
  for (const limits of limitsOfType(store, namespace, 'Pod')) problems.push(...violations('Pod', limits, podResources(pod)));
  if (problems.length === 0) return;
  const summary = problems.length === 1 ? problems[0] : `[${problems.join(', ')}]`;
  throw new KubeStatusError(403, 'Forbidden', `pods "${pod.metadata.name}" is forbidden: ${summary}`, {
    name: pod.metadata.name,
    kind: 'pods',
  });
}

/** The pod's requests and limits as the plugin sums them: its containers', or an init container's where larger. */
function podResources(pod: KubeObject): { requests: Resources; limits: Resources } {
  const spec = (pod.spec ?? {}) as { containers?: Container[]; initContainers?: Container[] };
  const total = (which: 'requests' | 'limits'): Resources => {
    const sums: Record<string, { value: number; written: string }> = {};
    for (const container of spec.containers ?? []) {
      for (const [resource, quantity] of Object.entries(container.resources?.[which] ?? {})) {
        const value = (sums[resource]?.value ?? 0) + parseQuantity(quantity);
        sums[resource] = { value, written: sums[resource]?.written ?? quantity };
      }
    }
    const result = Object.fromEntries(Object.entries(sums).map(([resource, sum]) => [resource, formatLike(sum.value, sum.written)]));
    for (const container of spec.initContainers ?? []) {
      for (const [resource, quantity] of Object.entries(container.resources?.[which] ?? {})) {
        if (result[resource] === undefined || parseQuantity(quantity) > parseQuantity(result[resource])) result[resource] = quantity;
      }
    }
    return result;
  };
  return { requests: total('requests'), limits: total('limits') };
}

/**
 * A sum written as Go's resource.Quantity prints it, in the format of its first addend: binary
 * suffixes (`Ki`, `Mi`, …) for one written with them, else decimal (`m`, ``, `k`, `M`, …).
 */
function formatLike(value: number, written: string): string {
  const binary = /i$/.test(written.trim());
  const units: Array<[string, number]> = binary
    ? [
        ['Ei', 2 ** 60],
        ['Pi', 2 ** 50],
        ['Ti', 2 ** 40],
        ['Gi', 2 ** 30],
        ['Mi', 2 ** 20],
        ['Ki', 2 ** 10],
        ['', 1],
      ]
    : [
        ['E', 1e18],
        ['P', 1e15],
        ['T', 1e12],
        ['G', 1e9],
        ['M', 1e6],
        ['k', 1e3],
        ['', 1],
        ['m', 1e-3],
      ];
  if (value === 0) return '0';
  for (const [suffix, size] of units) {
    const count = value / size;
    if (count >= 1 && Math.abs(count - Math.round(count)) < 1e-6) return `${Math.round(count)}${suffix}`;
  }
  return `${Math.round(value * 1000)}m`;
}

function violations(type: 'Container' | 'Pod', limits: ContainerLimits, resources: { requests?: Resources; limits?: Resources }): string[] {
  const { requests = {}, limits: limited = {} } = resources;
  const problems: string[] = [];
  for (const [resource, min] of Object.entries(limits.min ?? {})) {
    const request = requests[resource];
    const limit = limited[resource];
    if (request === undefined) problems.push(`minimum ${resource} usage per ${type} is ${min}.  No request is specified`);
    else if (parseQuantity(request) < parseQuantity(min))
      problems.push(`minimum ${resource} usage per ${type} is ${min}, but request is ${request}`);
    else if (limit !== undefined && parseQuantity(limit) < parseQuantity(min))
      problems.push(`minimum ${resource} usage per ${type} is ${min}, but limit is ${limit}`);
  }
  for (const [resource, max] of Object.entries(limits.max ?? {})) {
    const request = requests[resource];
    const limit = limited[resource];
    if (limit === undefined) problems.push(`maximum ${resource} usage per ${type} is ${max}.  No limit is specified`);
    else if (parseQuantity(limit) > parseQuantity(max))
      problems.push(`maximum ${resource} usage per ${type} is ${max}, but limit is ${limit}`);
    else if (request !== undefined && parseQuantity(request) > parseQuantity(max))
      problems.push(`maximum ${resource} usage per ${type} is ${max}, but request is ${request}`);
  }
  for (const [resource, ratio] of Object.entries(limits.maxLimitRequestRatio ?? {})) {
    const request = parseQuantity(requests[resource]);
    const limit = parseQuantity(limited[resource]);
    const per = `${resource} max limit to request ratio per ${type} is ${ratio}`;
    if (!request) problems.push(`${per}, but no request is specified or request is 0`);
    else if (!limit) problems.push(`${per}, but no limit is specified or limit is 0`);
    // Go's %f: six decimals.
    else if (limit / request > parseQuantity(ratio)) problems.push(`${per}, but provided ratio is ${(limit / request).toFixed(6)}`);
  }
  return problems;
}
