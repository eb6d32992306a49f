/**
 * The API server's side of the resumable link (link.ts) to a runner in a pod, over TLS with the API
 * server's certificate (the runner admits no other client). The runner's own certificate is not
 * trusted by chain: its welcome must carry its proof of the token for this very TLS session
 * (link-tls.ts), which only the runner can make; without it the connection is refused. The first
 * connection either succeeds (the runner welcomed this side's proof and proved itself) or fails with the reason; after that, a dropped
 * connection is restored in the background, retrying with backoff for up to the reconnect window,
 * and the protocol above never notices beyond the delay. If the window lapses, or the runner refuses
 * the reconnection, the link ends: the protocol sees its channel close (a turn in progress ends
 * `crashed`), so nothing waits forever.
 */
import { randomUUID } from 'node:crypto';
import tls from 'node:tls';
import { breachedBound } from './channel.js';
import { decodeFrame, encodeControl, HANDSHAKE_MAX_LINE_BYTES, LINK_MAX_LINE_BYTES, LinkEndpoint } from './link.js';
import { linkProof, proofMatches, sessionBinding } from './link-tls.js';
import { socketChannel } from './socket-channel.js';

export interface LinkClientOptions {
  host: string;
  port: number;
  token: string;
  /** This side's certificate and key (a leaf of the deployment CA naming the API server), read at each connection (it is renewed). */
  clientCertificate: () => { cert: string; key: string };
  reconnectSeconds: number;
  /** A connection that has not been welcomed or refused by then fails. */
  handshakeTimeoutMs?: number;
  /**
   * Take over the link another client held (its replica died): this side has that client's lines up to
   * `after` durably, and the runner replays the rest. Acknowledgements are held from the start (`holdAcks`).
   */
  takeoverAfter?: number | undefined;
  /** Told about drops and restorations (for the operator's log). */
  onEvent?: (event: { kind: 'lost' | 'restored'; reason?: string }) => void;
  /**
   * Bounds on what the runner can make this side hold: the longest line it may send (UTF-8 bytes), and
   * what it may leave unread or unacknowledged. Past either the link ends: the runner is dropped.
   */
  bounds?: LinkBounds;
}

export interface LinkBounds {
  maxLineBytes: number;
  maxUnreadBytes: number;
}

/** The runner answered the hello with a refusal (wrong token, another connection live, ...). */
export class LinkRefused extends Error {
  constructor(readonly reason: string) {
    super(`the runner refused the connection: ${reason}`);
  }
}

const DEFAULT_HANDSHAKE_TIMEOUT_MS = 10_000;
const FIRST_RETRY_MS = 50;
const MAX_RETRY_MS = 2000;

/** Connects and authenticates; the channel stays usable across dropped connections (see above). */
export async function openLinkClient(options: LinkClientOptions): Promise<LinkEndpoint> {
  const endpoint = new LinkEndpoint(undefined, options.bounds?.maxUnreadBytes);
  const link = randomUUID();
  if (options.takeoverAfter !== undefined) {
    endpoint.resumeAt(options.takeoverAfter, 0);
    endpoint.holdAcks();
  }
  await handshake(endpoint, link, options, options.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS, options.takeoverAfter !== undefined);
  endpoint.onDetached((reason) => {
    // A runner that broke a bound is not given another connection to break it on.
    if (breachedBound(reason)) {
      endpoint.end(reason);
      return;
    }
    options.onEvent?.({ kind: 'lost', reason });
    void restore(endpoint, link, options);
  });
  return endpoint;
}

async function restore(endpoint: LinkEndpoint, link: string, options: LinkClientOptions): Promise<void> {
  const deadline = Date.now() + options.reconnectSeconds * 1000;
  let delay = FIRST_RETRY_MS;
  let lastError = 'no attempt';
  while (!endpoint.isEnded) {
    const remaining = deadline - Date.now();
    if (remaining <= 0) {
      endpoint.end(`the connection to the runner was lost and not restored within ${options.reconnectSeconds} s (${lastError})`);
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(delay, remaining)));
    delay = Math.min(delay * 2, MAX_RETRY_MS);
    if (endpoint.isEnded) return;
    try {
      await handshake(
        endpoint,
        link,
        options,
        Math.max(1, Math.min(options.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS, deadline - Date.now())),
      );
      options.onEvent?.({ kind: 'restored' });
      return;
    } catch (error) {
      if (error instanceof LinkRefused) {
        endpoint.end(error.message);
        return;
      }
      lastError = (error as Error).message;
    }
  }
}

/**
 * One connection attempt: hello with what this side has received (and settled), then welcome (attach)
 * or refusal. A takeover's welcome says how many lines of the previous client the runner has: this
 * side's numbering carries on from there.
 */
function handshake(endpoint: LinkEndpoint, link: string, options: LinkClientOptions, timeoutMs: number, takeover = false): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    // The runner's certificate is its own, trusted by no CA: its welcome proof authenticates it instead.
    const socket = tls.connect({
      host: options.host,
      port: options.port,
      ...options.clientCertificate(),
      rejectUnauthorized: false,
      minVersion: 'TLSv1.3',
    });
    const wire = socketChannel(socket, HANDSHAKE_MAX_LINE_BYTES, options.bounds?.maxUnreadBytes);
    let settled = false;
    const settle = (error?: Error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (error) {
        wire.close(error.message);
        reject(error);
      } else resolve();
    };
    const timer = setTimeout(() => settle(new Error(`no answer from the runner within ${timeoutMs} ms`)), timeoutMs);
    socket.once('secureConnect', () =>
      wire.send(
        encodeControl({
          type: 'hello',
          proof: linkProof(options.token, 'hello', sessionBinding(socket)),
          link,
          after: endpoint.lastReceived,
          settled: endpoint.settled,
          ...(takeover && { takeover: true }),
        }),
      ),
    );
    wire.onLine((line) => {
      if (settled) return;
      const frame = decodeFrame(line);
      if (frame.kind === 'control' && frame.control.type === 'refused') return settle(new LinkRefused(frame.control.error));
      if (frame.kind !== 'control' || frame.control.type !== 'welcome')
        return settle(new Error('the runner answered the hello with something else'));
      if (!proofMatches(options.token, 'welcome', sessionBinding(socket), frame.control.proof))
        return settle(new LinkRefused('the runner did not prove it holds the token: not the runner this side was given'));
      if (takeover) endpoint.resumeAt(endpoint.lastReceived, frame.control.after);
      if (!endpoint.canReplayFrom(frame.control.after)) {
        return settle(new LinkRefused(`the runner has line ${frame.control.after} of ours, which this side cannot continue from`));
      }
      if (endpoint.isEnded) return settle(new Error('the link was closed'));
      settled = true;
      clearTimeout(timer);
      wire.setMaxLineBytes(options.bounds?.maxLineBytes ?? LINK_MAX_LINE_BYTES);
      endpoint.attach(wire, frame.control.after);
      resolve();
    });
    wire.onClosed((reason) => settle(new Error(`could not reach the runner at ${options.host}:${options.port}: ${reason}`)));
  });
}
