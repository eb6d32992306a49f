/**
 * Requests per runner through the egress proxy: a token bucket per runner id (the id its
 * Proxy-Authorization claims), taken before the run is looked up. A runner flooding the proxy is
 * answered 429 without costing a lookup (with standalone proxies, a call to the API server's
 * resolve listener), other runners keep their own budget, and guesses at another runner's token are
 * slowed to the same rate.
 *
 * In memory, per proxy process: replicas each allow the rate. Buckets of runners that went quiet are
 * dropped once full again, so the map holds only runners active within the last `burst / perSecond` s.
 */

export interface RunnerRateLimit {
  /** Requests each runner may make per second, sustained. */
  perSecond: number;
  /** Requests a runner may make at once after being quiet. */
  burst: number;
}

export const DEFAULT_RUNNER_RATE_LIMIT: RunnerRateLimit = { perSecond: 50, burst: 200 };

export interface RunnerRateLimiter {
  /** Whether the runner may make one more request now (and counts it). */
  take(runnerId: string): boolean;
}

interface Bucket {
  tokens: number;
  at: number;
}

/** Past this many runners tracked, full buckets are swept on the next take. */
const SWEEP_ABOVE = 1024;

export function createRunnerRateLimiter(limit: RunnerRateLimit, now: () => number = Date.now): RunnerRateLimiter {
  const buckets = new Map<string, Bucket>();
  const refill = (bucket: Bucket, at: number) => {
    bucket.tokens = Math.min(limit.burst, bucket.tokens + ((at - bucket.at) / 1000) * limit.perSecond);
    bucket.at = at;
  };
  const sweep = (at: number) => {
    for (const [id, bucket] of buckets) {
      refill(bucket, at);
      if (bucket.tokens >= limit.burst) buckets.delete(id);
    }
  };
  return {
    take(runnerId) {
      const at = now();
      if (buckets.size > SWEEP_ABOVE) sweep(at);
      let bucket = buckets.get(runnerId);
      if (!bucket) {
        bucket = { tokens: limit.burst, at };
        buckets.set(runnerId, bucket);
      }
      refill(bucket, at);
      if (bucket.tokens < 1) return false;
      bucket.tokens -= 1;
      return true;
    },
  };
}
