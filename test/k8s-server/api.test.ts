import path from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startKubeTestServer, type KubeTestServer } from '../../hack/k8s/server.js';

const FIXTURES = path.resolve(import.meta.dirname, 'fixtures');
const WIDGETS = '/apis/example.test/v1/namespaces/default/widgets';

let server: KubeTestServer;
let kubeConfig: k8s.KubeConfig;
let core: k8s.CoreV1Api;

beforeAll(async () => {
  server = await startKubeTestServer({ crdDirectories: [FIXTURES], namespaces: ['team-a'], historyLimit: 50, bookmarkIntervalMs: 50 });
  kubeConfig = new k8s.KubeConfig();
  kubeConfig.loadFromFile(server.kubeconfigPath);
  core = kubeConfig.makeApiClient(k8s.CoreV1Api);
});
afterAll(() => server.close());

interface Answer {
  status: number;
  body: Record<string, any>;
}

async function call(method: string, urlPath: string, body?: unknown, contentType = 'application/json'): Promise<Answer> {
  const response = await fetch(`${server.url}${urlPath}`, {
    method,
    headers: body === undefined ? {} : { 'Content-Type': contentType },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as Record<string, any> };
}

/** Reads a watch stream until `until` says enough (or the server ends it) and returns its events. */
async function watchEvents(
  urlPath: string,
  until: (events: Array<{ type: string; object: any }>) => boolean,
): Promise<Array<{ type: string; object: any }>> {
  const controller = new AbortController();
  const response = await fetch(`${server.url}${urlPath}`, { signal: controller.signal });
  const events: Array<{ type: string; object: any }> = [];
  const decoder = new TextDecoder();
  let buffer = '';
  try {
    for await (const chunk of response.body!) {
      buffer += decoder.decode(chunk as Uint8Array, { stream: true });
      for (let newline = buffer.indexOf('\n'); newline >= 0; newline = buffer.indexOf('\n')) {
        events.push(JSON.parse(buffer.slice(0, newline)));
        buffer = buffer.slice(newline + 1);
      }
      if (until(events)) break;
    }
  } finally {
    controller.abort();
  }
  return events;
}

function widget(name: string, spec: Record<string, unknown> = { color: 'red' }, labels?: Record<string, string>) {
  return { apiVersion: 'example.test/v1', kind: 'Widget', metadata: { name, ...(labels ? { labels } : {}) }, spec };
}

describe('makeInformer against the test server', () => {
  it('sees adds, updates and deletes, and lists again after 410 Gone without losing a change', async () => {
    const seen: string[] = [];
    const informer = k8s.makeInformer(kubeConfig, '/api/v1/namespaces/team-a/configmaps', () =>
      core.listNamespacedConfigMap({ namespace: 'team-a' }),
    );
    const changed = new Promise<void>((resolve) => {
      informer.on('add', (object) => {
        seen.push(`add ${object.metadata?.name}`);
        if (object.metadata?.name === 'after-compaction') resolve();
      });
    });
    informer.on('update', (object) => seen.push(`update ${object.metadata?.name}=${object.data?.value}`));
    informer.on('delete', (object) => seen.push(`delete ${object.metadata?.name}`));
    await core.createNamespacedConfigMap({ namespace: 'team-a', body: { metadata: { name: 'before' }, data: { value: '1' } } });
    await informer.start();
    await core.createNamespacedConfigMap({ namespace: 'team-a', body: { metadata: { name: 'second' } } });
    await core.patchNamespacedConfigMap(
      { namespace: 'team-a', name: 'before', body: { data: { value: '2' } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    await core.deleteNamespacedConfigMap({ namespace: 'team-a', name: 'second' });
    // The history is forgotten and the watch cut: reconnecting from the old version must fail with 410,
    // and the change made meanwhile must arrive through the re-list.
    await new Promise<void>((resolve) => informer.on('delete', () => resolve()));
    // In one tick, so the informer cannot reconnect in between.
    server.closeWatches();
    server.store.create('configmaps', 'team-a', { metadata: { name: 'after-compaction' } });
    server.compact();
    await changed;
    await informer.stop();
    expect(seen).toEqual(['add before', 'add second', 'update before=2', 'delete second', 'add after-compaction']);
    expect(server.countRequests({ verb: 'list', resource: 'configmaps', namespace: 'team-a' })).toBe(2);
  });
});

describe('connections', () => {
  it('keeps a connection between requests and announces no keep-alive timeout, as kube-apiserver (Go) does', async () => {
    const first = await fetch(`${server.url}/api/v1/namespaces/default/secrets`);
    await first.text();
    expect(first.headers.get('connection')).toBe('keep-alive');
    // A client therefore keeps its connections as its own settings say (undici: 4 s unless told).
    expect(first.headers.get('keep-alive')).toBeNull();
  });
});

describe('watch', () => {
  it('replays changes after a resourceVersion, reports selector exits as DELETED and sends bookmarks', async () => {
    const created = await call('POST', '/api/v1/namespaces/default/configmaps', { metadata: { name: 'watched', labels: { tier: 'a' } } });
    const from = created.body.metadata.resourceVersion;
    await call('PATCH', '/api/v1/namespaces/default/configmaps/watched', { data: { x: '1' } }, 'application/merge-patch+json');
    await call(
      'PATCH',
      '/api/v1/namespaces/default/configmaps/watched',
      { metadata: { labels: { tier: 'b' } } },
      'application/merge-patch+json',
    );
    const events = await watchEvents(
      `/api/v1/namespaces/default/configmaps?watch=1&labelSelector=tier%3Da&allowWatchBookmarks=true&resourceVersion=${from}`,
      (list) => list.some((event) => event.type === 'BOOKMARK'),
    );
    expect(events.map((event) => event.type)).toEqual(['MODIFIED', 'DELETED', 'BOOKMARK']);
    expect(Number(events[2]!.object.metadata.resourceVersion)).toBeGreaterThan(Number(from));
  });

  it('answers a version older than the kept history with an ERROR event carrying 410 Expired', async () => {
    for (let index = 0; index < 60; index++)
      await call('POST', '/api/v1/namespaces/default/configmaps', { metadata: { generateName: 'churn-' } });
    const events = await watchEvents('/api/v1/namespaces/default/configmaps?watch=true&resourceVersion=2', () => false);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ type: 'ERROR', object: { kind: 'Status', code: 410, reason: 'Expired' } });
  });

  it('starts with ADDED for every current object when no resourceVersion is given', async () => {
    const events = await watchEvents('/api/v1/watch/namespaces?', (list) => list.length >= 4);
    expect(events.map((event) => `${event.type} ${event.object.metadata.name}`)).toEqual(
      expect.arrayContaining(['ADDED default', 'ADDED kube-system', 'ADDED kube-public', 'ADDED team-a']),
    );
  });

  it('ends open watches of one resource cleanly, or cuts them', async () => {
    const stream = async () => {
      const response = await fetch(`${server.url}/api/v1/namespaces/default/services?watch=1`);
      return response.text();
    };
    const clean = stream();
    const other = fetch(`${server.url}/api/v1/namespaces/default/endpoints?watch=1`);
    await vi.waitFor(() => {
      expect(server.countRequests({ verb: 'watch', resource: 'services' })).toBe(1);
      expect(server.countRequests({ verb: 'watch', resource: 'endpoints' })).toBe(1);
    });
    server.closeWatches({ resource: 'services' });
    await expect(clean).resolves.toBe('');
    const cut = stream();
    await vi.waitFor(() => expect(server.countRequests({ verb: 'watch', resource: 'services' })).toBe(2));
    server.closeWatches({ abrupt: true });
    await expect(cut).rejects.toThrow();
    await expect((await other).text()).rejects.toThrow();
  });

  it('fails a watch on demand (failNext) and drops one, as a flaky apiserver would', async () => {
    server.failNext({ verb: 'watch', resource: 'widgets', status: 500 });
    const failed = await fetch(`${server.url}${WIDGETS}?watch=1`);
    expect(failed.status).toBe(500);
    await failed.body?.cancel();
    server.failNext({ verb: 'watch', resource: 'widgets', drop: true });
    await expect(fetch(`${server.url}${WIDGETS}?watch=1`).then((response) => response.text())).rejects.toThrow();
    server.failNext({ verb: 'watch', resource: 'widgets', status: 410 });
    const gone = await watchEvents(`${WIDGETS}?watch=1&resourceVersion=1`, () => false);
    expect(gone[0]).toMatchObject({ type: 'ERROR', object: { code: 410 } });
  });
});

describe('writes', () => {
  it('refuses a stale resourceVersion with 409 Conflict on PUT and PATCH, and a second create with AlreadyExists', async () => {
    const first = await call('POST', `${WIDGETS}`, widget('concurrent'));
    expect(first.status).toBe(201);
    const stale = first.body.metadata.resourceVersion;
    const updated = await call('PUT', `${WIDGETS}/concurrent`, { ...first.body, spec: { color: 'green' } });
    expect(updated.status).toBe(200);
    const conflict = await call('PUT', `${WIDGETS}/concurrent`, { ...first.body, spec: { color: 'blue' } });
    expect(conflict.status).toBe(409);
    expect(conflict.body).toMatchObject({ kind: 'Status', reason: 'Conflict', code: 409 });
    expect(conflict.body.message).toContain('the object has been modified');
    const patchConflict = await call(
      'PATCH',
      `${WIDGETS}/concurrent`,
      { metadata: { resourceVersion: stale }, spec: { color: 'blue' } },
      'application/merge-patch+json',
    );
    expect(patchConflict.status).toBe(409);
    const noVersion = await call('PUT', `${WIDGETS}/concurrent`, { ...updated.body, metadata: { name: 'concurrent' } });
    expect(noVersion.status).toBe(422);
    const again = await call('POST', `${WIDGETS}`, widget('concurrent'));
    expect(again.body).toMatchObject({ reason: 'AlreadyExists', code: 409 });
    expect((await call('GET', `${WIDGETS}/concurrent`)).body.spec.color).toBe('green');
  });

  it('bumps metadata.generation on spec changes only, and keeps status and spec writes apart', async () => {
    const created = (await call('POST', WIDGETS, { ...widget('generations'), status: { phase: 'Ignored' } })).body;
    expect(created.metadata.generation).toBe(1);
    expect(created.status).toBeUndefined();
    const labelled = await call('PATCH', `${WIDGETS}/generations`, { metadata: { labels: { a: 'b' } } }, 'application/merge-patch+json');
    expect(labelled.body.metadata.generation).toBe(1);
    const status = await call(
      'PATCH',
      `${WIDGETS}/generations/status`,
      { status: { phase: 'Ready' }, spec: { color: 'blue' } },
      'application/merge-patch+json',
    );
    expect(status.body.metadata.generation).toBe(1);
    expect(status.body.spec.color).toBe('red');
    expect(status.body.status.phase).toBe('Ready');
    const spec = await call(
      'PATCH',
      `${WIDGETS}/generations`,
      { spec: { color: 'blue' }, status: { phase: 'Lost' } },
      'application/merge-patch+json',
    );
    expect(spec.body.metadata.generation).toBe(2);
    expect(spec.body.status.phase).toBe('Ready');
    const statusPut = await call('PUT', `${WIDGETS}/generations/status`, { ...spec.body, status: { phase: 'Done' } });
    expect(statusPut.body).toMatchObject({ metadata: { generation: 2 }, status: { phase: 'Done' } });
  });

  it('applies JSON patches, and refuses strategic merge patches for custom resources as the real server does', async () => {
    await call('POST', WIDGETS, widget('patched', { color: 'red', parts: [{ name: 'a' }] }));
    const patched = await call(
      'PATCH',
      `${WIDGETS}/patched`,
      [
        { op: 'add', path: '/spec/parts/-', value: { name: 'b' } },
        { op: 'replace', path: '/spec/color', value: 'green' },
      ],
      'application/json-patch+json',
    );
    expect(patched.body.spec).toMatchObject({
      color: 'green',
      parts: [
        { name: 'a', count: 1 },
        { name: 'b', count: 1 },
      ],
    });
    const failedTest = await call(
      'PATCH',
      `${WIDGETS}/patched`,
      [{ op: 'test', path: '/spec/color', value: 'red' }],
      'application/json-patch+json',
    );
    expect(failedTest.status).toBe(422);
    const strategic = await call('PATCH', `${WIDGETS}/patched`, { spec: { color: 'blue' } }, 'application/strategic-merge-patch+json');
    expect(strategic.status).toBe(415);
  });

  it("merges a pod's containers by name in a strategic merge patch and keeps the rest of its spec immutable", async () => {
    await call('POST', '/api/v1/namespaces/default/pods', {
      metadata: { name: 'smp' },
      spec: {
        containers: [
          { name: 'a', image: 'one' },
          { name: 'b', image: 'two' },
        ],
      },
    });
    const patched = await call(
      'PATCH',
      '/api/v1/namespaces/default/pods/smp',
      { spec: { containers: [{ name: 'b', image: 'three' }] } },
      'application/strategic-merge-patch+json',
    );
    expect(patched.body.spec.containers.map((container: { image: string }) => container.image)).toEqual(['one', 'three']);
    const forbidden = await call(
      'PATCH',
      '/api/v1/namespaces/default/pods/smp',
      { spec: { restartPolicy: 'Never' } },
      'application/strategic-merge-patch+json',
    );
    expect(forbidden.status).toBe(422);
    expect(forbidden.body.details.causes[0]).toMatchObject({ reason: 'FieldValueForbidden', field: 'spec' });
  });

  it('fills in the defaults the real server adds to pods, services and secrets', async () => {
    const pod = (
      await call('POST', '/api/v1/namespaces/default/pods', {
        metadata: { name: 'defaulted' },
        spec: { containers: [{ name: 'main', image: 'runner:1.0', ports: [{ containerPort: 80 }] }] },
      })
    ).body;
    expect(pod.spec).toMatchObject({
      restartPolicy: 'Always',
      serviceAccountName: 'default',
      enableServiceLinks: true,
      terminationGracePeriodSeconds: 30,
    });
    expect(pod.spec.containers[0]).toMatchObject({
      imagePullPolicy: 'IfNotPresent',
      terminationMessagePath: '/dev/termination-log',
      ports: [{ containerPort: 80, protocol: 'TCP' }],
    });
    expect(pod.spec.tolerations).toHaveLength(2);
    expect(pod.status).toEqual({ phase: 'Pending', qosClass: 'BestEffort' });
    const service = (
      await call('POST', '/api/v1/namespaces/default/services', { metadata: { name: 'egress' }, spec: { ports: [{ port: 3128 }] } })
    ).body;
    expect(service.spec).toMatchObject({
      type: 'ClusterIP',
      clusterIP: expect.stringMatching(/^10\.96\./),
      ports: [{ port: 3128, targetPort: 3128, protocol: 'TCP' }],
    });
    expect((await call('POST', '/api/v1/namespaces/default/secrets', { metadata: { name: 'plain' } })).body.type).toBe('Opaque');
  });

  it('creates with generateName and refuses objects in a namespace that does not exist', async () => {
    const generated = await call('POST', WIDGETS, { ...widget(''), metadata: { generateName: 'gen-' } });
    expect(generated.body.metadata.name).toMatch(/^gen-[a-z0-9]{5}$/);
    expect(generated.body.metadata.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(generated.body.metadata.creationTimestamp).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    const missing = await call('POST', '/api/v1/namespaces/nowhere/configmaps', { metadata: { name: 'x' } });
    expect(missing.status).toBe(404);
    expect(missing.body.message).toBe('namespaces "nowhere" not found');
    const nameless = await call('POST', '/api/v1/namespaces/default/configmaps', { metadata: {} });
    expect(nameless.body).toMatchObject({ code: 422, details: { causes: [{ field: 'metadata.name', reason: 'FieldValueRequired' }] } });
    const badName = await call('POST', '/api/v1/namespaces/default/configmaps', { metadata: { name: 'Not_Valid' } });
    expect(badName.body).toMatchObject({ code: 422, reason: 'Invalid', details: { causes: [{ field: 'metadata.name' }] } });
  });
});

describe('admission', () => {
  it('refuses pods past a ResourceQuota with 403 exceeded quota, and pods without the tracked requests', async () => {
    await call('POST', '/api/v1/namespaces', { metadata: { name: 'quota' } });
    await call('POST', '/api/v1/namespaces/quota/resourcequotas', {
      metadata: { name: 'small' },
      spec: { hard: { pods: '2', 'requests.cpu': '1' } },
    });
    const pod = (name: string, cpu?: string) => ({
      metadata: { name },
      spec: { containers: [{ name: 'main', image: 'x', ...(cpu ? { resources: { requests: { cpu } } } : {}) }] },
    });
    expect((await call('POST', '/api/v1/namespaces/quota/pods', pod('a', '600m'))).status).toBe(201);
    const overCpu = await call('POST', '/api/v1/namespaces/quota/pods', pod('b', '500m'));
    expect(overCpu.body).toMatchObject({ code: 403, reason: 'Forbidden' });
    expect(overCpu.body.message).toBe(
      'pods "b" is forbidden: exceeded quota: small, requested: requests.cpu=500m, used: requests.cpu=600m, limited: requests.cpu=1',
    );
    const unspecified = await call('POST', '/api/v1/namespaces/quota/pods', pod('c'));
    expect(unspecified.body.message).toBe('pods "c" is forbidden: failed quota: small: must specify requests.cpu');
    expect((await call('POST', '/api/v1/namespaces/quota/pods', pod('d', '100m'))).status).toBe(201);
    const overCount = await call('POST', '/api/v1/namespaces/quota/pods', pod('e', '100m'));
    expect(overCount.body.message).toContain('exceeded quota: small, requested: pods=1, used: pods=2, limited: pods=2');
  });

  it('shows an events.k8s.io/v1 Event as a core/v1 Event and back', async () => {
    const recorded = await call('POST', '/apis/events.k8s.io/v1/namespaces/default/events', {
      metadata: { name: 'claimed.1' },
      eventTime: '2026-01-01T00:00:00.000000Z',
      reportingController: 'acis.dev/controller',
      reportingInstance: 'controller-0',
      action: 'Claim',
      reason: 'Claimed',
      note: 'adopted a warm pod',
      type: 'Normal',
      regarding: { apiVersion: 'example.test/v1', kind: 'Widget', name: 'w', namespace: 'default', uid: 'u-1' },
    });
    expect(recorded.status).toBe(201);
    expect(recorded.body).toMatchObject({ apiVersion: 'events.k8s.io/v1', note: 'adopted a warm pod', regarding: { name: 'w' } });
    const core = await call('GET', '/api/v1/namespaces/default/events?fieldSelector=involvedObject.uid%3Du-1');
    expect(core.body.items).toHaveLength(1);
    expect(core.body.items[0]).toMatchObject({
      apiVersion: 'v1',
      message: 'adopted a warm pod',
      reportingComponent: 'acis.dev/controller',
      involvedObject: { kind: 'Widget' },
    });
    const patched = await call(
      'PATCH',
      '/apis/events.k8s.io/v1/namespaces/default/events/claimed.1',
      { series: { count: 2, lastObservedTime: '2026-01-01T00:01:00.000000Z' } },
      'application/merge-patch+json',
    );
    expect(patched.body).toMatchObject({ note: 'adopted a warm pod', series: { count: 2 } });
  });
});

describe('custom resource validation', () => {
  it('refuses a bad object with 422 and one cause per failure, changing nothing', async () => {
    const before = server.store.list('widgets', 'default').items.length;
    const answer = await call(
      'POST',
      WIDGETS,
      widget('bad', { replicas: -1, size: 'huge', code: 'ab', expiresAt: 'tomorrow', tags: { a: 1 }, parts: [{}, {}, {}, {}] }),
    );
    expect(answer.status).toBe(422);
    expect(answer.body.reason).toBe('Invalid');
    const causes = answer.body.details.causes.map((cause: { field: string; reason: string }) => `${cause.field} ${cause.reason}`);
    expect(causes).toEqual(
      expect.arrayContaining([
        'spec.color FieldValueRequired',
        'spec.replicas FieldValueInvalid',
        'spec.size FieldValueInvalid',
        'spec.code FieldValueInvalid',
        'spec.expiresAt FieldValueInvalid',
        'spec.tags.a FieldValueTypeInvalid',
        'spec.parts FieldValueTooMany',
      ]),
    );
    expect(answer.body.message).toMatch(/^Widget\.example\.test "bad" is invalid: \[/);
    const enumFailure = await call('POST', WIDGETS, widget('bad', { color: 'purple' }));
    expect(enumFailure.body.details.causes).toEqual([
      {
        reason: 'FieldValueNotSupported',
        message: 'Unsupported value: "purple": supported values: "red", "green", "blue"',
        field: 'spec.color',
      },
    ]);
    expect(server.store.list('widgets', 'default').items.length).toBe(before);
  });

  it('prunes unknown fields (or refuses them with fieldValidation=Strict), keeps preserved ones and applies defaults', async () => {
    const created = await call(
      'POST',
      WIDGETS,
      widget('pruned', { color: 'blue', unknown: 1, note: null, extra: { anything: { goes: true } }, parts: [{ name: 'p' }] }),
    );
    expect(created.status).toBe(201);
    expect(created.body.spec).toEqual({
      color: 'blue',
      note: null,
      extra: { anything: { goes: true } },
      parts: [{ name: 'p', count: 1 }],
      replicas: 1,
      size: '1Gi',
    });
    const strict = await call('POST', `${WIDGETS}?fieldValidation=Strict`, widget('strict', { color: 'blue', unknown: 1 }));
    expect(strict.status).toBe(400);
    expect(strict.body.message).toBe('strict decoding error: unknown field "spec.unknown"');
  });
});

describe('lists and selectors', () => {
  beforeAll(async () => {
    const labels: Array<Record<string, string>> = [{ app: 'web', tier: 'front' }, { app: 'web', tier: 'back' }, { app: 'db' }, {}];
    for (const [index, set] of labels.entries()) {
      await call('POST', '/api/v1/namespaces/team-a/secrets', { metadata: { name: `s${index}`, labels: set }, type: 'Opaque' });
    }
  });

  async function names(query: string): Promise<string[]> {
    const answer = await call('GET', `/api/v1/namespaces/team-a/secrets?${query}`);
    return answer.body.items.map((item: { metadata: { name: string } }) => item.metadata.name);
  }

  it.each([
    ['labelSelector=app%3Dweb', ['s0', 's1']],
    ['labelSelector=app%3D%3Dweb,tier!%3Dfront', ['s1']],
    ['labelSelector=app!%3Dweb', ['s2', 's3']],
    ['labelSelector=tier%20in%20(front,back)', ['s0', 's1']],
    ['labelSelector=app%20notin%20(web)', ['s2', 's3']],
    ['labelSelector=tier', ['s0', 's1']],
    ['labelSelector=!app', ['s3']],
    ['fieldSelector=metadata.name%3Ds2', ['s2']],
    ['fieldSelector=metadata.name!%3Ds2,metadata.namespace%3Dteam-a&labelSelector=app', ['s0', 's1']],
  ])('%s', async (query, expected) => {
    expect(await names(query)).toEqual(expected);
  });

  it('refuses a malformed selector with 400', async () => {
    const answer = await call('GET', '/api/v1/namespaces/team-a/secrets?labelSelector=a%3D%3D%3Db%3D');
    expect(answer.status).toBe(400);
  });

  it('pages with limit and continue at one resourceVersion', async () => {
    const first = await call('GET', '/api/v1/namespaces/team-a/secrets?limit=3');
    expect(first.body.items).toHaveLength(3);
    expect(first.body.metadata.remainingItemCount).toBe(1);
    const second = await call('GET', `/api/v1/namespaces/team-a/secrets?limit=3&continue=${first.body.metadata.continue}`);
    expect(second.body.items.map((item: { metadata: { name: string } }) => item.metadata.name)).toEqual(['s3']);
    expect(second.body.metadata.resourceVersion).toBe(first.body.metadata.resourceVersion);
    expect(second.body.metadata.continue).toBeUndefined();
  });
});

describe('garbage collection', () => {
  async function owned(name: string, owner: Record<string, any>) {
    return call('POST', '/api/v1/namespaces/default/configmaps', {
      metadata: {
        name,
        ownerReferences: [
          {
            apiVersion: 'example.test/v1',
            kind: 'Widget',
            name: owner.metadata.name,
            uid: owner.metadata.uid,
            controller: true,
            blockOwnerDeletion: true,
          },
        ],
      },
    });
  }

  it('deletes dependents of a deleted owner in the background, and orphans them when asked', async () => {
    const owner = (await call('POST', WIDGETS, widget('owner'))).body;
    await owned('dependent', owner);
    await call('DELETE', `${WIDGETS}/owner`);
    await server.store.waitUntil(
      () => server.store.list('configmaps', 'default', { fieldSelector: 'metadata.name=dependent' }).items.length === 0,
      5_000,
      'the dependent to go',
    );

    const keeper = (await call('POST', WIDGETS, widget('keeper'))).body;
    await owned('orphan', keeper);
    await call('DELETE', `${WIDGETS}/keeper?propagationPolicy=Orphan`);
    const orphan = await server.store.waitFor(
      'configmaps',
      'default',
      'orphan',
      (object) => object?.metadata.ownerReferences === undefined,
    );
    expect(orphan).toBeDefined();
  });

  it('keeps a foreground-deleted owner until its dependents are gone', async () => {
    const owner = (await call('POST', WIDGETS, widget('foreground'))).body;
    await owned('fg-dependent', owner);
    const deleting = await call('DELETE', `${WIDGETS}/foreground`, { propagationPolicy: 'Foreground' });
    expect(deleting.body.metadata.deletionTimestamp).toBeDefined();
    expect(deleting.body.metadata.finalizers).toContain('foregroundDeletion');
    await server.store.waitFor('widgets', 'default', 'foreground', (object) => object === undefined);
    expect(server.store.find('configmaps', 'default', 'fg-dependent')).toBeUndefined();
  });

  it('keeps an object with finalizers until they are removed', async () => {
    await call('POST', WIDGETS, { ...widget('finalized'), metadata: { name: 'finalized', finalizers: ['example.test/cleanup'] } });
    const deleting = await call('DELETE', `${WIDGETS}/finalized`);
    expect(deleting.body.metadata.deletionTimestamp).toBeDefined();
    const refused = await call(
      'PATCH',
      `${WIDGETS}/finalized`,
      { metadata: { finalizers: ['example.test/cleanup', 'other'] } },
      'application/merge-patch+json',
    );
    expect(refused.status).toBe(422);
    await call('PATCH', `${WIDGETS}/finalized`, { metadata: { finalizers: null } }, 'application/merge-patch+json');
    expect((await call('GET', `${WIDGETS}/finalized`)).status).toBe(404);
  });

  it('empties and removes a deleted namespace', async () => {
    await call('POST', '/api/v1/namespaces', { metadata: { name: 'doomed' } });
    await call('POST', '/api/v1/namespaces/doomed/configmaps', { metadata: { name: 'x' } });
    const deleting = await call('DELETE', '/api/v1/namespaces/doomed');
    expect(deleting.body.status.phase).toBe('Terminating');
    await server.store.waitFor('namespaces', undefined, 'doomed', (object) => object === undefined);
    expect(server.store.list('configmaps', 'doomed').items).toEqual([]);
  });
});

describe('discovery, leases and scale through client-node', () => {
  it('serves leases with optimistic concurrency, as leader election uses them', async () => {
    const coordination = kubeConfig.makeApiClient(k8s.CoordinationV1Api);
    const lease = await coordination.createNamespacedLease({
      namespace: 'default',
      body: { metadata: { name: 'leader' }, spec: { holderIdentity: 'a', leaseDurationSeconds: 5 } },
    });
    await coordination.replaceNamespacedLease({
      namespace: 'default',
      name: 'leader',
      body: { ...lease, spec: { ...lease.spec, holderIdentity: 'b' } },
    });
    await expect(
      coordination.replaceNamespacedLease({
        namespace: 'default',
        name: 'leader',
        body: { ...lease, spec: { ...lease.spec, holderIdentity: 'c' } },
      }),
    ).rejects.toMatchObject({ code: 409 });
    expect((await coordination.readNamespacedLease({ namespace: 'default', name: 'leader' })).spec?.holderIdentity).toBe('b');
  });

  it("maps the scale subresource to the CRD's replicas paths", async () => {
    await call('POST', WIDGETS, widget('scaled', { color: 'red', replicas: 2 }));
    await call('PATCH', `${WIDGETS}/scaled/status`, { status: { replicas: 1, selector: 'app=scaled' } }, 'application/merge-patch+json');
    const custom = kubeConfig.makeApiClient(k8s.CustomObjectsApi);
    const scale = await custom.getNamespacedCustomObjectScale({
      group: 'example.test',
      version: 'v1',
      namespace: 'default',
      plural: 'widgets',
      name: 'scaled',
    });
    expect(scale).toMatchObject({
      kind: 'Scale',
      apiVersion: 'autoscaling/v1',
      spec: { replicas: 2 },
      status: { replicas: 1, selector: 'app=scaled' },
    });
    await custom.patchNamespacedCustomObjectScale(
      { group: 'example.test', version: 'v1', namespace: 'default', plural: 'widgets', name: 'scaled', body: { spec: { replicas: 4 } } },
      k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch),
    );
    expect((await call('GET', `${WIDGETS}/scaled`)).body.spec.replicas).toBe(4);
    const stale = await call('PUT', `${WIDGETS}/scaled/scale`, { ...scale, spec: { replicas: 3 } });
    expect(stale.status).toBe(409);
    const fresh = (await call('GET', `${WIDGETS}/scaled/scale`)).body;
    const tooMany = await call('PUT', `${WIDGETS}/scaled/scale`, { ...fresh, spec: { replicas: 40 } });
    expect(tooMany.status).toBe(422);
    expect(tooMany.body.details.causes[0].field).toBe('spec.replicas');
  });

  it('lists the served kinds, with subresources, in discovery', async () => {
    const resources = (await call('GET', '/apis/example.test/v1')).body.resources.map((resource: { name: string }) => resource.name);
    expect(resources).toEqual(['widgets', 'widgets/status', 'widgets/scale']);
    const groups = (await call('GET', '/apis')).body.groups.map((group: { name: string }) => group.name);
    expect(groups).toEqual(expect.arrayContaining(['example.test', 'coordination.k8s.io', 'batch', 'apps', 'apiextensions.k8s.io']));
  });

  it('serves a CRD created through the API at once', async () => {
    const crd = {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: 'gadgets.example.test' },
      spec: {
        group: 'example.test',
        scope: 'Namespaced',
        names: { plural: 'gadgets', singular: 'gadget', kind: 'Gadget' },
        versions: [
          {
            name: 'v1',
            served: true,
            storage: true,
            schema: {
              openAPIV3Schema: { type: 'object', properties: { spec: { type: 'object', properties: { size: { type: 'integer' } } } } },
            },
          },
        ],
      },
    };
    const created = await call('POST', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions', crd);
    expect(created.body.status.conditions).toEqual(
      expect.arrayContaining([expect.objectContaining({ type: 'Established', status: 'True' })]),
    );
    const gadget = await call('POST', '/apis/example.test/v1/namespaces/default/gadgets', {
      apiVersion: 'example.test/v1',
      kind: 'Gadget',
      metadata: { name: 'g' },
      spec: { size: 'big' },
    });
    expect(gadget.status).toBe(422);
    expect(
      (
        await call('POST', '/apis/example.test/v1/namespaces/default/gadgets', {
          apiVersion: 'example.test/v1',
          kind: 'Gadget',
          metadata: { name: 'g' },
          spec: { size: 3 },
        })
      ).status,
    ).toBe(201);
    await call('DELETE', '/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.example.test');
    const gone = await call('GET', '/apis/example.test/v1/namespaces/default/gadgets');
    expect(gone.body).toMatchObject({ kind: 'Status', code: 404, reason: 'NotFound' });
  });
});
