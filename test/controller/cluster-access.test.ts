import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConnectionSharingKubeConfig, loadKubeConfig } from '../../kube/cluster-access.js';
import { startKubeTestServer } from '../../hack/k8s/server.js';

/** An API endpoint that answers one Secret and counts the connections made to it and the tokens sent. */
let server: Server;
let connections: number;
let authorizations: string[];

beforeEach(async () => {
  connections = 0;
  authorizations = [];
  server = createServer((request: IncomingMessage, response) => {
    authorizations.push(request.headers.authorization ?? '');
    response.setHeader('content-type', 'application/json');
    response.end(
      JSON.stringify({
        apiVersion: 'v1',
        kind: 'Secret',
        metadata: { name: 'runner-token', namespace: 'default' },
        data: { token: 'dG9rZW4=' },
      }),
    );
  });
  server.on('connection', () => connections++);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
});

afterEach(async () => {
  server.closeAllConnections();
  server.close();
});

function kubeConfigFor(token: string): ConnectionSharingKubeConfig {
  const kubeConfig = new ConnectionSharingKubeConfig();
  kubeConfig.loadFromOptions({
    clusters: [{ name: 'test', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
    users: [{ name: 'test', token }],
    contexts: [{ name: 'test', cluster: 'test', user: 'test' }],
    currentContext: 'test',
  });
  return kubeConfig;
}

describe('cluster access', () => {
  it('sends the requests of every API client made from one kubeconfig over kept connections', async () => {
    const kubeConfig = kubeConfigFor('first');
    const core = kubeConfig.makeApiClient(CoreV1Api);
    const other = kubeConfig.makeApiClient(CoreV1Api);
    for (let i = 0; i < 10; i++) {
      const secret = await (i % 2 ? core : other).readNamespacedSecret({ name: 'runner-token', namespace: 'default' });
      expect(secret.data?.token).toBe('dG9rZW4=');
    }
    // undici may open a second connection while the first answer is being read; never one per request.
    expect(connections).toBeLessThanOrEqual(2);
    // Requests at once still each get an answer (more connections in the one pool).
    const together = await Promise.all(
      Array.from({ length: 5 }, () => core.readNamespacedSecret({ name: 'runner-token', namespace: 'default' })),
    );
    expect(together.map((secret) => secret.data?.token)).toEqual(Array(5).fill('dG9rZW4='));
    expect(connections).toBeLessThanOrEqual(7);
    expect(authorizations.every((value) => value === 'Bearer first')).toBe(true);
  });

  it('keeps its connection through a quiet spell longer than undici’s default, from a server that announces no keep-alive (as kube-apiserver)', async () => {
    // Go's net/http sends no Keep-Alive header; Node sends one unless its timeout is off.
    server.keepAliveTimeout = 0;
    const core = kubeConfigFor('first').makeApiClient(CoreV1Api);
    await core.readNamespacedSecret({ name: 'runner-token', namespace: 'default' });
    // Past undici's 4 s default (used when the server says nothing), within API_KEEP_ALIVE_MS: the
    // quiet spell is what is tested, so there is no event to wait for instead.
    await sleep(4_500);
    await core.readNamespacedSecret({ name: 'runner-token', namespace: 'default' });
    expect(connections).toBe(1);
  });

  it('still sends the credentials the kubeconfig holds at each request', async () => {
    const kubeConfig = kubeConfigFor('first');
    const core = kubeConfig.makeApiClient(CoreV1Api);
    await core.readNamespacedSecret({ name: 'runner-token', namespace: 'default' });
    kubeConfig.users[0] = { ...kubeConfig.users[0]!, token: 'rotated' };
    await core.readNamespacedSecret({ name: 'runner-token', namespace: 'default' });
    expect(authorizations).toEqual(['Bearer first', 'Bearer rotated']);
    expect(connections).toBeLessThanOrEqual(2);
  });
});

describe('the Kubernetes API test server over TLS', () => {
  it('serves HTTPS with a certificate its kubeconfig trusts, as a cluster does', async () => {
    const cluster = await startKubeTestServer({ tls: true });
    try {
      expect(cluster.url).toMatch(/^https:/);
      const core = loadKubeConfig(cluster.kubeconfigPath).makeApiClient(CoreV1Api);
      const created = await core.createNamespacedSecret({
        namespace: 'default',
        body: { metadata: { name: 'over-tls' }, stringData: { token: 't' } },
      });
      expect(created.metadata?.uid).toBeTruthy();
      const read = await core.readNamespacedSecret({ name: 'over-tls', namespace: 'default' });
      expect(Buffer.from(read.data?.token ?? '', 'base64').toString()).toBe('t');
      // Plain HTTP to it is no API: the server speaks TLS only.
      await expect(fetch(`${cluster.url.replace('https:', 'http:')}/api/v1/namespaces/default/secrets/over-tls`)).rejects.toThrow();
    } finally {
      await cluster.close();
    }
  });
});
