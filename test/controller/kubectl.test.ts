import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { kubectl } from '../helpers/kube-tools.js';
import { clusterForFile, createSandbox, eventually, NAMESPACE, phaseIs, runnerPods, waitForSandbox } from './harness.js';

const SAMPLES = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'crds', 'samples');

const file = clusterForFile();

const run = async (...args: string[]) => {
  const result = await kubectl(args, { kubeconfig: file.cluster.server.kubeconfigPath, timeoutMs: 30_000 });
  expect(result.stderr).toBe('');
  expect(result.code).toBe(0);
  return result.stdout;
};

describe('kubectl against the controller’s resources', () => {
  it('kubectl get sbx shows conversation, tenant, mode, phase, expiry and age; -l selects a tenant; -o wide adds the pod', async () => {
    const expires = new Date(Date.now() + 3_600_000);
    createSandbox(file.cluster, 'shown-1', {
      conversationId: 'con_SHOWN1',
      tenantId: 'tnt_ACME',
      mode: 'warm',
      shutdownTime: expires.toISOString(),
    });
    createSandbox(file.cluster, 'shown-2', { conversationId: 'con_SHOWN2', tenantId: 'tnt_OTHER', mode: 'pooled' });
    await waitForSandbox(file.cluster, 'shown-1', phaseIs('Ready'));
    await waitForSandbox(file.cluster, 'shown-2', phaseIs('Ready'));

    const table = await run('get', 'sbx');
    const [header, ...rows] = table.trim().split('\n');
    expect(header!.split(/\s{2,}/)).toEqual(['NAME', 'CONVERSATION', 'TENANT', 'MODE', 'PHASE', 'REASON', 'EXPIRES', 'AGE']);
    expect(rows.map((r) => r.split(/\s+/).slice(0, 6))).toEqual([
      ['shown-1', 'con_SHOWN1', 'tnt_ACME', 'warm', 'Ready', 'RunnerReady'],
      ['shown-2', 'con_SHOWN2', 'tnt_OTHER', 'pooled', 'Ready', 'RunnerReady'],
    ]);
    // The deadline as a time (a date column would print a time ahead as <invalid>).
    expect(rows[0]!.split(/\s+/)[6]).toBe(expires.toISOString());
    expect(rows[1]!.split(/\s+/)[6]).toBe('<none>');

    const byTenant = await run('get', 'sbx', '-l', 'acis.dev/tenant=tnt_ACME', '-o', 'name');
    expect(byTenant.trim()).toBe('sandbox.acis.dev/shown-1');

    const wide = await run('get', 'sandboxes', '-o', 'wide');
    expect(wide.split('\n')[0]!.split(/\s{2,}/)).toEqual([
      'NAME',
      'CONVERSATION',
      'TENANT',
      'MODE',
      'PHASE',
      'REASON',
      'EXPIRES',
      'AGE',
      'AGENT',
      'LAUNCH',
      'POD',
      'ENDPOINT',
    ]);
    expect(wide).toMatch(
      /shown-1\s+con_SHOWN1\s+tnt_ACME\s+warm\s+Ready\s+RunnerReady\s+\S+\s+\S+\s+vendor-agent-sdk\s+cold\s+shown-1-[0-9a-f]{8}\s+\d+\.\d+\.\d+\.\d+:\d+/,
    );
  });

  it('kubectl apply of the samples, then kubectl scale sbxpool resizes the pool and kubectl get sbxpool shows it', async () => {
    await run('apply', '-f', path.join(SAMPLES, 'sandboxwarmpool.yaml'));
    await eventually(
      file.cluster,
      () => runnerPods(file.cluster, 'acis.dev/pool=vendor-agent-sdk').filter((p: any) => !p.metadata.deletionTimestamp).length === 3,
    );

    expect((await run('scale', 'sbxpool/vendor-agent-sdk', '--replicas=1')).trim()).toBe(
      'sandboxwarmpool.acis.dev/vendor-agent-sdk scaled',
    );
    await eventually(file.cluster, () => {
      const pool = file.cluster.server.store.get('sandboxwarmpools', NAMESPACE, 'vendor-agent-sdk') as any;
      return pool.status?.readyReplicas === 1 && pool.status?.replicas === 1;
    });
    const table = await run('get', 'sbxpool');
    const [header, row] = table.trim().split('\n');
    expect(header!.split(/\s{2,}/)).toEqual(['NAME', 'AGENT', 'DESIRED', 'READY', 'AVAILABLE', 'REASON', 'AGE']);
    expect(row!.split(/\s+/).slice(0, 6)).toEqual(['vendor-agent-sdk', 'vendor-agent-sdk', '1', '1', '1', 'Filled']);

    const scale = JSON.parse(
      await run('get', '--raw', `/apis/acis.dev/v1alpha1/namespaces/${NAMESPACE}/sandboxwarmpools/vendor-agent-sdk/scale`),
    );
    expect(scale).toMatchObject({ spec: { replicas: 1 }, status: { replicas: 1, selector: 'acis.dev/pool=vendor-agent-sdk' } });
  });

  it('kubectl describe sbx shows why a Sandbox is not ready, with its events; kubectl get sbx shows the reason', async () => {
    createSandbox(file.cluster, 'stuck', { image: 'registry.invalid/missing:1' });
    // Failed at the start deadline (20 s here): until then the kubelet retries the pull.
    await waitForSandbox(file.cluster, 'stuck', phaseIs('Failed'), 40_000);
    const described = await run('describe', 'sbx', 'stuck');
    expect(described).toContain('ImagePullFailed');
    expect(described).toMatch(/Warning\s+ImagePullFailed/);
    expect(described).toMatch(/Normal\s+Started/);
    const [, row] = (await run('get', 'sbx', 'stuck')).trim().split('\n');
    expect(row!.split(/\s+/).slice(4, 6)).toEqual(['Failed', 'ImagePullFailed']);
  }, 60_000);

  it('kubectl describe sbx tells expiry at the idle TTL, and kubectl get sbx its reason', async () => {
    createSandbox(file.cluster, 'idle', { shutdownTime: new Date(Date.now() + 1_500).toISOString() });
    await waitForSandbox(file.cluster, 'idle', phaseIs('Expired'));
    const described = await run('describe', 'sbx', 'idle');
    expect(described).toMatch(/Normal\s+(Started|Adopted)/);
    expect(described).toMatch(/Normal\s+Ready/);
    expect(described).toMatch(/Normal\s+ShutdownTimeReached\s+.*the idle TTL lapsed/);
    const [, row] = (await run('get', 'sbx', 'idle')).trim().split('\n');
    expect(row!.split(/\s+/).slice(4, 6)).toEqual(['Expired', 'ShutdownTimeReached']);
  });

  it('the sample Sandboxes are accepted by the API server as they are (kubectl apply), and a bad one is refused', async () => {
    for (const file of ['sandbox-warm.yaml', 'sandbox-pooled.yaml']) {
      expect(await run('apply', '-f', path.join(SAMPLES, file))).toMatch(/^sandbox\.acis\.dev\/con-\S+ created/);
    }
    const bad = readFileSync(path.join(SAMPLES, 'sandbox-warm.yaml'), 'utf8')
      .replace('mode: warm', 'mode: hot')
      .replace(/name: con-\S+/, 'name: bad-mode');
    const refused = await kubectl(['apply', '-f', '-'], { kubeconfig: file.cluster.server.kubeconfigPath, input: bad, timeoutMs: 30_000 });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('spec.mode');
    expect(file.cluster.server.store.find('sandboxes', NAMESPACE, 'bad-mode')).toBeUndefined();
  });
});
