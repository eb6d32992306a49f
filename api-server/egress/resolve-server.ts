/**
 * The internal resolve listener (ACIS_EGRESS_RESOLVE_LISTEN): how a standalone egress proxy, which
 * holds no database credential and no master key, learns the values of the run a runner's proxy
 * credential stands for, and ends that run for a missing secret (egress-proxy/resolve-protocol.ts).
 *
 * Invariants:
 * - Its own listener, never the public API port: the chart lets only the proxy pods reach it.
 * - HTTPS only, with the API server's certificate of the deployment CA (renewed in place); a client
 *   without a certificate of that CA naming the egress proxy never completes its handshake, so nothing,
 *   the token included, is read from it; a plaintext client gets no answer at all.
 * - Nothing is answered without the resolve token (bearer, compared in constant time): 401, and the
 *   refusal is logged without what was sent.
 * - A runner's credential resolves to values only while a turn of a run is in progress on that runner
 *   (the same lookup as the in-process proxy's), so the answer is never more than the proxy would get
 *   in process; at any other time the answer is `{in_progress: false}`.
 * - Values are never logged; every answer is `Cache-Control: no-store`.
 * - Calls per runner id are rate-limited (429 past the rate): a runner flooding its proxy, or guessing
 *   another runner's token through it, costs this server no more than the rate, whichever proxy
 *   replica relays it (a proxy takes a 429 for a failed lookup, and its runner gets 503 "retry").
 */
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { checkServerIdentity, type TLSSocket } from 'node:tls';
import type { Logger } from 'pino';
import type { z } from 'zod';
import type { ResolvedRun } from '../../egress-proxy/egress-proxy.js';
import {
  EGRESS_PROXY_NAME,
  MISSING_PATH,
  MissingRequestSchema,
  REFUSED_PATH,
  RefusedRequestSchema,
  RESOLVE_PATH,
  ResolveRequestSchema,
  type ResolveAnswer,
  toWireSecrets,
} from '../../egress-proxy/resolve-protocol.js';
import { createRunnerRateLimiter, DEFAULT_RUNNER_RATE_LIMIT, type RunnerRateLimit } from '../../egress-proxy/runner-rate-limit.js';
import { constantTimeEqual } from '../core/crypto.js';
import type { EgressRefusalReport } from '../sandboxes/provider.js';
import { type InternalListener, listenInternally } from '../core/http/internal-listener.js';
import type { ApiIdentity } from '../internal-tls/api-identity.js';
import { createInternalHttpsServer } from '../internal-tls/internal-https.js';

/** Bodies are a credential and an alias: anything larger is not one of ours. */
const MAX_BODY_BYTES = 8 * 1024;

export interface EgressResolveServerOptions {
  host: string;
  port: number;
  /** The bearer token every call must carry. */
  token: string;
  /** The certificate served, and the CA a client's certificate must chain to. */
  identity: ApiIdentity;
  /** The values (and request id) of the run the credential stands for now; undefined when none. */
  resolve(runnerId: string, token: string): Promise<ResolvedRun | undefined>;
  /** Whether the credential stands for a run now (checked before a run is ended on its word). */
  standsForRun(runnerId: string, token: string): Promise<boolean>;
  /** Ends the run in progress on the runner for a missing secret (or one denied `destination`), wherever it is hosted. */
  abortMissing(runnerId: string, alias: string, destination: string | undefined): Promise<void>;
  /** Calls per runner id; default the proxy's own DEFAULT_RUNNER_RATE_LIMIT. */
  runnerRateLimit?: RunnerRateLimit | undefined;
  /** Records a refusal of the runner's request where operators look (its Sandbox's Events). */
  refused?(runnerId: string, refusal: EgressRefusalReport): void;
  logger: Logger;
}

export type EgressResolveServer = InternalListener;

/** Answered before the body is read: the connection is closed, so what is left of the body is never parsed as a request. */
const UNREAD_BODY = { connection: 'close' };

const digest = (text: string) => createHash('sha256').update(text).digest();

export async function startEgressResolveServer(options: EgressResolveServerOptions): Promise<EgressResolveServer> {
  const { logger } = options;
  const limiter = createRunnerRateLimiter(options.runnerRateLimit ?? DEFAULT_RUNNER_RATE_LIMIT);
  const limited = (res: ServerResponse, runnerId: string) => {
    if (limiter.take(runnerId)) return false;
    answer(res, 429, { error: 'rate-limited' });
    return true;
  };
  // Digests have one length whatever was sent, so the comparison reveals nothing of the token's length.
  const expected = digest(options.token);
  const authorized = (header: string | undefined) => {
    const match = /^Bearer (\S+)$/.exec(header ?? '');
    return match !== null && constantTimeEqual(digest(match[1]!), expected);
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (checkServerIdentity(EGRESS_PROXY_NAME, (req.socket as TLSSocket).getPeerCertificate())) {
      logger.warn(
        { remote: req.socket.remoteAddress },
        `egress resolve call refused: the client certificate does not name ${EGRESS_PROXY_NAME}`,
      );
      return answer(res, 403, { error: 'forbidden' }, UNREAD_BODY);
    }
    if (!authorized(req.headers.authorization)) {
      logger.warn(
        { remote: req.socket.remoteAddress, path: req.url, method: req.method },
        'egress resolve call refused: missing or wrong token',
      );
      return answer(res, 401, { error: 'unauthorized' }, { 'www-authenticate': 'Bearer', ...UNREAD_BODY });
    }
    if (req.url !== RESOLVE_PATH && req.url !== MISSING_PATH && req.url !== REFUSED_PATH)
      return answer(res, 404, { error: 'not-found' }, UNREAD_BODY);
    if (req.method !== 'POST') return answer(res, 405, { error: 'method-not-allowed' }, { allow: 'POST', ...UNREAD_BODY });
    const raw = await readBody(req);
    if (raw === undefined) return answer(res, 413, { error: 'body-too-large' }, UNREAD_BODY);
    if (req.url === RESOLVE_PATH) {
      const body = parse(ResolveRequestSchema, raw);
      if (!body) return answer(res, 400, { error: 'bad-request' });
      if (limited(res, body.runner_id)) return;
      const run = await options.resolve(body.runner_id, body.token);
      const result: ResolveAnswer = run
        ? { in_progress: true, secrets: toWireSecrets(run.secrets), ...(run.requestId !== undefined && { request_id: run.requestId }) }
        : { in_progress: false };
      return answer(res, 200, result);
    }
    if (req.url === REFUSED_PATH) {
      const body = parse(RefusedRequestSchema, raw);
      if (!body) return answer(res, 400, { error: 'bad-request' });
      if (limited(res, body.runner_id)) return;
      // Only a runner with a run in progress is recorded: a stale or forged credential records nothing.
      if (!(await options.standsForRun(body.runner_id, body.token))) return answer(res, 200, { in_progress: false });
      options.refused?.(body.runner_id, { outcome: body.outcome, destination: body.destination, detail: body.detail });
      return answer(res, 200, { in_progress: true });
    }
    const body = parse(MissingRequestSchema, raw);
    if (!body) return answer(res, 400, { error: 'bad-request' });
    if (limited(res, body.runner_id)) return;
    if (!(await options.standsForRun(body.runner_id, body.token))) return answer(res, 200, { in_progress: false });
    logger.warn(
      { runner_id: body.runner_id, alias: body.alias, destination: body.destination },
      body.destination === undefined
        ? 'placeholder without a secret at the egress proxy: run to be aborted'
        : 'bound secret toward a destination outside its hosts at the egress proxy: run to be aborted',
    );
    await options.abortMissing(body.runner_id, body.alias, body.destination);
    return answer(res, 200, { in_progress: true });
  };

  // Client certificates are checked on each new connection (below), so that a refusal is logged with its reason.
  const server = createInternalHttpsServer(options.identity, { requestCert: true }, (req, res) => {
    req.on('error', () => res.destroy());
    handle(req, res).catch((err: unknown) => {
      logger.error({ err, path: req.url }, 'egress resolve call failed');
      if (res.headersSent) res.destroy();
      else answer(res, 500, { error: 'internal' });
    });
  });
  server.on('secureConnection', (socket: TLSSocket) => {
    const refusal = clientRefusal(socket);
    if (!refusal) return;
    logger.warn({ remote: socket.remoteAddress, reason: refusal }, 'egress resolve connection refused');
    socket.destroy();
  });
  const listener = await listenInternally(server, options.port, options.host);
  logger.info({ host: options.host, port: listener.port }, 'egress resolve listener serving');
  return listener;
}

/** Why a client that finished its handshake is not an egress proxy of this deployment; undefined when it is. */
function clientRefusal(socket: TLSSocket): string | undefined {
  if (!socket.authorized) return `its certificate is not of the deployment CA (${String(socket.authorizationError ?? 'none given')})`;
  if (checkServerIdentity(EGRESS_PROXY_NAME, socket.getPeerCertificate())) return `its certificate does not name ${EGRESS_PROXY_NAME}`;
  return undefined;
}

function parse<T extends z.ZodTypeAny>(schema: T, raw: Buffer): z.infer<T> | undefined {
  let json: unknown;
  try {
    json = JSON.parse(raw.toString('utf8'));
  } catch {
    return undefined;
  }
  const parsed = schema.safeParse(json);
  return parsed.success ? parsed.data : undefined;
}

/** The request body, or undefined past MAX_BODY_BYTES. */
function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        req.removeAllListeners('data');
        req.resume();
        resolve(undefined);
      } else chunks.push(chunk);
    });
    req.once('end', () => resolve(Buffer.concat(chunks)));
    req.once('error', reject);
  });
}

function answer(res: ServerResponse, status: number, body: object, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    'cache-control': 'no-store',
    ...headers,
  });
  res.end(text);
}
