/**
 * The operator's runner pod template (RuntimeClass, scheduling, extra labels and annotations) reaches
 * pool pods, and a change of it rolls the warm pool: idle pods of the old template are replaced, never
 * fewer ready pods on offer meanwhile, and a claimed pod is never deleted for being old.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningController } from '../../controller/controller.js';
import { loadControllerConfig, type RunnerPodTemplate } from '../../controller/config.js';
import { kubectl } from '../helpers/kube-tools.js';
import {
  type Cluster,
  createPool,
  createSandbox,
  eventually,
  NAMESPACE,
  phaseIs,
  readyPoolPods,
  runnerPods,
  startCluster,
  startTestController,
  waitForSandbox,
} from './harness.js';

let cluster: Cluster;
let controller: RunningController | undefined;
beforeAll(async () => {
  cluster = await startCluster();
  controller = await startTestController(cluster);
}, 60_000);
afterAll(async () => {
  await controller?.stop();
  await cluster?.close();
});

const GVISOR: RunnerPodTemplate = {
  runtimeClassName: 'gvisor',
  nodeSelector: { 'sandbox.example.com/isolated': 'true' },
  tolerations: [{ key: 'sandbox.example.com/isolated', operator: 'Exists', effect: 'NoSchedule' }],
  affinity: {
    nodeAffinity: {
      preferredDuringSchedulingIgnoredDuringExecution: [
        { weight: 1, preference: { matchExpressions: [{ key: 'topology.kubernetes.io/zone', operator: 'In', values: ['a'] }] } },
      ],
    },
  },
  labels: { 'example.com/team': 'agents' },
  annotations: { 'example.com/owner': 'platform team' },
};

type PoolStatus = { templateHash?: string; updatedReplicas?: number; readyReplicas?: number; replicas?: number };
const poolStatus = (name: string) => (cluster.server.store.get('sandboxwarmpools', NAMESPACE, name) as { status?: PoolStatus }).status;
const hashOf = (pod: { metadata: { labels?: Record<string, string> } }) => pod.metadata.labels?.['acis.dev/template-hash'];
const livePoolPods = (pool: string) => runnerPods(cluster, `acis.dev/pool=${pool}`).filter((p) => !p.metadata.deletionTimestamp);

describe('the runner pod template and a warm pool’s roll', () => {
  it('a new template replaces idle pool pods, keeps as many ready on offer, and never touches a claimed pod', async () => {
    createPool(cluster, 'roll', 2);
    await eventually(cluster, () => readyPoolPods(cluster, 'roll').length === 2 && poolStatus('roll')?.updatedReplicas === 2);
    const first = poolStatus('roll')!.templateHash!;
    expect(first).toMatch(/^[0-9a-f]{10}$/);
    expect(readyPoolPods(cluster, 'roll').map(hashOf)).toEqual([first, first]);

    // A conversation's turn runs on a pod adopted from the old template.
    createSandbox(cluster, 'under-turn', { mode: 'pooled' });
    const claimed = await waitForSandbox(cluster, 'under-turn', phaseIs('Ready'));
    expect(claimed!.status!.launch).toBe('pool');
    const claimedPod = claimed!.status!.podName!;
    await eventually(cluster, () => readyPoolPods(cluster, 'roll').length === 2 && poolStatus('roll')?.readyReplicas === 2);

    // The controller restarted with a new template (as `helm upgrade` does with new values).
    await controller!.stop();
    let fewestReady = Number.POSITIVE_INFINITY;
    const stop = cluster.server.store.store.subscribe(() => {
      fewestReady = Math.min(fewestReady, readyPoolPods(cluster, 'roll').filter((p) => !p.metadata.deletionTimestamp).length);
    });
    controller = await startTestController(cluster, { runnerPodTemplate: GVISOR });
    const second = await eventually(
      cluster,
      () => {
        const status = poolStatus('roll');
        const pods = livePoolPods('roll');
        return (
          status?.templateHash !== first &&
          status?.updatedReplicas === 2 &&
          status.readyReplicas === 2 &&
          pods.length === 2 &&
          pods.every((p) => hashOf(p) === status.templateHash) &&
          status.templateHash
        );
      },
      30_000,
    );
    stop();
    expect(fewestReady).toBeGreaterThanOrEqual(2);

    // The claimed pod of the old template is untouched, and its Sandbox still serves.
    const kept = cluster.server.store.get('pods', NAMESPACE, claimedPod) as any;
    expect(kept.metadata.deletionTimestamp).toBeUndefined();
    expect(hashOf(kept)).toBe(first);
    expect((cluster.server.store.get('sandboxes', NAMESPACE, 'under-turn') as any).status.phase).toBe('Ready');

    // The new pods carry the template.
    for (const pod of livePoolPods('roll') as any[]) {
      expect(pod.spec.runtimeClassName).toBe('gvisor');
      expect(pod.spec.nodeSelector).toEqual(GVISOR.nodeSelector);
      expect(pod.spec.tolerations).toContainEqual(GVISOR.tolerations[0]);
      expect(pod.spec.affinity).toEqual(GVISOR.affinity);
      expect(pod.metadata.labels['example.com/team']).toBe('agents');
      expect(pod.metadata.labels['acis.dev/pool']).toBe('roll');
      expect(pod.metadata.annotations['example.com/owner']).toBe('platform team');
    }
    // A cold Sandbox pod gets it too.
    createSandbox(cluster, 'cold', { mode: 'warm', agentType: 'no-pool-agent' });
    const cold = await waitForSandbox(cluster, 'cold', phaseIs('Ready'));
    expect((cluster.server.store.get('pods', NAMESPACE, cold!.status!.podName!) as any).spec.runtimeClassName).toBe('gvisor');

    const wide = await kubectl(['get', 'sbxpool', 'roll', '-o', 'wide'], { kubeconfig: cluster.server.kubeconfigPath, timeoutMs: 30_000 });
    expect(wide.stderr).toBe('');
    const [header, row] = wide.stdout.trim().split('\n');
    expect(header!.split(/\s{2,}/)).toEqual([
      'NAME',
      'AGENT',
      'DESIRED',
      'READY',
      'AVAILABLE',
      'REASON',
      'AGE',
      'UPDATED',
      'TEMPLATE',
      'IMAGE',
    ]);
    expect(row!.split(/\s+/)).toEqual(['roll', 'vendor-agent-sdk', '2', '2', '2', 'Filled', expect.any(String), '2', second, '<none>']);
  });
});

describe('the runner pod template in the controller’s environment', () => {
  it('refuses what no pod can carry, naming the variable, before any pod is made', () => {
    const env = { ACIS_K8S_NAMESPACE: NAMESPACE };
    expect(() => loadControllerConfig({ ...env, ACIS_RUNNER_TOLERATIONS: 'not json' })).toThrow(/ACIS_RUNNER_TOLERATIONS: must be JSON/);
    expect(() => loadControllerConfig({ ...env, ACIS_RUNNER_POD_LABELS: '{"acis.dev/pool":"other"}' })).toThrow(
      /ACIS_RUNNER_POD_LABELS: may not set acis\.dev\/\*/,
    );
    expect(() => loadControllerConfig({ ...env, ACIS_RUNNER_RUNTIME_CLASS: 'gVisor' })).toThrow(/ACIS_RUNNER_RUNTIME_CLASS/);
    expect(() => loadControllerConfig({ ...env, ACIS_RUNNER_TOLERATIONS: '[{"effect":"Sometimes"}]' })).toThrow(/ACIS_RUNNER_TOLERATIONS/);
  });
});
