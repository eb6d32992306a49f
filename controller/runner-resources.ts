/**
 * A runner pod's resources: the owner's `resources` over the controller's defaults, and why such a
 * pod would be refused (a request above its limit) before the API server is asked.
 */
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

const QUANTITY_SUFFIXES: Record<string, number> = {
  m: 1e-3,
  '': 1,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
};

/** A Kubernetes quantity in base units, or undefined when it is not one (the API server judges those). */
function quantityValue(text: string): number | undefined {
  const match = /^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$/.exec(text.trim());
  const factor = match && QUANTITY_SUFFIXES[match[2]!];
  return factor === undefined || factor === null ? undefined : Number(match![1]) * factor;
}
