/**
 * Admission for all kinds: metadata checks (names, labels) as the real server words them, and the
 * few built-in rules a controller meets (a pod needs containers; most of a pod's spec is immutable).
 * Custom resources are checked against their schema in schema-validation.ts.
 */
import type { StatusCause } from './errors.js';
import type { ResourceType } from './resources.js';
import type { KubeObject } from './store.js';

const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
const QUALIFIED_NAME = /^([a-z0-9]([-a-z0-9.]*[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

/** Kinds whose names must be DNS labels (63 characters, no dots). */
const LABEL_NAMED = new Set(['namespaces', 'services']);

export function validateMetadata(type: ResourceType, object: KubeObject): StatusCause[] {
  const causes: StatusCause[] = [];
  const name = object.metadata.name ?? '';
  const labelNamed = LABEL_NAMED.has(type.resource) && type.group === '';
  if (!name) {
    causes.push({ reason: 'FieldValueRequired', message: 'Required value: name or generateName is required', field: 'metadata.name' });
  } else if (type.group === 'rbac.authorization.k8s.io') {
    // RBAC objects are named as path segments (ValidateRBACName): `system:discovery` is a name.
    const problem =
      name === '.' || name === '..' ? `may not be '${name}'` : /[/%]/.exec(name) ? `may not contain '${/[/%]/.exec(name)![0]}'` : '';
    if (problem) causes.push({ reason: 'FieldValueInvalid', message: `Invalid value: "${name}": ${problem}`, field: 'metadata.name' });
  } else if (labelNamed ? !DNS_LABEL.test(name) || name.length > 63 : !DNS_SUBDOMAIN.test(name) || name.length > 253) {
    const what = labelNamed ? 'a lowercase RFC 1123 label' : 'a lowercase RFC 1123 subdomain';
    causes.push({
      reason: 'FieldValueInvalid',
      message: `Invalid value: "${name}": ${what} must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character`,
      field: 'metadata.name',
    });
  }
  for (const [key, value] of Object.entries(object.metadata.labels ?? {})) {
    if (!QUALIFIED_NAME.test(key) || key.split('/').pop()!.length > 63) {
      causes.push({
        reason: 'FieldValueInvalid',
        message: `Invalid value: "${key}": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character`,
        field: 'metadata.labels',
      });
    }
    if (typeof value !== 'string' || !LABEL_VALUE.test(value) || value.length > 63) {
      causes.push({
        reason: 'FieldValueInvalid',
        message: `Invalid value: "${String(value)}": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character, and be at most 63 characters`,
        field: `metadata.labels`,
      });
    }
  }
  for (const [index, reference] of (object.metadata.ownerReferences ?? []).entries()) {
    for (const field of ['apiVersion', 'kind', 'name', 'uid'] as const) {
      if (!reference[field])
        causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: `metadata.ownerReferences[${index}].${field}` });
    }
  }
  if ((object.metadata.ownerReferences ?? []).filter((reference) => reference.controller).length > 1) {
    causes.push({
      reason: 'FieldValueInvalid',
      message: 'Invalid value: "": Only one reference can have Controller set to true',
      field: 'metadata.ownerReferences',
    });
  }
  return causes;
}

interface Container {
  name?: string;
  image?: string;
}

export function validatePod(object: KubeObject): StatusCause[] {
  const spec = (object.spec ?? {}) as { containers?: Container[] };
  const causes: StatusCause[] = [];
  if (!spec.containers || spec.containers.length === 0) {
    causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: 'spec.containers' });
  }
  for (const [index, container] of (spec.containers ?? []).entries()) {
    if (!container.name) causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: `spec.containers[${index}].name` });
    if (!container.image)
      causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: `spec.containers[${index}].image` });
  }
  return causes;
}

/**
 * A pod's spec after an update may differ from before only in images, activeDeadlineSeconds and
 * tolerations, of which it may only add (ValidatePodUpdate; the Pod API reference's "may be updated").
 */
export function validatePodUpdate(previous: KubeObject, next: KubeObject): StatusCause[] {
  const comparable = (object: KubeObject) => {
    const spec = structuredClone((object.spec ?? {}) as Record<string, unknown>);
    for (const list of ['containers', 'initContainers'] as const) {
      for (const container of (spec[list] as Container[] | undefined) ?? []) delete container.image;
    }
    delete spec.activeDeadlineSeconds;
    delete spec.tolerations;
    return JSON.stringify(spec);
  };
  const tolerations = (object: KubeObject) =>
    (((object.spec ?? {}) as { tolerations?: unknown[] }).tolerations ?? []).map((toleration) => JSON.stringify(toleration));
  const kept = tolerations(previous).every((toleration) => tolerations(next).includes(toleration));
  if (kept && comparable(previous) === comparable(next)) return [];
  return [
    {
      reason: 'FieldValueForbidden',
      message:
        'Forbidden: pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)',
      field: 'spec',
    },
  ];
}
