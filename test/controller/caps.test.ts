import { describe, expect, it } from 'vitest';
import { clusterForFile, condition, createSandbox, eventually, NAMESPACE, phaseIs, sandboxPods, waitForSandbox } from './harness.js';

const file = clusterForFile({ controller: { maxSandboxes: 2 } });

const minutesAgo = (minutes: number) => new Date(Date.now() - minutes * 60_000).toISOString();
const phase = (name: string) => (file.cluster.server.store.find('sandboxes', NAMESPACE, name) as any)?.status?.phase;

describe('caps', () => {
  it('past the cluster cap a Sandbox is not admitted (CapacityExhausted) until a place frees, in creation order', async () => {
    createSandbox(file.cluster, 'cap-1', { tenantId: 'tnt_CAPS' });
    createSandbox(file.cluster, 'cap-2', { tenantId: 'tnt_CAPS' });
    await waitForSandbox(file.cluster, 'cap-1', phaseIs('Ready'));
    await waitForSandbox(file.cluster, 'cap-2', phaseIs('Ready'));
    createSandbox(file.cluster, 'cap-3', { tenantId: 'tnt_CAPS' });
    createSandbox(file.cluster, 'cap-4', { tenantId: 'tnt_CAPS' });
    const waiting = await waitForSandbox(file.cluster, 'cap-4', phaseIs('Pending'));
    expect(condition(waiting, 'Admitted')).toMatchObject({ status: 'False', reason: 'CapacityExhausted' });
    expect(condition(waiting, 'Admitted')!.message).toContain('number 2 in line');
    expect(condition(await waitForSandbox(file.cluster, 'cap-3', phaseIs('Pending')), 'Admitted')!.message).toContain('number 1 in line');
    expect(sandboxPods(file.cluster, 'cap-3')).toEqual([]);

    file.cluster.server.store.delete('sandboxes', NAMESPACE, 'cap-1');
    await waitForSandbox(file.cluster, 'cap-3', phaseIs('Ready'));
    await file.controller.idle();
    expect(phase('cap-4')).toBe('Pending');

    file.cluster.server.store.delete('sandboxes', NAMESPACE, 'cap-2');
    await waitForSandbox(file.cluster, 'cap-4', phaseIs('Ready'));
    const events = file.cluster.server.store
      .list('events', NAMESPACE)
      .items.filter((e: any) => e.involvedObject.name === 'cap-4')
      .map((e: any) => e.reason);
    expect(events).toEqual(expect.arrayContaining(['CapacityExhausted', 'Admitted', 'Started', 'Ready']));
    file.cluster.server.store.delete('sandboxes', NAMESPACE, 'cap-3');
    file.cluster.server.store.delete('sandboxes', NAMESPACE, 'cap-4');
    await eventually(file.cluster, () => file.cluster.server.store.list('pods', NAMESPACE).items.length === 0);
  });

  it('past a tenant’s max_concurrent_warm its least recently used warm sandbox is released, no other tenant’s', async () => {
    createSandbox(file.cluster, 'warm-old', { tenantId: 'tnt_LRU', maxConcurrentWarm: 1, lastActivityTime: minutesAgo(5) });
    createSandbox(file.cluster, 'other-tenant', { tenantId: 'tnt_OTHER', maxConcurrentWarm: 1, lastActivityTime: minutesAgo(10) });
    await waitForSandbox(file.cluster, 'warm-old', phaseIs('Ready'));
    await waitForSandbox(file.cluster, 'other-tenant', phaseIs('Ready'));

    createSandbox(file.cluster, 'warm-new', { tenantId: 'tnt_LRU', maxConcurrentWarm: 1, lastActivityTime: minutesAgo(0) });
    const released = await waitForSandbox(file.cluster, 'warm-old', phaseIs('Expired'));
    expect(condition(released, 'Expired')).toMatchObject({ status: 'True', reason: 'TenantWarmCapReached' });
    await eventually(file.cluster, () => sandboxPods(file.cluster, 'warm-old').length === 0);
    // Its place went to the newer one; the other tenant keeps its own.
    await waitForSandbox(file.cluster, 'warm-new', phaseIs('Ready'));
    expect(phase('other-tenant')).toBe('Ready');
    const events = file.cluster.server.store
      .list('events', NAMESPACE)
      .items.filter((e: any) => e.involvedObject.name === 'warm-old')
      .map((e: any) => e.reason);
    expect(events).toContain('TenantWarmCapReached');
  });
});
