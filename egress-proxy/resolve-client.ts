/**
 * The standalone proxy's source of runs in a deployment: the API server's resolve listener
 * (resolve-protocol.ts), asked on every request, and inside a tunnel on every request again.
 *
 * No cache: a run's values are held only for the request being served, so they cannot outlive the run
 * by even a second, and the proxy keeps nothing at rest (a restart loses nothing). The cost is one call
 * per proxied request, which the API server answers as its in-process proxy would (a record lookup and
 * the run's values, from memory on the replica hosting the run).
 *
 * Fail-safe direction: an answer that is not a well-formed 200 (the API down, a timeout, a refused
 * token) throws, and the proxy then refuses the request with 503; it never forwards it unsubstituted.
 */
import type { EgressRefusal, ResolvedRun, RunCredential } from './egress-proxy.js';
import { MISSING_PATH, MissingAnswerSchema, REFUSED_PATH, RESOLVE_PATH, ResolveAnswerSchema, fromWireSecrets } from './resolve-protocol.js';

/** How long one call may take before the request it serves is refused. */
const CALL_TIMEOUT_MS = 5_000;

export interface ApiRunResolver {
  resolveRun(credential: RunCredential): Promise<ResolvedRun | undefined>;
  /**
   * Tells the API server to end the run in progress on the runner (missing secret, or with `destination` a
   * bound secret sent toward it); resolves whether there was one.
   */
  reportMissing(credential: RunCredential, alias: string, destination?: string): Promise<boolean>;
  /** Tells the API server of a refused request, for it to record on the runner's Sandbox. */
  reportRefused(credential: RunCredential, refusal: EgressRefusal): Promise<void>;
}

export class RunLookupError extends Error {}

export function createApiRunResolver(baseUrl: string, token: string): ApiRunResolver {
  const base = baseUrl.replace(/\/+$/, '');
  const call = async (path: string, body: object): Promise<unknown> => {
    let response: Response;
    try {
      response = await fetch(`${base}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
      });
    } catch (err) {
      throw new RunLookupError(`the API server's resolve listener is unreachable (${err instanceof Error ? err.message : String(err)})`);
    }
    if (response.status !== 200) {
      await response.body?.cancel();
      throw new RunLookupError(
        `the API server's resolve listener answered ${response.status}${response.status === 401 ? ' (wrong resolve token)' : ''}`,
      );
    }
    return response.json().catch(() => {
      throw new RunLookupError("the API server's resolve listener answered no JSON");
    });
  };
  return {
    async resolveRun({ runnerId, token: runnerToken }) {
      const parsed = ResolveAnswerSchema.safeParse(await call(RESOLVE_PATH, { runner_id: runnerId, token: runnerToken }));
      if (!parsed.success) throw new RunLookupError("the API server's resolve listener answered an unexpected body");
      if (!parsed.data.in_progress) return undefined;
      return { secrets: fromWireSecrets(parsed.data.secrets), requestId: parsed.data.request_id };
    },
    async reportMissing({ runnerId, token: runnerToken }, alias, destination) {
      const parsed = MissingAnswerSchema.safeParse(
        await call(MISSING_PATH, { runner_id: runnerId, token: runnerToken, alias, destination }),
      );
      if (!parsed.success) throw new RunLookupError("the API server's resolve listener answered an unexpected body");
      return parsed.data.in_progress;
    },
    async reportRefused({ runnerId, token: runnerToken }, refusal) {
      await call(REFUSED_PATH, { runner_id: runnerId, token: runnerToken, ...refusal, detail: refusal.detail.slice(0, 500) });
    },
  };
}
