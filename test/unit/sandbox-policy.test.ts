import { describe, expect, it } from 'vitest';
import {
  busyCapReached,
  effectiveBusyCaps,
  type CapacityLimits,
  decideAcquire,
  decideHold,
  expiredHolds,
  nextExpiry,
  poolDeficit,
  retryHintSeconds,
  type RunnerView,
  warmCapReleases,
} from '../../sandbox-policy/policy.js';
import { admitInOrder, compareAdmissionOrder } from '../../sandbox-policy/admission.js';
import { expectCreate, expectDelete, inFlight, lowerCreate, NO_EXPECTATIONS, observed } from '../../sandbox-policy/expectations.js';
import * as transition from '../../sandbox-policy/transitions.js';

const runner = (id: string, state: RunnerView['state'], extra: Partial<RunnerView> = {}): RunnerView => ({
  id,
  agentType: 'vendor-agent-sdk',
  state,
  lastUsedAt: 0,
  ...extra,
});
const limits: CapacityLimits = { maxSandboxes: 3, poolSize: 1 };
const request = { agentType: 'vendor-agent-sdk', conversationId: 'con_a' };

describe('decideAcquire(runners, request, limits)', () => {
  it.each([
    [
      'prefers the conversation’s own held runner',
      [runner('p', 'pooled'), runner('h', 'held', { conversationId: 'con_a' })],
      { kind: 'use-held', runnerId: 'h' },
    ],
    [
      'then a pre-started runner of the agent type',
      [runner('h2', 'held', { conversationId: 'con_b' }), runner('p', 'pooled')],
      { kind: 'claim-pooled', runnerId: 'p' },
    ],
    ['ignores pre-started runners of another type', [runner('p', 'pooled', { agentType: 'other' })], { kind: 'start-new' }],
    ['starts one while below capacity', [runner('b', 'busy')], { kind: 'start-new' }],
    [
      'evicts the least recently used warm hold when full',
      [runner('b', 'busy'), runner('h1', 'held', { lastUsedAt: 20 }), runner('h2', 'held', { lastUsedAt: 10 })],
      { kind: 'evict-and-start', evictRunnerId: 'h2' },
    ],
    [
      'then a pre-started runner of another type',
      [runner('b', 'busy'), runner('b2', 'busy'), runner('p', 'pooled', { agentType: 'other' })],
      { kind: 'evict-and-start', evictRunnerId: 'p' },
    ],
    [
      'has no capacity when every runner is busy',
      [runner('a', 'busy'), runner('b', 'busy'), runner('c', 'starting')],
      { kind: 'no-capacity' },
    ],
  ])('%s', (_name, runners, expected) => {
    expect(decideAcquire(runners, request, limits)).toEqual(expected);
  });
});

describe('decideHold(runners, request)', () => {
  const base = { runnerId: 'r', tenantId: 't1', idleTtlSeconds: 300, now: 1_000 };
  it('holds under a sliding TTL when the tenant is within its cap', () => {
    expect(decideHold([runner('r', 'busy')], { ...base, maxConcurrentWarm: 2 })).toEqual({ hold: true, heldUntil: 301_000, evict: [] });
  });
  it('evicts the tenant’s least recently used holds beyond the cap, never another tenant’s', () => {
    const runners = [
      runner('r', 'busy', { tenantId: 't1' }),
      runner('old', 'held', { tenantId: 't1', lastUsedAt: 1 }),
      runner('newer', 'held', { tenantId: 't1', lastUsedAt: 5 }),
      runner('other', 'held', { tenantId: 't2', lastUsedAt: 0 }),
    ];
    expect(decideHold(runners, { ...base, maxConcurrentWarm: 2 }).evict).toEqual(['old']);
    expect(decideHold(runners, { ...base, maxConcurrentWarm: 1 }).evict).toEqual(['old', 'newer']);
  });
  it('does not hold at all with a cap of 0', () => {
    expect(decideHold([], { ...base, maxConcurrentWarm: 0 }).hold).toBe(false);
  });
});

describe('expiry', () => {
  const runners = [runner('a', 'held', { heldUntil: 100 }), runner('b', 'held', { heldUntil: 200 }), runner('c', 'busy')];
  it('expiredHolds(runners, now) lists lapsed holds only, inclusive of the deadline', () => {
    expect(expiredHolds(runners, 99)).toEqual([]);
    expect(expiredHolds(runners, 100)).toEqual(['a']);
    expect(expiredHolds(runners, 500)).toEqual(['a', 'b']);
  });
  it('nextExpiry(runners) is the earliest deadline', () => {
    expect(nextExpiry(runners)).toBe(100);
    expect(nextExpiry([runner('c', 'busy')])).toBeUndefined();
  });
});

describe('poolDeficit(runners, agentType, limits)', () => {
  it('tops the pool up to its size, counting runners still starting', () => {
    expect(poolDeficit([], 'vendor-agent-sdk', { maxSandboxes: 5, poolSize: 2 })).toBe(2);
    expect(poolDeficit([runner('s', 'starting')], 'vendor-agent-sdk', { maxSandboxes: 5, poolSize: 2 })).toBe(1);
  });
  it('never exceeds capacity', () => {
    expect(poolDeficit([runner('b', 'busy'), runner('c', 'busy')], 'vendor-agent-sdk', { maxSandboxes: 3, poolSize: 2 })).toBe(1);
    expect(poolDeficit([runner('b', 'busy')], 'vendor-agent-sdk', { maxSandboxes: 1, poolSize: 2 })).toBe(0);
  });
});

describe('retryHintSeconds(position, typicalTurnSeconds)', () => {
  it('grows with the queue position and is at least one second', () => {
    expect(retryHintSeconds(1, 0.2)).toBe(1);
    expect(retryHintSeconds(3, 2)).toBe(6);
  });
});

describe('effectiveBusyCaps(settings, defaults)', () => {
  it.each([
    [{}, { tenant: 4, user: 2 }, { tenant: 4, user: 2 }],
    [
      { max_busy_sandboxes: null, max_busy_sandboxes_per_user: null },
      { tenant: 4, user: undefined },
      { tenant: 4, user: undefined },
    ],
    [
      { max_busy_sandboxes: 9, max_busy_sandboxes_per_user: 1 },
      { tenant: 4, user: 2 },
      { tenant: 9, user: 1 },
    ],
    [{ max_busy_sandboxes: 9 }, { tenant: undefined, user: undefined }, { tenant: 9, user: undefined }],
  ])('settings %j over defaults %j give %j', (settings, defaults, caps) => {
    expect(effectiveBusyCaps(settings, defaults)).toEqual(caps);
  });
});

describe('busyCapReached(busy, caps)', () => {
  it.each([
    [{ tenant: 0, user: 0 }, { tenant: undefined, user: undefined }, undefined],
    [{ tenant: 100, user: 100 }, { tenant: undefined, user: undefined }, undefined],
    [{ tenant: 1, user: 0 }, { tenant: 2, user: 1 }, undefined],
    [{ tenant: 2, user: 0 }, { tenant: 2, user: 1 }, 'tenant'],
    [{ tenant: 1, user: 1 }, { tenant: 2, user: 1 }, 'user'],
    [{ tenant: 3, user: 3 }, { tenant: 3, user: 3 }, 'tenant'],
    [{ tenant: 5, user: 2 }, { tenant: undefined, user: 2 }, 'user'],
  ] as const)('%j busy under %j: %s', (busy, caps, reached) => {
    expect(busyCapReached(busy, caps)).toBe(reached);
  });
});

describe('poolDeficit with creates in flight', () => {
  it('counts creates not yet seen towards the pool and against capacity', () => {
    expect(poolDeficit([], 'vendor-agent-sdk', { maxSandboxes: 5, poolSize: 3 }, 2)).toBe(1);
    expect(poolDeficit([runner('b', 'busy')], 'vendor-agent-sdk', { maxSandboxes: 2, poolSize: 3 }, 1)).toBe(0);
  });
});

describe('warmCapReleases(runners, capOf)', () => {
  const runners = [
    runner('t1-old', 'held', { tenantId: 't1', lastUsedAt: 1 }),
    runner('t1-mid', 'held', { tenantId: 't1', lastUsedAt: 5 }),
    runner('t1-new', 'held', { tenantId: 't1', lastUsedAt: 9 }),
    runner('t1-busy', 'busy', { tenantId: 't1', lastUsedAt: 0 }),
    runner('t2-a', 'held', { tenantId: 't2', lastUsedAt: 0 }),
  ];
  it.each([
    ['releases a tenant’s least recently used holds beyond its cap', { t1: 2, t2: 1 }, ['t1-old']],
    ['keeps none with a cap of 0', { t1: 0 }, ['t1-old', 't1-mid', 't1-new']],
    ['releases nothing for a tenant whose cap is unknown', {}, []],
    ['never counts a busy runner', { t1: 3 }, []],
  ])('%s', (_name, caps: Record<string, number>, expected) => {
    expect(warmCapReleases(runners, (tenantId) => caps[tenantId])).toEqual(expected);
  });
});

describe('compareAdmissionOrder(a, b)', () => {
  it.each([
    ['the earlier created first', { id: 'b', createdAt: 10 }, { id: 'a', createdAt: 20 }, -1],
    ['the later created after', { id: 'a', createdAt: 20 }, { id: 'b', createdAt: 10 }, 1],
    ['created together: by id', { id: 'a', createdAt: 10 }, { id: 'b', createdAt: 10 }, -1],
    ['created together: by id, the other way', { id: 'b', createdAt: 10 }, { id: 'a', createdAt: 10 }, 1],
    ['created together, ids of different lengths', { id: 'b', createdAt: 10 }, { id: 'b1', createdAt: 10 }, -1],
    ['the same request', { id: 'a', createdAt: 10 }, { id: 'a', createdAt: 10 }, 0],
    ['time before id', { id: 'z', createdAt: 0 }, { id: 'a', createdAt: 1 }, -1],
  ])('%s', (_name, a, b, expected) => {
    expect(Math.sign(compareAdmissionOrder(a, b))).toBe(expected);
  });
});

describe('admitInOrder(waiting, used, maxSandboxes)', () => {
  const waiting = [
    { id: 'c', createdAt: 30 },
    { id: 'a', createdAt: 10 },
    { id: 'b2', createdAt: 20 },
    { id: 'b1', createdAt: 20 },
  ];
  it.each([
    ['admits the earliest first, ties by id', 1, ['a', 'b1']],
    ['admits nobody when full', 3, []],
    ['admits nobody past the cap even if over it', 5, []],
    ['admits everyone when there is room', 0, ['a', 'b1', 'b2']],
  ])('%s', (_name, used, expected) => {
    expect(admitInOrder(waiting, used, 3)).toEqual(expected);
  });
});

describe('transitions', () => {
  const fresh = transition.newRunner('r', 'vendor-agent-sdk', 5);
  const owner = { conversationId: 'con_a', tenantId: 't1' };
  it('walks starting → pooled → busy → held → busy → released', () => {
    const pooled = transition.ready(fresh);
    expect(pooled.state).toBe('pooled');
    const busy = transition.claim(pooled, owner);
    expect(busy).toMatchObject({ state: 'busy', ...owner });
    const held = transition.hold(transition.turnEnded(busy, 50), 350);
    expect(held).toMatchObject({ state: 'held', heldUntil: 350, lastUsedAt: 50 });
    const again = transition.resume(held);
    expect(again).toMatchObject({ state: 'busy', heldUntil: undefined, conversationId: 'con_a' });
    expect(transition.release(again).state).toBe('released');
  });
  it('claims a runner still starting (started for the turn)', () => {
    expect(transition.claim(fresh, owner).state).toBe('busy');
  });
  it.each([
    ['ready', (v: RunnerView) => transition.ready(v), 'pooled'],
    ['claim a busy runner', (v: RunnerView) => transition.claim(v, owner), 'busy'],
    ['claim a held runner', (v: RunnerView) => transition.claim(v, owner), 'held'],
    ['resume a pooled runner', (v: RunnerView) => transition.resume(v), 'pooled'],
    ['hold a pooled runner', (v: RunnerView) => transition.hold(v, 1), 'pooled'],
    ['end a turn on a held runner', (v: RunnerView) => transition.turnEnded(v, 1), 'held'],
    ['claim a released runner', (v: RunnerView) => transition.claim(v, owner), 'released'],
  ] as const)('refuses to %s', (_name, step, from) => {
    expect(() => step(runner('r', from))).toThrow(transition.IllegalTransition);
  });
});

describe('expectations', () => {
  it('keeps creates in flight until observed, and deletes until gone', () => {
    let e = expectCreate(NO_EXPECTATIONS, 'ns/pool', 'pod-1', 100);
    e = expectCreate(e, 'ns/pool', 'pod-2', 100);
    e = expectDelete(e, 'ns/pool', 'pod-0', 100);
    expect(inFlight(e, 'ns/pool', 150, 1_000)).toMatchObject({ creates: ['pod-1', 'pod-2'], deletes: ['pod-0'] });
    e = observed(e, 'ns/pool', 'pod-1', 'created');
    e = lowerCreate(e, 'ns/pool', 'pod-2');
    e = observed(e, 'ns/pool', 'pod-0', 'deleted');
    expect(inFlight(e, 'ns/pool', 150, 1_000)).toBeUndefined();
    expect(e.size).toBe(0);
  });
  it('lets expectations lapse after the TTL, and never mutates the map it was given', () => {
    const e = expectCreate(NO_EXPECTATIONS, 'k', 'p', 100);
    expect(inFlight(e, 'k', 1_100, 1_000)).toBeDefined();
    expect(inFlight(e, 'k', 1_101, 1_000)).toBeUndefined();
    expect(NO_EXPECTATIONS.size).toBe(0);
    expect(observed(e, 'other', 'p', 'created')).toBe(e);
  });
});
