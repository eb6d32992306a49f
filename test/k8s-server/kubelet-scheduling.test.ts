import { describe, expect, it } from 'vitest';
import { missingResources, podResources, usage } from '../../hack/k8s/kubelet-scheduling.js';
import type { KubeObject } from '../../hack/k8s/store.js';

function pod(nodeName: string | undefined, resources: Record<string, Record<string, string>>, phase = 'Running'): KubeObject {
  return { metadata: { name: 'p' }, spec: { nodeName, containers: [{ name: 'main', image: 'x', resources }] }, status: { phase } };
}

describe('podResources(pod)', () => {
  it.each([
    [{ requests: { cpu: '500m', memory: '128Mi' } }, { cpu: 0.5, memory: 128 * 2 ** 20, pods: 1 }],
    [{ limits: { cpu: '2', memory: '1G' } }, { cpu: 2, memory: 1e9, pods: 1 }],
    [
      { requests: { cpu: '100m' }, limits: { cpu: '1' } },
      { cpu: 0.1, memory: 0, pods: 1 },
    ],
    [{}, { cpu: 0, memory: 0, pods: 1 }],
  ])('%j requests %j', (resources, expected) => {
    expect(podResources(pod('n', resources))).toEqual(expected);
  });
});

describe('missingResources(allocatable, usage(pods, node), wanted)', () => {
  const allocatable = { cpu: 2, memory: 2 ** 30, pods: 3 };
  const running = [
    pod('n', { requests: { cpu: '1500m' } }),
    pod('other', { requests: { cpu: '2' } }),
    pod('n', { requests: { cpu: '2' } }, 'Succeeded'),
  ];

  it.each([
    [{ requests: { cpu: '500m' } }, []],
    [{ requests: { cpu: '600m' } }, ['Insufficient cpu']],
    [{ requests: { cpu: '1', memory: '2Gi' } }, ['Insufficient cpu', 'Insufficient memory']],
  ])('a pod requesting %j on a node running 1.5 cpu lacks %j', (resources, expected) => {
    expect(missingResources(allocatable, usage(running, 'n'), podResources(pod(undefined, resources)))).toEqual(expected);
  });

  it('counts pod slots', () => {
    const full = [pod('n', {}), pod('n', {}), pod('n', {})];
    expect(missingResources(allocatable, usage(full, 'n'), podResources(pod(undefined, {})))).toEqual(['Too many pods']);
  });
});
