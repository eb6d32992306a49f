/** A channel over a pair of pipes: the runner's own stdin/stdout, or a child runner's from its parent. */
import type { Readable, Writable } from 'node:stream';
import type { Channel } from './channel.js';
import { LineSplitter } from './lines.js';

/** Pipes carry a whole workspace archive chunk or a run's skills in one line: generous, yet bounded. */
const MAX_LINE_LENGTH = 64 * 1024 * 1024;

export function stdioChannel(input: Readable, output: Writable): Channel {
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
    MAX_LINE_LENGTH,
    (line) => {
      // Listeners added while a line is delivered see only the lines after it.
      for (let i = 0, n = lineListeners.length; i < n; i++) lineListeners[i]!(line);
    },
    () => close('a line exceeded the length limit'),
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
      if (!closed) output.write(`${line}\n`);
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
