/**
 * The LimitRanger plugin's `type: Pod` limits and `maxLimitRequestRatio`, as kube-apiserver 1.35
 * answers them: 403 Forbidden, `pods "x" is forbidden: …` worded as
 * plugin/pkg/admission/limitranger words each violation.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startKubeTestServer, type KubeTestServer } from '../../hack/k8s/server.js';
import type { KubeObject } from '../../hack/k8s/store.js';

let server: KubeTestServer;

beforeAll(async () => {
  server = await startKubeTestServer({ namespaces: ['per-pod', 'ratio'] });
  server.store.create('limitranges', 'per-pod', {
    metadata: { name: 'pod-limits' },
    spec: { limits: [{ type: 'Pod', max: { cpu: '1', memory: '256Mi' }, min: { cpu: '50m' } }] },
  } as unknown as KubeObject);
  server.store.create('limitranges', 'ratio', {
    metadata: { name: 'ratios' },
    spec: {
      limits: [
        { type: 'Container', maxLimitRequestRatio: { cpu: '2' } },
        { type: 'Pod', maxLimitRequestRatio: { memory: '4' } },
      ],
    },
  } as unknown as KubeObject);
});
afterAll(() => server.close());

type Resources = { requests?: Record<string, string>; limits?: Record<string, string> };
const container = (name: string, resources: Resources) => ({ name, image: 'example/app:1', resources });

async function createPod(namespace: string, name: string, spec: Record<string, unknown>): Promise<{ code: number; body: any }> {
  const response = await fetch(`${server.url}/api/v1/namespaces/${namespace}/pods`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ apiVersion: 'v1', kind: 'Pod', metadata: { name }, spec }),
  });
  return { code: response.status, body: await response.json() };
}

describe('LimitRange type Pod', () => {
  it('holds the sum of the containers to max and min, and admits a pod within them', async () => {
    const within = await createPod('per-pod', 'within', {
      containers: [
        container('a', { requests: { cpu: '100m' }, limits: { cpu: '500m', memory: '128Mi' } }),
        container('b', { requests: { cpu: '100m' }, limits: { cpu: '500m', memory: '128Mi' } }),
      ],
    });
    expect(within.code, JSON.stringify(within.body)).toBe(201);

    const over = await createPod('per-pod', 'over', {
      containers: [
        container('a', { requests: { cpu: '100m' }, limits: { cpu: '600m', memory: '128Mi' } }),
        container('b', { requests: { cpu: '100m' }, limits: { cpu: '600m', memory: '192Mi' } }),
      ],
    });
    expect(over).toMatchObject({
      code: 403,
      body: {
        reason: 'Forbidden',
        message:
          'pods "over" is forbidden: [maximum cpu usage per Pod is 1, but limit is 1200m, maximum memory usage per Pod is 256Mi, but limit is 320Mi]',
      },
    });
    expect(server.store.find('pods', 'per-pod', 'over')).toBeUndefined();
  });

  it('counts an init container on its own when it asks more than the containers together', async () => {
    const answer = await createPod('per-pod', 'big-init', {
      initContainers: [container('setup', { requests: { cpu: '100m' }, limits: { cpu: '2', memory: '64Mi' } })],
      containers: [container('a', { requests: { cpu: '100m' }, limits: { cpu: '100m', memory: '64Mi' } })],
    });
    expect(answer.body.message).toBe('pods "big-init" is forbidden: maximum cpu usage per Pod is 1, but limit is 2');
  });

  it('wants a request where min is set and a limit where max is', async () => {
    const answer = await createPod('per-pod', 'unbounded', { containers: [container('a', {})] });
    expect(answer.body.message).toBe(
      'pods "unbounded" is forbidden: [minimum cpu usage per Pod is 50m.  No request is specified, maximum cpu usage per Pod is 1.  No limit is specified, maximum memory usage per Pod is 256Mi.  No limit is specified]',
    );
  });
});

describe('maxLimitRequestRatio', () => {
  it('refuses a container whose limit is more than the ratio times its request, or without either', async () => {
    const answer = await createPod('ratio', 'bursty', {
      containers: [
        container('a', { requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '300m', memory: '64Mi' } }),
        container('b', { limits: { memory: '64Mi' } }),
      ],
    });
    expect(answer).toMatchObject({
      code: 403,
      body: {
        message:
          'pods "bursty" is forbidden: [cpu max limit to request ratio per Container is 2, but provided ratio is 3.000000, cpu max limit to request ratio per Container is 2, but no request is specified or request is 0]',
      },
    });
  });

  it('holds the pod to its ratio over the sums, and admits one within every ratio', async () => {
    const within = await createPod('ratio', 'steady', {
      containers: [container('a', { requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '200m', memory: '256Mi' } })],
    });
    expect(within.code, JSON.stringify(within.body)).toBe(201);
    const over = await createPod('ratio', 'memory-bursty', {
      containers: [
        container('a', { requests: { cpu: '100m', memory: '32Mi' }, limits: { cpu: '100m', memory: '256Mi' } }),
        container('b', { requests: { cpu: '100m', memory: '32Mi' }, limits: { cpu: '100m', memory: '64Mi' } }),
      ],
    });
    expect(over.body.message).toBe(
      'pods "memory-bursty" is forbidden: memory max limit to request ratio per Pod is 4, but provided ratio is 5.000000',
    );
  });
});
