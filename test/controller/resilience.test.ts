import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import {
  clusterForFile,
  createPool,
  createSandbox,
  eventually,
  NAMESPACE,
  phaseIs,
  runnerPods,
  startTestController,
  waitForSandbox,
} from './harness.js';

const file = clusterForFile({ controller: { identity: 'controller-a' } });

const podCreates = () => file.cluster.server.countRequests({ verb: 'create', resource: 'pods' });
const livePods = (selector: string) => runnerPods(file.cluster, selector).filter((p: any) => !p.metadata.deletionTimestamp);
const readyPods = (selector: string) =>
  livePods(selector).filter((p: any) => p.status?.conditions?.some((c: any) => c.type === 'Ready' && c.status === 'True'));

function touch(resource: string, name: string, value: string): void {
  const current = file.cluster.server.store.get(resource, NAMESPACE, name) as any;
  file.cluster.server.store.update(resource, NAMESPACE, name, {
    ...current,
    metadata: { ...current.metadata, annotations: { touched: value } },
  });
}

describe('controller resilience', () => {
  it('a pod cache that lags its own creates never over-creates', async () => {
    const before = podCreates();
    // The pod watch breaks and cannot come back for a while: the pool is reconciled again and again
    // on a cache that shows none of the pods it created.
    file.cluster.server.failNext({ verb: 'watch', resource: 'pods', status: 500, times: 4 });
    file.cluster.server.closeWatches();
    createPool(file.cluster, 'stale', 3, 'stale-agent');
    for (let i = 0; i < 6; i++) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      touch('sandboxwarmpools', 'stale', String(i));
    }
    await eventually(file.cluster, () => readyPods('acis.dev/pool=stale').length === 3);
    await file.controller.idle();
    expect(podCreates() - before).toBe(3);
    expect(livePods('acis.dev/pool=stale')).toHaveLength(3);
  });

  it('a dropped watch and a 410 Gone re-list lose no change made in between', async () => {
    createSandbox(file.cluster, 'relist-1');
    createSandbox(file.cluster, 'relist-2');
    await waitForSandbox(file.cluster, 'relist-1', phaseIs('Ready'));
    await waitForSandbox(file.cluster, 'relist-2', phaseIs('Ready'));
    const lists = file.cluster.server.countRequests({ verb: 'list', resource: 'sandboxes' });

    // Every watch is cut; while they are down a Sandbox appears and another's deadline passes,
    // and the history they would resume from is compacted away (410 Gone on reconnect).
    file.cluster.server.closeWatches();
    createSandbox(file.cluster, 'relist-3');
    const two = file.cluster.server.store.get('sandboxes', NAMESPACE, 'relist-2') as any;
    file.cluster.server.store.update('sandboxes', NAMESPACE, 'relist-2', {
      ...two,
      spec: { ...two.spec, shutdownTime: new Date(Date.now() - 1000).toISOString() },
    });
    file.cluster.server.compact();

    await waitForSandbox(file.cluster, 'relist-3', phaseIs('Ready'));
    await waitForSandbox(file.cluster, 'relist-2', phaseIs('Expired'));
    expect(file.cluster.server.countRequests({ verb: 'list', resource: 'sandboxes' })).toBeGreaterThan(lists);
    expect((file.cluster.server.store.get('sandboxes', NAMESPACE, 'relist-1') as any).status.phase).toBe('Ready');
  });

  it('a second replica takes over within seconds when the leader dies, and creates nothing twice', async () => {
    const standby = await startTestController(file.cluster, { identity: 'controller-b' });
    try {
      await eventually(file.cluster, () => file.controller.isLeader() && !standby.isLeader());
      createPool(file.cluster, 'failover', 2, 'failover-agent');
      await eventually(file.cluster, () => readyPods('acis.dev/pool=failover').length === 2);
      await file.controller.idle();
      const before = podCreates();

      // The leader dies without releasing its Lease; work arrives meanwhile.
      await file.controller.stop({ releaseLease: false });
      const diedAt = Date.now();
      createSandbox(file.cluster, 'after-failover-1', { agentType: 'failover-agent', mode: 'pooled' });
      createSandbox(file.cluster, 'after-failover-2', { agentType: 'failover-agent', mode: 'pooled' });
      await eventually(file.cluster, () => standby.isLeader(), 10_000);
      expect(Date.now() - diedAt).toBeLessThan(5_000);
      const lease = file.cluster.server.store.get('leases', NAMESPACE, 'acis-controller') as any;
      expect(lease.spec.holderIdentity).toBe('controller-b');

      const first = await waitForSandbox(file.cluster, 'after-failover-1', phaseIs('Ready'));
      const second = await waitForSandbox(file.cluster, 'after-failover-2', phaseIs('Ready'));
      expect([first!.status!.launch, second!.status!.launch]).toEqual(['pool', 'pool']);
      await eventually(file.cluster, () => readyPods('acis.dev/pool=failover').length === 2);
      await standby.idle();
      // Two adopted (no create), two refills: nothing the dead leader did is done again.
      expect(podCreates() - before).toBe(2);
      expect(livePods('acis.dev/pool=failover')).toHaveLength(2);
    } finally {
      await standby.stop();
    }
  });
});

describe('controller/rbac.yaml', () => {
  it('allows every request the controller made in this suite (only the controller speaks HTTP here)', () => {
    const manifests = parseAllDocuments(
      readFileSync(path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'controller', 'rbac.yaml'), 'utf8'),
    ).map((d) => d.toJS());
    // Its two Roles (the sandbox namespace's and the Lease's), one namespace in this suite.
    const role = {
      rules: manifests.filter((m) => m.kind === 'Role').flatMap((m) => m.rules) as {
        apiGroups: string[];
        resources: string[];
        verbs: string[];
        resourceNames?: string[];
      }[],
    };
    const denied = file.cluster.server.requests
      .filter((r) => r.resource && r.verb)
      .filter((r) => {
        const resource = r.subresource ? `${r.resource}/${r.subresource}` : r.resource!;
        return !role.rules.some(
          (rule) =>
            rule.apiGroups.includes(r.group ?? '') &&
            rule.resources.includes(resource) &&
            rule.verbs.includes(r.verb) &&
            (!rule.resourceNames || (r.name !== undefined && rule.resourceNames.includes(r.name))),
        );
      })
      .map((r) => `${r.verb} ${r.group ?? ''}/${r.subresource ? `${r.resource}/${r.subresource}` : r.resource} ${r.name ?? ''}`);
    expect([...new Set(denied)]).toEqual([]);
    expect(file.cluster.server.requests.some((r) => r.resource === 'secrets' && ['get', 'list', 'watch'].includes(r.verb))).toBe(false);
  });
});
