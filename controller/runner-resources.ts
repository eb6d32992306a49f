/**
 * A runner pod's resources: the owner's `resources` over the controller's defaults, and why such a
 * pod would be refused (a request above its limit) before the API server is asked.
 */
import { quantityValue } from '../kube/quantity.js';
import type { Resources } from './api/v1alpha1.js';

export function mergeResources(defaults: Resources, own: Resources | undefined): Resources {
  return {
    requests: { ...defaults.requests, ...own?.requests },
    limits: { ...defaults.limits, ...own?.limits },
  };
}

/**
 * Why a runner pod of this owner would be invalid, or undefined: a request above its limit (the
 * owner's `resources` over the defaults), which the API server refuses with 422. Said up front
 * rather than clamped: the owner asked for something no pod can have.
 */
export function resourcesProblem(defaults: Resources, own: Resources | undefined): string | undefined {
  const { requests = {}, limits = {} } = mergeResources(defaults, own);
  const problems: string[] = [];
  for (const [resource, request] of Object.entries(requests)) {
    const limit = (limits as Record<string, string | undefined>)[resource];
    if (request === undefined || limit === undefined) continue;
    const [r, l] = [quantityValue(request), quantityValue(limit)];
    if (r !== undefined && l !== undefined && r > l)
      problems.push(
        `the ${resource} request ${request} exceeds its limit ${limit}${own?.limits?.[resource as 'cpu'] ? '' : ' (the default)'}`,
      );
  }
  return problems.length ? `resources: ${problems.join('; ')}; raise the limit with the request` : undefined;
}
