/**
 * Which run a request speaks for: the runner's credential (`Proxy-Authorization: Basic
 * base64(runner_id:runner_token)`) as `resolveRun` answers it now.
 *
 * Invariant: a request is forwarded only with an answer in hand. No credential, or one that stands for no run,
 * is `undefined` (the caller answers 407); a `resolveRun` that throws is LOOKUP_FAILED (the caller answers 503),
 * never taken for a run. Credentials are resolved per request, never cached here, so a run that ended stops
 * substituting at once.
 */
import type { EgressLogger, EgressProxyOptions, RunCaller, RunCredential, RunSecrets } from './egress-types.js';
import { createRunnerRateLimiter, DEFAULT_RUNNER_RATE_LIMIT } from './runner-rate-limit.js';

/** `resolveRun` threw: whether the credential stands for a run is unknown, so nothing is forwarded. */
export const LOOKUP_FAILED = Symbol('lookup failed');
export type LookupFailed = typeof LOOKUP_FAILED;
export const LOOKUP_FAILED_MESSAGE = 'the egress proxy cannot look the run up now; retry';
/** The runner made more requests than its rate allows: refused (429) before any lookup. */
export const RATE_LIMITED = Symbol('rate limited');
export type RateLimited = typeof RATE_LIMITED;
export const RATE_LIMITED_MESSAGE = 'too many requests from this runner; slow down';

export interface AuthenticatedRun {
  /** The credential, with the request id of the run it stands for now. */
  caller: RunCaller;
  secrets: RunSecrets;
}

export interface RunAuthentication {
  /** The run a Proxy-Authorization header stands for now. */
  authenticate(header: string | undefined): Promise<AuthenticatedRun | undefined | LookupFailed | RateLimited>;
  /** The run for a credential already parsed (a tunnel's, looked up again for each request in it). */
  lookUp(credential: RunCredential): Promise<AuthenticatedRun | undefined | LookupFailed | RateLimited>;
}

export function createRunAuthentication(
  options: Pick<EgressProxyOptions, 'resolveRun' | 'runnerRateLimit'>,
  logger: EgressLogger,
): RunAuthentication {
  const limiter = createRunnerRateLimiter(options.runnerRateLimit ?? DEFAULT_RUNNER_RATE_LIMIT);
  /** `resolveRun`, with a failure to answer told apart from "no run": neither forwards anything. */
  const lookUp = async (credential: RunCredential): Promise<AuthenticatedRun | undefined | LookupFailed | RateLimited> => {
    if (!limiter.take(credential.runnerId)) return RATE_LIMITED;
    try {
      const run = await options.resolveRun(credential);
      return run && { caller: { runnerId: credential.runnerId, token: credential.token, requestId: run.requestId }, secrets: run.secrets };
    } catch (err) {
      logger.warn(
        { runner_id: credential.runnerId, err: err instanceof Error ? err.message : String(err) },
        'run lookup failed: request refused',
      );
      return LOOKUP_FAILED;
    }
  };
  return {
    lookUp,
    async authenticate(header) {
      const credential = parseProxyAuthorization(header);
      return credential ? lookUp(credential) : undefined;
    },
  };
}

export function parseProxyAuthorization(header: string | undefined): RunCredential | undefined {
  const match = /^Basic\s+([A-Za-z0-9+/]+={0,2})\s*$/i.exec(header ?? '');
  if (!match) return undefined;
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon <= 0 || colon === decoded.length - 1) return undefined;
  return { runnerId: decoded.slice(0, colon), token: decoded.slice(colon + 1) };
}
