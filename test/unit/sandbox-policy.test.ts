import { describe, expect, it } from 'vitest';
import {
  type CapacityLimits,
  decideAcquire,
  decideHold,
  expiredHolds,
  nextExpiry,
  poolDeficit,
  retryHintSeconds,
  type RunnerView,
} from '../../api-server/sandboxes/policy.js';

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
    ['prefers the conversation’s own held runner', [runner('p', 'pooled'), runner('h', 'held', { conversationId: 'con_a' })], { kind: 'use-held', runnerId: 'h' }],
    ['then a pre-started runner of the agent type', [runner('h2', 'held', { conversationId: 'con_b' }), runner('p', 'pooled')], { kind: 'claim-pooled', runnerId: 'p' }],
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
    ['has no capacity when every runner is busy', [runner('a', 'busy'), runner('b', 'busy'), runner('c', 'starting')], { kind: 'no-capacity' }],
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
