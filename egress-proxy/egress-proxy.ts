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
 *
 * Where each concern lives: run-authentication.ts (the credential), connect-tunnel.ts (CONNECT and TLS
 * termination), forwarding.ts (the outbound leg and substitution), upstream.ts (the connection and the masked
 * way back), refusals.ts (the proxy's own answers, counted and logged), http-messages.ts (pure HTTP pieces).
 * This file holds the contract with the embedder and wires those together.
 */
import { readFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { createTunnels } from './connect-tunnel.js';
import { loadOrCreateDeploymentCa } from './deployment-ca.js';
import { parseAllowList, systemResolver, vetDestination, type AllowList, type Destination } from './destination-policy.js';
import { noEgressMetrics } from './egress-metrics.js';
import type { EgressLogger, EgressProxy, EgressProxyOptions } from './egress-types.js';
import { createForwarding } from './forwarding.js';
import { parseAbsoluteForm } from './http-messages.js';
import { parseModelEndpoint } from './model-endpoint.js';
import { createRefusals } from './refusals.js';
import { LOOKUP_FAILED, LOOKUP_FAILED_MESSAGE, RATE_LIMITED, RATE_LIMITED_MESSAGE, createRunAuthentication } from './run-authentication.js';
import { createUpstreams, type Route } from './upstream.js';

export type {
  EgressLogger,
  EgressProxy,
  EgressProxyOptions,
  EgressRefusal,
  ResolvedRun,
  RunCredential,
  RunSecrets,
} from './egress-types.js';

const silentLogger: EgressLogger = { debug() {}, info() {}, warn() {}, error() {} };

export async function createEgressProxy(options: EgressProxyOptions): Promise<EgressProxy> {
  const logger = options.logger ?? silentLogger;
  const metrics = options.metrics ?? noEgressMetrics;
  const model = options.modelEndpoint ? parseModelEndpoint(options.modelEndpoint.baseUrl) : undefined;
  const listed = parseAllowList(options.allow);
  const allow: AllowList = {
    has: (d) => listed.has(d) || (model !== undefined && model.destination.host === d.host && model.destination.port === d.port),
  };
  const route = async (scheme: Route['scheme'], destination: Destination): Promise<Route | string> => {
    const verdict = await vetDestination(destination, allow, systemResolver);
    return verdict.allowed ? { scheme, destination, addresses: verdict.addresses } : verdict.reason;
  };
  const ca = options.ca ?? (await loadOrCreateDeploymentCa(options.caDir));
  const extraCa = options.extraCaPath ? await readFile(options.extraCaPath, 'utf8') : undefined;

  const refusals = createRefusals(options, metrics, logger);
  const auth = createRunAuthentication(options, logger);
  const upstreams = createUpstreams(extraCa, refusals, metrics, logger);
  const forward = createForwarding({ upstreams, refusals, metrics, logger, model, modelKey: options.modelEndpoint?.apiKey });
  const openSockets = new Set<Duplex>();
  const track = (socket: Duplex) => {
    openSockets.add(socket);
    socket.once('close', () => openSockets.delete(socket));
  };
  const tunnels = createTunnels({ ca, auth, route, forward, refusals, logger, track, guard });

  // Plain HTTP: absolute-form requests.
  const server = createServer();
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    guard(req, res);
    void (async () => {
      const authenticated = await auth.authenticate(req.headers['proxy-authorization']);
      if (authenticated === LOOKUP_FAILED) return refusals.refuse(res, 503, 'lookup-failed', LOOKUP_FAILED_MESSAGE);
      if (authenticated === RATE_LIMITED) return refusals.refuse(res, 429, 'rate-limited', RATE_LIMITED_MESSAGE);
      if (!authenticated) return refusals.refuseAuth(res);
      const parsed = parseAbsoluteForm(req.url ?? '');
      if (!parsed) return refusals.refuse(res, 400, 'bad-request', 'the proxy takes absolute-form requests (http://host/path)');
      const routed = await route(parsed.scheme, parsed.destination);
      if (typeof routed === 'string') return refusals.refuseDestination(res, authenticated.caller, parsed.destination, routed);
      forward(req, res, authenticated.caller, authenticated.secrets, routed, parsed.target);
    })().catch((err: unknown) => refusals.failInternally(res, err));
  });
  // HTTPS: CONNECT, then TLS terminated with a leaf for the target.
  server.on('connect', tunnels.onConnect);
  for (const s of [server, tunnels.inner]) {
    s.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
      if (err.code !== 'ECONNRESET' && socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
      socket.destroy();
    });
    // WebSocket and other upgrades would leave the request/response model that substitution relies on.
    s.on('upgrade', (_req: IncomingMessage, socket: Duplex) =>
      refusals.refuseRaw(socket, 'upgrade-refused', 501, 'Not Implemented', '', 'protocol upgrades are not supported by the egress proxy'),
    );
  }

  const { port, url } = await listen(server, options, logger);
  return {
    port,
    url,
    caCertificatePem: ca.certPem,
    async close() {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeAllConnections();
      tunnels.inner.closeAllConnections();
      for (const socket of openSockets) socket.destroy();
      upstreams.close();
      await closed;
    },
  };
}

/** A client that goes away mid-exchange must not surface as an uncaught stream error. */
function guard(req: IncomingMessage, res: ServerResponse): void {
  req.on('error', () => res.destroy());
  res.on('error', () => req.destroy());
}

/** Listens where the options say. */
async function listen(server: Server, options: EgressProxyOptions, logger: EgressLogger): Promise<{ port: number; url: string }> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  const listenHost = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${listenHost}:${address.port}`;
  logger.info({ url, allow: options.allow ?? '' }, 'egress proxy listening');
  return { port: address.port, url };
}
