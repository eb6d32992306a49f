/**
 * A transport-neutral line channel: what the runner's control protocol (protocol.ts) runs over, on
 * both sides. The protocol handlers know no stdio or socket, only this. Implementations: a process's
 * stdio (stdio-channel.ts), one TCP socket (socket-channel.ts), and a resumable link over TCP that
 * outlives dropped connections (link-server.ts on the runner, link-client.ts on the API server).
 */
export interface Channel {
  /** Sends one line (it must not contain a newline); after the channel closed, nothing happens. */
  send(line: string): void;
  /** Every line received, in order, without its newline. */
  onLine(listener: (line: string) => void): void;
  /** Called once when the channel is closed for good, from either side, with why. */
  onClosed(listener: (reason: string) => void): void;
  /** Closes the channel from this side. */
  close(reason?: string): void;
}

/**
/**
 * A channel whose sender keeps each line until this side says it is durable (the resumable link on
 * the API side): a replica that takes the link over after a crash is replayed what was not.
 */
export interface SettlingChannel extends Channel {
  /** The number of the line being delivered, inside a line listener. */
  readonly delivering: number;
  /** From now on the sender keeps the lines received until `settle` covers them. */
  holdAcks(): void;
  /** Lines up to `seq` are durable here. */
  settle(seq: number): void;
  /** Every line received is settled as it arrives again. */
  releaseAcks(): void;
}

/**
 * The reasons a channel closes with when its peer broke a bound (each followed by the figure): the
 * peer is broken or hostile, and whoever hosts it stops it rather than keep serving it.
 */
export const LINE_TOO_LONG = 'a line exceeded the length limit';
export const LEFT_UNREAD = 'the peer left too many bytes unread';

export function breachedBound(reason: string): boolean {
  return reason.startsWith(LINE_TOO_LONG) || reason.startsWith(LEFT_UNREAD);
}
