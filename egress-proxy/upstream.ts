/**
 * The upstream leg: the connection to a vetted destination and what flows back from it.
 *
 * Invariants:
 * - The connection goes to the addresses the destination was vetted at (destination-policy.ts), never to a
 *   fresh resolution of its name. Upstream TLS is always verified (Node's roots plus ACIS_EGRESS_EXTRA_CA),
 *   against the destination name; SNI carries it too.
 * - Every response body the proxy can decode is masked, whatever its type, and so is every header value; a
 *   response in a content-encoding it cannot decode is refused with 502 rather than passed unmasked.
 */
import {
  Agent as HttpAgent,
  request as httpRequest,
  type ClientRequest,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import { createSecureContext, rootCertificates } from 'node:tls';
import { vettedLookup, type Destination, type ResolvedAddress } from './destination-policy.js';
import { callerFields, type EgressLogger, type RunCaller } from './egress-types.js';
import type { EgressMetrics } from './egress-metrics.js';
import { HOP_BY_HOP, appendHeader, authority, connectionTokens, decodersFor, relay, type Scheme } from './http-messages.js';
import { respond, type Refusals } from './refusals.js';
import { createMaskingTransform, type Masker } from './secret-masking.js';

/** A destination that passed the policy, with the addresses it was vetted at. */
export interface Route {
  scheme: Scheme;
  destination: Destination;
  addresses: ResolvedAddress[];
}

/** One request to send upstream: its target and headers already final, the masker of what comes back. */
export interface UpstreamRequest {
  caller: RunCaller;
  to: Route;
  target: string;
  headers: OutgoingHttpHeaders;
  masker: Masker | undefined;
  /** performance.now() when the proxy took the request, for the log line. */
  started: number;
}

export interface Upstreams {
  /** Opens the upstream request for `req` (its body is the caller's to write) and answers `res` from it. */
  open(req: IncomingMessage, res: ServerResponse, request: UpstreamRequest): ClientRequest;
  close(): void;
}

/** What answering a client from the upstream needs. */
interface AnswerDeps {
  refusals: Refusals;
  metrics: EgressMetrics;
  logger: EgressLogger;
}

export function createUpstreams(extraCa: string | undefined, refusals: Refusals, metrics: EgressMetrics, logger: EgressLogger): Upstreams {
  const deps: AnswerDeps = { refusals, metrics, logger };
  const httpAgent = new HttpAgent({ keepAlive: true });
  // One context built once: a `ca` array on each request would be re-stringified into every pool key.
  const httpsAgent = new HttpsAgent({
    keepAlive: true,
    ...(extraCa ? { secureContext: createSecureContext({ ca: [...rootCertificates, extraCa] }) } : {}),
  });

  function open(req: IncomingMessage, res: ServerResponse, request: UpstreamRequest): ClientRequest {
    const { host, port } = request.to.destination;
    const common = {
      host,
      port,
      method: req.method,
      path: request.target,
      headers: request.headers,
      setHost: false,
      lookup: vettedLookup(request.to.addresses),
    };
    const upstream =
      request.to.scheme === 'https'
        ? // SNI and the identity check use the destination name; an IP literal is checked against IP SANs.
          httpsRequest({ ...common, agent: httpsAgent, ...(isIP(host) === 0 ? { servername: host } : {}) })
        : httpRequest({ ...common, agent: httpAgent });
    upstream.on('response', (up: IncomingMessage) => answer(deps, req, res, up, request));
    upstream.on('error', (err: NodeJS.ErrnoException) => failed(deps, res, err, request));
    return upstream;
  }

  return {
    open,
    close() {
      httpAgent.destroy();
      httpsAgent.destroy();
    },
  };
}

/** Relays the upstream's response, masked when the run has values to mask. */
function answer(deps: AnswerDeps, req: IncomingMessage, res: ServerResponse, up: IncomingMessage, request: UpstreamRequest): void {
  const { refusals, metrics, logger } = deps;
  const { masker } = request;
  const status = up.statusCode ?? 502;
  const bodyful = req.method !== 'HEAD' && status !== 204 && status !== 304;
  const outHeaders = responseHeaders(up, masker);
  const decoders = masker && bodyful ? decodersFor(up.headers['content-encoding']) : [];
  if (!decoders) {
    up.destroy();
    refusals.refuse(res, 502, 'undecodable-response', 'the upstream answered in a content-encoding the proxy cannot inspect');
    return;
  }
  metrics.request('forwarded');
  // The proxy's access log: one line per request forwarded, naming the runner and its run's API request.
  const log = () =>
    logger.info(
      {
        ...callerFields(request.caller),
        method: req.method,
        destination: authority(request.to.destination),
        status,
        ms: Math.round(performance.now() - request.started),
      },
      'egress request',
    );
  if (!masker || !bodyful) {
    res.writeHead(status, up.statusMessage, outHeaders);
    relay([up], res, log);
    return;
  }
  // The masked body's length is unknown until it is sent: chunked to the client.
  delete outHeaders['content-length'];
  if (decoders.length > 0) delete outHeaders['content-encoding'];
  res.writeHead(status, up.statusMessage, outHeaders);
  relay([up, ...decoders, createMaskingTransform(masker)], res, log);
}

/** The upstream could not be reached or failed mid-response: 502 while the client has no answer yet, else a cut response. */
function failed(deps: AnswerDeps, res: ServerResponse, err: NodeJS.ErrnoException, request: UpstreamRequest): void {
  const { metrics, logger } = deps;
  if (res.headersSent || res.destroyed) return void res.destroy();
  metrics.request('upstream-error');
  const untrusted = typeof err.code === 'string' && /CERT|SIGNATURE|ISSUER|ALTNAME|SELF_SIGNED/.test(err.code);
  logger.warn(
    { ...callerFields(request.caller), destination: authority(request.to.destination), code: err.code },
    'upstream request failed',
  );
  respond(
    res,
    502,
    untrusted ? 'upstream-certificate' : 'upstream-unreachable',
    untrusted ? `upstream certificate not trusted (${err.code})` : `upstream unreachable (${err.code ?? err.message})`,
  );
}

function responseHeaders(up: IncomingMessage, masker: Masker | undefined): OutgoingHttpHeaders {
  const dropped = connectionTokens(up.headers.connection);
  const headers: OutgoingHttpHeaders = {};
  const raw = up.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (HOP_BY_HOP.has(name) || dropped.has(name)) continue;
    appendHeader(headers, name, masker ? masker.maskHeaderValue(raw[i + 1]!) : raw[i + 1]!);
  }
  return headers;
}
