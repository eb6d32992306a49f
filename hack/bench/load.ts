import autocannon from 'autocannon';
import { nearestRank } from './stats.js';

export interface RequestSpec {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  headers?: Record<string, string>;
  /** Sent as JSON. */
  body?: unknown;
}

/** One fixed request, or the n-th request of a rotation (e.g. over 100 external ids). */
export type RequestPlan = RequestSpec | ((n: number) => RequestSpec);

export interface LoadOptions {
  url: string;
  connections: number;
  seconds: number;
}

export interface LoadResult {
  requests: number;
  seconds: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** Responses per HTTP status. */
  statuses: Record<string, number>;
  non2xx: number;
  /** Connection errors and timeouts. */
  errors: number;
}

/** Load whose figures are discarded: JIT, connection pools and plan caches settle. */
export async function warmUp(plan: RequestPlan, options: LoadOptions): Promise<void> {
  if (options.seconds > 0) await run(plan, options, () => {});
}

/**
 * Drives `plan` with closed-loop load (each connection sends its next request when the previous
 * answer arrives). Latencies are taken from every response at full hrtime precision (autocannon's
 * own histogram rounds to whole milliseconds).
 */
export async function measure(plan: RequestPlan, options: LoadOptions): Promise<LoadResult> {
  const latencies: number[] = [];
  const result = await run(plan, options, (ms) => latencies.push(ms));
  latencies.sort((a, b) => a - b);
  const statuses: Record<string, number> = {};
  for (const [code, stat] of Object.entries(result.statusCodeStats ?? {})) statuses[code] = stat.count ?? 0;
  const requests = latencies.length;
  return {
    requests,
    seconds: result.duration,
    rps: requests / result.duration,
    p50Ms: nearestRank(latencies, 0.5) ?? 0,
    p99Ms: nearestRank(latencies, 0.99) ?? 0,
    statuses,
    non2xx: result.non2xx,
    errors: result.errors + result.timeouts,
  };
}

const running = new Set<autocannon.Instance>();

/** Ends every load in progress at once (on Ctrl-C: a server cannot stop while it is being loaded). */
export function stopAllLoad(): void {
  for (const instance of running) instance.stop();
}

function run(plan: RequestPlan, options: LoadOptions, onLatency: (ms: number) => void): Promise<autocannon.Result> {
  let n = 0;
  const request: autocannon.Request =
    typeof plan === 'function' ? { setupRequest: (base) => ({ ...base, ...toAutocannon(plan(n++)) }) } : toAutocannon(plan);
  return new Promise((resolve, reject) => {
    const instance = autocannon(
      { url: options.url, connections: options.connections, duration: options.seconds, requests: [request] },
      (error, result) => {
        running.delete(instance);
        if (error) reject(error);
        else resolve(result);
      },
    );
    running.add(instance);
    instance.on('response', (_client, _status, _bytes, ms) => onLatency(ms));
  });
}

function toAutocannon(spec: RequestSpec): autocannon.Request {
  const headers = { ...spec.headers };
  if (spec.body !== undefined) headers['content-type'] = 'application/json';
  return {
    method: spec.method,
    path: spec.path,
    headers,
    ...(spec.body !== undefined && { body: JSON.stringify(spec.body) }),
  };
}
