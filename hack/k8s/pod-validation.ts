/**
 * The rules of kube-apiserver's pod validation (pkg/apis/core/validation, ValidatePodCreate) that
 * ACIS's pods meet, worded as the real server words them; see the Pod API reference (Container:
 * ports[].name is an IANA_SVC_NAME, volumeMounts[].name must match a volume's name) and "Resource
 * Management for Pods and Containers" (a request may not exceed its limit). A failure is one of the
 * causes of a 422 Invalid. Not checked: the many other rules of that file (probes, env names, …).
 */
import type { StatusCause } from './errors.js';
import { parseQuantity } from '../../kube/quantity.js';
import type { KubeObject } from './store.js';

interface Container {
  name?: string;
  ports?: Array<{ name?: string; containerPort?: number }>;
  volumeMounts?: Array<{ name?: string; mountPath?: string }>;
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
}

interface PodSpec {
  containers?: Container[];
  initContainers?: Container[];
  volumes?: Array<{ name?: string }>;
}

export function validatePodSpec(pod: KubeObject, options: { requestsWithinLimits: boolean }): StatusCause[] {
  const spec = (pod.spec ?? {}) as PodSpec;
  const volumes = new Set((spec.volumes ?? []).map((volume) => volume.name));
  const causes: StatusCause[] = [];
  for (const list of ['initContainers', 'containers'] as const) {
    for (const [index, container] of (spec[list] ?? []).entries()) {
      const path = `spec.${list}[${index}]`;
      causes.push(...portCauses(container, path), ...mountCauses(container, path, volumes));
      if (options.requestsWithinLimits) causes.push(...resourceCauses(container, path));
    }
  }
  return causes;
}

/** apimachinery's IsValidPortName: an IANA_SVC_NAME (RFC 6335), each failure its own message. */
export function portNameProblems(name: string): string[] {
  const problems: string[] = [];
  if (name.length > 15) problems.push('must be no more than 15 characters');
  if (!/^[-a-z0-9]+$/.test(name)) problems.push('must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)');
  if (!/[a-z]/.test(name)) problems.push('must contain at least one letter (a-z)');
  if (name.includes('--')) problems.push('must not contain consecutive hyphens');
  if (name.startsWith('-') || name.endsWith('-')) problems.push('must not begin or end with a hyphen');
  return problems;
}

function portCauses(container: Container, path: string): StatusCause[] {
  const causes: StatusCause[] = [];
  const seen = new Set<string>();
  for (const [index, port] of (container.ports ?? []).entries()) {
    const field = `${path}.ports[${index}]`;
    if (port.containerPort === undefined)
      causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: `${field}.containerPort` });
    else if (!(port.containerPort >= 1 && port.containerPort <= 65535)) {
      causes.push({
        reason: 'FieldValueInvalid',
        message: `Invalid value: ${port.containerPort}: must be between 1 and 65535, inclusive`,
        field: `${field}.containerPort`,
      });
    }
    if (port.name === undefined || port.name === '') continue;
    for (const problem of portNameProblems(port.name))
      causes.push({ reason: 'FieldValueInvalid', message: `Invalid value: "${port.name}": ${problem}`, field: `${field}.name` });
    if (seen.has(port.name))
      causes.push({ reason: 'FieldValueDuplicate', message: `Duplicate value: "${port.name}"`, field: `${field}.name` });
    seen.add(port.name);
  }
  return causes;
}

function mountCauses(container: Container, path: string, volumes: Set<string | undefined>): StatusCause[] {
  const causes: StatusCause[] = [];
  for (const [index, mount] of (container.volumeMounts ?? []).entries()) {
    const field = `${path}.volumeMounts[${index}]`;
    if (!mount.name) causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: `${field}.name` });
    else if (!volumes.has(mount.name))
      causes.push({ reason: 'FieldValueNotFound', message: `Not found: "${mount.name}"`, field: `${field}.name` });
    if (!mount.mountPath) causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: `${field}.mountPath` });
  }
  return causes;
}

/** ValidateContainerResourceRequirements: a request above its limit names the limit. */
function resourceCauses(container: Container, path: string): StatusCause[] {
  const { requests = {}, limits = {} } = container.resources ?? {};
  const causes: StatusCause[] = [];
  for (const [resource, request] of Object.entries(requests)) {
    const limit = limits[resource];
    if (limit === undefined || parseQuantity(request) <= parseQuantity(limit)) continue;
    causes.push({
      reason: 'FieldValueInvalid',
      message: `Invalid value: "${request}": must be less than or equal to ${resource} limit of ${limit}`,
      field: `${path}.resources.requests`,
    });
  }
  return causes;
}
