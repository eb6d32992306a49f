/**
 * The runner's side of the resumable link (link.ts), when it runs in a pod: it listens on TCP and
 * serves one API connection at a time.
 *
 * Invariants, fail-closed:
 * - a connection is authenticated by its first line, a hello carrying the per-sandbox token
 *   (compared in constant time); anything else gets a `refused` line and is closed, and is logged
 *   here without the token or the line;
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
import { createHash, timingSafeEqual } from 'node:crypto';
import net from 'node:net';
import { LINE_TOO_LONG } from './channel.js';
import { decodeFrame, encodeControl, HANDSHAKE_MAX_LINE_BYTES, LINK_MAX_LINE_BYTES, type LinkControl, LinkEndpoint } from './link.js';
import { type SocketChannel, socketChannel } from './socket-channel.js';
import { listenOn } from './listen.js';

export interface LinkServerOptions {
  host: string;
  /** 0 picks a free port (see `address`). */
  port: number;
  token: string;
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
  expectedDigest: Buffer;
  /** The link id of the accepted client (its reconnects carry the same one). */
  clientLink: string | undefined;
  windowTimer: NodeJS.Timeout | undefined;
}

export async function serveLink(options: LinkServerOptions): Promise<LinkServer> {
  const state: LinkState = {
    options,
    endpoint: new LinkEndpoint(),
    expectedDigest: digest(options.token),
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
  const server = net.createServer((socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    greet(socket, state);
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

/** A new connection: its first line decides whether it is let in (and attached to the link) or refused. */
function greet(socket: net.Socket, state: LinkState): void {
  const { options } = state;
  const peer = `${socket.remoteAddress ?? '?'}:${socket.remotePort ?? '?'}`;
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
    const admission = admit(line, state);
    if ('refusal' in admission) {
      options.log(`refused a connection from ${peer}: ${admission.refusal}`);
      wire.send(encodeControl({ type: 'refused', error: admission.refusal }));
      wire.close('refused');
    } else {
      attach(wire, admission.hello, state, peer);
    }
  });
}

/** Let in: a new client starts the link afresh; the same client resumes where it left off, and so does one taking it over. */
function attach(wire: SocketChannel, hello: Hello, state: LinkState, peer: string): void {
  const { endpoint, options } = state;
  const isNew = hello.link !== state.clientLink;
  const takeover = isNew && hello.takeover === true;
  if (isNew) state.clientLink = hello.link;
  if (isNew && !takeover) {
    endpoint.reset();
    options.onNewClient();
  }
  wire.send(encodeControl({ type: 'welcome', after: endpoint.lastReceived }));
  wire.setMaxLineBytes(LINK_MAX_LINE_BYTES);
  clearTimeout(state.windowTimer);
  endpoint.attach(wire, hello.after, hello.settled);
  if (takeover) options.onTakeover();
  options.log(`API connection from ${peer} ${takeover ? 'took the link over' : isNew ? 'accepted' : 'resumed'}`);
}

/** The hello a first line carries, if it is let in; else why not. */
function admit(line: string, state: LinkState): { hello: Hello } | { refusal: string } {
  const frame = decodeFrame(line);
  if (frame.kind !== 'control' || frame.control.type !== 'hello') return { refusal: 'the first line was not a hello' };
  const refusal = refusalOf(frame.control, state);
  return refusal === undefined ? { hello: frame.control } : { refusal };
}

function refusalOf(hello: Hello, { endpoint, options, expectedDigest, clientLink }: LinkState): string | undefined {
  if (!timingSafeEqual(digest(hello.token), expectedDigest)) return 'wrong token';
  if (endpoint.isEnded) return 'the runner is shutting down';
  if (hello.link === clientLink || hello.takeover === true) {
    return endpoint.canReplayFrom(hello.after) ? undefined : `cannot resume after line ${hello.after}: it was never sent or is gone`;
  }
  if (endpoint.attached) return 'another API connection is live';
  if (options.busy()) return 'a turn of another connection is in progress';
  if (hello.after !== 0) return 'a new connection must start after line 0';
  return undefined;
}

/** Fixed-length digests, so the comparison takes the same time whatever the given token's length. */
function digest(token: string): Buffer {
  return createHash('sha256').update(token).digest();
}
