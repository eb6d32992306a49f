/**
 * Byte pipes across the sandbox's network boundary. A sandbox has its own network namespace with nothing but
 * loopback, so it reaches the outside only through Unix sockets bind-mounted into it:
 * - on the host, `serveUnixToTcp` listens on such a socket and pipes each connection to a TCP endpoint
 *   (the model endpoint, the egress proxy);
 * - inside the sandbox, `serveTcpToUnix` listens on the sandbox's loopback and pipes each connection to a
 *   bound socket, for clients that only speak TCP (HTTP_PROXY users such as curl or git in the Bash tool).
 * Path-based Unix sockets are file system objects, so a bind mount carries them into another network namespace.
 */
import { rm } from 'node:fs/promises';
import net from 'node:net';

export interface Bridge {
  /** The socket path (host side) or the loopback port (sandbox side) the bridge listens on. */
  address: string | number;
  close(): Promise<void>;
}

export async function serveUnixToTcp(socketPath: string, target: { host: string; port: number }): Promise<Bridge> {
  await rm(socketPath, { force: true });
  const open = new Set<net.Socket>();
  const server = net.createServer((client) => pipeBoth(open, client, net.connect(target.port, target.host)));
  await listen(server, () => server.listen(socketPath));
  return { address: socketPath, close: () => close(server, open) };
}

/** Port 0 picks a free loopback port (the sandbox has its own loopback, so any port is free in practice). */
export async function serveTcpToUnix(port: number, socketPath: string): Promise<Bridge> {
  const open = new Set<net.Socket>();
  const server = net.createServer((client) => pipeBoth(open, client, net.connect(socketPath)));
  await listen(server, () => server.listen(port, '127.0.0.1'));
  return { address: (server.address() as net.AddressInfo).port, close: () => close(server, open) };
}

function pipeBoth(open: Set<net.Socket>, a: net.Socket, b: net.Socket) {
  open.add(a);
  a.on('close', () => open.delete(a));
  a.pipe(b).pipe(a);
  // Either side failing (refused, reset) ends both; the peer sees a closed connection, as with a real network.
  a.on('error', () => b.destroy());
  b.on('error', () => a.destroy());
  a.on('close', () => b.destroy());
  b.on('close', () => a.destroy());
}

function listen(server: net.Server, start: () => void): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.once('listening', () => {
      server.off('error', reject);
      resolve();
    });
    start();
  });
}

/** Stops listening and cuts connections still open (the agent keeps model connections alive between turns). */
function close(server: net.Server, open: Set<net.Socket>): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  for (const socket of open) socket.destroy();
  return closed;
}
