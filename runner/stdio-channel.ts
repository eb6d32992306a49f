/** A channel over a pair of pipes: the runner's own stdin/stdout, or a child runner's from its parent. */
import type { Readable, Writable } from 'node:stream';
import { type Channel, LEFT_UNREAD, LINE_TOO_LONG } from './channel.js';
import { LineSplitter } from './lines.js';

/** Pipes carry a whole workspace archive chunk or a run's skills in one line: generous, yet bounded. */
const MAX_LINE_BYTES = 64 * 1024 * 1024;
const MAX_UNREAD_BYTES = 256 * 1024 * 1024;

export interface StdioChannelLimits {
  /** The longest line accepted from `input` (UTF-8 bytes). */
  maxLineBytes: number;
  /** What `output`'s reader may leave unread before the channel closes. */
  maxUnreadBytes: number;
}

export function stdioChannel(
  input: Readable,
  output: Writable,
  limits: StdioChannelLimits = { maxLineBytes: MAX_LINE_BYTES, maxUnreadBytes: MAX_UNREAD_BYTES },
): Channel {
  const lineListeners: Array<(line: string) => void> = [];
  const closedListeners: Array<(reason: string) => void> = [];
  let closed = false;
  const close = (reason: string) => {
    if (closed) return;
    closed = true;
    input.destroy();
    output.end();
    for (const listener of closedListeners) listener(reason);
  };
  const splitter = new LineSplitter(
    limits.maxLineBytes,
    (line) => {
      // Listeners added while a line is delivered see only the lines after it.
      for (let i = 0, n = lineListeners.length; i < n; i++) lineListeners[i]!(line);
    },
    () => close(`${LINE_TOO_LONG} (${limits.maxLineBytes} bytes)`),
  );
  input.on('data', (chunk: Buffer) => {
    if (!closed) splitter.push(chunk);
  });
  input.once('end', () => close('end of input'));
  input.once('close', () => close('input closed'));
  input.on('error', (error) => close(`input failed: ${error.message}`));
  // A reader that went away (EPIPE) ends the channel; nothing more can be said to it.
  output.on('error', (error) => close(`output failed: ${error.message}`));
  return {
    send(line) {
      if (closed) return;
      output.write(`${line}\n`);
      if (output.writableLength > limits.maxUnreadBytes) close(`${LEFT_UNREAD} (over ${limits.maxUnreadBytes})`);
    },
    onLine(listener) {
      lineListeners.push(listener);
    },
    onClosed(listener) {
      closedListeners.push(listener);
    },
    close(reason = 'closed') {
      close(reason);
    },
  };
}
