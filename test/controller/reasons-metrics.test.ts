import { CoreV1Api } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { createRefusal, isCreateRefusal } from '../../controller/create-refusal.js';
import { httpStatus, statusMessage } from '../../kube/kube-errors.js';
import { clusterForFile, condition, createSandbox, eventually, NAMESPACE, phaseIs, sandboxPods, waitForSandbox } from './harness.js';

const START_TIMEOUT_MS = 4_000;

const file = clusterForFile({
  cluster: { allocatable: { cpu: '2', memory: '4Gi', pods: 50 } },
  controller: { startTimeoutMs: START_TIMEOUT_MS },
});

const get = (path: string) => fetch(`http://127.0.0.1:${file.controller.metricsPort}${path}`);

describe('reasons a user can act on', () => {
  it('a pod no node can fit says Unschedulable, then fails with it at the start deadline', async () => {
    createSandbox(file.cluster, 'too-big', { resources: { requests: { cpu: '16' }, limits: { cpu: '16' } } });
    const waiting = await waitForSandbox(file.cluster, 'too-big', (s) => condition(s, 'Ready')?.reason === 'Unschedulable');
    expect(waiting!.status!.phase).toBe('Starting');
    expect(condition(waiting, 'Ready')!.message).toContain('no node can run it');
    const failed = await waitForSandbox(file.cluster, 'too-big', phaseIs('Failed'), START_TIMEOUT_MS + 10_000);
    expect(condition(failed, 'Ready')).toMatchObject({ status: 'False', reason: 'Unschedulable' });
    expect(condition(failed, 'Ready')!.message).toMatch(/not ready within 4 s/);
  });

  it('an image no retry pulls fails with ImagePullFailed at the start deadline, not before', async () => {
    const created = Date.now();
    createSandbox(file.cluster, 'no-image', { image: 'registry.invalid/nothing:1' });
    const failed = await waitForSandbox(file.cluster, 'no-image', phaseIs('Failed'), START_TIMEOUT_MS + 10_000);
    expect(condition(failed, 'Ready')).toMatchObject({ status: 'False', reason: 'ImagePullFailed' });
    expect(condition(failed, 'Ready')!.message).toMatch(/not ready within 4 s: image registry.invalid\/nothing:1 cannot be pulled/);
    expect(Date.now() - created).toBeGreaterThanOrEqual(START_TIMEOUT_MS - 1000);
    await eventually(file.cluster, () => sandboxPods(file.cluster, 'no-image').length === 0);
  });

  it('requests above their limits are refused up front: Failed InvalidResources at once, no pod, no place held', async () => {
    createSandbox(file.cluster, 'over-limit', { resources: { requests: { cpu: '16' } } });
    const failed = await waitForSandbox(file.cluster, 'over-limit', phaseIs('Failed'));
    expect(condition(failed, 'Ready')).toMatchObject({ status: 'False', reason: 'InvalidResources' });
    expect(condition(failed, 'Ready')!.message).toMatch(/the cpu request 16 exceeds its limit \S+ \(the default\)/);
    expect(sandboxPods(file.cluster, 'over-limit')).toEqual([]);
  });

  it('a pod an admission webhook refuses says PodCreateRefused with its message, as an Event, and starts once it allows', async () => {
    const message = 'admission webhook "policy.example.com" denied the request: images must be signed';
    file.cluster.server.failNext({ verb: 'create', resource: 'pods', namespace: NAMESPACE, status: 400, message, times: 2 });
    createSandbox(file.cluster, 'webhook-1');
    const refused = await waitForSandbox(file.cluster, 'webhook-1', (s) => condition(s, 'Ready')?.reason === 'PodCreateRefused');
    expect(refused!.status!.phase).toBe('Starting');
    expect(condition(refused, 'Ready')!.message).toContain(message);
    await waitForSandbox(file.cluster, 'webhook-1', phaseIs('Ready'));
    const events = file.cluster.server.store
      .list('events', NAMESPACE)
      .items.filter((e: any) => e.involvedObject.name === 'webhook-1' && e.reason === 'PodCreateRefused');
    expect(events.length).toBeGreaterThan(0);
    expect(events[0]!.message).toContain(message);
  });

  it('a pod refused until the start deadline fails with the refusal', async () => {
    file.cluster.server.failNext({
      verb: 'create',
      resource: 'pods',
      namespace: NAMESPACE,
      status: 422,
      message: 'Pod "webhook-2" is invalid',
      times: 1000,
    });
    createSandbox(file.cluster, 'webhook-2');
    const failed = await waitForSandbox(file.cluster, 'webhook-2', phaseIs('Failed'), START_TIMEOUT_MS + 10_000);
    file.cluster.server.clearFailures();
    expect(condition(failed, 'Ready')).toMatchObject({ status: 'False', reason: 'PodCreateRefused' });
    expect(condition(failed, 'Ready')!.message).toMatch(/not ready within 4 s: .*\(422\).*is invalid/);
  });

  it('a pod refused by a ResourceQuota says QuotaExceeded, and starts once the quota allows', async () => {
    const running = file.cluster.server.store
      .list('pods', NAMESPACE)
      .items.filter((p: any) => !['Succeeded', 'Failed'].includes(p.status?.phase)).length;
    file.cluster.server.store.create('resourcequotas', NAMESPACE, {
      metadata: { name: 'runners' },
      spec: { hard: { pods: String(running) } },
    });
    createSandbox(file.cluster, 'quota-1');
    const refused = await waitForSandbox(file.cluster, 'quota-1', (s) => condition(s, 'Ready')?.reason === 'QuotaExceeded');
    expect(refused!.status!.phase).toBe('Starting');
    expect(condition(refused, 'Ready')!.message).toContain('exceeded quota');
    expect(sandboxPods(file.cluster, 'quota-1')).toEqual([]);
    file.cluster.server.store.delete('resourcequotas', NAMESPACE, 'runners');
    await waitForSandbox(file.cluster, 'quota-1', phaseIs('Ready'));
  });
});

describe('a 403 that is not a quota', () => {
  it('a pod create RBAC forbids says PodCreateForbidden with its message, as an Event, not QuotaExceeded', async () => {
    const message =
      'pods "forbidden-1" is forbidden: User "system:serviceaccount:acis:acis-controller" cannot create resource "pods" in API group "" in the namespace "default"';
    file.cluster.server.failNext({ verb: 'create', resource: 'pods', namespace: NAMESPACE, status: 403, message, times: 2 });
    createSandbox(file.cluster, 'forbidden-1');
    const refused = await waitForSandbox(file.cluster, 'forbidden-1', (s) => condition(s, 'Ready')?.reason === 'PodCreateForbidden');
    expect(refused!.status!.phase).toBe('Starting');
    expect(condition(refused, 'Ready')!.message).toContain(message);
    await waitForSandbox(file.cluster, 'forbidden-1', phaseIs('Ready'));
    const reasons = file.cluster.server.store
      .list('events', NAMESPACE)
      .items.filter((e: any) => e.involvedObject.name === 'forbidden-1')
      .map((e: any) => `${e.type} ${e.reason}`);
    expect(reasons).toContain('Warning PodCreateForbidden');
    expect(reasons).not.toContain('Warning QuotaExceeded');
  });

  it("Pod Security admission's refusal is PodCreateForbidden, a ResourceQuota's QuotaExceeded (as the API server sends them)", async () => {
    const core = file.cluster.kubeConfig.makeApiClient(CoreV1Api);
    const refusalOf = (namespace: string, privileged: boolean) =>
      core
        .createNamespacedPod({
          namespace,
          body: {
            metadata: { name: 'probe' },
            spec: { containers: [{ name: 'c', image: 'x', ...(privileged && { securityContext: { privileged: true } }) }] },
          },
        })
        .then(
          () => undefined,
          (error: unknown) => createRefusal(httpStatus(error), statusMessage(error)),
        );
    file.cluster.server.store.create('namespaces', undefined, {
      metadata: { name: 'restricted', labels: { 'pod-security.kubernetes.io/enforce': 'baseline' } },
    });
    const forbidden = await refusalOf('restricted', true);
    expect(forbidden?.reason).toBe('PodCreateForbidden');
    expect(forbidden?.message).toContain('violates PodSecurity "baseline:latest": privileged');
    file.cluster.server.store.create('namespaces', undefined, { metadata: { name: 'no-pods' } });
    file.cluster.server.store.create('resourcequotas', 'no-pods', { metadata: { name: 'none' }, spec: { hard: { pods: '0' } } });
    const quota = await refusalOf('no-pods', false);
    expect(quota?.reason).toBe('QuotaExceeded');
    expect(quota?.message).toContain('exceeded quota: none');
  });

  it('a refused create is a 4xx but a 409: a taken name says nothing about the spec', async () => {
    const core = file.cluster.kubeConfig.makeApiClient(CoreV1Api);
    const create = (namespace: string) =>
      core
        .createNamespacedPod({ namespace, body: { metadata: { name: 'taken' }, spec: { containers: [{ name: 'c', image: 'x' }] } } })
        .then(
          () => undefined,
          (error: unknown) => error,
        );
    expect(await create(NAMESPACE)).toBeUndefined();
    const conflict = await create(NAMESPACE);
    expect(httpStatus(conflict)).toBe(409);
    expect(isCreateRefusal(conflict)).toBe(false);
    file.cluster.server.store.create('namespaces', undefined, { metadata: { name: 'quota-zero' } });
    file.cluster.server.store.create('resourcequotas', 'quota-zero', { metadata: { name: 'none' }, spec: { hard: { pods: '0' } } });
    expect(isCreateRefusal(await create('quota-zero'))).toBe(true);
    expect(isCreateRefusal(new Error('connection reset'))).toBe(false);
  });
});

describe('the controller’s own endpoints', () => {
  it('/healthz and /readyz answer; /metrics counts reconciles, claims by launch type, sandboxes by phase, and names no tenant', async () => {
    expect((await get('/healthz')).status).toBe(200);
    expect((await get('/readyz')).status).toBe(200);
    createSandbox(file.cluster, 'metered', { tenantId: 'tnt_SECRETIVE' });
    await waitForSandbox(file.cluster, 'metered', phaseIs('Ready'));
    const text = await (await get('/metrics')).text();
    expect(text).toMatch(/acis_controller_reconciles_total\{kind="Sandbox",result="ok"\} [1-9]/);
    expect(text).toMatch(/acis_controller_claim_latency_seconds_count\{launch="cold"\} [1-9]/);
    expect(text).toMatch(/acis_controller_sandboxes\{phase="Ready"\} [1-9]/);
    expect(text).toMatch(/acis_controller_reconcile_duration_seconds_bucket/);
    expect(text).toMatch(/acis_controller_queue_depth\{kind="Sandbox"\} \d/);
    expect(text).toMatch(/acis_controller_leader 1/);
    expect(text).not.toContain('tnt_');
    expect(text).not.toContain('con_');
    expect(sandboxPods(file.cluster, 'metered')).toHaveLength(1);
  });
});
