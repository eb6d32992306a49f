import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A listener of the API server's own beside the public one (the resolve and sync report listeners). */
export interface InternalListener {
  port: number;
  /** Stops listening and ends open connections. */
  close(): Promise<void>;
}

/** Listens on `host:port` (0 for any free port); rejects if it cannot (the port taken, say). */
export async function listenInternally(server: Server, port: number, host: string): Promise<InternalListener> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
