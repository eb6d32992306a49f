/**
 * The HTTPS server of an internal listener of the API server (the egress resolve listener, the sync
 * report listener): TLS 1.3 only, with the API server's certificate of the deployment CA, swapped in
 * place when it is renewed. A client that never finishes its handshake (a plaintext one, say) is
 * dropped: nothing it sent, a token included, is ever read as a request.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { ApiIdentity } from './api-identity.js';

/** `requestCert`: ask clients for a certificate of the deployment CA (checked by the caller on `secureConnection`). */
export function createInternalHttpsServer(
  identity: ApiIdentity,
  options: { requestCert: boolean },
  handler: (req: IncomingMessage, res: ServerResponse) => void,
): Server {
  const context = () => ({ ...identity.current(), ...(options.requestCert && { ca: identity.caPem }) });
  const server = createServer(
    { ...context(), requestCert: options.requestCert, rejectUnauthorized: false, minVersion: 'TLSv1.3' },
    handler,
  );
  identity.onRenewed(() => server.setSecureContext(context()));
  // With this listener Node would leave such a socket open.
  server.on('tlsClientError', (_err, socket) => socket.destroy());
  return server;
}
