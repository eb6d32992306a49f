/**
 * The simulated pod network's loopback mode (kubelet-pod-network.ts): a pod's wildcard listen holds its
 * port on the pod's own IP only, as in a pod's own network namespace; and a wait that times out on a
 * pod says why. (The netns mode: pod-netns.test.ts.)
 */
import { once } from 'node:events';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allocatePodIP } from '../../hack/k8s/kubelet-pod-network.js';
import { startKubelet, type Kubelet } from '../../hack/k8s/kubelet.js';
import { startKubeTestServer, type KubeTestServer } from '../../hack/k8s/server.js';
import type { KubeObject } from '../../hack/k8s/store.js';

/** Listens on every address (no host), as a server in a pod does, and answers where it landed. */
const WILDCARD = `
const server = require('node:http').createServer((request, response) => response.end(process.env.HOSTNAME + ' on ' + server.address().address));
server.listen(Number(process.env.PORT));`;
const FAILING =
  "console.log('loading the CA'); console.error('no CA at /var/lib/ca.crt'); require('fs').writeFileSync('/dev/termination-log', 'CA missing'); process.exit(3)";

let server: KubeTestServer;
let kubelet: Kubelet;

beforeAll(async () => {
  server = await startKubeTestServer();
  kubelet = await startKubelet({
    server,
    images: {
      'example/wildcard:1': { command: process.execPath, args: ['-e', WILDCARD] },
      'example/failing:1': { command: process.execPath, args: ['-e', FAILING] },
    },
    probePeriodMs: 50,
    restartBackoffMs: 50,
    network: 'loopback',
  });
});
afterAll(async () => {
  await kubelet?.close();
  await server?.close();
});

function runPod(name: string, image: string, port?: number): KubeObject {
  const listening = port === undefined ? {} : { env: [{ name: 'PORT', value: String(port) }], readinessProbe: { tcpSocket: { port } } };
  return server.store.create('pods', 'default', { metadata: { name }, spec: { containers: [{ name: 'main', image, ...listening }] } });
}

function podIP(pod: KubeObject | undefined): string | undefined {
  return (pod?.status as { podIP?: string } | undefined)?.podIP;
}

const ready = (pod: KubeObject | undefined) =>
  Boolean((pod?.status as { containerStatuses?: Array<{ ready: boolean }> } | undefined)?.containerStatuses?.[0]?.ready);

describe('the pod network', () => {
  it("gives pods loopback IPs of this process's own block, never 127.0.0.0/23", () => {
    expect(allocatePodIP(1)).toMatch(/^127\.0\.2\.\d+$/);
    expect(allocatePodIP(32_767)).toMatch(/^127\.255\.25[45]\.\d+$/);
    expect(allocatePodIP(4242).split('.').slice(0, 3)).not.toEqual(allocatePodIP(4243).split('.').slice(0, 3));
  });

  it("lands a pod's wildcard listen on its own IP: two pods and a host process hold the same port", async () => {
    const taken = createServer();
    taken.listen(0, '127.0.0.1');
    await once(taken, 'listening');
    const port = (taken.address() as { port: number }).port;
    try {
      runPod('first', 'example/wildcard:1', port);
      runPod('second', 'example/wildcard:1', port);
      for (const name of ['first', 'second']) {
        const pod = await server.store.waitFor('pods', 'default', name, ready, 15_000);
        expect(await (await fetch(`http://${podIP(pod)}:${port}/`)).text()).toBe(`${name} on ${podIP(pod)}`);
      }
    } finally {
      taken.close();
    }
  });

  it("times a wait on a pod out with its containers' state, last termination message and last log lines", async () => {
    runPod('failing', 'example/failing:1');
    const wait = server.store.waitFor('pods', 'default', 'failing', () => false, 1_000);
    await expect(wait).rejects.toThrow(
      /container main: .*restarts\n {2}last state: terminated, exit code 3 Error: "CA missing"\n {2}last 20 log lines:\n {2}\| loading the CA\n {2}\| no CA at \/var\/lib\/ca\.crt/,
    );
  });
});
