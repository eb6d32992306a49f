import type net from 'node:net';

/** Starts `server` listening; resolves once it does, rejects if it cannot (the port taken, say). */
export function listenOn(server: net.Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}
