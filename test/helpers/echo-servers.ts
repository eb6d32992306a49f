/**
 * Upstreams standing for the outside world, which record what they received: one over HTTP, one over
 * HTTPS under a CA of their own (written to `caFile` for whoever must trust them, e.g. the egress
 * proxy's ACIS_EGRESS_EXTRA_CA), and as many more plain HTTP ones as asked (a host off the allow
 * list, an attacker's). Each answers `echo <path>` unless the test gives its own responder. What a
 * run sends out through the egress proxy is checked here.
 */
import { randomBytes } from 'node:crypto';
import { rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingHttpHeaders, type RequestListener, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createEphemeralCa } from '../../egress-proxy/deployment-ca.js';

export interface EchoRequest {
  /** The port of the server that received it. */
  port: number;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/** Answers one request, now or later (a test holding a request open answers when it wants). */
export type EchoResponder = (request: EchoRequest, answer: (contentType: string, body: string) => void) => void;

export interface EchoServers {
  httpPort: number;
  httpsPort: number;
  /** The extra plain HTTP servers' ports (`options.extraHttpServers`). */
  extraHttpPorts: number[];
  /** PEM of the CA the HTTPS server's certificate (for `localhost`) is issued by. */
  caCertificatePem: string;
  /** The same PEM in a file, removed by `close`. */
  caFile: string;
  /** The requests received, oldest first. */
  received: EchoRequest[];
  close(): void;
}

const echoPath: EchoResponder = (request, answer) => answer('text/plain', `echo ${request.path}\n`);

export async function startEchoServers(
  caName: string,
  options: { respond?: EchoResponder; extraHttpServers?: number } = {},
): Promise<EchoServers> {
  const received: EchoRequest[] = [];
  const respond = options.respond ?? echoPath;
  const listener: RequestListener = (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const request = {
        port: req.socket.localPort!,
        path: req.url ?? '',
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
      };
      received.push(request);
      respond(request, (contentType, body) => {
        res.writeHead(200, { 'content-type': contentType });
        res.end(body);
      });
    });
  };
  const ca = await createEphemeralCa(caName);
  const leaf = await ca.issueLeaf('localhost');
  const extra = Array.from({ length: options.extraHttpServers ?? 0 }, () => createHttpServer(listener));
  const servers: Server[] = [createHttpServer(listener), createHttpsServer({ cert: leaf.certPem, key: leaf.keyPem }, listener), ...extra];
  const [httpPort, httpsPort, ...extraHttpPorts] = await Promise.all(servers.map(listenOnLoopback));
  const caFile = path.join(tmpdir(), `acis-echo-ca-${randomBytes(4).toString('hex')}.pem`);
  writeFileSync(caFile, ca.certPem);
  return {
    httpPort: httpPort!,
    httpsPort: httpsPort!,
    extraHttpPorts,
    caCertificatePem: ca.certPem,
    caFile,
    received,
    close: () => {
      for (const server of servers) server.close();
      rmSync(caFile, { force: true });
    },
  };
}

function listenOnLoopback(server: Server): Promise<number> {
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve((server.address() as { port: number }).port)));
}
