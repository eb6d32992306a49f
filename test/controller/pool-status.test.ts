/**
 * A warm pool whose pod creates are refused says why (conditions, an Event, `kubectl get sbxpool`),
 * backs off, and leaves no token Secret behind; each pool pod's Secret goes with its pod.
 */
import { describe, expect, it } from 'vitest';
import { kubectl } from '../helpers/kube-tools.js';
import { clusterForFile, createPool, eventually, NAMESPACE, readyPoolPods } from './harness.js';
import type { KubeObject } from '../../hack/k8s/store.js';

const file = clusterForFile();

const run = async (...args: string[]) => {
  const result = await kubectl(args, { kubeconfig: file.cluster.server.kubeconfigPath, timeoutMs: 30_000 });
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  return result.stdout;
};

type PoolObject = KubeObject & { status?: { conditions?: { type: string; status: string; reason: string; message?: string }[] } };

const poolCondition = (name: string, type: string) =>
  (file.cluster.server.store.find('sandboxwarmpools', NAMESPACE, name) as PoolObject | undefined)?.status?.conditions?.find(
    (c) => c.type === type,
  );

/** Token Secrets of runner pods in the namespace (the controller's, by their label). */
const tokenSecrets = () =>
  file.cluster.server.store
    .list('secrets', NAMESPACE, { labelSelector: 'app.kubernetes.io/managed-by=acis-controller' })
    .items.filter((s) => s.metadata.name!.endsWith('-token'));

const poolEvents = (name: string) =>
  file.cluster.server.store
    .list('events', NAMESPACE)
    .items.filter((e: any) => e.involvedObject.kind === 'SandboxWarmPool' && e.involvedObject.name === name) as any[];

describe('a warm pool whose pod creates are refused', () => {
  it('under a full ResourceQuota: no Secret left per attempt, QuotaExceeded in its conditions, one Event, backoff, kubectl get shows why', async () => {
    const { store } = file.cluster.server;
    store.create('resourcequotas', NAMESPACE, { metadata: { name: 'full' }, spec: { hard: { pods: '0' } } });
    const secretsCreated: number[] = [];
    const stop = store.store.subscribe((change) => {
      if (change.storageKey === '/secrets' && change.type === 'ADDED') secretsCreated.push(performance.now());
    });
    createPool(file.cluster, 'quota', 2);

    // Three attempts of two pods each, and none left a Secret behind.
    await eventually(file.cluster, () => secretsCreated.length >= 6 && tokenSecrets().length === 0, 20_000);
    stop();
    // Each attempt waited longer than the one before (0.5 s, then 1 s), not the work queue's 50 ms.
    const attempts = [secretsCreated[0]!, secretsCreated[2]!, secretsCreated[4]!];
    expect(attempts[1]! - attempts[0]!).toBeGreaterThanOrEqual(450);
    expect(attempts[2]! - attempts[1]!).toBeGreaterThanOrEqual(950);

    expect(poolCondition('quota', 'Degraded')).toMatchObject({ status: 'True', reason: 'QuotaExceeded' });
    expect(poolCondition('quota', 'Degraded')!.message).toContain('exceeded quota: full');
    expect(poolCondition('quota', 'Ready')).toMatchObject({ status: 'False', reason: 'QuotaExceeded' });
    expect(poolCondition('quota', 'Ready')!.message).toBe(
      '0 of 2 ready: pods "quota-*" is forbidden: exceeded quota: full, requested: pods=1, used: pods=0, limited: pods=0',
    );
    // Told once, not on every retry.
    const refusals = poolEvents('quota').filter((e) => e.reason === 'QuotaExceeded');
    expect(refusals).toHaveLength(1);
    expect(refusals[0]).toMatchObject({ type: 'Warning' });
    expect(refusals[0].message).toContain('exceeded quota: full');

    const [header, row] = (await run('get', 'sbxpool', 'quota')).trim().split('\n');
    expect(header!.split(/\s{2,}/)).toEqual(['NAME', 'AGENT', 'DESIRED', 'READY', 'AVAILABLE', 'REASON', 'AGE']);
    expect(row!.split(/\s+/).slice(0, 6)).toEqual(['quota', 'vendor-agent-sdk', '2', '0', '0', 'QuotaExceeded']);
    const described = await run('describe', 'sbxpool', 'quota');
    expect(described).toMatch(/Warning\s+QuotaExceeded\s+.*exceeded quota: full/);

    // The quota lifted, the pool fills (within the backoff's next try) and says so.
    store.delete('resourcequotas', NAMESPACE, 'full');
    await eventually(
      file.cluster,
      () => poolCondition('quota', 'Ready')?.status === 'True' && readyPoolPods(file.cluster, 'quota').length === 2,
    );
    expect(poolCondition('quota', 'Ready')).toMatchObject({ reason: 'Filled', message: '2 of 2 ready' });
    expect(poolCondition('quota', 'Degraded')).toMatchObject({ status: 'False', reason: 'AsExpected' });
    const [, filled] = (await run('get', 'sbxpool', 'quota')).trim().split('\n');
    expect(filled!.split(/\s+/).slice(0, 6)).toEqual(['quota', 'vendor-agent-sdk', '2', '2', '2', 'Filled']);
  });

  it('each pool pod’s token Secret is owned by its pod and goes with it', async () => {
    createPool(file.cluster, 'owned', 2, 'owned-agent');
    const pods = await eventually(
      file.cluster,
      () => readyPoolPods(file.cluster, 'owned').length === 2 && readyPoolPods(file.cluster, 'owned'),
    );
    const tokenOf = (pod: KubeObject) => file.cluster.server.store.find('secrets', NAMESPACE, `${pod.metadata.name}-token`);
    await eventually(file.cluster, () => pods.every((pod) => tokenOf(pod)?.metadata.ownerReferences?.[0]?.kind === 'Pod'));
    for (const pod of pods) {
      expect(tokenOf(pod)!.metadata.ownerReferences).toEqual([
        { apiVersion: 'v1', kind: 'Pod', name: pod.metadata.name, uid: pod.metadata.uid },
      ]);
    }
    const gone = pods[0]!;
    await run('delete', 'pod', gone.metadata.name!, '--wait=false');
    await eventually(file.cluster, () => !tokenOf(gone));
    expect(tokenOf(pods[1]!)).toBeDefined();
  });

  it('a pod an admission webhook refuses makes the pool Degraded with PodCreateRefused and the message, until it allows', async () => {
    const message = 'admission webhook "policy.example.com" denied the request: images must be signed';
    file.cluster.server.failNext({ verb: 'create', resource: 'pods', namespace: NAMESPACE, status: 400, message, times: 1 });
    createPool(file.cluster, 'webhook', 1, 'webhook-agent');
    const refused = await file.cluster.server.store.waitFor(
      'sandboxwarmpools',
      NAMESPACE,
      'webhook',
      (p) => (p as PoolObject | undefined)?.status?.conditions?.some((c) => c.type === 'Degraded' && c.status === 'True') === true,
    );
    const degraded = (refused as PoolObject).status!.conditions!.find((c) => c.type === 'Degraded')!;
    expect(degraded.reason).toBe('PodCreateRefused');
    expect(degraded.message).toContain(`(400): ${message}`);
    await eventually(file.cluster, () => poolCondition('webhook', 'Ready')?.status === 'True');
    expect(poolEvents('webhook').map((e) => e.reason)).toContain('PodCreateRefused');
  });
});
