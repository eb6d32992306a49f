/**
 * What the server does to a pod on create beyond storing it, in kube-apiserver's order: mutating
 * admission (LimitRanger's defaults), then validation (pod-validation.ts, through objects.ts), then
 * validating admission (LimitRanger's min/max, PodSecurity; ResourceQuota last, in quota.ts). Each
 * part can be switched with the server's `podAdmission` option, so a test that needs a rule of the
 * real server relaxed says so; all are on by default.
 */
import { defaultFromLimitRanges, admitLimitRanges } from './limit-ranges.js';
import { admitPodSecurity, warnPodTemplate } from './pod-security.js';
import type { KubeObject, ObjectStore } from './store.js';

export interface PodAdmission {
  /** The pod rules of pod-validation.ts (port names, volume mounts, required fields). */
  validation: boolean;
  /** pod-validation.ts's rule that a request may not exceed its limit (a 422, as kube-apiserver's). */
  requestsWithinLimits: boolean;
  /** LimitRange defaults and min/max. */
  limitRanges: boolean;
  /** Pod Security admission by the namespace's `pod-security.kubernetes.io/enforce` and `warn` labels. */
  podSecurity: boolean;
}

export const ALL_POD_ADMISSION: PodAdmission = { validation: true, requestsWithinLimits: true, limitRanges: true, podSecurity: true };

export function mutatePod(store: ObjectStore, admission: PodAdmission, namespace: string, pod: KubeObject): void {
  if (admission.limitRanges) defaultFromLimitRanges(store, namespace, pod);
}

/** Throws the 403 of a refusing plugin; returns the warnings for the response's Warning headers. */
export function validatePodAdmission(store: ObjectStore, admission: PodAdmission, namespace: string, pod: KubeObject): string[] {
  if (admission.limitRanges) admitLimitRanges(store, namespace, pod);
  if (!admission.podSecurity) return [];
  const labels = store.get('/namespaces', undefined, namespace)?.metadata.labels ?? {};
  return admitPodSecurity(labels, pod);
}

/** Pod Security's warn mode for a workload resource's pod template (Deployments, Jobs, …): warnings only. */
export function warnWorkload(
  store: ObjectStore,
  admission: PodAdmission,
  storageKey: string,
  namespace: string,
  object: KubeObject,
): string[] {
  if (!admission.podSecurity) return [];
  const labels = store.get('/namespaces', undefined, namespace)?.metadata.labels ?? {};
  return warnPodTemplate(labels, storageKey, object);
}
