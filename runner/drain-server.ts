/**
 * Where a runner pod's `preStop` hook waits (`GET /drain` on ACIS_RUNNER_DRAIN_PORT) before the
 * kubelet sends SIGTERM. It answers once no API server is connected, or the one connected has said
 * goodbye. An API server ending a warm hold (the idle TTL, the tenant's warm cap) first keeps the
 * conversation's workspace from the runner, then says goodbye; the controller deletes the pod at the
 * same moment, and this wait is what keeps the deletion from cutting that save. The pod's grace
 * period bounds it.
 *
 * Fail-safe direction: with no API connection there is nothing to wait for, so it answers at once;
 * it reveals nothing and changes nothing, so it takes no credential (the kubelet has none to give).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { LinkEndpoint } from './link.js';
import { listenOn } from './listen.js';

export interface DrainServer {
  /** The port it listens on (the one asked for, or the one chosen for port 0). */
  port: number;
  /** Answers every waiting hook (the link has ended) and resolves once the answers are written. */
  settle(): Promise<void>;
  close(): Promise<void>;
}

export async function serveDrain(options: { host: string; port: number; link: LinkEndpoint }): Promise<DrainServer> {
  const { link } = options;
  const waiting = new Set<http.ServerResponse>();
  /** Answers being written: an exit waits for them, or the hook would see its connection cut (FailedPreStopHook). */
  const writing = new Set<Promise<void>>();
  const drained = () => link.isEnded || !link.attached;
  const answer = (response: http.ServerResponse) => {
    waiting.delete(response);
    const written = new Promise<void>((resolve) => {
      response.once('finish', resolve);
      response.once('close', resolve);
      response.writeHead(200, { 'content-type': 'text/plain' }).end('drained\n');
    });
    writing.add(written);
    void written.then(() => writing.delete(written));
  };
  const answerAll = () => {
    for (const response of [...waiting]) answer(response);
  };
  link.onDetached(answerAll);
  link.onClosed(answerAll);
  const server = http.createServer((request, response) => {
    if (request.method !== 'GET' || request.url !== '/drain') return void response.writeHead(404).end();
    if (drained()) return answer(response);
    waiting.add(response);
    // The kubelet gave up (the grace period ended): nothing to answer.
    response.once('close', () => waiting.delete(response));
  });
  await listenOn(server, options.port, options.host);
  return {
    port: (server.address() as AddressInfo).port,
    settle: async () => {
      answerAll();
      await Promise.all([...writing]);
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
