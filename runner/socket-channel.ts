/**
 * A channel over one TCP connection. Closing flushes what was sent, then ends the connection; the
 * peer's end, a reset or an over-long line closes it too, and so does a peer that leaves more than
 * `maxUnreadBytes` of what was sent to it unread (the kernel's buffers full, Node's write queue would
 * grow without bound). Nagle's algorithm is off: the protocol sends small lines one at a time, and
 * delayed acknowledgements would add tens of milliseconds to each.
 */
import type net from 'node:net';
import { type Channel, LEFT_UNREAD, LINE_TOO_LONG } from './channel.js';
import { LineSplitter } from './lines.js';

export interface SocketChannel extends Channel {
  /** The longest line accepted (UTF-8 bytes); raised once the peer authenticated. */
  setMaxLineBytes(bytes: number): void;
}

/** What is written to a peer that does not read it waits in this process's memory up to this, by default. */
export const DEFAULT_MAX_UNREAD_BYTES = 256 * 1024 * 1024;

export function socketChannel(socket: net.Socket, maxLineBytes: number, maxUnreadBytes = DEFAULT_MAX_UNREAD_BYTES): SocketChannel {
  const lineListeners: Array<(line: string) => void> = [];
  const closedListeners: Array<(reason: string) => void> = [];
  let closed = false;
  const markClosed = (reason: string) => {
    if (closed) return;
    closed = true;
    for (const listener of closedListeners) listener(reason);
  };
  socket.setNoDelay(true);
  const splitter = new LineSplitter(
    maxLineBytes,
    (line) => {
      if (closed) return;
      // Listeners added while a line is delivered see only the lines after it.
      for (let i = 0, n = lineListeners.length; i < n; i++) lineListeners[i]!(line);
    },
    () => {
      markClosed(`${LINE_TOO_LONG} (${splitter.maxLineBytes} bytes)`);
      socket.destroy();
    },
  );
  socket.on('data', (chunk: Buffer) => {
    if (!closed) splitter.push(chunk);
  });
  socket.on('error', (error) => markClosed(`connection failed: ${error.message}`));
  socket.once('close', () => markClosed('connection closed'));
  return {
    send(line) {
      if (closed || !socket.writable) return;
      socket.write(`${line}\n`);
      if (socket.writableLength > maxUnreadBytes) {
        markClosed(`${LEFT_UNREAD} (over ${maxUnreadBytes})`);
        socket.destroy();
      }
    },
    onLine(listener) {
      lineListeners.push(listener);
    },
    onClosed(listener) {
      closedListeners.push(listener);
    },
    close(reason = 'closed') {
      markClosed(reason);
      socket.end(() => socket.destroy());
    },
    setMaxLineBytes(bytes) {
      splitter.maxLineBytes = bytes;
    },
  };
}
