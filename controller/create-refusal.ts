import { httpStatus } from '../kube/kube-errors.js';
import { REASONS } from './api/v1alpha1.js';

/**
 * What a refused pod create says, for a Sandbox's and a warm pool's conditions alike: a
 * ResourceQuota's refusal is `QuotaExceeded`, any other 403 (RBAC, Pod Security admission, a
 * webhook's denial, a missing RuntimeClass) `PodCreateForbidden`, anything else (422 an invalid spec,
 * 400 a webhook) `PodCreateRefused`, each with the API server's message. A quota's 403 carries no
 * details of its own; its message does ("exceeded quota: <name>, ..." or "failed quota: <name>: must
 * specify ...", k8s.io/apiserver/pkg/admission/plugin/resourcequota/controller.go).
 */
export function createRefusal(status: number | undefined, message: string): { reason: string; message: string } {
  if (status === 403 && /\b(exceeded|failed) quota: /.test(message)) return { reason: REASONS.quotaExceeded, message };
  if (status === 403) return { reason: REASONS.podCreateForbidden, message: `the API server forbade the pod: ${message}` };
  return { reason: REASONS.podCreateRefused, message: `the API server refused the pod (${status}): ${message}` };
}

/**
 * The API server said no to a create (4xx): a quota, an invalid spec, an admission webhook, Pod
 * Security. A 409 is not one: the name is taken, which says nothing about the spec.
 */
export function isCreateRefusal(error: unknown): boolean {
  const status = httpStatus(error);
  return status !== undefined && status >= 400 && status < 500 && status !== 409;
}
