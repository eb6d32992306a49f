/**
 * The outbound leg: a run's request on its way to a vetted route, with the run's values in place of its
 * placeholders (target, headers, body) and its masker chosen for the way back.
 *
 * Invariants:
 * - Substitution and masking use exactly the map `resolveRun` returned for the request's credential.
 * - A bound secret (secret-binding.ts) is substituted only toward a destination its hosts allow; its
 *   placeholder anywhere in a request elsewhere (target, a header, the body) refuses the whole request (403,
 *   secret-destination-denied) before anything is sent, or, deep in a large streamed body, destroys the
 *   upstream request mid-body. The masker of the way back covers every value of the run, bound or not.
 * - The upstream Host header is the route's destination; the client's Host is dropped, as are hop-by-hop
 *   headers, and framing is recomputed.
 * - A placeholder whose alias the run lacks aborts the request: in the target, headers or a small body,
 *   before anything is sent; in a large streamed body, the upstream request is destroyed mid-body, so the
 *   upstream never receives a complete request.
 * - The platform's model key goes to the model endpoint and nowhere else: there it replaces whatever key
 *   headers the runner sent, and nothing of the run's is substituted (a model request's body is the
 *   conversation, which names placeholders and must not receive their values). Responses from the model
 *   endpoint are masked of the key as well as the run's values.
 *
 * Fail-safe direction: a body the proxy cannot read (a Content-Encoding, a non-text type) is sent as it is,
 * placeholders included, so the call fails upstream; a value is never leaked by a miss.
 */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import type { Readable } from 'node:stream';
import { callerFields, type EgressLogger, type RunCaller, type RunSecrets } from './egress-types.js';
import type { EgressMetrics } from './egress-metrics.js';
import { HOP_BY_HOP, appendHeader, authority, collect, connectionTokens, decodableCodings, isEncoded, isTextual } from './http-messages.js';
import { MODEL_KEY_ALIAS, isModelEndpoint, type ModelEndpoint } from './model-endpoint.js';
import type { Refusals } from './refusals.js';
import { allowsDestination, secretValue } from './secret-binding.js';
import { compileMasker, type Masker } from './secret-masking.js';
import {
  SecretDestinationError,
  type SecretValues,
  createSubstitutionTransform,
  scanSubstitute,
  substituteHeaderValue,
  substituteTarget,
} from './secret-substitution.js';
import type { Route, Upstreams } from './upstream.js';

/** Request bodies up to this size are substituted whole and sent with an exact Content-Length (some
 * upstreams refuse chunked uploads); larger ones stream with chunked framing. */
const BUFFERED_BODY_LIMIT = 1 << 20;

export interface ForwardingDeps {
  upstreams: Upstreams;
  refusals: Refusals;
  metrics: EgressMetrics;
  logger: EgressLogger;
  model: ModelEndpoint | undefined;
  /** The platform's model key; undefined: model calls go without one. */
  modelKey: string | undefined;
}

/** Forwards one authenticated request along `to`; `rawTarget` is its path and query as the client sent them. */
export type Forward = (
  req: IncomingMessage,
  res: ServerResponse,
  caller: RunCaller,
  runSecrets: RunSecrets,
  to: Route,
  rawTarget: string,
) => void;

/** A request whose target and headers are substituted, on its way upstream with its body still to send. */
interface Outbound {
  req: IncomingMessage;
  res: ServerResponse;
  caller: RunCaller;
  to: Route;
  target: string;
  headers: OutgoingHttpHeaders;
  masker: Masker | undefined;
  started: number;
}

export function createForwarding(deps: ForwardingDeps): Forward {
  const { refusals, metrics, model, modelKey } = deps;
  const maskerFor = maskerPerRun((secrets) => compileMasker(new Map(plainValues(secrets))));
  // The run's values and the model key, for what the model endpoint answers.
  const modelMaskerFor = modelKey
    ? maskerPerRun((secrets) => compileMasker(new Map([...plainValues(secrets), [MODEL_KEY_ALIAS, modelKey]])))
    : maskerFor;

  /** A model call: the platform's key in place of the runner's key headers; target, other headers and body untouched. */
  const forwardToModel: Forward = (req, res, caller, runSecrets, to, rawTarget) => {
    const started = performance.now();
    const masker = modelMaskerFor(runSecrets);
    const headers = requestHeaders(req, undefined, to, masker !== undefined);
    delete headers['x-api-key'];
    delete headers.authorization;
    if (modelKey) headers['x-api-key'] = modelKey;
    const declared = req.headers['content-length'];
    if (declared !== undefined) headers['content-length'] = declared;
    else if (req.headers['transfer-encoding'] !== undefined) headers['transfer-encoding'] = 'chunked';
    const target = rawTarget.startsWith('/') ? rawTarget : `/${rawTarget}`;
    send(deps.upstreams, { req, res, caller, to, target, headers, masker, started }, req);
  };

  return (req, res, caller, runSecrets, to, rawTarget) => {
    if (isModelEndpoint(model, to.scheme, to.destination)) return forwardToModel(req, res, caller, runSecrets, to, rawTarget);
    const started = performance.now();
    const masker = maskerFor(runSecrets);
    const secrets = valuesToward(runSecrets, to, metrics.substituted);
    let target: string;
    let headers: OutgoingHttpHeaders;
    try {
      target = substituteTarget(rawTarget.startsWith('/') ? rawTarget : `/${rawTarget}`, secrets);
      headers = requestHeaders(req, secrets, to, masker !== undefined);
    } catch (err) {
      return refusals.refuseSecret(res, caller, to.destination, err);
    }
    sendBody(deps, { req, res, caller, to, target, headers, masker, started }, secrets);
  };
}

/** Opens the upstream request, writes `body` into it, and destroys it when the client goes away first. */
function send(upstreams: Upstreams, out: Outbound, body: Buffer | Readable | undefined): void {
  const { req, res, caller, to, target, headers, masker, started } = out;
  const upstream = upstreams.open(req, res, { caller, to, target, headers, masker, started });
  if (body === undefined) upstream.end();
  else if (Buffer.isBuffer(body)) upstream.end(body);
  else {
    body.pipe(upstream);
    body.once('error', () => upstream.destroy());
  }
  res.once('close', () => {
    if (!upstream.writableFinished || !res.writableFinished) upstream.destroy();
  });
}

/** Sends the request's body, substituted when the proxy can read it: whole when small, streamed when large. */
function sendBody(deps: ForwardingDeps, out: Outbound, secrets: SecretValues): void {
  const { req, res, headers } = out;
  const { upstreams, refusals, logger } = deps;
  const declared = req.headers['content-length'];
  const hasBody = req.headers['transfer-encoding'] !== undefined || (declared !== undefined && declared !== '0');
  const substitutable = hasBody && !isEncoded(req.headers['content-encoding']) && isTextual(req.headers['content-type']);
  if (!hasBody) {
    if (declared === '0') headers['content-length'] = '0';
    send(upstreams, out, undefined);
    return;
  }
  if (!substitutable) {
    logger.debug(
      { ...callerFields(out.caller), destination: authority(out.to.destination) },
      'request body passed unscanned (encoded or not text)',
    );
    if (declared !== undefined) headers['content-length'] = declared;
    else headers['transfer-encoding'] = 'chunked';
    send(upstreams, out, req);
    return;
  }
  if (declared !== undefined && Number(declared) <= BUFFERED_BODY_LIMIT) {
    // Small: substitute whole, so a missing alias is found before a byte goes upstream.
    collect(req)
      .then((raw) => {
        let body: Buffer;
        try {
          body = scanSubstitute(raw, secrets, true).out;
        } catch (err) {
          return refusals.refuseSecret(res, out.caller, out.to.destination, err);
        }
        headers['content-length'] = String(body.length);
        send(upstreams, out, body);
      })
      .catch(() => res.destroy());
    return;
  }
  headers['transfer-encoding'] = 'chunked';
  const substitution = createSubstitutionTransform(secrets);
  substitution.once('error', (err) => {
    req.unpipe(substitution);
    refusals.refuseSecret(res, out.caller, out.to.destination, err); // destroys the upstream request through res 'close'
  });
  req.pipe(substitution);
  send(upstreams, out, substitution);
}

/** The headers sent upstream; `secrets` undefined: values pass unsubstituted. */
function requestHeaders(req: IncomingMessage, secrets: SecretValues | undefined, to: Route, masking: boolean): OutgoingHttpHeaders {
  const dropped = connectionTokens(req.headers.connection);
  const headers: OutgoingHttpHeaders = {};
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    // Framing is recomputed; Expect is dropped because the body is sent without waiting for 100.
    if (HOP_BY_HOP.has(name) || dropped.has(name) || name === 'host' || name === 'content-length' || name === 'expect') continue;
    let value = secrets ? substituteHeaderValue(raw[i + 1]!, secrets) : raw[i + 1]!;
    if (name === 'accept-encoding' && masking) value = decodableCodings(value);
    appendHeader(headers, name, value);
  }
  headers.host = authority(to.destination, to.scheme === 'https' ? 443 : 80);
  return headers;
}

/** `compile`, once per run's map of values (a run resolved in process hands the same map to each request). */
function maskerPerRun(compile: (secrets: RunSecrets) => Masker | undefined): (secrets: RunSecrets) => Masker | undefined {
  const maskers = new WeakMap<RunSecrets, Masker | null>();
  return (secrets) => {
    let masker = maskers.get(secrets);
    if (masker === undefined) {
      masker = compile(secrets) ?? null;
      maskers.set(secrets, masker);
    }
    return masker ?? undefined;
  };
}

function plainValues(secrets: RunSecrets): Array<[string, string]> {
  return [...secrets].map(([alias, secret]) => [alias, secretValue(secret)]);
}

/**
 * The run's values as the substitution functions see them for a request along `to`: a bound value the
 * route may not carry throws SecretDestinationError, and every value handed out is one substitution.
 */
function valuesToward(secrets: RunSecrets, to: Route, onHit: () => void): SecretValues {
  return {
    get(alias) {
      const secret = secrets.get(alias);
      if (secret === undefined) return undefined;
      if (!allowsDestination(secret, to.scheme, to.destination)) {
        throw new SecretDestinationError(alias, `${to.scheme}://${authority(to.destination, to.scheme === 'https' ? 443 : 80)}`);
      }
      onHit();
      return secretValue(secret);
    },
  };
}
