import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import type { Condition, Sandbox, SandboxStatus } from '../../controller/api/v1alpha1.js';
import {
  isAdmitted,
  parseEndpoint,
  type RunnerAddress,
  servingPod,
  standingOf,
  statusAddress,
  untrustedStatus,
} from '../../controller/api/sandbox-status.js';
import { creationTime, inAdmissionOrder, queuePosition } from '../../controller/api/admission-order.js';

const AT = '2026-01-01T00:00:00Z';

function sandbox(name: string, status: SandboxStatus = {}, meta: Partial<Sandbox['metadata']> = {}): Sandbox {
  return {
    apiVersion: 'acis.dev/v1alpha1',
    kind: 'Sandbox',
    metadata: { name, uid: `uid-${name}`, creationTimestamp: AT, ...meta },
    spec: { conversationId: 'con_X', tenantId: 'tnt_X', agentType: 'vendor-agent-sdk', mode: 'pooled' },
    status,
  };
}

const condition = (type: Condition['type'], status: Condition['status'], reason: string): Condition => ({
  type,
  status,
  reason,
  lastTransitionTime: AT,
});
const queued: SandboxStatus = { phase: 'Pending', conditions: [condition('Admitted', 'False', 'CapacityExhausted')] };

describe('standingOf(sandbox)', () => {
  const ready: SandboxStatus = {
    phase: 'Ready',
    endpoint: '10.0.0.7:7070',
    tokenSecretName: 'p-token',
    conditions: [condition('Ready', 'True', 'RunnerReady')],
  };
  it.each<[string, Sandbox, ReturnType<typeof standingOf>]>([
    ['no status yet', sandbox('a', {}), { kind: 'starting' }],
    ['starting', sandbox('a', { phase: 'Starting', conditions: [condition('Admitted', 'True', 'Admitted')] }), { kind: 'starting' }],
    ['not admitted', sandbox('a', queued), { kind: 'queued' }],
    ['ready', sandbox('a', ready), { kind: 'ready', host: '10.0.0.7', port: 7070, tokenSecretName: 'p-token' }],
    ['ready without an endpoint yet', sandbox('a', { ...ready, endpoint: undefined }), { kind: 'starting' }],
    [
      'failed',
      sandbox('a', { phase: 'Failed', conditions: [{ ...condition('Ready', 'False', 'ImagePullFailed'), message: 'no such image' }] }),
      { kind: 'ended', reason: 'ImagePullFailed', message: 'no such image' },
    ],
    ['expired', sandbox('a', { phase: 'Expired' }), { kind: 'ended', reason: 'Expired', message: 'the Sandbox is Expired' }],
    [
      'being deleted',
      sandbox('a', ready, { deletionTimestamp: AT }),
      { kind: 'ended', reason: 'Deleted', message: 'the Sandbox is being deleted' },
    ],
  ])('%s', (_, input, expected) => {
    expect(standingOf(input)).toEqual(expected);
  });
});

describe('isAdmitted(sandbox)', () => {
  it('is true once the controller wrote Admitted=True, not before nor while the Sandbox waits for a place', () => {
    expect(isAdmitted(sandbox('a', {}))).toBe(false);
    expect(isAdmitted(sandbox('a', queued))).toBe(false);
    expect(isAdmitted(sandbox('a', { phase: 'Starting', conditions: [condition('Admitted', 'True', 'Admitted')] }))).toBe(true);
  });
});

describe('parseEndpoint(endpoint)', () => {
  it.each([
    ['10.1.2.3:7070', { host: '10.1.2.3', port: 7070 }],
    ['[fd00::1]:7070', { host: 'fd00::1', port: 7070 }],
    ['10.1.2.3', undefined],
    ['10.1.2.3:0', undefined],
    ['10.1.2.3:70000', undefined],
  ])('%s', (endpoint, expected) => {
    expect(parseEndpoint(endpoint)).toEqual(expected);
  });
});

describe('statusAddress(sandbox)', () => {
  it('is the endpoint, pod and token Secret of a Ready status, and nothing before', () => {
    const ready: SandboxStatus = {
      phase: 'Ready',
      podName: 'p',
      endpoint: '10.0.0.7:7070',
      tokenSecretName: 'p-token',
      conditions: [condition('Ready', 'True', 'RunnerReady')],
    };
    expect(statusAddress(sandbox('a', ready))).toEqual({ podName: 'p', host: '10.0.0.7', port: 7070, tokenSecretName: 'p-token' });
    expect(statusAddress(sandbox('a', { ...ready, phase: 'Starting', conditions: [] }))).toBeUndefined();
    expect(statusAddress(sandbox('a', ready, { deletionTimestamp: AT }))).toBeUndefined();
  });
});

describe('servingPod(sandbox, pods)', () => {
  const owner = sandbox('a', { phase: 'Starting', podName: 'pool-x' });
  const RUNNER_LABELS = { 'app.kubernetes.io/managed-by': 'acis-controller', 'app.kubernetes.io/component': 'runner' };
  function pod(
    name: string,
    changes: { ownerUid?: string | null; ready?: boolean; deleting?: boolean; port?: string; labels?: Record<string, string> } = {},
  ): V1Pod {
    const { ownerUid = owner.metadata.uid, ready = true, deleting = false, port = 'control', labels = RUNNER_LABELS } = changes;
    return {
      metadata: {
        name,
        uid: `uid-${name}`,
        labels,
        ...(ownerUid && {
          ownerReferences: [{ apiVersion: 'acis.dev/v1alpha1', kind: 'Sandbox', name: 'a', uid: ownerUid, controller: true }],
        }),
        ...(deleting && { deletionTimestamp: new Date(AT) }),
      },
      spec: { containers: [{ name: 'runner', ports: [{ name: port, containerPort: 7070 }] }] },
      status: { phase: 'Running', podIP: '10.0.0.9', conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
    };
  }

  it('is the ready pod the Sandbox controls (adopted or its own), before any Ready status', () => {
    expect(servingPod(owner, [pod('other', { ownerUid: 'uid-b' }), pod('pool-x')])).toEqual({
      podName: 'pool-x',
      podUid: 'uid-pool-x',
      sandboxUid: 'uid-a',
      host: '10.0.0.9',
      port: 7070,
      tokenSecretName: 'pool-x-token',
    });
  });

  it.each<[string, Sandbox, V1Pod[]]>([
    ['no pod yet', owner, []],
    ['a pool pod it does not own yet', owner, [pod('pool-x', { ownerUid: null })]],
    ['another Sandbox’s pod', owner, [pod('pool-x', { ownerUid: 'uid-b' })]],
    ['a pod it controls that is not a runner pod', owner, [pod('pool-x', { labels: { 'app.kubernetes.io/component': 'runner' } })]],
    ['its pod not ready', owner, [pod('pool-x', { ready: false })]],
    ['its pod being deleted', owner, [pod('pool-x', { deleting: true })]],
    ['its pod without a control port', owner, [pod('pool-x', { port: 'metrics' })]],
    ['the Sandbox ended, its pod still up', sandbox('a', { phase: 'Expired' }), [pod('pool-x')]],
  ])('nothing serves: %s', (_, subject, pods) => {
    expect(servingPod(subject, pods)).toBeUndefined();
  });
});
describe('untrustedStatus(sandbox, serving)', () => {
  const serving: RunnerAddress = {
    podName: 'p',
    podUid: 'uid-p',
    sandboxUid: 'uid-a',
    host: '10.0.0.9',
    port: 7070,
    tokenSecretName: 'p-token',
  };
  const claiming = (claim: Partial<SandboxStatus>) =>
    sandbox('a', {
      phase: 'Ready',
      podName: 'p',
      endpoint: '10.0.0.9:7070',
      tokenSecretName: 'p-token',
      conditions: [condition('Ready', 'True', 'RunnerReady')],
      ...claim,
    });

  it('trusts a status that claims the serving pod, or nothing, or a pod not seen yet', () => {
    expect(untrustedStatus(claiming({}), serving)).toBeUndefined();
    expect(untrustedStatus(sandbox('a', { phase: 'Starting' }), serving)).toBeUndefined();
    expect(untrustedStatus(claiming({ podName: 'elsewhere' }), undefined)).toBeUndefined();
  });

  it.each<[string, Partial<SandboxStatus>, string]>([
    ['another pod', { podName: 'victim' }, 'pod victim'],
    ['a foreign address', { endpoint: '203.0.113.9:7070' }, 'address 203.0.113.9:7070'],
    ['another port', { endpoint: '10.0.0.9:22' }, 'address 10.0.0.9:22'],
    ['another Secret', { tokenSecretName: 'acis-master-key' }, 'token Secret acis-master-key'],
  ])('names a status claiming %s, and what the pod says instead', (_, claim, named) => {
    const reason = untrustedStatus(claiming(claim), serving);
    expect(reason).toContain(`its status names ${named}`);
    expect(reason).toContain('ready runner pod it controls is p at 10.0.0.9:7070 with token Secret p-token');
  });
});

describe('queuePosition(sandboxes, name)', () => {
  const later = '2026-01-01T00:00:05Z';
  it('counts the waiting Sandboxes created before it, ties broken by name, admitted ones not at all', () => {
    const all = [
      sandbox('b', queued),
      sandbox('a', queued),
      sandbox('c', queued, { creationTimestamp: later }),
      sandbox('admitted', { phase: 'Ready' }),
      sandbox('d', queued, { creationTimestamp: later }),
    ];
    expect(['a', 'b', 'c', 'd'].map((name) => queuePosition(all, name))).toEqual([1, 2, 3, 4]);
  });
});

describe('inAdmissionOrder(a, b)', () => {
  const later = '2026-01-01T00:00:05Z';
  it.each<[string, Sandbox, Sandbox, number]>([
    ['created earlier goes first', sandbox('b'), sandbox('a', {}, { creationTimestamp: later }), -1],
    ['created later goes after', sandbox('a', {}, { creationTimestamp: later }), sandbox('b'), 1],
    ['created in the same second: by name', sandbox('a'), sandbox('b'), -1],
    ['created in the same second: by name, the other way', sandbox('b'), sandbox('a'), 1],
    ['the same creation time and name', sandbox('a'), sandbox('a'), 0],
    ['no creation time counts as the earliest', sandbox('z', {}, { creationTimestamp: undefined }), sandbox('a'), -1],
  ])('%s', (_, a, b, expected) => {
    expect(Math.sign(inAdmissionOrder(a, b))).toBe(expected);
  });

  it('orders pods as Sandboxes, their Date creation times read as the strings are', () => {
    const pod = (name: string, at: string): V1Pod => ({ metadata: { name, creationTimestamp: new Date(at) } });
    const pods = [pod('p2', AT), pod('p3', later), pod('p1', AT)];
    expect(pods.sort(inAdmissionOrder).map((p) => p.metadata!.name)).toEqual(['p1', 'p2', 'p3']);
    expect(creationTime(pods[0]!)).toBe(creationTime(sandbox('a')));
  });
});
