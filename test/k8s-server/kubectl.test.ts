import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { helm, kubectl, type ToolResult } from '../helpers/kube-tools.js';
import { startKubeTestServer, type KubeTestServer } from '../../hack/k8s/server.js';

const FIXTURES = path.resolve(import.meta.dirname, 'fixtures');

let server: KubeTestServer;

beforeAll(async () => {
  server = await startKubeTestServer({ crdDirectories: [FIXTURES] });
});
afterAll(() => server.close());

function run(args: string[], input?: string): Promise<ToolResult> {
  return kubectl(args, { kubeconfig: server.kubeconfigPath, input });
}

/** The rows of kubectl's table output, each split into its columns. */
function rows(output: string): string[][] {
  return output
    .trim()
    .split('\n')
    .map((line) => line.trim().split(/\s{2,}/));
}

const widgetManifest = (name: string, color: string, replicas: number) => `apiVersion: example.test/v1
kind: Widget
metadata:
  name: ${name}
  labels:
    example.test/owner: ann
spec:
  color: ${color}
  replicas: ${replicas}
  expiresAt: "2099-01-01T00:00:00Z"
`;

describe('kubectl against the test server', () => {
  it("applies custom resources and prints them with the CRD's printer columns, wide-only ones with -o wide", async () => {
    expect(await run(['apply', '-f', '-'], widgetManifest('first', 'red', 2))).toMatchObject({
      code: 0,
      stdout: 'widget.example.test/first created\n',
    });
    server.store.patch(
      'widgets',
      'default',
      'first',
      'application/merge-patch+json',
      { status: { phase: 'Running', conditions: [{ type: 'Ready', status: 'True' }] } },
      { subresource: 'status' },
    );
    const table = await run(['get', 'wdg']);
    expect(table.code).toBe(0);
    const [header, row] = rows(table.stdout);
    expect(header).toEqual(['NAME', 'COLOR', 'REPLICAS', 'PHASE', 'READY', 'EXPIRES', 'AGE']);
    expect(row!.slice(0, 5)).toEqual(['first', 'red', '2', 'Running', 'True']);
    // A future time in a date column prints as on a real cluster.
    expect(row![5]).toBe('<invalid>');
    expect(row![6]).toMatch(/^\d+s$/);
    const wide = rows((await run(['get', 'widgets', '-o', 'wide'])).stdout);
    expect(wide[0]).toContain('OWNER');
    expect(wide[1]![wide[0]!.indexOf('OWNER')]).toBe('ann');
  });

  it("re-applies (configured), refuses an invalid object with the server's causes, and deletes", async () => {
    expect((await run(['apply', '-f', '-'], widgetManifest('first', 'green', 2))).stdout).toBe('widget.example.test/first configured\n');
    expect(server.store.get('widgets', 'default', 'first').spec).toMatchObject({ color: 'green' });
    const refused = await run(['apply', '-f', '-'], widgetManifest('second', 'purple', 20));
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('spec.color: Unsupported value: "purple"');
    expect(refused.stderr).toContain('spec.replicas: Invalid value: 20');
    expect(server.store.find('widgets', 'default', 'second')).toBeUndefined();
    expect(await run(['delete', 'widget', 'first'])).toMatchObject({ code: 0 });
    expect(server.store.find('widgets', 'default', 'first')).toBeUndefined();
  });

  it('scales through the scale subresource', async () => {
    await run(['apply', '-f', '-'], widgetManifest('scalable', 'blue', 1));
    const generation = server.store.get('widgets', 'default', 'scalable').metadata.generation!;
    expect(await run(['scale', 'wdg/scalable', '--replicas=5'])).toMatchObject({
      code: 0,
      stdout: 'widget.example.test/scalable scaled\n',
    });
    const scaled = server.store.get('widgets', 'default', 'scalable');
    expect(scaled.spec).toMatchObject({ replicas: 5 });
    expect(scaled.metadata.generation).toBe(generation + 1);
    expect(server.countRequests({ method: 'PATCH', resource: 'widgets', subresource: 'scale' })).toBe(1);
    expect((await run(['scale', 'wdg/scalable', '--replicas=50'])).stderr).toContain('should be less than or equal to 10');
  });

  it('describes an object with its events, and prints pods as kubectl does', async () => {
    const object = server.store.get('widgets', 'default', 'scalable');
    server.store.create('events', 'default', {
      metadata: { name: 'scalable.1' },
      involvedObject: { apiVersion: 'example.test/v1', kind: 'Widget', name: 'scalable', namespace: 'default', uid: object.metadata.uid },
      reason: 'Scaled',
      message: 'scaled to 5',
      type: 'Normal',
      source: { component: 'widget-controller' },
      count: 1,
      firstTimestamp: new Date().toISOString(),
      lastTimestamp: new Date().toISOString(),
    });
    const described = await run(['describe', 'widget', 'scalable']);
    expect(described.stdout).toMatch(/Normal\s+Scaled\s+\S+\s+widget-controller\s+scaled to 5/);

    server.store.create('pods', 'default', {
      metadata: { name: 'p' },
      spec: { nodeName: 'node-x', containers: [{ name: 'main', image: 'x' }] },
    });
    server.store.patch(
      'pods',
      'default',
      'p',
      'application/merge-patch+json',
      {
        status: {
          phase: 'Running',
          podIP: '127.0.0.9',
          containerStatuses: [{ name: 'main', ready: false, restartCount: 4, state: { waiting: { reason: 'CrashLoopBackOff' } } }],
        },
      },
      { subresource: 'status' },
    );
    const [header, row] = rows((await run(['get', 'pods', '-o', 'wide'])).stdout);
    expect(header!.slice(0, 7)).toEqual(['NAME', 'READY', 'STATUS', 'RESTARTS', 'AGE', 'IP', 'NODE']);
    expect(row!.slice(0, 4)).toEqual(['p', '0/1', 'CrashLoopBackOff', '4']);
    expect(row!.slice(5, 7)).toEqual(['127.0.0.9', 'node-x']);
  });

  it('installs and uninstalls a helm chart', async () => {
    const chart = await mkdtemp(path.join(tmpdir(), 'acis-chart-'));
    try {
      await mkdir(path.join(chart, 'templates'));
      await writeFile(path.join(chart, 'Chart.yaml'), 'apiVersion: v2\nname: demo\nversion: 0.1.0\n');
      await writeFile(path.join(chart, 'values.yaml'), 'color: blue\n');
      await writeFile(
        path.join(chart, 'templates', 'things.yaml'),
        'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-config\ndata:\n  color: {{ .Values.color }}\n---\n' +
          widgetManifest('{{ .Release.Name }}-widget', '{{ .Values.color }}', 1),
      );
      const installed = await helm(['install', 'demo', chart, '--namespace', 'default'], {
        kubeconfig: server.kubeconfigPath,
        timeoutMs: 60_000,
      });
      expect(installed.stderr, installed.stderr).toBe('');
      expect(installed.code, installed.stdout).toBe(0);
      expect(server.store.get('configmaps', 'default', 'demo-config').data).toEqual({ color: 'blue' });
      expect(server.store.get('widgets', 'default', 'demo-widget').spec).toMatchObject({ color: 'blue' });
      const uninstalled = await helm(['uninstall', 'demo', '--namespace', 'default'], {
        kubeconfig: server.kubeconfigPath,
        timeoutMs: 60_000,
      });
      expect(uninstalled.code, uninstalled.stderr).toBe(0);
      expect(server.store.find('configmaps', 'default', 'demo-config')).toBeUndefined();
    } finally {
      await rm(chart, { recursive: true, force: true });
    }
  });
});
