import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startKubelet, type Kubelet } from '../../hack/k8s/kubelet.js';
import { startKubeTestServer, type KubeTestServer } from '../../hack/k8s/server.js';
import type { KubeObject } from '../../hack/k8s/store.js';

/** Writes what happens to it to $OUT: SIGTERM, and a drain request on its port. */
const TRAPPING = `
const fs = require('node:fs');
process.on('SIGTERM', () => { fs.appendFileSync(process.env.OUT, 'SIGTERM\\n'); process.exit(0); });
require('node:http').createServer((request, response) => { fs.appendFileSync(process.env.OUT, 'GET ' + request.url + '\\n'); response.end(); })
  .listen(Number(process.env.PORT), process.env.POD_IP, () => console.log('up'));
`;
const STUBBORN = "process.on('SIGTERM', () => console.log('ignoring SIGTERM')); setInterval(() => {}, 1000); console.log('up')";

let server: KubeTestServer;
let kubelet: Kubelet;
let outputs: string;

beforeAll(async () => {
  outputs = await mkdtemp(path.join(tmpdir(), 'acis-termination-'));
  server = await startKubeTestServer();
  kubelet = await startKubelet({
    server,
    // Plain processes, so a program can write its record to the host; bubblewrap's SIGTERM path is kubelet.test.ts's.
    isolation: 'none',
    images: {
      'example/trapping:1': { command: process.execPath, args: ['-e', TRAPPING] },
      'example/stubborn:1': { command: process.execPath, args: ['-e', STUBBORN] },
    },
    probePeriodMs: 50,
  });
});
afterAll(async () => {
  await kubelet?.close();
  await server?.close();
  await rm(outputs, { recursive: true, force: true });
});

function trappingPod(name: string, extra: Record<string, unknown> = {}, lifecycle?: unknown): KubeObject {
  return server.store.create('pods', 'default', {
    metadata: { name, annotations: { 'kubelet.test.acis.dev/port-env': 'PORT' } },
    spec: {
      ...extra,
      containers: [
        {
          name: 'main',
          image: 'example/trapping:1',
          ports: [{ containerPort: 18_000 + Math.floor(Math.random() * 2000), name: 'http' }],
          env: [
            { name: 'OUT', value: path.join(outputs, name) },
            { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } },
          ],
          readinessProbe: { tcpSocket: { port: 'http' } },
          ...(lifecycle ? { lifecycle } : {}),
        },
      ],
    },
  });
}

const ready = (name: string) =>
  server.store.waitFor('pods', 'default', name, (pod) =>
    ((pod?.status as { conditions?: Array<{ type: string; status: string }> } | undefined)?.conditions ?? []).some(
      (condition) => condition.type === 'Ready' && condition.status === 'True',
    ),
  );
const gone = (name: string, timeoutMs = 10_000) => server.store.waitFor('pods', 'default', name, (pod) => pod === undefined, timeoutMs);
const record = (name: string) => readFile(path.join(outputs, name), 'utf8');

function events(name: string): Array<{ reason: string; type: string; message: string }> {
  return server.store.list('events', 'default').items.filter((event) => (event.involvedObject as { name: string }).name === name) as never;
}

describe('pod termination', () => {
  it('runs an exec preStop hook, then SIGTERM; the pod keeps its deletionTimestamp and grace until its container stopped', async () => {
    trappingPod(
      'exec-hook',
      {},
      {
        preStop: { exec: { command: [process.execPath, '-e', "require('fs').appendFileSync(process.env.OUT, 'preStop\\n')"] } },
      },
    );
    await ready('exec-hook');
    const deleted = server.store.delete('pods', 'default', 'exec-hook');
    // The default terminationGracePeriodSeconds.
    expect(deleted.metadata.deletionGracePeriodSeconds).toBe(30);
    expect(deleted.metadata.deletionTimestamp).toBeDefined();
    await gone('exec-hook');
    expect(await record('exec-hook')).toBe('preStop\nSIGTERM\n');
    expect(events('exec-hook').map((event) => event.reason)).toContain('Killing');
  });

  it('runs an httpGet preStop hook against the container before SIGTERM', async () => {
    trappingPod('http-hook', {}, { preStop: { httpGet: { path: '/drain', port: 'http' } } });
    await ready('http-hook');
    server.store.delete('pods', 'default', 'http-hook');
    await gone('http-hook');
    expect(await record('http-hook')).toBe('GET /drain\nSIGTERM\n');
  });

  it('records a failing preStop hook as FailedPreStopHook and stops the container anyway', async () => {
    trappingPod('failing-hook', {}, { preStop: { exec: { command: [process.execPath, '-e', 'process.exit(3)'] } } });
    await ready('failing-hook');
    server.store.delete('pods', 'default', 'failing-hook');
    await gone('failing-hook');
    expect(await record('failing-hook')).toBe('SIGTERM\n');
    expect(events('failing-hook')).toContainEqual(expect.objectContaining({ type: 'Warning', reason: 'FailedPreStopHook' }));
  });

  it("SIGKILLs a container that ignores SIGTERM when DeleteOptions' grace period (not the pod's 30 s) is spent", async () => {
    server.store.create('pods', 'default', {
      metadata: { name: 'stubborn' },
      spec: { terminationGracePeriodSeconds: 30, containers: [{ name: 'main', image: 'example/stubborn:1' }] },
    });
    await vi.waitFor(() => expect(kubelet.logs('default', 'stubborn')).toBe('up\n'), { timeout: 10_000 });
    const started = Date.now();
    const deleted = server.store.delete('pods', 'default', 'stubborn', { gracePeriodSeconds: 3 });
    expect(deleted.metadata.deletionGracePeriodSeconds).toBe(3);
    await vi.waitFor(() => expect(kubelet.logs('default', 'stubborn')).toContain('ignoring SIGTERM'));
    // Still there (and running) while the grace period lasts.
    expect(server.store.find('pods', 'default', 'stubborn')).toBeDefined();
    await gone('stubborn');
    expect(Date.now() - started).toBeGreaterThanOrEqual(2900);
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(kubelet.processes().filter((process) => process.pod === 'stubborn')).toEqual([]);
  });

  it('removes a pod deleted with grace 0 (kubectl delete --force) at once and kills its container', async () => {
    server.store.create('pods', 'default', {
      metadata: { name: 'forced' },
      spec: { containers: [{ name: 'main', image: 'example/stubborn:1' }] },
    });
    await vi.waitFor(() => expect(kubelet.logs('default', 'forced')).toBe('up\n'), { timeout: 10_000 });
    server.store.delete('pods', 'default', 'forced', { gracePeriodSeconds: 0 });
    expect(server.store.find('pods', 'default', 'forced')).toBeUndefined();
    await vi.waitFor(() => expect(kubelet.processes().filter((process) => process.pod === 'forced')).toEqual([]));
  });
});

describe('garbage collection', () => {
  it('with a collector delay, a dependent is still there right after its owner was deleted, and goes after the delay', async () => {
    const delayed = await startKubeTestServer({ garbageCollectorDelayMs: 300 });
    try {
      const owner = delayed.store.create('configmaps', 'default', { metadata: { name: 'owner' } });
      const reference = { apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid: owner.metadata.uid! };
      delayed.store.create('secrets', 'default', { metadata: { name: 'dependent', ownerReferences: [reference] } });
      const started = Date.now();
      delayed.store.delete('configmaps', 'default', 'owner');
      await new Promise((resolve) => setImmediate(resolve));
      expect(delayed.store.find('secrets', 'default', 'dependent')).toBeDefined();
      await delayed.store.waitFor('secrets', 'default', 'dependent', (secret) => secret === undefined);
      expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    } finally {
      await delayed.close();
    }
  });

  it('holds a foreground-deleted owner only for dependents with blockOwnerDeletion', async () => {
    const owner = server.store.create('configmaps', 'default', { metadata: { name: 'fg-owner' } });
    const reference = (block: boolean) => ({
      apiVersion: 'v1',
      kind: 'ConfigMap',
      name: 'fg-owner',
      uid: owner.metadata.uid!,
      blockOwnerDeletion: block,
    });
    for (const [name, block] of [
      ['blocking', true],
      ['non-blocking', false],
    ] as const) {
      server.store.create('secrets', 'default', {
        metadata: { name, ownerReferences: [reference(block)], finalizers: ['example.test/hold'] },
      });
    }
    server.store.delete('configmaps', 'default', 'fg-owner', { propagationPolicy: 'Foreground' });
    const terminating = (name: string) =>
      server.store.waitFor('secrets', 'default', name, (secret) => secret?.metadata.deletionTimestamp !== undefined);
    await Promise.all([terminating('blocking'), terminating('non-blocking')]);
    expect(server.store.get('configmaps', 'default', 'fg-owner').metadata.finalizers).toEqual(['foregroundDeletion']);
    server.store.patch('secrets', 'default', 'blocking', 'application/merge-patch+json', { metadata: { finalizers: null } });
    // The non-blocking dependent is still terminating; the owner goes anyway.
    await server.store.waitFor('configmaps', 'default', 'fg-owner', (object) => object === undefined);
    expect(server.store.find('secrets', 'default', 'non-blocking')?.metadata.deletionTimestamp).toBeDefined();
    server.store.patch('secrets', 'default', 'non-blocking', 'application/merge-patch+json', { metadata: { finalizers: null } });
  });
});
