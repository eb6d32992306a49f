/**
 * The controller's log lines about a Sandbox and its pod name the REST request that created it (the
 * `acis.dev/request-id` annotation the API server writes), on a cold start and on a warm pool
 * adoption; an annotation that is not a plausible id is left out of them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ANNOTATIONS } from '../../controller/api/v1alpha1.js';
import type { RunningController } from '../../controller/controller.js';
import type { KubeObject } from '../../hack/k8s/store.js';
import {
  type Cluster,
  createPool,
  eventually,
  NAMESPACE,
  phaseIs,
  readyPoolPods,
  sandboxManifest,
  startCluster,
  startTestController,
  waitForSandbox,
} from './harness.js';

let cluster: Cluster;
let controller: RunningController;
const logs: string[] = [];

beforeAll(async () => {
  cluster = await startCluster();
  controller = await startTestController(cluster, {}, logs);
}, 60_000);
afterAll(async () => {
  await controller?.stop();
  await cluster?.close();
});

/** A Sandbox as the API server writes it for a turn: annotated with the turn's request id. */
function createAnnotated(name: string, requestId: string, spec: Parameters<typeof sandboxManifest>[1] = {}): void {
  const manifest = sandboxManifest(name, { shutdownTime: new Date(Date.now() + 600_000).toISOString(), ...spec });
  manifest.metadata.annotations = { [ANNOTATIONS.requestId]: requestId };
  cluster.server.store.create('sandboxes', NAMESPACE, manifest as unknown as KubeObject);
}

/** The controller's log lines about a Sandbox, as objects. */
const linesAbout = (sandbox: string) =>
  logs.map((line) => JSON.parse(line) as Record<string, unknown>).filter((line) => line.sandbox === sandbox);

describe('the controller’s lines about a Sandbox', () => {
  it('carry the request id of its annotation: the pod it creates, the events it records, Ready', async () => {
    createAnnotated('sbx-traced', 'host-trace:cold.1');
    await waitForSandbox(cluster, 'sbx-traced', phaseIs('Ready'));
    const lines = await eventually(cluster, () => {
      const about = linesAbout('sbx-traced');
      return about.some((line) => line.reason === 'Ready') && about;
    });
    expect(lines).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ msg: 'creating the runner pod', pod: expect.stringMatching(/^sbx-traced-[0-9a-f]{8}$/) }),
        expect.objectContaining({ reason: 'Started', msg: expect.stringContaining('sbx-traced') }),
        expect.objectContaining({ reason: 'Ready', phase: 'Ready' }),
      ]),
    );
    for (const line of lines) expect(line.request_id, JSON.stringify(line)).toBe('host-trace:cold.1');
  });

  it('carry it when a warm pool pod is adopted', async () => {
    createPool(cluster, 'traced-pool', 1);
    await eventually(cluster, () => readyPoolPods(cluster, 'traced-pool').length === 1, 60_000);
    const [pooled] = readyPoolPods(cluster, 'traced-pool');
    createAnnotated('sbx-adopting', 'req_ADOPTED01');
    await waitForSandbox(cluster, 'sbx-adopting', phaseIs('Ready'));
    const lines = await eventually(cluster, () => {
      const about = linesAbout('sbx-adopting');
      return about.some((line) => line.reason === 'Ready') && about;
    });
    expect(lines).toContainEqual(
      expect.objectContaining({
        msg: 'adopting a warm pool pod',
        pod: pooled!.metadata.name,
        pool: 'traced-pool',
        request_id: 'req_ADOPTED01',
      }),
    );
    for (const line of lines) expect(line.request_id, JSON.stringify(line)).toBe('req_ADOPTED01');
  });

  it.each([
    ['too long', 'x'.repeat(129)],
    ['with a line break', 'req-1\nforged'],
    ['non-ASCII', 'req-ünïcødé'],
  ])('leave out an annotation %s', async (_name, hostile) => {
    const name = `sbx-hostile-${logs.length}`;
    createAnnotated(name, hostile);
    await waitForSandbox(cluster, name, phaseIs('Ready'));
    const lines = await eventually(cluster, () => {
      const about = linesAbout(name);
      return about.some((line) => line.reason === 'Ready') && about;
    });
    for (const line of lines) expect(line).not.toHaveProperty('request_id');
    expect(logs.join('\n')).not.toContain(hostile.slice(0, 8) === 'xxxxxxxx' ? hostile : 'forged');
    expect(logs.join('\n')).not.toContain('nïc');
  });
});
