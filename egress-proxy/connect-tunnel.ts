/**
 * HTTPS through the proxy: a CONNECT, authenticated and vetted like any request, answered with TLS terminated
 * by a leaf of the deployment CA, and the requests decrypted from it forwarded like plain ones.
 *
 * Invariants:
 * - The CONNECT target is the destination: the route is vetted for it, the upstream connection goes to it,
 *   and an absolute-form target inside the tunnel keeps only its path. Leaves are minted for the name the
 *   client verifies (SNI), which never moves the upstream.
 * - CONNECT carries TLS only: a tunnel whose client does not complete a TLS handshake with our leaf within
 *   TLS_HANDSHAKE_TIMEOUT_MS is closed (no opaque tunnels, so no traffic escapes inspection).
 * - The CONNECT's credential is resolved again for every request inside the tunnel, so a run that ended
 *   stops substituting at once.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { TLSSocket } from 'node:tls';
import type { DeploymentCa } from './deployment-ca.js';
import { canonicalHost, parseAuthority, type Destination } from './destination-policy.js';
import { callerFields, type EgressLogger, type RunCaller } from './egress-types.js';
import type { Forward } from './forwarding.js';
import { authority, parseAbsoluteForm } from './http-messages.js';
import { PROXY_AUTH_REALM, type Refusals } from './refusals.js';
import { LOOKUP_FAILED, LOOKUP_FAILED_MESSAGE, RATE_LIMITED, RATE_LIMITED_MESSAGE, type RunAuthentication } from './run-authentication.js';
import type { Route } from './upstream.js';

const TLS_HANDSHAKE_TIMEOUT_MS = 10_000;

export interface TunnelDeps {
  ca: DeploymentCa;
  auth: RunAuthentication;
  /** The destination vetted into a route, or why it is refused. */
  route(scheme: Route['scheme'], destination: Destination): Promise<Route | string>;
  forward: Forward;
  refusals: Refusals;
  logger: EgressLogger;
  /** Keeps a socket to be destroyed when the proxy closes. */
  track(socket: Duplex): void;
  /** Keeps an exchange's stream errors from surfacing as uncaught ones. */
  guard(req: IncomingMessage, res: ServerResponse): void;
}

export interface Tunnels {
  /** The outer server's 'connect' handler. */
  onConnect(req: IncomingMessage, socket: Duplex, head: Buffer): void;
  /** The server the decrypted requests arrive at; it never listens, it is handed TLS sockets. */
  readonly inner: Server;
}

interface Tunnel {
  /** The CONNECT's credential, with the request id of the run it stood for then. */
  caller: RunCaller;
  route: Route;
}

export function createTunnels(deps: TunnelDeps): Tunnels {
  const { auth, refusals, logger } = deps;
  const tunnels = new WeakMap<Socket, Tunnel>();
  const inner = createServer();
  inner.on('request', (req: IncomingMessage, res: ServerResponse) => {
    deps.guard(req, res);
    const tunnel = tunnels.get(req.socket);
    if (!tunnel) return void res.destroy();
    void (async () => {
      // Looked up again: a kept-alive tunnel may outlive the turn it was opened in (its next request is the next turn's).
      const run = await auth.lookUp(tunnel.caller);
      if (run === LOOKUP_FAILED) return refusals.refuse(res, 503, 'lookup-failed', LOOKUP_FAILED_MESSAGE);
      if (run === RATE_LIMITED) return refusals.refuse(res, 429, 'rate-limited', RATE_LIMITED_MESSAGE);
      if (!run) return refusals.refuseAuth(res);
      // The tunnel target is authoritative: an absolute-form target inside it keeps only its path.
      const target = parseAbsoluteForm(req.url ?? '')?.target ?? req.url ?? '/';
      deps.forward(req, res, run.caller, run.secrets, tunnel.route, target);
    })().catch((err: unknown) => refusals.failInternally(res, err));
  });

  const accept = (tls: TLSSocket, tunnel: Tunnel) => {
    tunnels.set(tls, tunnel);
    inner.emit('connection', tls);
  };

  return {
    inner,
    onConnect(req, socket, head) {
      deps.track(socket);
      socket.on('error', () => socket.destroy());
      void (async () => {
        const tunnel = await admit(deps, req, socket);
        if (tunnel) await terminateTls(deps, socket, head, tunnel, (tls) => accept(tls, tunnel));
      })().catch((err: unknown) => {
        logger.error({ err }, 'CONNECT handling failed');
        socket.destroy();
      });
    },
  };
}

/** Authenticates and vets a CONNECT; the tunnel to open, or undefined once the socket has been answered. */
async function admit(deps: TunnelDeps, req: IncomingMessage, socket: Duplex): Promise<Tunnel | undefined> {
  const { auth, refusals } = deps;
  const authenticated = await auth.authenticate(req.headers['proxy-authorization']);
  if (authenticated === LOOKUP_FAILED)
    return void refusals.refuseRaw(socket, 'lookup-failed', 503, 'Service Unavailable', '', LOOKUP_FAILED_MESSAGE);
  if (authenticated === RATE_LIMITED)
    return void refusals.refuseRaw(socket, 'rate-limited', 429, 'Too Many Requests', '', RATE_LIMITED_MESSAGE);
  if (!authenticated) {
    const challenge = `Proxy-Authenticate: ${PROXY_AUTH_REALM}\r\n`;
    return void refusals.refuseRaw(socket, 'auth-required', 407, 'Proxy Authentication Required', challenge, 'run credentials required');
  }
  const target = parseAuthority(req.url ?? '');
  if (!target || target.port === undefined)
    return void refusals.refuseRaw(socket, 'bad-request', 400, 'Bad Request', '', 'CONNECT takes host:port');
  const destination = { host: target.host, port: target.port };
  const routed = await deps.route('https', destination);
  if (typeof routed === 'string') {
    refusals.logRefusal(authenticated.caller, destination, routed);
    const header = 'X-Acis-Egress-Error: destination-refused\r\n';
    return void refusals.refuseRaw(socket, 'destination-refused', 403, 'Forbidden', header, `egress refused: ${routed}`);
  }
  return { caller: authenticated.caller, route: routed };
}

/** Answers the CONNECT and terminates TLS on its socket with a leaf for the destination; `accept` takes the TLS socket. */
async function terminateTls(
  deps: TunnelDeps,
  socket: Duplex,
  head: Buffer,
  tunnel: Tunnel,
  accept: (tls: TLSSocket) => void,
): Promise<void> {
  const { destination } = tunnel.route;
  const context = await deps.ca.secureContextFor(destination.host);
  if (socket.destroyed) return;
  socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
  if (head.length > 0) socket.unshift(head);
  const tls = new TLSSocket(socket as Socket, {
    isServer: true,
    secureContext: context,
    ALPNProtocols: ['http/1.1'],
    // Leaves are minted for the name the client verifies; the upstream stays the CONNECT target.
    SNICallback: (servername, callback) => {
      deps.ca.secureContextFor(canonicalHost(servername) ?? destination.host).then(
        (ctx) => callback(null, ctx),
        (err: Error) => callback(err),
      );
    },
  });
  deps.track(tls);
  const deadline = setTimeout(() => tls.destroy(), TLS_HANDSHAKE_TIMEOUT_MS);
  tls.once('secure', () => clearTimeout(deadline));
  tls.once('close', () => clearTimeout(deadline));
  tls.on('error', (err) => {
    deps.logger.debug({ ...callerFields(tunnel.caller), destination: authority(destination), err: err.message }, 'tunnel closed on error');
    tls.destroy();
  });
  accept(tls);
}
