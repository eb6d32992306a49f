/**
 * Leader election when the API server stops answering one candidate (a network that drops its
 * packets, not one that refuses them): its requests hang, and it must stop acting on its own, at the
 * renew deadline, before the other candidate may take the Lease, as client-go's leader election
 * does (RenewDeadline < LeaseDuration). The hang is a TCP relay in front of the Kubernetes API test
 * server that stops forwarding while keeping its connections open.
 */
import { connect, createServer, type Server, type Socket } from 'node:net';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CoordinationV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadKubeConfig } from '../../kube/cluster-access.js';
import { LeaderElection } from '../../kube/leader-election.js';
import { startKubeTestServer, type KubeTestServer } from '../../hack/k8s/server.js';

const LEASE_MS = 2_000;

/** A TCP relay to `port`; `freeze()` keeps every connection open and forwards nothing more, either way. */
async function startRelay(port: number): Promise<{ port: number; freeze(): void; close(): Promise<void> }> {
  let frozen = false;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(port, '127.0.0.1');
    for (const [from, to] of [
      [client, upstream],
      [upstream, client],
    ] as const) {
      sockets.add(from);
      from.on('data', (chunk) => {
        if (!frozen) to.write(chunk);
      });
      from.on('error', () => to.destroy());
      from.on('close', () => to.destroy());
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as { port: number }).port,
    freeze: () => {
      frozen = true;
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

let server: KubeTestServer;
let relay: Awaited<ReturnType<typeof startRelay>>;
let relayedConfig: string;

beforeAll(async () => {
  server = await startKubeTestServer({});
  const url = new URL(server.url);
  relay = await startRelay(Number(url.port));
  relayedConfig = path.join(tmpdir(), `acis-relayed-${process.pid}.kubeconfig`);
  await writeFile(relayedConfig, (await readFile(server.kubeconfigPath, 'utf8')).replace(`:${url.port}`, `:${relay.port}`));
});
afterAll(async () => {
  await relay?.close();
  await server?.close();
  await rm(relayedConfig, { force: true });
});

function candidate(kubeconfigPath: string, identity: string, log: string[]) {
  return new LeaderElection({
    api: loadKubeConfig(kubeconfigPath).makeApiClient(CoordinationV1Api),
    namespace: 'default',
    name: 'acis-controller',
    identity,
    leaseDurationMs: LEASE_MS,
    onStartedLeading: () => log.push(`${identity} leads`),
    onStoppedLeading: () => log.push(`${identity} stops`),
  });
}

describe('leader election', () => {
  it('a leader whose API server stops answering stops acting at its renew deadline, before another may take over', async () => {
    const log: string[] = [];
    const cut = candidate(relayedConfig, 'a', log);
    const other = candidate(server.kubeconfigPath, 'b', log);
    try {
      cut.start();
      await until(() => cut.isLeader);
      other.start();
      relay.freeze();
      const frozenAt = Date.now();
      await until(() => other.isLeader, 10_000);
      // a stopped on its own (its requests never answered), and before b began.
      expect(log).toEqual(['a leads', 'a stops', 'b leads']);
      expect(Date.now() - frozenAt).toBeGreaterThanOrEqual(LEASE_MS - 300);
    } finally {
      await Promise.all([cut.stop({ release: false }), other.stop()]);
    }
  });

  it('refuses a renew deadline that is not shorter than the lease', () => {
    const api = loadKubeConfig(server.kubeconfigPath).makeApiClient(CoordinationV1Api);
    const options = { api, namespace: 'default', name: 'x', identity: 'x', onStartedLeading() {}, onStoppedLeading() {} };
    expect(() => new LeaderElection({ ...options, leaseDurationMs: 1000, renewDeadlineMs: 1000 })).toThrow(/shorter than the lease/);
  });
});

/** Resolves once `check` holds, looking on every turn of the event loop's timers. */
async function until(check: () => boolean, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
