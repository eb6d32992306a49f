/**
 * The resumable link: the runner's control protocol over TCP, surviving dropped connections. Each
 * side numbers the lines it sends (1, 2, ...) and keeps them until the other side acknowledges them;
 * a connection opens with a handshake in which each side says the last number it received, and each
 * replays what the other missed. The protocol above sees every line exactly once, in order, however
 * often the connection drops: a replayed line the receiver already has is dropped by its number.
 *
 * Wire format, one line each:
 * - data: `<seq> <payload>` (the payload is a protocol line, unchanged);
 * - control: a JSON object: `hello` (client, first line: its proof of the token, link id, last seq
 *   received), `welcome` (runner: last seq received from this link, its own proof), `refused` (runner,
 *   then it closes),
 *   `ack` (either side: every line up to seq arrived), `bye` (either side: done for good).
 *
 * The link runs over TLS; the proofs are bound to the TLS session (link-tls.ts), so the token itself
 * never crosses the wire and a proof seen on one connection opens no other.
 *
 * A link id names one API-side client across its reconnections; a hello with another link id is a
 * new client, for which both sides start numbering afresh, unless it says `takeover`: then it is a new
 * holder of the same link (the API replica that held it died), and the runner's numbering and kept
 * lines carry on.
 *
 * Acknowledging is not receiving. The API side may hold its acknowledgements back to what it has
 * stored (`holdAcks`, `settle`): the runner then keeps every line the API side could still lose, so a
 * replica that takes the link over after a crash gets them replayed (a hello's `settled` says how far
 * the sender may drop, its `after` what to replay from).
 */
import { type Channel, LEFT_UNREAD } from './channel.js';

export type LinkControl =
  | { type: 'hello'; proof: string; link: string; after: number; settled?: number | undefined; takeover?: boolean | undefined }
  | { type: 'welcome'; after: number; proof: string }
  | { type: 'refused'; error: string }
  | { type: 'ack'; seq: number }
  | { type: 'bye' };

export type Frame = { kind: 'data'; seq: number; payload: string } | { kind: 'control'; control: LinkControl } | { kind: 'invalid' };

/** Lines before authentication are a hello or an answer to one: small. */
export const HANDSHAKE_MAX_LINE_BYTES = 4096;
/** After authentication: a run's skills or a workspace archive chunk fit in one line. */
export const LINK_MAX_LINE_BYTES = 64 * 1024 * 1024;
/** What one side keeps for a peer that does not acknowledge it, unless told otherwise. */
export const LINK_MAX_UNACKNOWLEDGED_BYTES = 256 * 1024 * 1024;
/** The receiver acknowledges after this many lines, or this long after the first unacknowledged one. */
const ACK_EVERY_LINES = 64;
const ACK_AFTER_MS = 100;
/**
 * While connected, each side sends an `ack` at least this often, and drops a connection it has heard
 * nothing on for SILENCE_MS: a peer that vanished without closing (a node gone, a half-open
 * connection) is noticed in seconds, not after the kernel's keepalive minutes.
 */
const HEARTBEAT_MS = 5000;
const SILENCE_MS = 15_000;
/** The reason a link ends with when the other side said goodbye. */
export const PEER_CLOSED = 'the other side closed the link';

export function encodeData(seq: number, payload: string): string {
  return `${seq} ${payload}`;
}

export function encodeControl(control: LinkControl): string {
  return JSON.stringify(control);
}

export function decodeFrame(line: string): Frame {
  if (line.startsWith('{')) {
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      return { kind: 'invalid' };
    }
    const control = validControl(value);
    return control ? { kind: 'control', control } : { kind: 'invalid' };
  }
  const space = line.indexOf(' ');
  const seq = space > 0 && space <= 16 ? Number(line.slice(0, space)) : Number.NaN;
  if (!Number.isSafeInteger(seq) || seq < 1 || !/^\d+$/.test(line.slice(0, space))) return { kind: 'invalid' };
  return { kind: 'data', seq, payload: line.slice(space + 1) };
}

function validControl(value: unknown): LinkControl | undefined {
  if (!value || typeof value !== 'object') return undefined;
  const v = value as Record<string, unknown>;
  const count = (n: unknown) => typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
  switch (v.type) {
    case 'hello': {
      const valid =
        typeof v.proof === 'string' &&
        typeof v.link === 'string' &&
        v.link.length > 0 &&
        count(v.after) &&
        (v.settled === undefined || (count(v.settled) && (v.settled as number) <= (v.after as number))) &&
        (v.takeover === undefined || typeof v.takeover === 'boolean');
      if (!valid) return undefined;
      return {
        type: 'hello',
        proof: v.proof as string,
        link: v.link as string,
        after: v.after as number,
        ...(v.settled !== undefined && { settled: v.settled as number }),
        ...(v.takeover === true && { takeover: true }),
      };
    }
    case 'welcome':
      return count(v.after) && typeof v.proof === 'string' ? { type: 'welcome', after: v.after as number, proof: v.proof } : undefined;
    case 'refused':
      return typeof v.error === 'string' ? { type: 'refused', error: v.error } : undefined;
    case 'ack':
      return count(v.seq) ? { type: 'ack', seq: v.seq as number } : undefined;
    case 'bye':
      return { type: 'bye' };
    default:
      return undefined;
  }
}

/** The lines a side sent that the other has not acknowledged yet, by number. */
export class Outbox {
  private lines: string[] = [];
  /** The number of lines[0]. */
  private firstSeq = 1;
  /** The characters the lines kept hold (what the memory they take grows with). */
  private length = 0;

  /** The number the next line gets. */
  get nextSeq(): number {
    return this.firstSeq + this.lines.length;
  }

  get unacknowledged(): number {
    return this.lines.length;
  }

  get unacknowledgedLength(): number {
    return this.length;
  }

  push(payload: string): number {
    this.lines.push(payload);
    this.length += payload.length;
    return this.nextSeq - 1;
  }

  /** The peer has every line up to `seq`: they need not be kept. */
  acknowledge(seq: number): void {
    const drop = Math.min(seq - this.firstSeq + 1, this.lines.length);
    if (drop <= 0) return;
    for (let i = 0; i < drop; i++) this.length -= this.lines[i]!.length;
    this.lines.splice(0, drop);
    this.firstSeq += drop;
  }

  /**
   * The lines after `after`, to replay to a peer that received up to it; undefined when they cannot
   * be: some were dropped as acknowledged (the peer lost state) or the peer claims lines never sent.
   */
  since(after: number): Array<[seq: number, payload: string]> | undefined {
    if (after < this.firstSeq - 1 || after > this.nextSeq - 1) return undefined;
    return this.lines.slice(after - this.firstSeq + 1).map((payload, i) => [after + 1 + i, payload]);
  }

  clear(): void {
    this.startAfter(0);
  }

  /** Nothing kept, and the next line is numbered `seq + 1` (a link taken over: the peer has up to `seq`). */
  startAfter(seq: number): void {
    this.lines = [];
    this.firstSeq = seq + 1;
    this.length = 0;
  }
}

/**
 * One side of a link: a Channel for the protocol above, carried by whichever connection is attached
 * (none while it is being restored). Sending while detached keeps the line for the next attachment.
 */
export class LinkEndpoint implements Channel {
  private readonly outbox = new Outbox();
  private received = 0;
  /** While acknowledgements are held (`holdAcks`): how far the lines received are durable here. */
  private settledSeq = 0;
  private holding = false;
  /** The number of the line being delivered to the listeners (or the last one delivered). */
  private deliveringSeq = 0;
  private unacknowledged = 0;
  private ackTimer: NodeJS.Timeout | undefined;
  private wire: Channel | undefined;
  private ended = false;
  private readonly lineListeners: Array<(line: string) => void> = [];
  /** Lines that arrived before anyone listened (the first lines can come with the handshake). */
  private early: Array<[seq: number, payload: string]> | undefined = [];
  private readonly closedListeners: Array<(reason: string) => void> = [];
  private readonly detachedListeners: Array<(reason: string) => void> = [];
  private drainWaiters: Array<() => void> = [];

  constructor(
    private readonly timing: { heartbeatMs: number; silenceMs: number } = { heartbeatMs: HEARTBEAT_MS, silenceMs: SILENCE_MS },
    /** A peer that leaves more than this unacknowledged (characters kept for replay) ends the link: it is broken or hostile. */
    private readonly maxUnacknowledged = LINK_MAX_UNACKNOWLEDGED_BYTES,
  ) {}

  /** The last line number received (what a handshake tells the other side). */
  get lastReceived(): number {
    return this.received;
  }

  /** How far the lines received may be dropped by the sender: all of them, unless acknowledgements are held. */
  get settled(): number {
    return this.holding ? this.settledSeq : this.received;
  }

  /** The number of the line being delivered, inside a line listener (the last one delivered, outside). */
  get delivering(): number {
    return this.deliveringSeq;
  }

  /**
   * From now on acknowledge only what `settle` says is durable: the sender keeps the rest, for this
   * side or whoever takes the link over. What was received until now counts as settled.
   */
  holdAcks(): void {
    if (!this.holding) this.settledSeq = this.received;
    this.holding = true;
  }

  /** Lines up to `seq` are durable here: the sender may drop them. */
  settle(seq: number): void {
    const to = Math.min(seq, this.received);
    if (!this.holding || to <= this.settledSeq) return;
    this.settledSeq = to;
    this.scheduleAck();
  }

  /** Back to acknowledging every line as it arrives. */
  releaseAcks(): void {
    if (!this.holding) return;
    this.holding = false;
    this.scheduleAck();
  }

  /**
   * This side takes over a link another client held: the peer has `peerReceived` of that client's
   * lines, and this side has (durably) the peer's lines up to `received`.
   */
  resumeAt(received: number, peerReceived: number): void {
    this.received = received;
    this.settledSeq = received;
    this.deliveringSeq = received;
    this.outbox.startAfter(peerReceived);
  }

  get attached(): boolean {
    return this.wire !== undefined;
  }

  get isEnded(): boolean {
    return this.ended;
  }

  /** Whether a peer that received up to `after` can be brought up to date. */
  canReplayFrom(after: number): boolean {
    return this.outbox.since(after) !== undefined;
  }

  /** A new peer: numbering starts afresh both ways and nothing kept for the previous one is sent. */
  reset(): void {
    this.outbox.clear();
    this.received = 0;
    this.settledSeq = 0;
    this.deliveringSeq = 0;
    this.unacknowledged = 0;
  }

  /**
   * Carries the link over `wire` (after a handshake), replaying what the peer missed; a previous
   * connection is dropped. The peer may have received more than it settled: only that is dropped here.
   */
  attach(wire: Channel, peerReceived: number, peerSettled = peerReceived): void {
    const replay = this.outbox.since(peerReceived);
    if (!replay || this.ended) {
      wire.close('cannot resume the link');
      return;
    }
    const previous = this.wire;
    this.wire = wire;
    previous?.close('replaced by a newer connection');
    this.outbox.acknowledge(Math.min(peerSettled, peerReceived));
    let lastHeard = Date.now();
    const heartbeat = setInterval(() => {
      if (Date.now() - lastHeard > this.timing.silenceMs) wire.close(`nothing heard for ${this.timing.silenceMs} ms`);
      else wire.send(encodeControl({ type: 'ack', seq: this.settled }));
    }, this.timing.heartbeatMs);
    heartbeat.unref();
    wire.onLine((line) => {
      lastHeard = Date.now();
      if (this.wire === wire) this.receive(wire, line);
    });
    wire.onClosed((reason) => {
      clearInterval(heartbeat);
      if (this.wire !== wire) return;
      this.wire = undefined;
      clearTimeout(this.ackTimer);
      this.ackTimer = undefined;
      if (!this.ended) for (const listener of this.detachedListeners) listener(reason);
    });
    for (const [seq, payload] of replay) wire.send(encodeData(seq, payload));
  }

  send(line: string): void {
    if (this.ended) return;
    const seq = this.outbox.push(line);
    if (this.outbox.unacknowledgedLength > this.maxUnacknowledged) {
      this.end(`${LEFT_UNREAD} (over ${this.maxUnacknowledged} unacknowledged)`);
      return;
    }
    this.wire?.send(encodeData(seq, line));
  }

  onLine(listener: (line: string) => void): void {
    this.lineListeners.push(listener);
    const early = this.early;
    this.early = undefined;
    for (const [seq, line] of early ?? []) {
      this.deliveringSeq = seq;
      listener(line);
    }
  }

  onClosed(listener: (reason: string) => void): void {
    this.closedListeners.push(listener);
  }

  /** The connection dropped (the link itself lives on until `close` or `end`). */
  onDetached(listener: (reason: string) => void): void {
    this.detachedListeners.push(listener);
  }

  /** Resolves once the peer has acknowledged every line sent so far, or the link ended. */
  drained(): Promise<void> {
    if (this.ended || this.outbox.unacknowledged === 0) return Promise.resolve();
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  /** Done for good: tells the peer (when connected) and closes. */
  close(reason = 'closed'): void {
    if (this.ended) return;
    this.wire?.send(encodeControl({ type: 'bye' }));
    this.end(reason);
  }

  /** Ends the link without a goodbye (the peer is gone, or said goodbye itself). */
  end(reason: string): void {
    if (this.ended) return;
    this.ended = true;
    clearTimeout(this.ackTimer);
    const wire = this.wire;
    this.wire = undefined;
    wire?.close(reason);
    this.wakeDrainWaiters();
    for (const listener of this.closedListeners) listener(reason);
  }

  private wakeDrainWaiters(): void {
    const waiters = this.drainWaiters;
    this.drainWaiters = [];
    for (const wake of waiters) wake();
  }

  private receive(wire: Channel, line: string): void {
    const frame = decodeFrame(line);
    if (frame.kind === 'data') {
      if (frame.seq <= this.received) return; // replayed, already delivered
      if (frame.seq !== this.received + 1) {
        wire.close(`line ${frame.seq} arrived after line ${this.received}`);
        return;
      }
      this.received = frame.seq;
      if (!this.holding) this.scheduleAck();
      if (this.early) this.early.push([frame.seq, frame.payload]);
      else {
        this.deliveringSeq = frame.seq;
        for (let i = 0, n = this.lineListeners.length; i < n; i++) this.lineListeners[i]!(frame.payload);
      }
      return;
    }
    if (frame.kind === 'control' && frame.control.type === 'ack') {
      this.outbox.acknowledge(frame.control.seq);
      if (this.outbox.unacknowledged === 0) this.wakeDrainWaiters();
      return;
    }
    if (frame.kind === 'control' && frame.control.type === 'bye') {
      this.end(PEER_CLOSED);
      return;
    }
    wire.close('unexpected line on the link');
  }

  private scheduleAck(): void {
    this.unacknowledged += 1;
    if (this.unacknowledged >= ACK_EVERY_LINES) {
      this.sendAck();
      return;
    }
    if (this.ackTimer) return;
    this.ackTimer = setTimeout(() => this.sendAck(), ACK_AFTER_MS);
    this.ackTimer.unref();
  }

  private sendAck(): void {
    clearTimeout(this.ackTimer);
    this.ackTimer = undefined;
    this.unacknowledged = 0;
    this.wire?.send(encodeControl({ type: 'ack', seq: this.settled }));
  }
}
