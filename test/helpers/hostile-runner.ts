/**
 * A runner that breaks the protocol on purpose, standing where a compromised runner pod stands: it
 * holds its pod's token, as a compromised runner would, and speaks just enough of the link (link.ts, over
 * TLS with a certificate of its own) to be let in (welcome with its proof, `runner_ready`), then does what its
 * scenario says, typically without reading a byte of what the API server sends it. Floods are
 * written with backpressure, so what this side holds stays small and what the process's memory
 * shows is the API side's; `onWrite` is called after every write, for the test to sample memory.
 */
import { once } from 'node:events';
import type net from 'node:net';
import tls from 'node:tls';
import { ephemeralCertificate, linkProof, sessionBinding } from '../../runner/link-tls.js';

/** The token the hostile runner's pod was given (the API side connects with it). */
export const HOSTILE_RUNNER_TOKEN = 'tok_hostile_runner_0123456789';

export interface HostileConnection {
  /** Sends raw bytes, waiting while the socket's buffer is full; false once the API side cut it off. */
  write(data: string): Promise<boolean>;
  /** Sends one protocol line as the link's data frame `seq`. */
  line(seq: number, payload: unknown): Promise<boolean>;
  /** Stops reading what the API side sends (the kernel's buffers fill, then the API side's). */
  stopReading(): void;
  /** Resolves with the next chunk the API side sends that contains `text`. */
  received(text: string): Promise<void>;
  readonly closed: boolean;
  /** Bytes written so far. */
  readonly sent: number;
}

export interface HostileRunner {
  port: number;
  /** Settles once the first connection's scenario has run to its end (its writes cut off, or done). */
  finished: Promise<void>;
  close(): Promise<void>;
}

export async function startHostileRunner(
  scenario: (connection: HostileConnection) => Promise<void>,
  onWrite: () => void = () => {},
): Promise<HostileRunner> {
  const sockets = new Set<net.Socket>();
  let finish: () => void = () => {};
  const finished = new Promise<void>((resolve) => (finish = resolve));
  const server = tls.createServer(await ephemeralCertificate('acis-runner'), (socket) => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    void serve(socket, scenario, onWrite).finally(finish);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    port: (server.address() as net.AddressInfo).port,
    finished,
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function serve(
  socket: tls.TLSSocket,
  scenario: (connection: HostileConnection) => Promise<void>,
  onWrite: () => void,
): Promise<void> {
  let closed = false;
  let sent = 0;
  let seen = '';
  const waiters: Array<{ text: string; wake: () => void }> = [];
  socket.once('close', () => {
    closed = true;
  });
  socket.on('data', (chunk: Buffer) => {
    // Only the tail is kept: enough to find a marker split across two chunks.
    seen = (seen + chunk.toString('utf8')).slice(-4096);
    for (const waiter of [...waiters]) {
      if (!seen.includes(waiter.text)) continue;
      waiters.splice(waiters.indexOf(waiter), 1);
      waiter.wake();
    }
  });
  const connection: HostileConnection = {
    async write(data) {
      if (closed) return false;
      sent += Buffer.byteLength(data);
      const flushed = socket.write(data);
      onWrite();
      if (!flushed) await Promise.race([once(socket, 'drain'), once(socket, 'close')]).catch(() => undefined);
      return !closed;
    },
    line(seq, payload) {
      return connection.write(`${seq} ${JSON.stringify(payload)}\n`);
    },
    stopReading() {
      socket.pause();
    },
    received(text) {
      if (seen.includes(text)) return Promise.resolve();
      return new Promise((wake) => waiters.push({ text, wake }));
    },
    get closed() {
      return closed;
    },
    get sent() {
      return sent;
    },
  };
  await connection.received('"type":"hello"');
  seen = '';
  const proof = linkProof(HOSTILE_RUNNER_TOKEN, 'welcome', sessionBinding(socket));
  await connection.write(`${JSON.stringify({ type: 'welcome', after: 0, proof })}\n`);
  await connection.line(1, { type: 'runner_ready' });
  await scenario(connection);
}
