/**
 * The sync report listener (ACIS_SYNC_REPORT_LISTEN): where a sync Job's pod, which holds no database
 * credential, hands over what its attempt found (sync-report.ts) for the API server to store.
 *
 * Invariants:
 * - Its own listener, never the public API port: no ingress exposes it, and the chart lets only sync
 *   Job pods reach it. It serves one path, `POST /internal/repository-syncs/{id}/claims/{claim}/result`.
 * - HTTPS only (TLS 1.3), with the API server's certificate of the deployment CA naming the listener's
 *   Service (ACIS_SYNC_REPORT_TLS_NAMES): a Job verifies it before it sends its token, and a plaintext
 *   client gets no answer at all, so the token never crosses the network in clear. No client
 *   certificate: the attempt's token is what authenticates a Job.
 * - Nothing is read past the headers without the attempt's token (401) while the claim is current
 *   (403 `sync-superseded` otherwise: the attempt is stale, its result dropped, as in process).
 * - The body is hostile input: bounded while it streams in (413), then checked whole (422) before
 *   anything is written; it is stored by the worker's own `settle`, the in-process sync's code path,
 *   which writes nothing if the claim ended meanwhile.
 * - Every refusal is problem+json, logged without the token or the body.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { constantTimeEqual } from '../core/crypto.js';
import type { Db } from '../core/db/database.js';
import { fieldErrors } from '../core/http/validation.js';
import { ProblemError, problemBody, problems } from '../core/problems.js';
import { isCurrentSync } from './repositories.repository.js';
import type { RepositorySyncWorker } from './sync.js';
import { decodeReport, MAX_REPORT_BYTES, REPORT_PATH, SyncReportSchema, syncReportToken } from './sync-report.js';
import { type InternalListener, listenInternally } from '../core/http/internal-listener.js';
import type { ApiIdentity } from '../internal-tls/api-identity.js';
import { createInternalHttpsServer } from '../internal-tls/internal-https.js';

export interface SyncReportServerOptions {
  host: string;
  port: number;
  /** The certificate served (renewed in place). */
  identity: ApiIdentity;
  db: Db;
  /** The key tokens are derived with (Vault.deriveKey(SYNC_REPORT_KEY_PURPOSE)). */
  tokenKey: Buffer;
  worker: Pick<RepositorySyncWorker, 'settle'>;
  /** The `{base_url}` of problem types. */
  baseUrl: string;
  logger: Logger;
  /** The largest body taken; MAX_REPORT_BYTES unless a test wants a smaller one. */
  maxBodyBytes?: number;
}

export type SyncReportServer = InternalListener;

/** A refusal before the body is read closes the connection, so the rest of the body is never parsed as a request. */
const UNREAD_BODY = { connection: 'close' };
/**
 * Past the limit a body is still read (and dropped) this far, so a client that overshot a little
 * can read its 413 rather than lose it to a reset connection; further than that, it is cut.
 */
const DRAIN_BYTES = 32 * 1024 * 1024;

export async function startSyncReportServer(options: SyncReportServerOptions): Promise<SyncReportServer> {
  const { logger } = options;
  const maxBytes = options.maxBodyBytes ?? MAX_REPORT_BYTES;

  const handle = async (req: IncomingMessage, res: ServerResponse, requestId: string): Promise<void> => {
    const match = REPORT_PATH.exec(req.url ?? '');
    if (!match) throw new ProblemError('not-found', 404, { detail: 'This listener serves sync results only.' });
    if (req.method !== 'POST')
      throw new ProblemError('method-not-allowed', 405, { detail: 'Sync results are POSTed.', headers: { allow: 'POST' } });
    const repositoryId = match[1]!;
    const claim = match[2]!;
    const given = /^Bearer (\S+)$/.exec(req.headers.authorization ?? '')?.[1] ?? '';
    if (!constantTimeEqual(Buffer.from(given), Buffer.from(syncReportToken(options.tokenKey, repositoryId, claim)))) {
      logger.warn({ repository_id: repositoryId, remote: req.socket.remoteAddress }, 'sync result refused: missing or wrong token');
      throw problems.unauthorized('A sync result needs the token issued for its attempt.');
    }
    if (!(await isCurrentSync(options.db, repositoryId, claim))) throw superseded();
    if (!/^application\/json(;|$)/i.test(req.headers['content-type'] ?? ''))
      throw new ProblemError('unsupported-media-type', 415, { detail: 'The result is application/json.' });
    const raw = await readBody(req, maxBytes);
    let json: unknown;
    try {
      json = JSON.parse(raw.toString('utf8'));
    } catch {
      throw problems.badRequest([], 'The result is not JSON.');
    }
    const parsed = SyncReportSchema.safeParse(json);
    if (!parsed.success) throw problems.invalid(fieldErrors(parsed.error));
    const outcome = await options.worker.settle(repositoryId, claim, decodeReport(parsed.data));
    if (outcome.state !== 'ready' && outcome.state !== 'error') throw superseded();
    logger.info({ repository_id: repositoryId, state: outcome.state, request_id: requestId }, 'sync result stored');
    answer(res, 200, 'application/json', outcome);
  };

  const server = createInternalHttpsServer(options.identity, { requestCert: false }, (req, res) => {
    const requestId = randomUUID();
    req.on('error', () => res.destroy());
    handle(req, res, requestId).catch((error: unknown) => {
      if (res.headersSent) return res.destroy();
      const problem = error instanceof ProblemError ? error : new ProblemError('internal-error', 500);
      if (!(error instanceof ProblemError)) logger.error({ err: error, request_id: requestId }, 'storing a sync result failed');
      const body = problemBody(problem, { baseUrl: options.baseUrl, requestId, instance: req.url?.split('?')[0] });
      // A refusal that left the body unread closes the connection.
      const unread = req.readableEnded ? {} : UNREAD_BODY;
      answer(res, problem.status, 'application/problem+json', body, { ...problem.options.headers, ...unread });
    });
  });
  const listener = await listenInternally(server, options.port, options.host);
  logger.info({ host: options.host, port: listener.port }, 'sync report listener serving');
  return listener;
}

function superseded(): ProblemError {
  return new ProblemError('sync-superseded', 403, {
    detail:
      'The attempt this result belongs to is no longer current (a newer sync, a change of the repository, or its deletion); it was dropped.',
  });
}

/**
 * The body, refused (413) when its declared length is past `limit`, or once it has grown past it:
 * nothing beyond the limit is kept, and what follows is drained up to DRAIN_BYTES before the answer.
 */
function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const tooLarge = () => new ProblemError('payload-too-large', 413, { detail: `A sync result is at most ${limit} bytes.` });
  if (Number(req.headers['content-length'] ?? 0) > limit) return Promise.reject(tooLarge());
  return new Promise((resolve, reject) => {
    let chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) return void chunks.push(chunk);
      chunks = [];
      if (size > limit + DRAIN_BYTES) {
        req.removeAllListeners('data');
        req.resume();
        reject(tooLarge());
      }
    });
    req.once('end', () => (size > limit ? reject(tooLarge()) : resolve(Buffer.concat(chunks))));
    req.once('error', reject);
  });
}

function answer(res: ServerResponse, status: number, type: string, body: object, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(text), 'cache-control': 'no-store', ...headers });
  res.end(text);
}
