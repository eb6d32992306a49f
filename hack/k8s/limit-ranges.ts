/**
 * The LimitRanger admission plugin for pods, as "Limit Ranges" (concepts/policy/limit-range)
 * describes it, for limits of `type: Container`:
 * - mutating, on create: a container without a limit (request) for a resource gets the range's
 *   `default` (`defaultRequest`), and the pod the `kubernetes.io/limit-ranger` annotation saying so;
 * - validating: a request under `min`, or a limit over `max` (or no limit where `max` is set), is
 *   403 Forbidden with the plugin's wording (`maximum cpu usage per Container is 2, but limit is 3`).
 * Not applied: `type: Pod` and `PersistentVolumeClaim` limits, maxLimitRequestRatio; the default
 * request from a default limit when no defaultRequest is set.
 */
import { KubeStatusError } from './errors.js';
import { parseQuantity } from './quantity.js';
import type { KubeObject, ObjectStore } from './store.js';

type Resources = Record<string, string>;

interface ContainerLimits {
  type: string;
  default?: Resources;
  defaultRequest?: Resources;
  min?: Resources;
  max?: Resources;
}

interface Container {
  name: string;
  resources?: { requests?: Resources; limits?: Resources };
}

function containerLimits(store: ObjectStore, namespace: string): ContainerLimits[] {
  return store
    .scan('/limitranges', namespace)
    .flatMap((range) =>
      ((range.spec as { limits?: ContainerLimits[] } | undefined)?.limits ?? []).filter((limit) => limit.type === 'Container'),
    );
}

function containersOf(pod: KubeObject): Container[] {
  const spec = (pod.spec ?? {}) as { containers?: Container[]; initContainers?: Container[] };
  return [...(spec.initContainers ?? []), ...(spec.containers ?? [])];
}

/** The mutating half: defaults filled in, and the annotation naming what was set. */
export function defaultFromLimitRanges(store: ObjectStore, namespace: string, pod: KubeObject): void {
  const set: string[] = [];
  for (const limits of containerLimits(store, namespace)) {
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

/** The validating half: min and max per container, every violation in one 403. */
export function admitLimitRanges(store: ObjectStore, namespace: string, pod: KubeObject): void {
  const problems: string[] = [];
  for (const limits of containerLimits(store, namespace)) {
    for (const container of containersOf(pod)) problems.push(...violations(limits, container));
  }
  if (problems.length === 0) return;
  const summary = problems.length === 1 ? problems[0] : `[${problems.join(', ')}]`;
  throw new KubeStatusError(403, 'Forbidden', `pods "${pod.metadata.name}" is forbidden: ${summary}`, {
    name: pod.metadata.name,
    kind: 'pods',
  });
}

function violations(limits: ContainerLimits, container: Container): string[] {
  const { requests = {}, limits: limited = {} } = container.resources ?? {};
  const problems: string[] = [];
  for (const [resource, min] of Object.entries(limits.min ?? {})) {
    const request = requests[resource];
    const limit = limited[resource];
    if (request === undefined) problems.push(`minimum ${resource} usage per Container is ${min}.  No request is specified`);
    else if (parseQuantity(request) < parseQuantity(min))
      problems.push(`minimum ${resource} usage per Container is ${min}, but request is ${request}`);
    else if (limit !== undefined && parseQuantity(limit) < parseQuantity(min))
      problems.push(`minimum ${resource} usage per Container is ${min}, but limit is ${limit}`);
  }
  for (const [resource, max] of Object.entries(limits.max ?? {})) {
    const request = requests[resource];
    const limit = limited[resource];
    if (limit === undefined) problems.push(`maximum ${resource} usage per Container is ${max}.  No limit is specified`);
    else if (parseQuantity(limit) > parseQuantity(max))
      problems.push(`maximum ${resource} usage per Container is ${max}, but limit is ${limit}`);
    else if (request !== undefined && parseQuantity(request) > parseQuantity(max))
      problems.push(`maximum ${resource} usage per Container is ${max}, but request is ${request}`);
  }
  return problems;
}
