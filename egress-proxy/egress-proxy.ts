/**
 * The egress proxy: a forward proxy (absolute-form HTTP, and HTTPS through CONNECT with TLS terminated by the
 * deployment CA) that puts a run's vaulted values in place of `{{secret:ALIAS}}` placeholders on the way out
 * and masks them back into placeholders on the way in.
 *
 * Invariants:
 * - Nothing is forwarded for a request without valid run credentials (`Proxy-Authorization: Basic
 *   base64(runner_id:runner_token)`, checked by `resolveRun`): it gets 407, or 503 when `resolveRun` cannot
 *   answer. Inside a tunnel the CONNECT's credentials are resolved again for every request, so a run that
 *   ended stops substituting at once.
 * - A run's credentials only ever reach that run's values: substitution and masking use exactly the map
 *   `resolveRun` returned for them.
 * - The destination is the absolute URL's authority or the CONNECT target, never the Host header: the policy
 *   check, the connection and the upstream Host header all use it (a client-sent Host is replaced).
 * - The destination is resolved once and vetted (destination-policy.ts); the connection goes to those vetted
 *   addresses only. Upstream TLS is always verified (Node's roots plus ACIS_EGRESS_EXTRA_CA), against the
 *   destination name.
 * - A placeholder whose alias the run lacks aborts the request: in the target, headers or a small body,
 *   before anything is sent; in a large streamed body, the upstream request is destroyed mid-body, so the
 *   upstream never receives a complete request. The client gets `missingSecretStatus` and `onMissing` is told.
 * - The platform's model key goes to the model endpoint (`modelEndpoint`: scheme, host and port) and nowhere
 *   else: there it replaces whatever key headers the runner sent, as the local provider's model gateway does,
 *   and nothing of the run's is substituted (a model request's body is the conversation, which names
 *   placeholders and must not receive their values). Elsewhere `{{secret:ANTHROPIC_API_KEY}}` is the run's
 *   alias like any other. Responses from the model endpoint are masked of the key as well as the run's values.
 * - CONNECT carries TLS only: a tunnel whose client does not complete a TLS handshake with our leaf is closed
 *   (no opaque tunnels, so no traffic escapes inspection).
 *
 * Fail-safe direction: outbound, a placeholder the proxy cannot see (a body with a Content-Encoding, a
 * non-text body) is sent as the placeholder itself, so the call fails upstream; a value is never leaked by a
 * miss. Inbound, every response body the proxy can decode is masked whatever its type, and a response in an
 * encoding it cannot decode is refused with 502 rather than passed unmasked.
 */
import { readFile } from 'node:fs/promises';
import {
  Agent as HttpAgent,
  createServer,
  request as httpRequest,
  type ClientRequest,
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
} from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { isIP, type AddressInfo, type Socket } from 'node:net';
import type { Duplex, Readable, Transform } from 'node:stream';
import { TLSSocket, createSecureContext, rootCertificates } from 'node:tls';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import { loadOrCreateDeploymentCa } from './deployment-ca.js';
import { type EgressMetrics, type EgressOutcome, noEgressMetrics } from './egress-metrics.js';
import {
  canonicalHost,
  parseAllowList,
  parseAuthority,
  systemResolver,
  vetDestination,
  vettedLookup,
  type AllowList,
  type Destination,
  type ResolvedAddress,
} from './destination-policy.js';
import { MODEL_KEY_ALIAS, isModelEndpoint, parseModelEndpoint } from './model-endpoint.js';
import { compileMasker, createMaskingTransform, type Masker } from './secret-masking.js';
import {
  MissingSecretError,
  SecretPlacementError,
  createSubstitutionTransform,
  scanSubstitute,
  substituteHeaderValue,
  substituteTarget,
} from './secret-substitution.js';
import { placeholderFor } from './placeholder.js';

/** A runner's proxy credential (Proxy-Authorization's user and password); `resolveRun` says which run it stands for now. */
export interface RunCredential {
  runnerId: string;
  token: string;
}

/** Alias → plaintext value for one run. Return the same map object for a run to let the proxy reuse its masking tables. */
export type RunSecrets = ReadonlyMap<string, string>;

/** The subset of a pino logger the proxy uses. It never logs values, tokens, headers or bodies. */
export interface EgressLogger {
  debug(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface EgressProxyOptions {
  /**
   * The run a credential belongs to, as its secrets; undefined when the credential is not valid (now).
   * A throw means the answer is unknown (its source is down): the request gets 503, nothing is forwarded.
   */
  resolveRun(credential: RunCredential): RunSecrets | undefined | Promise<RunSecrets | undefined>;
  /** A placeholder named an alias the run lacks; the run is to be aborted (missing-secret). `token` is the credential's. */
  onMissing(runnerId: string, alias: string, token: string): void;
  /** Where the deployment CA lives (created on first start), e.g. `$ACIS_DATA_DIR/egress-ca`. */
  caDir: string;
  /** ACIS_EGRESS_ALLOW: comma-separated `host` or `host:port` that may be reached although private. */
  allow?: string | undefined;
  /** ACIS_EGRESS_EXTRA_CA: a PEM bundle trusted for upstream TLS on top of Node's roots. */
  extraCaPath?: string | undefined;
  /** Listen address; default 127.0.0.1 and an ephemeral port. */
  host?: string;
  port?: number;
  logger?: EgressLogger;
  /** Status answered for an unresolvable placeholder; default 422 (the spec's missing-secret). */
  missingSecretStatus?: number;
  /** Where requests, denials and substitutions are counted (egress-metrics.ts); default: nowhere. */
  metrics?: EgressMetrics;
  /**
   * The platform's model endpoint (ANTHROPIC_BASE_URL) and key (ANTHROPIC_API_KEY), for runners that reach
   * the model through the proxy. The endpoint is allowed although private (cloud metadata never); requests
   * to it carry `apiKey` (when set) in x-api-key in place of the key headers sent. Absent: no destination is
   * special and the key is never used.
   */
  modelEndpoint?: { baseUrl: string; apiKey: string | undefined } | undefined;
}

export interface EgressProxy {
  readonly port: number;
  /** `http://host:port`; runners use `http://<runner_id>:<runner_token>@host:port` as HTTP(S)_PROXY. */
  readonly url: string;
  /** The deployment CA runners must trust. */
  readonly caCertificatePem: string;
  close(): Promise<void>;
}

interface Route {
  scheme: 'http' | 'https';
  destination: Destination;
  addresses: ResolvedAddress[];
}

interface Tunnel {
  credential: RunCredential;
  route: Route;
}

/** `resolveRun` threw: whether the credential stands for a run is unknown, so nothing is forwarded. */
const LOOKUP_FAILED = Symbol('lookup failed');
type LookupFailed = typeof LOOKUP_FAILED;
const LOOKUP_FAILED_MESSAGE = 'the egress proxy cannot look the run up now; retry';

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

/** Request bodies up to this size are substituted whole and sent with an exact Content-Length (some
 * upstreams refuse chunked uploads); larger ones stream with chunked framing. */
const BUFFERED_BODY_LIMIT = 1 << 20;
const TLS_HANDSHAKE_TIMEOUT_MS = 10_000;
const REALM = 'Basic realm="acis-egress"';
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);
const DECODABLE_CODINGS = new Set(['gzip', 'x-gzip', 'deflate', 'br', 'identity']);
const TEXT_TYPES = new Set([
  'application/json',
  'application/xml',
  'application/x-www-form-urlencoded',
  'application/javascript',
  'application/x-ndjson',
  'application/graphql',
  'application/yaml',
  'application/x-yaml',
  'multipart/form-data',
]);
const silentLogger: EgressLogger = { debug() {}, info() {}, warn() {}, error() {} };

export async function createEgressProxy(options: EgressProxyOptions): Promise<EgressProxy> {
  const logger = options.logger ?? silentLogger;
  const model = options.modelEndpoint ? parseModelEndpoint(options.modelEndpoint.baseUrl) : undefined;
  const modelKey = options.modelEndpoint?.apiKey;
  const listed = parseAllowList(options.allow);
  const allow: AllowList = { has: (d) => listed.has(d) || (model !== undefined && model.destination.host === d.host && model.destination.port === d.port) };
  const missingStatus = options.missingSecretStatus ?? 422;
  const metrics = options.metrics ?? noEgressMetrics;
  /** Answers the proxy's own response (not an upstream one) and counts it. */
  const refuse = (res: ServerResponse, status: number, outcome: EgressOutcome, message: string) => {
    metrics.request(outcome);
    respond(res, status, outcome, message);
  };
  const refuseAuth = (res: ServerResponse) => {
    metrics.request('auth-required');
    respondAuthRequired(res);
  };
  const refuseRaw = (socket: Duplex, outcome: EgressOutcome, status: number, reason: string, extraHeaders: string, message: string) => {
    metrics.request(outcome);
    endRaw(socket, status, reason, extraHeaders, message);
  };
  const ca = await loadOrCreateDeploymentCa(options.caDir);
  const extraCa = options.extraCaPath ? await readFile(options.extraCaPath, 'utf8') : undefined;

  const httpAgent = new HttpAgent({ keepAlive: true });
  // One context built once: a `ca` array on each request would be re-stringified into every pool key.
  const httpsAgent = new HttpsAgent({
    keepAlive: true,
    ...(extraCa ? { secureContext: createSecureContext({ ca: [...rootCertificates, extraCa] }) } : {}),
  });
  const maskerFor = maskerPerRun(compileMasker);
  // The run's values and the model key, for what the model endpoint answers.
  const modelMaskerFor = modelKey ? maskerPerRun((secrets) => compileMasker(new Map([...secrets, [MODEL_KEY_ALIAS, modelKey]]))) : maskerFor;

  const tunnels = new WeakMap<Socket, Tunnel>();
  const openSockets = new Set<Duplex>();
  const track = (socket: Duplex) => {
    openSockets.add(socket);
    socket.once('close', () => openSockets.delete(socket));
  };

  async function authenticate(header: string | undefined): Promise<{ credential: RunCredential; secrets: RunSecrets } | undefined | LookupFailed> {
    const credential = parseProxyAuthorization(header);
    if (!credential) return undefined;
    const secrets = await lookUp(credential);
    return secrets === LOOKUP_FAILED ? secrets : secrets ? { credential, secrets } : undefined;
  }

  /** `resolveRun`, with a failure to answer told apart from "no run": neither forwards anything. */
  async function lookUp(credential: RunCredential): Promise<RunSecrets | undefined | LookupFailed> {
    try {
      return await options.resolveRun(credential);
    } catch (err) {
      logger.warn({ runner_id: credential.runnerId, err: err instanceof Error ? err.message : String(err) }, 'run lookup failed: request refused');
      return LOOKUP_FAILED;
    }
  }

  async function route(scheme: Route['scheme'], destination: Destination): Promise<Route | string> {
    const verdict = await vetDestination(destination, allow, systemResolver);
    return verdict.allowed ? { scheme, destination, addresses: verdict.addresses } : verdict.reason;
  }

  // ---- plain HTTP: absolute-form requests --------------------------------------------------------------

  const server = createServer();
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    guard(req, res);
    void (async () => {
      const auth = await authenticate(req.headers['proxy-authorization']);
      if (auth === LOOKUP_FAILED) return refuse(res, 503, 'lookup-failed', LOOKUP_FAILED_MESSAGE);
      if (!auth) return refuseAuth(res);
      const parsed = parseAbsoluteForm(req.url ?? '');
      if (!parsed) return refuse(res, 400, 'bad-request', 'the proxy takes absolute-form requests (http://host/path)');
      const routed = await route(parsed.scheme, parsed.destination);
      if (typeof routed === 'string') return refuseDestination(res, auth.credential, parsed.destination, routed);
      forward(req, res, auth.credential, auth.secrets, routed, parsed.target);
    })().catch((err: unknown) => failInternally(res, err));
  });

  // ---- HTTPS: CONNECT, then TLS terminated with a leaf for the target ------------------------------------

  server.on('connect', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    track(socket);
    socket.on('error', () => socket.destroy());
    void (async () => {
      const auth = await authenticate(req.headers['proxy-authorization']);
      if (auth === LOOKUP_FAILED) return refuseRaw(socket, 'lookup-failed', 503, 'Service Unavailable', '', LOOKUP_FAILED_MESSAGE);
      if (!auth) {
        return refuseRaw(socket, 'auth-required', 407, 'Proxy Authentication Required', `Proxy-Authenticate: ${REALM}\r\n`, 'run credentials required');
      }
      const target = parseAuthority(req.url ?? '');
      if (!target || target.port === undefined) return refuseRaw(socket, 'bad-request', 400, 'Bad Request', '', 'CONNECT takes host:port');
      const destination = { host: target.host, port: target.port };
      const routed = await route('https', destination);
      if (typeof routed === 'string') {
        logRefusal(auth.credential, destination, routed);
        return refuseRaw(socket, 'destination-refused', 403, 'Forbidden', 'X-Acis-Egress-Error: destination-refused\r\n', `egress refused: ${routed}`);
      }
      const context = await ca.secureContextFor(destination.host);
      if (socket.destroyed) return;
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) socket.unshift(head);
      const tls = new TLSSocket(socket as Socket, {
        isServer: true,
        secureContext: context,
        ALPNProtocols: ['http/1.1'],
        // Leaves are minted for the name the client verifies; the upstream stays the CONNECT target.
        SNICallback: (servername, callback) => {
          ca.secureContextFor(canonicalHost(servername) ?? destination.host).then(
            (ctx) => callback(null, ctx),
            (err: Error) => callback(err),
          );
        },
      });
      track(tls);
      const deadline = setTimeout(() => tls.destroy(), TLS_HANDSHAKE_TIMEOUT_MS);
      tls.once('secure', () => clearTimeout(deadline));
      tls.once('close', () => clearTimeout(deadline));
      tls.on('error', (err) => {
        logger.debug({ runner_id: auth.credential.runnerId, destination: authority(destination), err: err.message }, 'tunnel closed on error');
        tls.destroy();
      });
      tunnels.set(tls, { credential: auth.credential, route: routed });
      inner.emit('connection', tls);
    })().catch((err: unknown) => {
      logger.error({ err }, 'CONNECT handling failed');
      socket.destroy();
    });
  });

  // Requests decrypted from tunnels; never listens, it is handed TLS sockets.
  const inner = createServer();
  inner.on('request', (req: IncomingMessage, res: ServerResponse) => {
    guard(req, res);
    const tunnel = tunnels.get(req.socket);
    if (!tunnel) return void res.destroy();
    void (async () => {
      const secrets = await lookUp(tunnel.credential);
      if (secrets === LOOKUP_FAILED) return refuse(res, 503, 'lookup-failed', LOOKUP_FAILED_MESSAGE);
      if (!secrets) return refuseAuth(res);
      // The tunnel target is authoritative: an absolute-form target inside it keeps only its path.
      const target = parseAbsoluteForm(req.url ?? '')?.target ?? req.url ?? '/';
      forward(req, res, tunnel.credential, secrets, tunnel.route, target);
    })().catch((err: unknown) => failInternally(res, err));
  });

  for (const s of [server, inner]) {
    s.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
      if (err.code !== 'ECONNRESET' && socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
      socket.destroy();
    });
    // WebSocket and other upgrades would leave the request/response model that substitution relies on.
    s.on('upgrade', (_req: IncomingMessage, socket: Duplex) =>
      refuseRaw(socket, 'upgrade-refused', 501, 'Not Implemented', '', 'protocol upgrades are not supported by the egress proxy'),
    );
  }

  // ---- forwarding ---------------------------------------------------------------------------------------

  function forward(req: IncomingMessage, res: ServerResponse, credential: RunCredential, runSecrets: RunSecrets, to: Route, rawTarget: string): void {
    const runnerId = credential.runnerId;
    if (isModelEndpoint(model, to.scheme, to.destination)) return forwardToModel(req, res, runnerId, runSecrets, to, rawTarget);
    const started = performance.now();
    const masker = maskerFor(runSecrets);
    const secrets = countingLookups(runSecrets, metrics.substituted);
    let target: string;
    let headers: OutgoingHttpHeaders;
    try {
      target = substituteTarget(rawTarget.startsWith('/') ? rawTarget : `/${rawTarget}`, secrets);
      headers = requestHeaders(req, secrets, to, masker !== undefined);
    } catch (err) {
      return refuseSecret(res, credential, to.destination, err);
    }

    const declared = req.headers['content-length'];
    const hasBody = req.headers['transfer-encoding'] !== undefined || (declared !== undefined && declared !== '0');
    const substitutable = hasBody && !isEncoded(req.headers['content-encoding']) && isTextual(req.headers['content-type']);
    if (hasBody && !substitutable) {
      logger.debug({ runner_id: runnerId, destination: authority(to.destination) }, 'request body passed unscanned (encoded or not text)');
    }

    const send = (body: Buffer | Readable | undefined): void => {
      const upstream = openUpstream(req, res, runnerId, to, target, headers, masker, started);
      if (body === undefined) upstream.end();
      else if (Buffer.isBuffer(body)) upstream.end(body);
      else {
        body.pipe(upstream);
        body.once('error', () => upstream.destroy());
      }
      res.once('close', () => {
        if (!upstream.writableFinished || !res.writableFinished) upstream.destroy();
      });
    };

    if (!hasBody) {
      if (declared === '0') headers['content-length'] = '0';
      return send(undefined);
    }
    if (!substitutable) {
      if (declared !== undefined) headers['content-length'] = declared;
      else headers['transfer-encoding'] = 'chunked';
      return send(req);
    }
    if (declared !== undefined && Number(declared) <= BUFFERED_BODY_LIMIT) {
      // Small: substitute whole, so a missing alias is found before a byte goes upstream.
      collect(req)
        .then((raw) => {
          let body: Buffer;
          try {
            body = scanSubstitute(raw, secrets, true).out;
          } catch (err) {
            return refuseSecret(res, credential, to.destination, err);
          }
          headers['content-length'] = String(body.length);
          send(body);
        })
        .catch(() => res.destroy());
      return;
    }
    headers['transfer-encoding'] = 'chunked';
    const substitution = createSubstitutionTransform(secrets);
    substitution.once('error', (err) => {
      req.unpipe(substitution);
      refuseSecret(res, credential, to.destination, err); // destroys the upstream request through res 'close'
    });
    req.pipe(substitution);
    send(substitution);
  }

  /** A model call: the platform's key in place of the runner's key headers; target, other headers and body untouched. */
  function forwardToModel(req: IncomingMessage, res: ServerResponse, runnerId: string, runSecrets: RunSecrets, to: Route, rawTarget: string): void {
    const started = performance.now();
    const masker = modelMaskerFor(runSecrets);
    const headers = requestHeaders(req, undefined, to, masker !== undefined);
    delete headers['x-api-key'];
    delete headers.authorization;
    if (modelKey) headers['x-api-key'] = modelKey;
    const declared = req.headers['content-length'];
    if (declared !== undefined) headers['content-length'] = declared;
    else if (req.headers['transfer-encoding'] !== undefined) headers['transfer-encoding'] = 'chunked';
    const upstream = openUpstream(req, res, runnerId, to, rawTarget.startsWith('/') ? rawTarget : `/${rawTarget}`, headers, masker, started);
    req.pipe(upstream);
    res.once('close', () => {
      if (!upstream.writableFinished || !res.writableFinished) upstream.destroy();
    });
  }

  function openUpstream(
    req: IncomingMessage,
    res: ServerResponse,
    runnerId: string,
    to: Route,
    target: string,
    headers: OutgoingHttpHeaders,
    masker: Masker | undefined,
    started: number,
  ): ClientRequest {
    const { host, port } = to.destination;
    const common = {
      host,
      port,
      method: req.method,
      path: target,
      headers,
      setHost: false,
      lookup: vettedLookup(to.addresses),
    };
    const upstream =
      to.scheme === 'https'
        ? // SNI and the identity check use the destination name; an IP literal is checked against IP SANs.
          httpsRequest({ ...common, agent: httpsAgent, ...(isIP(host) === 0 ? { servername: host } : {}) })
        : httpRequest({ ...common, agent: httpAgent });

    upstream.on('response', (up: IncomingMessage) => {
      const status = up.statusCode ?? 502;
      const bodyful = req.method !== 'HEAD' && status !== 204 && status !== 304;
      const outHeaders = responseHeaders(up, masker);
      const decoders = masker && bodyful ? decodersFor(up.headers['content-encoding']) : [];
      if (!decoders) {
        up.destroy();
        return refuse(res, 502, 'undecodable-response', 'the upstream answered in a content-encoding the proxy cannot inspect');
      }
      metrics.request('forwarded');
      const log = () =>
        logger.debug(
          { runner_id: runnerId, method: req.method, destination: authority(to.destination), status, ms: Math.round(performance.now() - started) },
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
    });
    upstream.on('error', (err: NodeJS.ErrnoException) => {
      if (res.headersSent || res.destroyed) return void res.destroy();
      metrics.request('upstream-error');
      const untrusted = typeof err.code === 'string' && /CERT|SIGNATURE|ISSUER|ALTNAME|SELF_SIGNED/.test(err.code);
      logger.warn({ runner_id: runnerId, destination: authority(to.destination), code: err.code }, 'upstream request failed');
      respond(
        res,
        502,
        untrusted ? 'upstream-certificate' : 'upstream-unreachable',
        untrusted ? `upstream certificate not trusted (${err.code})` : `upstream unreachable (${err.code ?? err.message})`,
      );
    });
    return upstream;
  }

  /** The headers sent upstream; `secrets` undefined: values pass unsubstituted. */
  function requestHeaders(req: IncomingMessage, secrets: RunSecrets | undefined, to: Route, masking: boolean): OutgoingHttpHeaders {
    const dropped = connectionTokens(req.headers.connection);
    const headers: OutgoingHttpHeaders = {};
    const raw = req.rawHeaders;
    for (let i = 0; i < raw.length; i += 2) {
      const name = raw[i]!.toLowerCase();
      // Framing is recomputed; Expect is dropped because the body is sent without waiting for 100.
      if (HOP_BY_HOP.has(name) || dropped.has(name) || name === 'host' || name === 'content-length' || name === 'expect') continue;
      let value = secrets ? substituteHeaderValue(raw[i + 1]!, secrets) : raw[i + 1]!;
      if (name === 'accept-encoding' && masking) value = decodableCodings(value);
      const existing = headers[name];
      headers[name] = existing === undefined ? value : Array.isArray(existing) ? [...existing, value] : [String(existing), value];
    }
    headers.host = authority(to.destination, to.scheme === 'https' ? 443 : 80);
    return headers;
  }

  function refuseSecret(res: ServerResponse, credential: RunCredential, destination: Destination, err: unknown): void {
    if (err instanceof MissingSecretError) {
      logger.warn({ runner_id: credential.runnerId, alias: err.alias, destination: authority(destination) }, 'placeholder without a secret: run to be aborted');
      try {
        options.onMissing(credential.runnerId, err.alias, credential.token);
      } catch (hookErr) {
        logger.error({ err: hookErr, runner_id: credential.runnerId }, 'onMissing hook failed');
      }
      return refuse(res, missingStatus, 'missing-secret', `missing secret: ${placeholderFor(err.alias)} is not vaulted for this run`);
    }
    if (err instanceof SecretPlacementError) return refuse(res, 400, 'secret-placement', err.message);
    failInternally(res, err);
  }

  function refuseDestination(res: ServerResponse, credential: RunCredential, destination: Destination, reason: string): void {
    logRefusal(credential, destination, reason);
    refuse(res, 403, 'destination-refused', `egress refused: ${reason}`);
  }

  function logRefusal(credential: RunCredential, destination: Destination, reason: string): void {
    logger.warn({ runner_id: credential.runnerId, destination: authority(destination), reason }, 'egress destination refused');
  }

  function failInternally(res: ServerResponse, err: unknown): void {
    logger.error({ err }, 'egress request failed');
    refuse(res, 500, 'internal', 'egress proxy error');
  }

  function guard(req: IncomingMessage, res: ServerResponse): void {
    // A client that goes away mid-exchange must not surface as an uncaught stream error.
    req.on('error', () => res.destroy());
    res.on('error', () => req.destroy());
  }

  // ---- lifecycle ----------------------------------------------------------------------------------------

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const listenHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  logger.info({ url: `http://${listenHost}:${address.port}`, allow: options.allow ?? '' }, 'egress proxy listening');

  return {
    port: address.port,
    url: `http://${listenHost}:${address.port}`,
    caCertificatePem: ca.certPem,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      inner.closeAllConnections();
      for (const socket of openSockets) socket.destroy();
      httpAgent.destroy();
      httpsAgent.destroy();
      await closed;
    },
  };
}

// ---- helpers (pure) ---------------------------------------------------------------------------------------

export function parseProxyAuthorization(header: string | undefined): RunCredential | undefined {
  const match = /^Basic\s+([A-Za-z0-9+/]+={0,2})\s*$/i.exec(header ?? '');
  if (!match) return undefined;
  const decoded = Buffer.from(match[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon <= 0 || colon === decoded.length - 1) return undefined;
  return { runnerId: decoded.slice(0, colon), token: decoded.slice(colon + 1) };
}

/** Splits `http(s)://[userinfo@]authority[/path?query]` keeping the target exactly as the client spelled it. */
/**
 * `secrets` as the substitution functions see them: every value they look up is one substitution.
 * (They read values only through `get`; masking keeps using the run's own map.)
 */
function countingLookups(secrets: RunSecrets, onHit: () => void): RunSecrets {
  return new Proxy(secrets, {
    get(target, property) {
      if (property === 'get') {
        return (alias: string) => {
          const value = target.get(alias);
          if (value !== undefined) onHit();
          return value;
        };
      }
      const member: unknown = Reflect.get(target, property, target);
      return typeof member === 'function' ? member.bind(target) : member;
    },
  });
}

function parseAbsoluteForm(url: string): { scheme: Route['scheme']; destination: Destination; target: string } | undefined {
  const match = /^(https?):\/\/(?:[^@/?#]*@)?([^/?#]*)([^#]*)/i.exec(url);
  if (!match) return undefined;
  const scheme = match[1]!.toLowerCase() as Route['scheme'];
  const parsed = parseAuthority(match[2]!);
  if (!parsed) return undefined;
  const rest = match[3]!;
  return {
    scheme,
    destination: { host: parsed.host, port: parsed.port ?? (scheme === 'https' ? 443 : 80) },
    target: rest === '' ? '/' : rest.startsWith('?') ? `/${rest}` : rest,
  };
}

function authority(destination: Destination, defaultPort?: number): string {
  const host = isIP(destination.host) === 6 ? `[${destination.host}]` : destination.host;
  return destination.port === defaultPort ? host : `${host}:${destination.port}`;
}

function connectionTokens(header: string | undefined): Set<string> {
  return new Set((header ?? '').split(',').map((t) => t.trim().toLowerCase()).filter(Boolean));
}

function isEncoded(contentEncoding: string | undefined): boolean {
  return contentEncoding !== undefined && contentEncoding.trim().toLowerCase() !== 'identity' && contentEncoding.trim() !== '';
}

function isTextual(contentType: string | undefined): boolean {
  if (contentType === undefined) return true;
  const type = contentType.split(';')[0]!.trim().toLowerCase();
  return type.startsWith('text/') || type.endsWith('+json') || type.endsWith('+xml') || TEXT_TYPES.has(type);
}

/** Keeps only the codings the proxy can decode for masking; identity when none is left. */
function decodableCodings(acceptEncoding: string): string {
  const kept = acceptEncoding
    .split(',')
    .map((t) => t.trim())
    .filter((t) => DECODABLE_CODINGS.has(t.split(';')[0]!.trim().toLowerCase()));
  return kept.length > 0 ? kept.join(', ') : 'identity';
}

/** Decoders for a response's content-encoding, outermost last as applied; undefined when one is unknown. */
function decodersFor(contentEncoding: string | undefined): Transform[] | undefined {
  const codings = (contentEncoding ?? '')
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
  const decoders: Transform[] = [];
  for (const coding of codings.reverse()) {
    if (coding === 'gzip' || coding === 'x-gzip') decoders.push(createGunzip());
    else if (coding === 'deflate') decoders.push(createInflate());
    else if (coding === 'br') decoders.push(createBrotliDecompress());
    else return undefined;
  }
  return decoders;
}

function responseHeaders(up: IncomingMessage, masker: Masker | undefined): OutgoingHttpHeaders {
  const dropped = connectionTokens(up.headers.connection);
  const headers: OutgoingHttpHeaders = {};
  const raw = up.rawHeaders;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!.toLowerCase();
    if (HOP_BY_HOP.has(name) || dropped.has(name)) continue;
    const value = masker ? masker.maskHeaderValue(raw[i + 1]!) : raw[i + 1]!;
    const existing = headers[name];
    headers[name] = existing === undefined ? value : Array.isArray(existing) ? [...existing, value] : [String(existing), value];
  }
  return headers;
}

function collect(stream: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.once('end', () => resolve(Buffer.concat(chunks)));
    stream.once('error', reject);
    stream.once('close', () => reject(new Error('client went away mid-body'))); // a no-op after 'end'
  });
}

/**
 * Pipes `stages` into one another and into `res`; any failure tears the whole chain down (the client sees a
 * cut response, never a partial one presented as complete). Plain pipe() rather than stream.pipeline: this
 * runs for every response, and pipeline pays for an AbortController and an AbortError per call.
 */
function relay(stages: Readable[], res: ServerResponse, done: () => void): void {
  const teardown = () => {
    for (const stage of stages) stage.destroy();
    res.destroy();
  };
  stages.forEach((stage, i) => {
    stage.once('error', teardown);
    stage.pipe(i + 1 < stages.length ? (stages[i + 1] as unknown as NodeJS.WritableStream) : res);
  });
  res.once('finish', done);
  res.once('close', () => {
    if (!res.writableFinished) teardown();
  });
}

function respond(res: ServerResponse, status: number, code: string, message: string): void {
  if (res.headersSent) return void res.destroy();
  // The client may still be sending a body the proxy will not read: close rather than drain it.
  res.writeHead(status, {
    'content-type': 'text/plain; charset=utf-8',
    'x-acis-egress-error': code,
    connection: 'close',
  });
  res.end(`${message}\n`);
}

function respondAuthRequired(res: ServerResponse): void {
  if (res.headersSent) return void res.destroy();
  res.writeHead(407, {
    'proxy-authenticate': REALM,
    'content-type': 'text/plain; charset=utf-8',
    'x-acis-egress-error': 'proxy-auth-required',
    connection: 'close',
  });
  res.end('run credentials required\n');
}

function endRaw(socket: Duplex, status: number, reason: string, extraHeaders: string, message: string): void {
  if (!socket.writable) return void socket.destroy();
  const body = `${message}\n`;
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\n${extraHeaders}Content-Type: text/plain; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}
