import { retryAfterSeconds } from './errors.js';

export interface RetryOptions {
  /** Attempts in all, the first included (default 4). */
  attempts?: number;
  /** The longest wait between two attempts, whatever Retry-After says (default 30 s). */
  maxDelayMs?: number;
  /** The first wait when the answer names none (default 250 ms), doubled at each attempt. */
  baseDelayMs?: number;
}

const RETRIED_STATUSES = new Set([429, 503]);

/**
 * A fetch that retries 429 and 503 after their Retry-After, and connection errors (no answer at
 * all), with a bound. A POST is retried only with an Idempotency-Key, so a retry never creates
 * twice: the client puts one on every POST.
 */
export function retryingFetch(base: typeof fetch, options: RetryOptions = {}): typeof fetch {
  const attempts = options.attempts ?? 4;
  const maxDelayMs = options.maxDelayMs ?? 30_000;
  const baseDelayMs = options.baseDelayMs ?? 250;
  return async (input, init) => {
    const request = new Request(input, init);
    const retriable = request.method !== 'POST' || request.headers.has('idempotency-key');
    for (let attempt = 1; ; attempt++) {
      const last = !retriable || attempt >= attempts;
      const backoff = Math.min(maxDelayMs, baseDelayMs * 2 ** (attempt - 1));
      let response: Response;
      try {
        response = await base(request.clone());
      } catch (error) {
        if (last || request.signal.aborted) throw error;
        await sleep(backoff, request.signal);
        continue;
      }
      if (last || !RETRIED_STATUSES.has(response.status)) return response;
      const told = retryAfterSeconds(response.headers.get('retry-after'));
      await response.body?.cancel();
      await sleep(Math.min(maxDelayMs, told === undefined ? backoff : told * 1000), request.signal);
    }
  };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        reject(signal.reason);
      },
      { once: true },
    );
  });
}
