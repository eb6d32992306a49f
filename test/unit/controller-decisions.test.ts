import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { Sandbox, SandboxStatus, SandboxWarmPool } from '../../controller/api/v1alpha1.js';
import { setCondition, statusChanged } from '../../controller/conditions.js';
import { podHealth } from '../../controller/api/pod-health.js';
import { decidePool } from '../../controller/pool-decisions.js';
import { decideSandbox, type SandboxObservation } from '../../controller/sandbox-decisions.js';

const NOW = Date.parse('2026-03-01T12:00:00Z');
const iso = (offsetMs: number) => new Date(NOW + offsetMs).toISOString();

function sandbox(spec: Partial<Sandbox['spec']> = {}, status?: SandboxStatus): Sandbox {
  return {
    apiVersion: 'acis.dev/v1alpha1',
    kind: 'Sandbox',
    metadata: { name: 'sbx', namespace: 'ns', uid: 'uid-1', generation: 2, creationTimestamp: iso(-10_000) },
    spec: { conversationId: 'con_A', tenantId: 'tnt_A', agentType: 'vendor-agent-sdk', mode: 'warm', ...spec },
    ...(status && { status }),
  };
}

function pod(name: string, status: V1Pod['status'] = {}, extra: Partial<V1Pod['metadata']> = {}): V1Pod {
  return {
    metadata: {
      name,
      creationTimestamp: new Date(NOW - 5_000),
      labels: { 'acis.dev/pool': 'p', 'acis.dev/template-hash': 'h1' },
      ...extra,
    },
    spec: { containers: [{ name: 'runner', image: 'img:1' }] },
    status,
  };
}

const running = (ip = '10.0.0.7'): V1Pod['status'] => ({ phase: 'Running', podIP: ip, conditions: [{ type: 'Ready', status: 'True' }] });
const exited = (exitCode: number) => ({
  name: 'runner',
  image: 'i',
  imageID: '',
  ready: false,
  restartCount: 0,
  state: { terminated: { exitCode } },
});
const admittedStatus = (extra: SandboxStatus = {}): SandboxStatus => ({
  phase: 'Starting',
  admittedTime: iso(-1_000),
  conditions: [{ type: 'Admitted', status: 'True', reason: 'Admitted', lastTransitionTime: iso(-1_000) }],
  ...extra,
});

function observe(extra: Partial<SandboxObservation> = {}): SandboxObservation {
  return {
    now: NOW,
    podInFlight: false,
    admission: { admitted: true },
    releasedByWarmCap: false,
    startTimeoutMs: 60_000,
    runnerPort: 7070,
    ...extra,
  };
}

const ready = (s: SandboxStatus | undefined) => s?.conditions?.find((c) => c.type === 'Ready');

describe('decideSandbox(sandbox, observed)', () => {
  it.each<[string, Sandbox, Partial<SandboxObservation>, { phase: string; reason?: string; actions: string[]; launch?: string }]>([
    [
      'admitted with no pod and no pool pod: starts one cold',
      sandbox(),
      {},
      { phase: 'Starting', reason: 'Starting', actions: ['create-pod'], launch: 'cold' },
    ],
    [
      'admitted with a ready pool pod: adopts it, Ready in the same pass',
      sandbox(),
      { poolCandidate: pod('pool-a', running()) },
      { phase: 'Ready', reason: 'RunnerReady', actions: ['adopt-pod'], launch: 'pool' },
    ],
    [
      'not admitted: waits, Pending, nothing started',
      sandbox(),
      { admission: { admitted: false, position: 2, used: 5, max: 5 } },
      { phase: 'Pending', reason: 'CapacityExhausted', actions: [] },
    ],
    [
      'a create in flight: waits for the cache, never a second pod',
      sandbox({}, admittedStatus()),
      { podInFlight: true },
      { phase: 'Starting', actions: [] },
    ],
    [
      'its pod ready: Ready with the endpoint',
      sandbox({}, admittedStatus()),
      { pod: pod('sbx', running()) },
      { phase: 'Ready', reason: 'RunnerReady', actions: [] },
    ],
    [
      'shutdownTime passed: pod deleted, Expired',
      sandbox({ shutdownTime: iso(-1) }, admittedStatus()),
      { pod: pod('sbx', running()) },
      { phase: 'Expired', reason: 'ShutdownTimeReached', actions: ['delete-pod'] },
    ],
    [
      'shutdownTime exactly now: Expired (inclusive)',
      sandbox({ shutdownTime: iso(0) }),
      {},
      { phase: 'Expired', reason: 'ShutdownTimeReached', actions: [] },
    ],
    [
      'released by the tenant warm cap',
      sandbox({}, admittedStatus()),
      { pod: pod('sbx', running()), releasedByWarmCap: true },
      { phase: 'Expired', reason: 'TenantWarmCapReached', actions: ['delete-pod'] },
    ],
    [
      'its pod crashed: Failed, the finished pod kept for logs',
      sandbox({}, admittedStatus()),
      {
        pod: pod('sbx', {
          phase: 'Failed',
          containerStatuses: [
            { name: 'runner', image: 'i', imageID: '', ready: false, restartCount: 0, state: { terminated: { exitCode: 3 } } },
          ],
        }),
      },
      { phase: 'Failed', reason: 'CrashLoop', actions: [] },
    ],
    [
      'its runner exited 0 after serving (the API server stopped it): Expired RunnerStopped, the pod goes',
      sandbox({}, admittedStatus({ phase: 'Ready', readyTime: iso(-1000) })),
      { pod: pod('sbx', { phase: 'Succeeded', containerStatuses: [exited(0)] }) },
      { phase: 'Expired', reason: 'RunnerStopped', actions: ['delete-pod'] },
    ],
    [
      'its runner exited 0 before it ever served: a crash',
      sandbox({}, admittedStatus()),
      { pod: pod('sbx', { phase: 'Succeeded', containerStatuses: [exited(0)] }) },
      { phase: 'Failed', reason: 'CrashLoop', actions: [] },
    ],
    [
      'image pull backing off: says so and waits for the kubelet to retry (the start deadline decides)',
      sandbox({}, admittedStatus()),
      {
        pod: pod('sbx', {
          phase: 'Pending',
          containerStatuses: [
            { name: 'runner', image: 'i', imageID: '', ready: false, restartCount: 0, state: { waiting: { reason: 'ImagePullBackOff' } } },
          ],
        }),
      },
      { phase: 'Starting', reason: 'ImagePullFailed', actions: [] },
    ],
    [
      'unschedulable before the deadline: says so, keeps waiting',
      sandbox({}, admittedStatus()),
      {
        pod: pod('sbx', {
          phase: 'Pending',
          conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable', message: '0/1 nodes: Insufficient cpu' }],
        }),
      },
      { phase: 'Starting', reason: 'Unschedulable', actions: [] },
    ],
    [
      'unschedulable past the start deadline: Failed with that reason',
      sandbox({}, admittedStatus({ admittedTime: iso(-61_000) })),
      { pod: pod('sbx', { phase: 'Pending', conditions: [{ type: 'PodScheduled', status: 'False', reason: 'Unschedulable' }] }) },
      { phase: 'Failed', reason: 'Unschedulable', actions: ['delete-pod'] },
    ],
    [
      'starting past the deadline: Failed StartTimeout',
      sandbox({}, admittedStatus({ admittedTime: iso(-61_000) })),
      { pod: pod('sbx', { phase: 'Pending' }) },
      { phase: 'Failed', reason: 'StartTimeout', actions: ['delete-pod'] },
    ],
    [
      'quota refused the pod: says QuotaExceeded and tries again',
      sandbox({}, admittedStatus()),
      { createRefused: { reason: 'QuotaExceeded', message: 'exceeded quota: runners' } },
      { phase: 'Starting', reason: 'QuotaExceeded', actions: ['create-pod'] },
    ],
    [
      'quota still refusing at the deadline: Failed QuotaExceeded',
      sandbox({}, admittedStatus({ admittedTime: iso(-61_000) })),
      { createRefused: { reason: 'QuotaExceeded', message: 'exceeded quota' } },
      { phase: 'Failed', reason: 'QuotaExceeded', actions: [] },
    ],
    [
      'an admission webhook refused the pod: says PodCreateRefused and tries again',
      sandbox({}, admittedStatus()),
      { createRefused: { reason: 'PodCreateRefused', message: 'the API server refused the pod (400): denied' } },
      { phase: 'Starting', reason: 'PodCreateRefused', actions: ['create-pod'] },
    ],
    [
      'still refused at the deadline: Failed PodCreateRefused',
      sandbox({}, admittedStatus({ admittedTime: iso(-61_000) })),
      { createRefused: { reason: 'PodCreateRefused', message: 'the API server refused the pod (422): invalid' } },
      { phase: 'Failed', reason: 'PodCreateRefused', actions: [] },
    ],
    [
      'requests above limits: Failed InvalidResources at once, before admission, nothing created',
      sandbox(),
      {
        specProblem: 'resources: the cpu request 16 exceeds its limit 2 (the default)',
        admission: { admitted: false, position: 1, used: 5, max: 5 },
      },
      { phase: 'Failed', reason: 'InvalidResources', actions: [] },
    ],
    [
      'its ready pod vanished: Failed PodDeleted, not restarted',
      sandbox({}, admittedStatus({ podName: 'sbx', readyTime: iso(-500) })),
      {},
      { phase: 'Failed', reason: 'PodDeleted', actions: [] },
    ],
    [
      'terminal stays terminal: a leftover pod of an expired one goes',
      sandbox({}, { phase: 'Expired' }),
      { pod: pod('sbx', running()) },
      { phase: 'Expired', actions: ['delete-pod'] },
    ],
    ['terminal stays terminal even when capacity is offered', sandbox({}, { phase: 'Failed' }), {}, { phase: 'Failed', actions: [] }],
  ])('%s', (_name, object, observation, expected) => {
    const decision = decideSandbox(object, observe(observation));
    expect(decision.status.phase).toBe(expected.phase);
    expect(decision.actions.map((a) => a.kind)).toEqual(expected.actions);
    if (expected.reason) expect(ready(decision.status)?.reason).toBe(expected.reason);
    if (expected.launch) expect(decision.status.launch).toBe(expected.launch);
  });

  it('deletes an expired one’s pod with its grace period (its preStop hook waits for the workspace to be kept), a failed one’s at once', () => {
    const deletion = (object: Sandbox, observation: Partial<SandboxObservation>) =>
      decideSandbox(object, observe(observation)).actions.find((a) => a.kind === 'delete-pod');
    const held = sandbox({ shutdownTime: iso(0) }, admittedStatus({ phase: 'Ready', readyTime: iso(-1000) }));
    expect(deletion(held, { pod: pod('sbx', running()) })).toEqual({ kind: 'delete-pod', podName: 'sbx', graceful: true });
    expect(deletion(sandbox({}, { phase: 'Expired' }), { pod: pod('sbx', running()) })).toMatchObject({ graceful: true });
    const late = sandbox({}, admittedStatus({ admittedTime: iso(-120_000) }));
    expect(deletion(late, { pod: pod('sbx', { phase: 'Pending' }) })).toMatchObject({ graceful: false });
  });

  it('requeues at the shutdown time while ready, and at the earlier of it and the start deadline while starting', () => {
    const live = sandbox({ shutdownTime: iso(30_000) }, admittedStatus());
    expect(decideSandbox(live, observe({ pod: pod('sbx', running()) })).requeueAt).toBe(NOW + 30_000);
    expect(decideSandbox(live, observe({ pod: pod('sbx', { phase: 'Pending' }) })).requeueAt).toBe(NOW + 30_000);
    const later = sandbox({ shutdownTime: iso(120_000) }, admittedStatus());
    expect(decideSandbox(later, observe({ pod: pod('sbx', { phase: 'Pending' }) })).requeueAt).toBe(NOW - 1_000 + 60_000);
  });

  it('a refused create is told as a Warning event with the server message once, not on every retry', () => {
    const createRefused = { reason: 'PodCreateRefused', message: 'the API server refused the pod (400): denied' };
    const first = decideSandbox(sandbox({}, admittedStatus()), observe({ createRefused }));
    expect(first.events).toEqual([{ type: 'Warning', ...createRefused }]);
    expect(ready(first.status)?.message).toBe(createRefused.message);
    const again = decideSandbox(sandbox({}, first.status), observe({ now: NOW + 1_000, createRefused }));
    expect(again.events).toEqual([]);
  });

  it('a second pass over its own result changes nothing (one status write, then none)', () => {
    const first = decideSandbox(sandbox({}, admittedStatus()), observe({ pod: pod('sbx', running()) }));
    const second = decideSandbox(sandbox({}, first.status), observe({ now: NOW + 5_000, pod: pod('sbx', running()) }));
    expect(statusChanged(first.status, second.status)).toBe(false);
    expect(second.events).toEqual([]);
  });

  it('an adopted ready pool pod: bound and Ready in one status, both events, no second write once the cache shows the pod', () => {
    const adopted = decideSandbox(sandbox(), observe({ poolCandidate: pod('pool-a', running('10.4.5.6')) }));
    expect(adopted.status).toMatchObject({
      phase: 'Ready',
      podName: 'pool-a',
      tokenSecretName: 'pool-a-token',
      endpoint: '10.4.5.6:7070',
      readyTime: iso(0),
      launch: 'pool',
    });
    expect(adopted.events.map((e) => e.reason)).toEqual(['Adopted', 'Ready']);
    // The pass its own status write triggers, before the pod's watch event: still Ready, nothing to write.
    const inFlight = decideSandbox(sandbox({}, adopted.status), observe({ now: NOW + 5, podInFlight: true }));
    expect(inFlight.actions).toEqual([]);
    expect(statusChanged(adopted.status, inFlight.status)).toBe(false);
    // The pass once the cache shows the pod owned: the same.
    const owned = decideSandbox(sandbox({}, adopted.status), observe({ now: NOW + 10, pod: pod('pool-a', running('10.4.5.6')) }));
    expect(statusChanged(adopted.status, owned.status)).toBe(false);
    expect(owned.events).toEqual([]);
  });

  it('a pool pod that is not ready is bound but not Ready: no endpoint until its pod is', () => {
    const bound = decideSandbox(
      sandbox(),
      observe({ poolCandidate: pod('pool-a', { phase: 'Running', podIP: '10.4.5.6', conditions: [{ type: 'Ready', status: 'False' }] }) }),
    );
    expect(bound.actions.map((a) => a.kind)).toEqual(['adopt-pod']);
    expect(bound.status).toMatchObject({ phase: 'Starting', podName: 'pool-a' });
    expect(bound.status.endpoint).toBeUndefined();
    expect(ready(bound.status)?.status).toBe('False');
  });

  it('the Ready endpoint is the pod IP and the runner port', () => {
    const decision = decideSandbox(sandbox({}, admittedStatus()), observe({ pod: pod('sbx', running('10.1.2.3')) }));
    expect(decision.status.endpoint).toBe('10.1.2.3:7070');
  });

  it('the waiting message says where in line and how full the cluster is', () => {
    const decision = decideSandbox(sandbox(), observe({ admission: { admitted: false, position: 3, used: 10, max: 10 } }));
    expect(decision.status.conditions?.find((c) => c.type === 'Admitted')?.message).toContain('number 3 in line');
    expect(decision.events.map((e) => e.reason)).toEqual(['CapacityExhausted']);
  });
});

describe('setCondition(conditions, next, now)', () => {
  it('keeps lastTransitionTime while the status stays, moves it when the status flips', () => {
    const first = setCondition(undefined, { type: 'Ready', status: 'False', reason: 'Starting' }, NOW);
    const same = setCondition(first, { type: 'Ready', status: 'False', reason: 'Unschedulable' }, NOW + 1_000);
    expect(same[0]!.lastTransitionTime).toBe(iso(0));
    const flipped = setCondition(same, { type: 'Ready', status: 'True', reason: 'RunnerReady' }, NOW + 2_000);
    expect(flipped[0]!.lastTransitionTime).toBe(iso(2_000));
  });
});

describe('podHealth(pod)', () => {
  it.each<[string, V1Pod['status'], string, string?]>([
    ['running and ready', running(), 'ready'],
    [
      'running, not ready yet',
      { phase: 'Running', podIP: '10.0.0.1', conditions: [{ type: 'Ready', status: 'False' }] },
      'starting',
      'Starting',
    ],
    [
      'restarted before',
      {
        phase: 'Running',
        containerStatuses: [
          { name: 'r', image: 'i', imageID: '', ready: false, restartCount: 2, lastState: { terminated: { exitCode: 1 } } },
        ],
      },
      'failing',
      'CrashLoop',
    ],
    [
      'ErrImagePull (not given up yet)',
      {
        phase: 'Pending',
        containerStatuses: [
          { name: 'r', image: 'i', imageID: '', ready: false, restartCount: 0, state: { waiting: { reason: 'ErrImagePull' } } },
        ],
      },
      'failing',
      'ImagePullFailed',
    ],
  ])('%s', (_name, status, state, reason) => {
    const health = podHealth(pod('p', status));
    expect(health.state).toBe(state);
    if (reason) expect((health as { reason: string }).reason).toBe(reason);
  });

  it('ErrImagePull and ImagePullBackOff may still resolve (the kubelet retries); a malformed name is final', () => {
    const waiting = (reason: string) =>
      podHealth(
        pod('p', {
          phase: 'Pending',
          containerStatuses: [{ name: 'r', image: 'i', imageID: '', ready: false, restartCount: 0, state: { waiting: { reason } } }],
        }),
      );
    expect(waiting('ErrImagePull')).toMatchObject({ terminal: false });
    expect(waiting('ImagePullBackOff')).toMatchObject({ terminal: false });
    expect(waiting('InvalidImageName')).toMatchObject({ reason: 'ImagePullFailed', terminal: true });
  });
});

describe('decidePool(pool, observed)', () => {
  const pool = (replicas: number): SandboxWarmPool => ({
    apiVersion: 'acis.dev/v1alpha1',
    kind: 'SandboxWarmPool',
    metadata: { name: 'p', namespace: 'ns', uid: 'pool-uid', generation: 4 },
    spec: { agentType: 'vendor-agent-sdk', replicas },
  });
  const now = Date.parse('2026-11-25T12:00:00Z');
  const base = {
    pods: [] as V1Pod[],
    inFlight: 0,
    deleting: 0,
    templateHash: 'h1',
    picked: new Set<string>(),
    usedElsewhere: 0,
    waitingClaims: 0,
    maxSandboxes: 10,
    claimedAt: [] as number[],
    refillDelayMs: 300,
    now,
  };

  it.each<[string, number, Partial<typeof base>, { create: number; delete: string[] }]>([
    ['fills an empty pool', 3, {}, { create: 3, delete: [] }],
    ['counts creates in flight', 3, { inFlight: 2 }, { create: 1, delete: [] }],
    ['counts pods still starting', 3, { pods: [pod('a', { phase: 'Pending' })] }, { create: 2, delete: [] }],
    ['never past the cluster cap', 3, { usedElsewhere: 9 }, { create: 1, delete: [] }],
    ['claims waiting for a place come first', 3, { usedElsewhere: 7, waitingClaims: 2 }, { create: 1, delete: [] }],
    ['replaces a failed pod', 1, { pods: [pod('dead', { phase: 'Failed' })] }, { create: 1, delete: ['dead'] }],
    [
      'scales down, pods not ready first, never a picked one',
      1,
      { pods: [pod('r1', running()), pod('r2', running()), pod('s1', { phase: 'Pending' })], picked: new Set(['r1']) },
      { create: 0, delete: ['s1', 'r2'] },
    ],
  ])('%s', (_name, replicas, observed, expected) => {
    const decision = decidePool(pool(replicas), { ...base, ...observed });
    expect({ create: decision.create, delete: decision.delete }).toEqual(expected);
  });

  it('holds a replacement back until refillDelayMs after the last claim while a ready pod is left, then creates it', () => {
    const claimed = { ...base, claimedAt: [now - 100], pods: [pod('r1', running())] };
    expect(decidePool(pool(2), claimed)).toMatchObject({ create: 0, requeueAt: now + 200 });
    expect(decidePool(pool(2), { ...claimed, now: now + 200 })).toMatchObject({ create: 1, requeueAt: undefined });
    // Without a deficit nothing waits; a claim long ago holds nothing back; no delay, no wait.
    expect(decidePool(pool(1), claimed)).toMatchObject({ create: 0, requeueAt: undefined });
    expect(decidePool(pool(2), { ...claimed, claimedAt: [now - 5000] })).toMatchObject({ create: 1, requeueAt: undefined });
    expect(decidePool(pool(2), { ...claimed, refillDelayMs: 0 })).toMatchObject({ create: 1, requeueAt: undefined });
  });

  it('refills at once after a second claim within the delay (a burst)', () => {
    const decision = decidePool(pool(3), { ...base, claimedAt: [now - 250, now - 20], pods: [pod('r1', running())] });
    expect(decision).toMatchObject({ create: 2, requeueAt: undefined });
  });

  it('refills an empty pool at once: no ready pod left, or the last one being adopted', () => {
    expect(decidePool(pool(2), { ...base, claimedAt: [now] })).toMatchObject({ create: 2, requeueAt: undefined });
    expect(decidePool(pool(2), { ...base, claimedAt: [now], pods: [pod('s1', { phase: 'Pending' })] })).toMatchObject({
      create: 1,
      requeueAt: undefined,
    });
    expect(decidePool(pool(2), { ...base, claimedAt: [now], pods: [pod('r1', running())], picked: new Set(['r1']) })).toMatchObject({
      create: 1,
    });
  });

  it('rolls to a new template: new pods first, an old ready pod goes only as a new one is ready, a picked one never', () => {
    const old = (name: string, status = running()) =>
      pod(name, status, { labels: { 'acis.dev/pool': 'p', 'acis.dev/template-hash': 'h0' } });
    const rolled = { ...base, templateHash: 'h1' };
    // Two old ready pods: two new ones are made, no old one goes yet.
    expect(decidePool(pool(2), { ...rolled, pods: [old('o1'), old('o2')] })).toMatchObject({ create: 2, delete: [] });
    // One new one ready: one old one goes; an old one still starting goes at once.
    expect(
      decidePool(pool(2), { ...rolled, pods: [old('o1'), old('o2'), pod('n1', running()), pod('n2', { phase: 'Pending' })] }),
    ).toMatchObject({
      create: 0,
      delete: ['o1'],
    });
    expect(decidePool(pool(2), { ...rolled, pods: [old('o1', { phase: 'Pending' }), pod('n1', running())] })).toMatchObject({
      create: 1,
      delete: ['o1'],
    });
    // A picked old pod is never deleted, even with the new ones ready.
    const picked = decidePool(pool(1), { ...rolled, pods: [old('o1'), pod('n1', running())], picked: new Set(['o1']) });
    expect(picked.delete).toEqual([]);
    expect(picked.status).toMatchObject({ updatedReplicas: 1, templateHash: 'h1', replicas: 2 });
    // At the cluster's cap with no place for a new pod: one old one goes to make one.
    expect(decidePool(pool(2), { ...rolled, maxSandboxes: 2, pods: [old('o1'), old('o2')] })).toMatchObject({ create: 0, delete: ['o1'] });
    expect(decidePool(pool(2), { ...rolled, maxSandboxes: 2, deleting: 1, pods: [old('o1'), old('o2')] })).toMatchObject({
      create: 0,
      delete: [],
    });
  });

  it('removes failed and surplus pods while a refill is held back', () => {
    const decision = decidePool(pool(2), { ...base, claimedAt: [now], pods: [pod('r1', running()), pod('dead', { phase: 'Failed' })] });
    expect(decision).toMatchObject({ create: 0, delete: ['dead'], requeueAt: now + 300 });
  });

  it('reports desired, ready and available (ready, not picked) and the selector', () => {
    const decision = decidePool(pool(3), {
      ...base,
      pods: [pod('r1', running()), pod('r2', running()), pod('s1', { phase: 'Pending' })],
      picked: new Set(['r1']),
    });
    expect(decision.status).toEqual({
      replicas: 3,
      desiredReplicas: 3,
      readyReplicas: 2,
      availableReplicas: 1,
      selector: 'acis.dev/pool=p',
      observedGeneration: 4,
      updatedReplicas: 3,
      templateHash: 'h1',
      conditions: [
        expect.objectContaining({ type: 'Ready', status: 'False', reason: 'Filling', message: '2 of 3 ready; the others are starting' }),
        expect.objectContaining({ type: 'Degraded', status: 'False', reason: 'AsExpected' }),
      ],
    });
  });
});
