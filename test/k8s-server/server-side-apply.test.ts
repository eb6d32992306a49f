import path from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kubectl, type ToolResult } from '../helpers/kube-tools.js';
import { startKubeTestServer, type KubeTestServer } from '../../hack/k8s/server.js';
import type { KubeObject } from '../../hack/k8s/store.js';

const FIXTURES = path.resolve(import.meta.dirname, 'fixtures');

let server: KubeTestServer;

beforeAll(async () => {
  server = await startKubeTestServer({ crdDirectories: [FIXTURES], namespaces: ['apply'] });
  const created = await run(['apply', '-f', '-'], GADGET_CRD);
  if (created.code !== 0) throw new Error(created.stderr);
});
afterAll(() => server.close());

function run(args: string[], input?: string): Promise<ToolResult> {
  return kubectl(['--namespace', 'apply', ...args], { kubeconfig: server.kubeconfigPath, input });
}

/** kubectl's server-side apply of a manifest, as a manager. */
function apply(manifest: string, manager = 'kubectl', ...flags: string[]): Promise<ToolResult> {
  return run(['apply', '--server-side', `--field-manager=${manager}`, ...flags, '-f', '-'], manifest);
}

interface Entry {
  manager: string;
  operation: string;
  apiVersion: string;
  time?: string;
  fieldsType: string;
  fieldsV1: Record<string, unknown>;
  subresource?: string;
}

function entries(resource: string, name: string): Entry[] {
  return (server.store.get(resource, 'apply', name).metadata.managedFields ?? []) as Entry[];
}

function entryOf(resource: string, name: string, manager: string, subresource?: string): Entry | undefined {
  return entries(resource, name).find((entry) => entry.manager === manager && entry.subresource === subresource);
}

async function call(method: string, urlPath: string, body: unknown, contentType: string, userAgent?: string) {
  const response = await fetch(`${server.url}${urlPath}`, {
    method,
    headers: { 'Content-Type': contentType, ...(userAgent ? { 'User-Agent': userAgent } : {}) },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, any> };
}

const widget = (name: string, spec: Record<string, unknown>) =>
  JSON.stringify({ apiVersion: 'example.test/v1', kind: 'Widget', metadata: { name }, spec });

/** A kind with each list type of the schema: a map keyed by port, a set of tags, an atomic list of args. */
const GADGET_CRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.test
spec:
  group: example.test
  scope: Namespaced
  names: { plural: gadgets, singular: gadget, kind: Gadget }
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                ports:
                  type: array
                  x-kubernetes-list-type: map
                  x-kubernetes-list-map-keys: [port]
                  items:
                    type: object
                    required: [port]
                    properties:
                      port: { type: integer }
                      name: { type: string }
                tags:
                  type: array
                  x-kubernetes-list-type: set
                  items: { type: string }
                args:
                  type: array
                  items: { type: string }
`;

describe('server-side apply: managed fields', () => {
  it('records an Apply entry with the fields of the applied configuration, in the FieldsV1 encoding', async () => {
    const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: { app: web }
spec:
  selector: { matchLabels: { app: web } }
  template:
    metadata: { labels: { app: web } }
    spec:
      containers:
        - name: main
          image: nginx:1
          env: [{ name: MODE, value: prod }]
          ports: [{ containerPort: 8080 }]
`;
    expect(await apply(deployment)).toMatchObject({ code: 0, stdout: 'deployment.apps/web serverside-applied\n' });
    const [entry] = entries('deployments.apps', 'web');
    expect(entry).toMatchObject({ manager: 'kubectl', operation: 'Apply', apiVersion: 'apps/v1', fieldsType: 'FieldsV1' });
    expect(entry!.time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(entry!.fieldsV1).toEqual({
      'f:metadata': { 'f:labels': { 'f:app': {} } },
      'f:spec': {
        'f:selector': { 'f:matchLabels': { 'f:app': {} } },
        'f:template': {
          'f:metadata': { 'f:labels': { 'f:app': {} } },
          'f:spec': {
            'f:containers': {
              'k:{"name":"main"}': {
                '.': {},
                'f:env': { 'k:{"name":"MODE"}': { '.': {}, 'f:name': {}, 'f:value': {} } },
                'f:image': {},
                'f:name': {},
                'f:ports': { 'k:{"containerPort":8080,"protocol":"TCP"}': { '.': {}, 'f:containerPort': {} } },
              },
            },
          },
        },
      },
    });
    // kubectl shows them only when asked, as with a real server.
    const shown = await run(['get', 'deployment', 'web', '-o', 'yaml', '--show-managed-fields']);
    expect(shown.stdout).toContain('manager: kubectl\n    operation: Apply');
  });

  it('records other writes as Update entries of their manager: kubectl create, label, scale, a status write, the user agent', async () => {
    expect((await run(['create', '-f', '-'], widget('updated', { color: 'red', replicas: 1 }))).code).toBe(0);
    expect(entryOf('widgets', 'updated', 'kubectl-create')).toMatchObject({
      operation: 'Update',
      apiVersion: 'example.test/v1',
      // A custom resource's spec is new on create, so the entry owns the map itself too; the server's
      // default (size) is the creator's as well, as defaults applied on decoding are.
      fieldsV1: { 'f:spec': { '.': {}, 'f:color': {}, 'f:replicas': {}, 'f:size': {} } },
    });
    expect((await run(['label', 'widget/updated', 'tier=gold'])).code).toBe(0);
    expect(entryOf('widgets', 'updated', 'kubectl-label')?.fieldsV1).toEqual({
      'f:metadata': { 'f:labels': { '.': {}, 'f:tier': {} } },
    });
    expect((await run(['scale', 'widget/updated', '--replicas=4'])).code).toBe(0);
    // kubectl scale names no manager: the server takes its user agent's (`kubectl/v1.35…`).
    expect(entryOf('widgets', 'updated', 'kubectl', 'scale')).toMatchObject({
      operation: 'Update',
      fieldsV1: { 'f:spec': { 'f:replicas': {} } },
    });
    // The creator no longer owns what the scale took.
    expect(entryOf('widgets', 'updated', 'kubectl-create')?.fieldsV1).toEqual({ 'f:spec': { '.': {}, 'f:color': {}, 'f:size': {} } });

    const status = await call(
      'PATCH',
      '/apis/example.test/v1/namespaces/apply/widgets/updated/status?fieldManager=widget-controller',
      { status: { phase: 'Running' } },
      'application/merge-patch+json',
    );
    expect(status.status).toBe(200);
    expect(entryOf('widgets', 'updated', 'widget-controller', 'status')?.fieldsV1).toEqual({
      'f:status': { '.': {}, 'f:phase': {} },
    });
    const byAgent = await call(
      'PATCH',
      '/apis/example.test/v1/namespaces/apply/widgets/updated',
      { spec: { code: 'abcd' } },
      'application/merge-patch+json',
      'acis-controller/1.2 (linux)',
    );
    expect(byAgent.status).toBe(200);
    expect(entryOf('widgets', 'updated', 'acis-controller')?.fieldsV1).toEqual({ 'f:spec': { 'f:code': {} } });
  });

  it('refuses an apply that changes a field another manager owns with 409 FieldManagerConflict; --force-conflicts takes it', async () => {
    const manifest = (replicas: number) => widget('scaled', { color: 'red', replicas });
    expect((await apply(manifest(2), 'helm')).code).toBe(0);
    expect((await run(['scale', 'widget/scaled', '--replicas=5'])).code).toBe(0);

    const refused = await apply(manifest(2), 'helm');
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(
      'Apply failed with 1 conflict: conflict with "kubectl" with subresource "scale" using example.test/v1: .spec.replicas',
    );
    expect(server.store.get('widgets', 'apply', 'scaled').spec).toMatchObject({ replicas: 5 });

    const raw = await call(
      'PATCH',
      '/apis/example.test/v1/namespaces/apply/widgets/scaled?fieldManager=helm',
      manifest(2),
      'application/apply-patch+yaml',
    );
    expect(raw).toEqual({
      status: 409,
      body: {
        kind: 'Status',
        apiVersion: 'v1',
        metadata: {},
        status: 'Failure',
        message: 'Apply failed with 1 conflict: conflict with "kubectl" with subresource "scale" using example.test/v1: .spec.replicas',
        reason: 'Conflict',
        details: {
          causes: [
            {
              reason: 'FieldManagerConflict',
              message: 'conflict with "kubectl" with subresource "scale" using example.test/v1',
              field: '.spec.replicas',
            },
          ],
        },
        code: 409,
      },
    });

    // Applying the value already there is no conflict: both own it.
    expect((await apply(manifest(5), 'helm')).code).toBe(0);
    expect(entryOf('widgets', 'scaled', 'helm')?.fieldsV1).toEqual({ 'f:spec': { 'f:color': {}, 'f:replicas': {} } });
    expect(entryOf('widgets', 'scaled', 'kubectl', 'scale')?.fieldsV1).toEqual({ 'f:spec': { 'f:replicas': {} } });

    expect((await run(['scale', 'widget/scaled', '--replicas=6'])).code).toBe(0);
    expect((await apply(manifest(3), 'helm', '--force-conflicts')).code).toBe(0);
    expect(server.store.get('widgets', 'apply', 'scaled').spec).toMatchObject({ replicas: 3 });
    // Forced: the scale's manager lost the field, and with it its only entry.
    expect(entryOf('widgets', 'scaled', 'kubectl', 'scale')).toBeUndefined();
  });

  it('names every conflict, grouped by manager, when there are several', async () => {
    expect((await apply(widget('contested', { color: 'red', code: 'abc', replicas: 1 }), 'first')).code).toBe(0);
    expect((await apply(widget('contested', { color: 'red', note: 'n' }), 'second')).code).toBe(0);
    const raw = await call(
      'PATCH',
      '/apis/example.test/v1/namespaces/apply/widgets/contested?fieldManager=second',
      widget('contested', { color: 'green', code: 'xyz', note: 'n' }),
      'application/apply-patch+yaml',
    );
    expect(raw.status).toBe(409);
    expect(raw.body.message).toBe('Apply failed with 2 conflicts: conflicts with "first":\n- .spec.code\n- .spec.color');
    expect(raw.body.details.causes).toEqual([
      { reason: 'FieldManagerConflict', message: 'conflict with "first"', field: '.spec.code' },
      { reason: 'FieldManagerConflict', message: 'conflict with "first"', field: '.spec.color' },
    ]);
  });

  it('removes a field its applier dropped, unless another manager owns it too', async () => {
    expect((await apply(widget('dropped', { color: 'red', code: 'abc', note: 'kept' }), 'owner')).code).toBe(0);
    expect((await apply(widget('dropped', { color: 'red', note: 'kept' }), 'other')).code).toBe(0);
    expect((await apply(widget('dropped', { color: 'red' }), 'owner')).code).toBe(0);
    const spec = server.store.get('widgets', 'apply', 'dropped').spec as Record<string, unknown>;
    expect(spec.code).toBeUndefined();
    expect(spec.note).toBe('kept');
  });

  it('merges lists by their keys: containers and env by name for built-ins; x-kubernetes-list-type map, set and atomic', async () => {
    const deployment = (manager: string, containers: string[]) =>
      JSON.stringify({
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: { name: 'shared' },
        spec: {
          selector: { matchLabels: { app: 'shared' } },
          template: {
            metadata: { labels: { app: 'shared' } },
            spec: { containers: containers.map((name) => ({ name, image: `${manager}:1`, env: [{ name: 'FROM', value: manager }] })) },
          },
        },
      });
    const containers = () =>
      (server.store.get('deployments.apps', 'apply', 'shared').spec as any).template.spec.containers.map(
        (container: { name: string; image: string }) => `${container.name}=${container.image}`,
      );
    expect((await apply(deployment('first', ['one']), 'first')).code).toBe(0);
    expect((await apply(deployment('second', ['two']), 'second')).code).toBe(0);
    expect(containers()).toEqual(['one=first:1', 'two=second:1']);

    const gadget = (manager: string, spec: Record<string, unknown>) =>
      apply(JSON.stringify({ apiVersion: 'example.test/v1', kind: 'Gadget', metadata: { name: 'g' }, spec }), manager);
    expect((await gadget('a', { ports: [{ port: 80, name: 'http' }], tags: ['x'], args: ['--a'] })).code).toBe(0);
    expect((await gadget('b', { ports: [{ port: 443, name: 'https' }], tags: ['y'] })).code).toBe(0);
    expect(entryOf('gadgets', 'g', 'b')?.fieldsV1).toEqual({
      'f:spec': { 'f:ports': { 'k:{"port":443}': { '.': {}, 'f:name': {}, 'f:port': {} } }, 'f:tags': { 'v:"y"': {} } },
    });
    const spec = () => server.store.get('gadgets', 'apply', 'g').spec as Record<string, unknown>;
    expect(spec()).toEqual({
      ports: [
        { port: 80, name: 'http' },
        { port: 443, name: 'https' },
      ],
      tags: ['x', 'y'],
      args: ['--a'],
    });
    // An atomic list belongs whole to one manager: another's different list is a conflict on the list.
    const atomic = await call(
      'PATCH',
      '/apis/example.test/v1/namespaces/apply/gadgets/g?fieldManager=b',
      { apiVersion: 'example.test/v1', kind: 'Gadget', metadata: { name: 'g' }, spec: { args: ['--b'] } },
      'application/apply-patch+yaml',
    );
    expect(atomic.body.details.causes).toEqual([{ reason: 'FieldManagerConflict', message: 'conflict with "a"', field: '.spec.args' }]);
    // a drops its port and tag: only its own items go.
    expect((await gadget('a', { args: ['--a'] })).code).toBe(0);
    expect(spec()).toEqual({ ports: [{ port: 443, name: 'https' }], tags: ['y'], args: ['--a'] });
    // The second container's manager drops it: only that container goes; the selector both applied stays.
    expect((await apply(deployment('second', []), 'second')).code).toBe(0);
    expect(containers()).toEqual(['one=first:1']);
    expect((server.store.get('deployments.apps', 'apply', 'shared').spec as any).selector).toEqual({ matchLabels: { app: 'shared' } });
  });

  it('works through client-node: apply with a field manager, a conflict as a 409 ApiException, force', async () => {
    const kubeConfig = new k8s.KubeConfig();
    kubeConfig.loadFromFile(server.kubeconfigPath);
    const objects = k8s.KubernetesObjectApi.makeApiClient(kubeConfig);
    const lease = (holder: string) => ({
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: { name: 'leader', namespace: 'apply' },
      spec: { holderIdentity: holder },
    });
    await objects.patch(lease('a'), undefined, undefined, 'candidate-a', undefined, k8s.PatchStrategy.ServerSideApply);
    const refused = await objects
      .patch(lease('b'), undefined, undefined, 'candidate-b', undefined, k8s.PatchStrategy.ServerSideApply)
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(k8s.ApiException);
    expect((refused as k8s.ApiException<string>).code).toBe(409);
    expect(JSON.parse((refused as k8s.ApiException<string>).body)).toMatchObject({
      reason: 'Conflict',
      message: 'Apply failed with 1 conflict: conflict with "candidate-a": .spec.holderIdentity',
    });
    const forced = (await objects.patch(
      lease('b'),
      undefined,
      undefined,
      'candidate-b',
      true,
      k8s.PatchStrategy.ServerSideApply,
    )) as KubeObject;
    expect(forced.spec).toEqual({ holderIdentity: 'b' });
    expect(forced.metadata.managedFields).toEqual([expect.objectContaining({ manager: 'candidate-b', operation: 'Apply' })]);
  });
});
