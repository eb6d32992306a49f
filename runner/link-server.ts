/**
 * The runner's side of the resumable link (link.ts), when it runs in a pod: it listens on TCP and
 * serves one API connection at a time.
 *
 * Invariants, fail-closed:
 * - it speaks TLS only, with a certificate made at start, and lets a client finish its handshake only
 *   with a certificate that chains to the deployment's CA and names the API server (link-tls.ts); any
 *   other is closed and logged;
 * - a connection is authenticated by its first line, a hello carrying a proof of the per-sandbox token
 *   bound to this TLS session (compared in constant time); anything else gets a `refused` line and is
 *   closed, and is logged here without the proof or the line; the welcome carries this side's proof;
 * - a connection that says nothing (a TCP readiness probe) changes nothing and is closed after a
 *   while, unlogged;
 * - while one API connection is live, another client's hello is refused; the same client (same link
 *   id) reconnecting replaces its own connection, which it may have lost without this side noticing;
 * - a new client is refused while a turn is in progress (the turn's lines belong to its client),
 *   unless it takes the link over (`takeover`, after the replica holding it died): it then becomes the
 *   link's client, supersedes the previous connection, and gets the lines the previous client did not
 *   settle replayed from where it says its durable record ends; a takeover from a point this side no
 *   longer has (or never sent) is refused;
 * - when the connection drops while the runner is busy, the runner keeps working and buffering; if no
 *   connection comes back within the reconnect window, the link ends (and the runner exits), so
 *   nothing waits forever.
 */
import type net from 'node:net';
import tls from 'node:tls';
import { LINE_TOO_LONG } from './channel.js';
import { decodeFrame, encodeControl, HANDSHAKE_MAX_LINE_BYTES, LINK_MAX_LINE_BYTES, type LinkControl, LinkEndpoint } from './link.js';
import { API_SERVER_NAME, ephemeralCertificate, linkProof, proofMatches, sessionBinding } from './link-tls.js';
import { type SocketChannel, socketChannel } from './socket-channel.js';
import { listenOn } from './listen.js';

export interface LinkServerOptions {
  host: string;
  /** 0 picks a free port (see `address`). */
  port: number;
  token: string;
  /** The deployment CA's certificate (PEM): a client must present a certificate it signed, naming the API server. */
  clientCa: string;
  /** How long a dropped connection may take to come back while the runner is busy. */
  reconnectSeconds: number;
  /** True while a turn is in progress: a drop then starts the reconnect window, and new clients are refused. */
  busy: () => boolean;
  /** A new client was accepted: what it must see first goes out here (nothing of a previous client's is replayed). */
  onNewClient: () => void;
  /** A client took the link over: what it must see after the replay goes out here. */
  onTakeover: () => void;
  /** Operator messages (stderr); never given the token. */
  log: (message: string) => void;
  /** How long a connection may stay silent before its hello. */
  helloTimeoutMs?: number;
}

export interface LinkServer {
  /** The protocol's channel: ends when the window lapses or the client says goodbye. */
  channel: LinkEndpoint;
  address: net.AddressInfo;
  close(): Promise<void>;
}

const DEFAULT_HELLO_TIMEOUT_MS = 10_000;

type Hello = Extract<LinkControl, { type: 'hello' }>;

/** What the connections of one link server share: the link, who its client is, the reconnect window. */
interface LinkState {
  options: LinkServerOptions;
  endpoint: LinkEndpoint;
  /** The link id of the accepted client (its reconnects carry the same one). */
  clientLink: string | undefined;
  windowTimer: NodeJS.Timeout | undefined;
}

export async function serveLink(options: LinkServerOptions): Promise<LinkServer> {
  const state: LinkState = {
    options,
    endpoint: new LinkEndpoint(),
    clientLink: undefined,
    windowTimer: undefined,
  };
  const { endpoint } = state;
  const sockets = new Set<net.Socket>();
  endpoint.onDetached((reason) => {
    options.log(`API connection lost (${reason})`);
    if (!options.busy()) return;
    clearTimeout(state.windowTimer);
    state.windowTimer = setTimeout(() => {
      if (!endpoint.attached) endpoint.end(`no API connection came back within ${options.reconnectSeconds} s`);
    }, options.reconnectSeconds * 1000);
  });
  endpoint.onClosed(() => {
    clearTimeout(state.windowTimer);
    if (server.listening) server.close();
  });
  const server = tls.createServer(
    {
      ...ephemeralCertificate('acis-runner'),
      ca: options.clientCa,
      requestCert: true,
      // Checked below instead, so that a refusal is logged with its reason; nothing is read before.
      rejectUnauthorized: false,
      minVersion: 'TLSv1.3',
      handshakeTimeout: options.helloTimeoutMs ?? DEFAULT_HELLO_TIMEOUT_MS,
    },
    (socket) => {
      const refusal = clientRefusal(socket);
      if (refusal) {
        options.log(`refused a connection from ${peerOf(socket)}: ${refusal}`);
        socket.destroy();
        return;
      }
      greet(socket, state);
    },
  );
  // A probe that connects and closes, or a client that never finishes its handshake: closed, unlogged
  // (with this listener Node leaves the socket open).
  server.on('tlsClientError', (_error, socket) => socket.destroy());
  // Every connection from its first byte, handshakes in progress included, so that closing ends them all.
  server.on('connection', (socket: net.Socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  });
  await listenOn(server, options.port, options.host);
  return {
    channel: endpoint,
    address: server.address() as net.AddressInfo,
    close: async () => {
      endpoint.end('the runner is stopping');
      for (const socket of sockets) socket.destroy();
      if (server.listening) await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Why a client that finished its handshake is not the API server; undefined when it is. */
function clientRefusal(socket: tls.TLSSocket): string | undefined {
  if (!socket.authorized) return `its certificate is not of the deployment CA (${String(socket.authorizationError ?? 'none given')})`;
  if (tls.checkServerIdentity(API_SERVER_NAME, socket.getPeerCertificate())) return `its certificate does not name ${API_SERVER_NAME}`;
  return undefined;
}

/** A new connection: its first line decides whether it is let in (and attached to the link) or refused. */
function greet(socket: tls.TLSSocket, state: LinkState): void {
  const { options } = state;
  const peer = peerOf(socket);
  const binding = sessionBinding(socket);
  const wire = socketChannel(socket, HANDSHAKE_MAX_LINE_BYTES);
  let greeted = false;
  const helloTimer = setTimeout(() => wire.close('no hello'), options.helloTimeoutMs ?? DEFAULT_HELLO_TIMEOUT_MS);
  wire.onClosed((reason) => {
    clearTimeout(helloTimer);
    if (!greeted && reason.startsWith(LINE_TOO_LONG)) options.log(`refused a connection from ${peer}: its first line was too long`);
  });
  wire.onLine((line) => {
    if (greeted) return;
    greeted = true;
    clearTimeout(helloTimer);
    const admission = admit(line, state, binding);
    if ('refusal' in admission) {
      options.log(`refused a connection from ${peer}: ${admission.refusal}`);
      wire.send(encodeControl({ type: 'refused', error: admission.refusal }));
      wire.close('refused');
    } else {
      attach(wire, admission.hello, state, peer, binding);
    }
  });
}

/** Let in: a new client starts the link afresh; the same client resumes where it left off, and so does one taking it over. */
function attach(wire: SocketChannel, hello: Hello, state: LinkState, peer: string, binding: Buffer): void {
  const { endpoint, options } = state;
  const isNew = hello.link !== state.clientLink;
  const takeover = isNew && hello.takeover === true;
  if (isNew) state.clientLink = hello.link;
  if (isNew && !takeover) {
    endpoint.reset();
    options.onNewClient();
  }
  wire.send(encodeControl({ type: 'welcome', after: endpoint.lastReceived, proof: linkProof(options.token, 'welcome', binding) }));
  wire.setMaxLineBytes(LINK_MAX_LINE_BYTES);
  clearTimeout(state.windowTimer);
  endpoint.attach(wire, hello.after, hello.settled);
  if (takeover) options.onTakeover();
  options.log(`API connection from ${peer} ${takeover ? 'took the link over' : isNew ? 'accepted' : 'resumed'}`);
}

/** The hello a first line carries, if it is let in; else why not. */
function admit(line: string, state: LinkState, binding: Buffer): { hello: Hello } | { refusal: string } {
  const frame = decodeFrame(line);
  if (frame.kind !== 'control' || frame.control.type !== 'hello') return { refusal: 'the first line was not a hello' };
  if (!proofMatches(state.options.token, 'hello', binding, frame.control.proof)) return { refusal: 'wrong token' };
  const refusal = refusalOf(frame.control, state);
  return refusal === undefined ? { hello: frame.control } : { refusal };
}

function refusalOf(hello: Hello, { endpoint, options, clientLink }: LinkState): string | undefined {
  if (endpoint.isEnded) return 'the runner is shutting down';
  if (hello.link === clientLink || hello.takeover === true) {
    return endpoint.canReplayFrom(hello.after) ? undefined : `cannot resume after line ${hello.after}: it was never sent or is gone`;
  }
  if (endpoint.attached) return 'another API connection is live';
  if (options.busy()) return 'a turn of another connection is in progress';
  if (hello.after !== 0) return 'a new connection must start after line 0';
  return undefined;
}

function peerOf(socket: net.Socket): string {
  return `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? '?'}`;
}
