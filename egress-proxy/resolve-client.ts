/**
 * The standalone proxy's source of runs in a deployment: the API server's resolve listener
 * (resolve-protocol.ts), asked on every request, and inside a tunnel on every request again.
 *
 * No cache: a run's values are held only for the request being served, so they cannot outlive the run
 * by even a second, and the proxy keeps nothing at rest (a restart loses nothing). The cost is one call
 * per proxied request, which the API server answers as its in-process proxy would (a record lookup and
 * the run's values, from memory on the replica hosting the run).
 *
 * The call goes over HTTPS only: the proxy presents a certificate of the deployment CA naming it (made from
 * the CA key it holds) and trusts the listener only with a certificate of that CA for the URL's host name;
 * the token is sent inside that TLS session, never in clear.
 *
 * Fail-safe direction: an answer that is not a well-formed 200 (the API down, a timeout, a refused
 * token) throws, and the proxy then refuses the request with 503; it never forwards it unsubstituted.
 */
import { Agent, request } from 'node:https';
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

/** The proxy's side of the listener's TLS: the deployment CA to trust, and the proxy's own certificate and key (PEM). */
export interface ResolveClientTls {
  ca: string;
  cert: string;
  key: string;
}

/** Answers are a few secrets: anything larger is not the listener's. */
const MAX_ANSWER_BYTES = 1024 * 1024;

export function createApiRunResolver(baseUrl: string, token: string, tls: ResolveClientTls): ApiRunResolver {
  const base = new URL(baseUrl.replace(/\/+$/, ''));
  if (base.protocol !== 'https:') throw new Error('the resolve URL must be https: the listener speaks TLS only');
  const agent = new Agent({ ...tls, keepAlive: true, minVersion: 'TLSv1.3' });
  const call = async (path: string, body: object): Promise<unknown> => {
    const { status, text } = await post(new URL(`${base.pathname.replace(/\/$/, '')}${path}`, base), agent, token, body);
    if (status !== 200) {
      throw new RunLookupError(`the API server's resolve listener answered ${status}${status === 401 ? ' (wrong resolve token)' : ''}`);
    }
    try {
      return JSON.parse(text);
    } catch {
      throw new RunLookupError("the API server's resolve listener answered no JSON");
    }
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

/** One POST over the agent's TLS; rejects with a RunLookupError when the listener cannot be reached or answers too much. */
function post(url: URL, agent: Agent, token: string, body: object): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const fail = (err: Error) => reject(new RunLookupError(`the API server's resolve listener is unreachable (${err.message})`));
    const req = request(
      url,
      {
        method: 'POST',
        agent,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        timeout: CALL_TIMEOUT_MS,
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_ANSWER_BYTES) req.destroy(new Error('the answer is too large'));
          else chunks.push(chunk);
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', fail);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${CALL_TIMEOUT_MS} ms`)));
    req.on('error', fail);
    req.end(JSON.stringify(body));
  });
}
