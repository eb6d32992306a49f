/**
 * A TCP proxy standing for the network between the API server and a runner: connections pass through
 * to `target` until the test cuts them all, refuses new ones, or points new ones elsewhere. It also keeps
 * every byte it carried, both ways (`carried()`), as a packet capture on that network would.
 */
import net from 'node:net';

export async function cuttableNetwork(target = 0) {
  const open = new Set<net.Socket>();
  const state = { target, refuse: false };
  const tapped: Buffer[] = [];
  const server = net.createServer((client) => {
    if (state.refuse) return client.destroy();
    const upstream = net.connect(state.target, '127.0.0.1');
    for (const socket of [client, upstream]) {
      open.add(socket);
      socket.on('close', () => open.delete(socket));
      socket.on('error', () => undefined);
    }
    for (const socket of [client, upstream]) socket.on('data', (chunk: Buffer) => tapped.push(chunk));
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    set target(port: number) {
      state.target = port;
    },
    set refuse(value: boolean) {
      state.refuse = value;
    },
    /** Everything that crossed it so far, both directions. */
    carried: () => Buffer.concat(tapped),
    /** Destroys every open connection, as a network partition would. */
    cut() {
      for (const socket of open) socket.destroy();
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
