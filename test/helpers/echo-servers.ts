/**
 * Upstreams that answer every request with `echo <path>` and record what they received: one over
 * HTTP, one over HTTPS under a CA of their own (its certificate for whoever must trust them, e.g. the
 * egress proxy's ACIS_EGRESS_EXTRA_CA). What a run sends out through the egress proxy is checked here.
 */
import { createServer as createHttpServer, type IncomingHttpHeaders, type RequestListener, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createEphemeralCa } from '../../egress-proxy/deployment-ca.js';

export interface EchoServers {
  httpPort: number;
  httpsPort: number;
  /** PEM of the CA the HTTPS server's certificate (for `localhost`) is issued by. */
  caCertificatePem: string;
  /** The requests received, oldest first. */
  received: Array<{ path: string; headers: IncomingHttpHeaders; body: string }>;
  close(): void;
}

export async function startEchoServers(caName: string): Promise<EchoServers> {
  const received: EchoServers['received'] = [];
  const echo: RequestListener = (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({ path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(`echo ${req.url}\n`);
    });
  };
  const ca = await createEphemeralCa(caName);
  const leaf = await ca.issueLeaf('localhost');
  const servers: Server[] = [createHttpServer(echo), createHttpsServer({ cert: leaf.certPem, key: leaf.keyPem }, echo)];
  const [httpPort, httpsPort] = await Promise.all(servers.map(listenOnLoopback));
  return {
    httpPort: httpPort!,
    httpsPort: httpsPort!,
    caCertificatePem: ca.certPem,
    received,
    close: () => {
      for (const server of servers) server.close();
    },
  };
}

function listenOnLoopback(server: Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
}
