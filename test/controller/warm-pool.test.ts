import { describe, expect, it } from 'vitest';
import {
  createPool,
  createSandbox,
  eventually,
  NAMESPACE,
  phaseIs,
  runnerPods,
  sandboxPods,
  clusterForFile,
  readyPoolPods,
  waitForSandbox,
} from './harness.js';

const file = clusterForFile();

describe('SandboxWarmPool', () => {
  it('fills to replicas, a claim adopts a ready pod without starting one, and the pool refills behind it', async () => {
    createPool(file.cluster, 'agents', 2);
    await eventually(file.cluster, () => readyPoolPods(file.cluster, 'agents').length === 2);
    const pool = await file.cluster.server.store.waitFor(
      'sandboxwarmpools',
      NAMESPACE,
      'agents',
      (p: any) => p?.status?.readyReplicas === 2,
    );
    expect((pool as any).status).toMatchObject({
      replicas: 2,
      desiredReplicas: 2,
      readyReplicas: 2,
      availableReplicas: 2,
      selector: 'acis.dev/pool=agents',
    });
    const before = new Set(readyPoolPods(file.cluster, 'agents').map((p) => p.metadata.name));

    // Every status the Sandbox shows on its way: an adopted ready pod makes it Ready in the write that binds it.
    const phases: string[] = [];
    // And when the API server saw the adoption and the replacement pod's create.
    const seen: { adopted?: number; replaced?: number } = {};
    const stopWatching = file.cluster.server.store.store.subscribe((change) => {
      const status = (change.object as any).status;
      if (change.storageKey === 'acis.dev/sandboxes' && change.object.metadata.name === 'claim-1' && status)
        phases.push(`${status.phase}${status.podName ? ' bound' : ''}`);
      const labels = (change.object.metadata as any).labels ?? {};
      if (change.storageKey === '/pods' && change.type === 'ADDED' && labels['acis.dev/pool'] === 'agents')
        seen.replaced ??= performance.now();
      if (change.storageKey === '/pods' && labels['acis.dev/sandbox'] === 'claim-1') seen.adopted ??= performance.now();
    });
    const sandbox = createSandbox(file.cluster, 'claim-1', { mode: 'pooled' });
    const ready = await waitForSandbox(file.cluster, 'claim-1', phaseIs('Ready'));
    expect(phases).toEqual(['Ready bound']);
    expect(ready!.status!.launch).toBe('pool');
    expect(before.has(ready!.status!.podName!)).toBe(true);
    const adopted = file.cluster.server.store.get('pods', NAMESPACE, ready!.status!.podName!) as any;
    expect(adopted.metadata.ownerReferences).toEqual([
      expect.objectContaining({ kind: 'Sandbox', uid: sandbox.metadata.uid, controller: true }),
    ]);
    expect(adopted.metadata.labels['acis.dev/pool']).toBeUndefined();
    expect(adopted.metadata.labels['acis.dev/conversation']).toBe((sandbox as any).spec.conversationId);
    // The token Secret moves to the Sandbox beside the Ready write (Ready does not wait for it).
    const tokenOwner = () =>
      (file.cluster.server.store.get('secrets', NAMESPACE, `${adopted.metadata.name}-token`) as any).metadata.ownerReferences[0];
    await eventually(file.cluster, () => tokenOwner().kind === 'Sandbox');
    expect(tokenOwner()).toMatchObject({ kind: 'Sandbox', uid: sandbox.metadata.uid });
    // Adopted, not started: its only pod is the adopted one.
    expect(sandboxPods(file.cluster, 'claim-1').map((p) => p.metadata.name)).toEqual([adopted.metadata.name]);

    expect(adopted.metadata.annotations).toMatchObject({
      'acis.dev/adopted-from': 'agents',
      'acis.dev/adopted-at': expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });

    await eventually(file.cluster, () => readyPoolPods(file.cluster, 'agents').length === 2);
    stopWatching();
    expect(readyPoolPods(file.cluster, 'agents').map((p) => p.metadata.name)).not.toContain(adopted.metadata.name);
    // The replacement waited the refill delay (300 ms by default) after the claim, off its first turn's CPU.
    expect(seen.replaced! - seen.adopted!).toBeGreaterThanOrEqual(250);
    const events = file.cluster.server.store
      .list('events', NAMESPACE)
      .items.filter((e: any) => e.involvedObject.name === 'claim-1')
      .map((e: any) => e.reason);
    expect(events).toEqual(expect.arrayContaining(['Adopted', 'Ready']));

    // The pool going away does not take an adopted runner with it.
    file.cluster.server.store.delete('sandboxwarmpools', NAMESPACE, 'agents');
    await eventually(file.cluster, () => runnerPods(file.cluster, 'acis.dev/pool=agents').length === 0);
    expect(file.cluster.server.store.find('pods', NAMESPACE, adopted.metadata.name)).toBeDefined();
    expect(file.cluster.server.store.find('secrets', NAMESPACE, `${adopted.metadata.name}-token`)).toBeDefined();
  });

  it('with the pool empty a claim falls back to a cold pod', async () => {
    createPool(file.cluster, 'empty', 0, 'other-agent');
    createSandbox(file.cluster, 'claim-cold', { mode: 'pooled', agentType: 'other-agent', poolRef: { name: 'empty' } });
    const ready = await waitForSandbox(file.cluster, 'claim-cold', phaseIs('Ready'));
    expect(ready!.status).toMatchObject({ launch: 'cold', podName: expect.stringMatching(/^claim-cold-[0-9a-f]{8}$/) });
    const events = file.cluster.server.store
      .list('events', NAMESPACE)
      .items.filter((e: any) => e.involvedObject.name === 'claim-cold')
      .map((e: any) => e.reason);
    expect(events).toContain('Started');
  });

  it('scaling the pool down removes unclaimed pods, and up adds them', async () => {
    createPool(file.cluster, 'scaled', 3, 'scaled-agent');
    await eventually(file.cluster, () => readyPoolPods(file.cluster, 'scaled').length === 3);
    const current = file.cluster.server.store.get('sandboxwarmpools', NAMESPACE, 'scaled') as any;
    file.cluster.server.store.update('sandboxwarmpools', NAMESPACE, 'scaled', { ...current, spec: { ...current.spec, replicas: 1 } });
    await eventually(
      file.cluster,
      () => runnerPods(file.cluster, 'acis.dev/pool=scaled').filter((p: any) => !p.metadata.deletionTimestamp).length === 1,
    );
    const again = file.cluster.server.store.get('sandboxwarmpools', NAMESPACE, 'scaled') as any;
    file.cluster.server.store.update('sandboxwarmpools', NAMESPACE, 'scaled', { ...again, spec: { ...again.spec, replicas: 2 } });
    await eventually(file.cluster, () => readyPoolPods(file.cluster, 'scaled').length === 2);
  });
});
