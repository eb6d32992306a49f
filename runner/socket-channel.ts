/**
 * A channel over one TCP connection. Closing flushes what was sent, then ends the connection; the
 * peer's end, a reset or an over-long line closes it too. Nagle's algorithm is off: the protocol
 * sends small lines one at a time, and delayed acknowledgements would add tens of milliseconds to each.
 */
import type net from 'node:net';
import type { Channel } from './channel.js';
import { LineSplitter } from './lines.js';

export interface SocketChannel extends Channel {
  /** The longest line accepted; raised once the peer authenticated. */
  setMaxLineLength(length: number): void;
}

export function socketChannel(socket: net.Socket, maxLineLength: number): SocketChannel {
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
    maxLineLength,
    (line) => {
      if (closed) return;
      // Listeners added while a line is delivered see only the lines after it.
      for (let i = 0, n = lineListeners.length; i < n; i++) lineListeners[i]!(line);
    },
    () => {
      markClosed('a line exceeded the length limit');
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
      if (!closed && socket.writable) socket.write(`${line}\n`);
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
    setMaxLineLength(length) {
      splitter.maxLineLength = length;
    },
  };
}
