/**
 * The host end of a sandbox's `model.sock`: a small HTTP forwarder to the model endpoint that puts the
 * platform's key on every request of a runner with a run in progress (its credential in a header says
 * which runner calls; an idle runner's left-over process gets 401). Runners hold only a placeholder
 * key, so the real one never enters a sandbox; whatever key or authorization a runner sends is dropped. Bodies stream both ways untouched
 * (server-sent events must not be buffered).
 */
import { rm } from 'node:fs/promises';
import { createServer, request as httpRequest, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { Socket } from 'node:net';
import type { Logger } from 'pino';
import { HOP_BY_HOP } from '../../../egress-proxy/http-messages.js';
import type { Bridge } from '../../../runner/bridge.js';
import { RUNNER_CREDENTIAL_HEADER } from './runner-process.js';

export interface ModelGatewayOptions {
  /** ANTHROPIC_BASE_URL: where requests go (its path is prefixed to theirs). */
  baseUrl: string;
  /** ANTHROPIC_API_KEY: sent as x-api-key; absent, requests go without a key (the endpoint decides). */
  apiKey: string | undefined;
  /** The caller, when the runner credential a request carries (`id:token`) stands for a run in progress. */
  authorize: (credential: string) => ModelCaller | undefined;
  logger: Logger;
}

/** Who calls: the runner, and the request id of the run in progress on it (for the gateway's lines). */
export interface ModelCaller {
  runnerId: string;
  requestId: string | undefined;
}

const DROPPED = new Set([...HOP_BY_HOP, 'host', 'x-api-key', 'authorization', RUNNER_CREDENTIAL_HEADER]);

export async function serveModelGateway(socketPath: string, options: ModelGatewayOptions): Promise<Bridge> {
  const base = new URL(options.baseUrl);
  const basePath = base.pathname.replace(/\/+$/, '');
  const send = base.protocol === 'https:' ? httpsRequest : httpRequest;
  const open = new Set<Socket>();

  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const credential = req.headers[RUNNER_CREDENTIAL_HEADER];
    const caller = typeof credential === 'string' ? options.authorize(credential) : undefined;
    if (!caller) {
      options.logger.warn(
        { runner: typeof credential === 'string' ? credential.split(':')[0] : undefined },
        'model call refused: no run in progress on the calling runner',
      );
      return void refuse(res);
    }
    const headers: OutgoingHttpHeaders = {};
    for (const [name, value] of Object.entries(req.headers)) {
      if (value !== undefined && !DROPPED.has(name)) headers[name] = value;
    }
    if (options.apiKey) headers['x-api-key'] = options.apiKey;
    headers.host = base.host;
    const logger = options.logger.child(
      caller.requestId === undefined ? { runner_id: caller.runnerId } : { runner_id: caller.runnerId, request_id: caller.requestId },
    );
    const startedMs = performance.now();
    const upstream = send({
      protocol: base.protocol,
      hostname: base.hostname,
      port: base.port || undefined,
      method: req.method,
      path: `${basePath}${req.url ?? '/'}`,
      headers,
    });
    upstream.on('response', (up) => {
      const out: OutgoingHttpHeaders = {};
      for (const [name, value] of Object.entries(up.headers)) if (value !== undefined && !HOP_BY_HOP.has(name)) out[name] = value;
      res.writeHead(up.statusCode ?? 502, up.statusMessage, out);
      res.once('close', () => logger.info({ status: up.statusCode, duration_ms: Math.round(performance.now() - startedMs) }, 'model call'));
      // Each chunk goes out as it arrives: no buffering of streamed replies.
      up.pipe(res);
      up.on('error', () => res.destroy());
    });
    upstream.on('error', (err: NodeJS.ErrnoException) => {
      logger.warn({ code: err.code }, 'model endpoint request failed');
      if (res.headersSent) return void res.destroy();
      res.writeHead(502, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ type: 'error', error: { type: 'api_error', message: 'model endpoint unreachable' } }));
    });
    req.pipe(upstream);
    req.on('error', () => upstream.destroy());
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
  });
  server.on('connection', (socket: Socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
  });

  await rm(socketPath, { force: true });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(socketPath, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    address: socketPath,
    close: () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      // The agent keeps model connections alive between turns.
      for (const socket of open) socket.destroy();
      return closed;
    },
  };
}

/** Answered as the model endpoint answers a bad key, so the agent runtime reports it as such. */
function refuse(res: ServerResponse): void {
  res.writeHead(401, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ type: 'error', error: { type: 'authentication_error', message: 'no run in progress on this runner' } }));
}
