/**
 * `helm upgrade` after `kubectl scale sbxpool` (or an HPA writing the scale subresource), with the
 * real helm 4 (which applies server-side) against the Kubernetes API test server, which keeps field
 * ownership as kube-apiserver does: with the chart owning `spec.replicas` an upgrade after a scale
 * is refused with the scale's manager named (and `--force-conflicts` puts the chart's value back);
 * with `warmPool.manageReplicas: false` the chart renders no replicas, so the scaled count survives every
 * upgrade. docs/kubernetes.md ("Scaling the warm pool") says which to choose.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { helm, kubectl, type ToolResult } from '../helpers/kube-tools.js';
import { startKubeTestServer, type KubeTestServer } from '../../hack/k8s/server.js';
import { CHART, NAMESPACE, SANDBOX_NAMESPACE } from './chart-render.js';

const POOL = 'vendor-agent-sdk';

let server: KubeTestServer;

beforeEach(async () => {
  server = await startKubeTestServer({ namespaces: [NAMESPACE] });
});
afterEach(() => server.close());

function tool(run: typeof helm, args: string[]): Promise<ToolResult> {
  return run(args, { kubeconfig: server.kubeconfigPath, timeoutMs: 90_000 });
}

function install(...set: string[]): Promise<ToolResult> {
  return tool(helm, ['install', 'acis', CHART, '--namespace', NAMESPACE, ...set.flatMap((value) => ['--set', value])]);
}

function upgrade(...flags: string[]): Promise<ToolResult> {
  return tool(helm, ['upgrade', 'acis', CHART, '--namespace', NAMESPACE, '--reuse-values', ...flags]);
}

function scale(replicas: number): Promise<ToolResult> {
  return tool(kubectl, ['scale', `sbxpool/${POOL}`, '--namespace', SANDBOX_NAMESPACE, `--replicas=${replicas}`]);
}

function replicas(): unknown {
  return (server.store.get('sbxpool', SANDBOX_NAMESPACE, POOL).spec as { replicas?: unknown }).replicas;
}

function managersOfReplicas(): string[] {
  const entries = (server.store.get('sbxpool', SANDBOX_NAMESPACE, POOL).metadata.managedFields ?? []) as Array<{
    manager: string;
    operation: string;
    subresource?: string;
    fieldsV1: { 'f:spec'?: Record<string, unknown> };
  }>;
  return entries
    .filter((entry) => entry.fieldsV1['f:spec']?.['f:replicas'])
    .map((entry) => `${entry.manager}/${entry.operation}${entry.subresource ? `/${entry.subresource}` : ''}`);
}

describe('charts/acis: helm upgrade after kubectl scale sbxpool', () => {
  it('with the chart owning replicas, an upgrade after a scale is refused naming the scale; --force-conflicts puts the chart value back', async () => {
    expect((await install('warmPool.replicas=2')).code).toBe(0);
    expect(managersOfReplicas()).toEqual(['helm/Apply']);
    expect((await scale(5)).code).toBe(0);
    expect(managersOfReplicas()).toEqual(['kubectl/Update/scale']);

    const refused = await upgrade();
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`conflict with "kubectl" with subresource "scale" using acis.dev/v1alpha1: .spec.replicas`);
    expect(replicas()).toBe(5);

    const forced = await upgrade('--force-conflicts');
    expect(forced.code, forced.stderr).toBe(0);
    expect(replicas()).toBe(2);
    expect(managersOfReplicas()).toEqual(['helm/Apply']);
  }, 180_000);

  it('with warmPool.manageReplicas false, a scaled pool keeps its count across upgrades, and the scale stays the owner', async () => {
    expect((await install('warmPool.replicas=2')).code).toBe(0);
    // The hand-over: scale first (the scale takes the field from the chart), then stop rendering it.
    expect((await scale(5)).code).toBe(0);
    const handedOver = await upgrade('--set', 'warmPool.manageReplicas=false');
    expect(handedOver.code, handedOver.stderr).toBe(0);
    expect(replicas()).toBe(5);
    expect(managersOfReplicas()).toEqual(['kubectl/Update/scale']);

    expect((await scale(7)).code).toBe(0);
    const again = await upgrade('--set', 'warmPool.agentType=vendor-agent-sdk');
    expect(again.code, again.stderr).toBe(0);
    expect(replicas()).toBe(7);
  }, 180_000);

  it('installed with warmPool.manageReplicas false, the pool starts at the CRD default and an HPA-style scale write coexists with upgrades', async () => {
    expect((await install('warmPool.manageReplicas=false')).code).toBe(0);
    expect(replicas()).toBe(1);
    expect(managersOfReplicas()).toEqual([]);
    // What an HPA does: a PUT of the scale subresource under its own manager.
    const scaleUrl = `${server.url}/apis/acis.dev/v1alpha1/namespaces/${SANDBOX_NAMESPACE}/sandboxwarmpools/${POOL}/scale`;
    const current = (await (await fetch(scaleUrl)).json()) as { spec: { replicas: number } };
    const written = await fetch(`${scaleUrl}?fieldManager=horizontal-pod-autoscaler`, {
      method: 'PUT',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ ...current, spec: { replicas: 4 } }),
    });
    expect(written.status).toBe(200);
    const upgraded = await upgrade();
    expect(upgraded.code, upgraded.stderr).toBe(0);
    expect(replicas()).toBe(4);
    expect(managersOfReplicas()).toEqual(['horizontal-pod-autoscaler/Update/scale']);
  }, 180_000);
});
