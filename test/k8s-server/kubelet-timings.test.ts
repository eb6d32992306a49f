import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKubelet, type Kubelet } from '../../hack/k8s/kubelet.js';
import { kubeletTimings } from '../../hack/k8s/kubelet-timings.js';
import { startKubeTestServer, type KubeTestServer } from '../../hack/k8s/server.js';

const LISTENER = "require('node:http').createServer((q, r) => r.end()).listen(Number(process.env.PORT), process.env.POD_IP)";

describe('kubelet timings', () => {
  it('fast: no pull or start time, probes every probePeriodMs from the start', () => {
    const fast = kubeletTimings('fast', 100);
    expect(fast.beforeStartMs('example/a:1', undefined)).toEqual({ pullMs: 0, startMs: 0 });
    expect(fast.firstProbeMs({ initialDelaySeconds: 5 })).toBe(100);
    expect(fast.periodMs({ periodSeconds: 10 })).toBe(100);
  });

  it("realistic: the kubelet's probe defaults, one pull per image and node, seeded draws that repeat", () => {
    const draws = (seed: number) => {
      const timings = kubeletTimings('realistic', 100, seed);
      return [
        timings.beforeStartMs('example/a:1', 'IfNotPresent'),
        timings.beforeStartMs('example/a:1', 'IfNotPresent'),
        timings.beforeStartMs('example/a:1', 'Always'),
      ];
    };
    const [first, cached, always] = draws(1);
    expect(first!.pullMs).toBeGreaterThan(0);
    expect(first!.startMs).toBeGreaterThan(0);
    expect(cached!.pullMs).toBe(0);
    expect(always!.pullMs).toBeGreaterThan(0);
    expect(draws(1)).toEqual(draws(1));
    expect(draws(2)).not.toEqual(draws(1));
    const timings = kubeletTimings('realistic', 100);
    expect(timings.periodMs({})).toBe(10_000);
    expect(timings.firstProbeMs({})).toBe(0);
    expect(timings.firstProbeMs({ initialDelaySeconds: 2, periodSeconds: 1 })).toBe(2000);
  });

  describe('a kubelet with realistic timings', () => {
    let server: KubeTestServer;
    let kubelet: Kubelet;
    beforeAll(async () => {
      server = await startKubeTestServer();
      kubelet = await startKubelet({
        server,
        isolation: 'none',
        timings: 'realistic',
        timingSeed: 3,
        images: { 'example/listener:1': { command: process.execPath, args: ['-e', LISTENER] } },
      });
    });
    afterAll(async () => {
      await kubelet?.close();
      await server?.close();
    });

    const createPod = (name: string, port = 20_000 + Math.floor(Math.random() * 2000)) =>
      server.store.create('pods', 'default', {
        metadata: { name, annotations: { 'kubelet.test.acis.dev/port-env': 'PORT' } },
        spec: {
          containers: [
            {
              name: 'main',
              image: 'example/listener:1',
              ports: [{ containerPort: port }],
              env: [{ name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } }],
              readinessProbe: { tcpSocket: { port }, initialDelaySeconds: 1, periodSeconds: 1 },
            },
          ],
        },
      });
    const reasons = (name: string) =>
      server.store
        .list('events', 'default')
        .items.filter((event) => (event.involvedObject as { name: string }).name === name)
        .map((event) => `${event.reason}: ${event.message}`);
    const ready = (name: string) =>
      server.store.waitFor(
        'pods',
        'default',
        name,
        (pod) =>
          ((pod?.status as { conditions?: Array<{ type: string; status: string }> } | undefined)?.conditions ?? []).some(
            (condition) => condition.type === 'Ready' && condition.status === 'True',
          ),
        30_000,
      );

    it('pulls the image once, starts the container after the drawn delays, and probes first at initialDelaySeconds', async () => {
      // The kubelet's first draws, repeated with its seed.
      const expected = kubeletTimings('realistic', 100, 3).beforeStartMs('example/listener:1', 'IfNotPresent');
      const started = Date.now();
      createPod('first');
      await ready('first');
      expect(Date.now() - started).toBeGreaterThanOrEqual(expected.pullMs + expected.startMs + 1000);
      expect(reasons('first')).toEqual(
        expect.arrayContaining([
          'Pulling: Pulling image "example/listener:1"',
          `Pulled: Successfully pulled image "example/listener:1" in ${expected.pullMs / 1000}s (${expected.pullMs / 1000}s including waiting)`,
        ]),
      );
      createPod('second');
      await ready('second');
      expect(reasons('second')).toContain('Pulled: Container image "example/listener:1" already present on machine');
    }, 40_000);
  });
});
