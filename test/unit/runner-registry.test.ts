import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Runner } from '../../api-server/sandboxes/runner.js';
import { type RegisteredRunner, RunnerRegistry } from '../../api-server/sandboxes/runner-registry.js';
import { IllegalTransition } from '../../sandbox-policy/transitions.js';

const OWNER = { conversationId: 'con_a', tenantId: 'ten_a' };

/** A runner as the registry sees it: an id and the run of the turn in progress. */
function runner(id: string, currentRunId?: string): Runner {
  return { id, alive: true, currentRunId } as unknown as Runner;
}

interface Setup {
  registry: RunnerRegistry<RegisteredRunner>;
  clock: { now: number };
  shown: Array<[string, { warm: boolean; expiresAt: Date | null }]>;
  lapses: { count: number };
}

function setup(): Setup {
  const clock = { now: 1_000 };
  const shown: Setup['shown'] = [];
  const lapses = { count: 0 };
  const registry = new RunnerRegistry<RegisteredRunner>({
    logger: pino({ level: 'silent' }),
    onSandboxState: async (conversationId, state) => void shown.push([conversationId, state]),
    onHoldsLapsed: async () => void lapses.count++,
    now: () => clock.now,
  });
  return { registry, clock, shown, lapses };
}

/** A registered runner brought to `state` through the transitions a provider would use. */
function inState(
  registry: RunnerRegistry<RegisteredRunner>,
  state: 'starting' | 'pooled' | 'busy' | 'held',
  id = 'run_1',
  runId?: string,
): RegisteredRunner {
  const entry = registry.add({ runner: runner(id, runId), egressToken: 'tok' }, 'vendor-agent-sdk');
  if (state === 'pooled') registry.ready(entry);
  if (state === 'busy' || state === 'held') registry.claim(entry, OWNER);
  if (state === 'held') registry.hold(entry, 5_000);
  return entry;
}

describe('RunnerRegistry transitions', () => {
  let s: Setup;
  beforeEach(() => {
    vi.useFakeTimers();
    s = setup();
  });
  afterEach(() => {
    s.registry.stop();
    vi.useRealTimers();
  });

  it('registers a runner as starting, nobody’s, used now', () => {
    const entry = s.registry.add({ runner: runner('run_1'), egressToken: 'tok' }, 'vendor-agent-sdk');
    expect(entry.view).toEqual({ id: 'run_1', agentType: 'vendor-agent-sdk', state: 'starting', lastUsedAt: 1_000 });
    expect(entry.shownWarm).toBe(false);
    expect(s.registry.views()).toEqual([entry.view]);
  });

  it.each([
    ['ready', 'starting', (r: RunnerRegistry<RegisteredRunner>, e: RegisteredRunner) => r.ready(e), { state: 'pooled' }],
    ['claim', 'pooled', (r: RunnerRegistry<RegisteredRunner>, e: RegisteredRunner) => r.claim(e, OWNER), { state: 'busy', ...OWNER }],
    ['claim', 'starting', (r: RunnerRegistry<RegisteredRunner>, e: RegisteredRunner) => r.claim(e, OWNER), { state: 'busy', ...OWNER }],
    ['hold', 'busy', (r: RunnerRegistry<RegisteredRunner>, e: RegisteredRunner) => r.hold(e, 9_000), { state: 'held', heldUntil: 9_000 }],
    ['resume', 'held', (r: RunnerRegistry<RegisteredRunner>, e: RegisteredRunner) => r.resume(e), { state: 'busy', heldUntil: undefined }],
  ] as const)('%s from %s goes through the shared transition', (_name, from, apply, expected) => {
    const entry = inState(s.registry, from);
    apply(s.registry, entry);
    expect(entry.view).toMatchObject(expected);
  });

  it.each([
    ['ready', 'busy', (r: RunnerRegistry<RegisteredRunner>, e: RegisteredRunner) => r.ready(e)],
    ['claim', 'held', (r: RunnerRegistry<RegisteredRunner>, e: RegisteredRunner) => r.claim(e, OWNER)],
    ['resume', 'busy', (r: RunnerRegistry<RegisteredRunner>, e: RegisteredRunner) => r.resume(e)],
    ['hold', 'pooled', (r: RunnerRegistry<RegisteredRunner>, e: RegisteredRunner) => r.hold(e, 9_000)],
    ['turnEnded', 'held', (r: RunnerRegistry<RegisteredRunner>, e: RegisteredRunner) => r.turnEnded(e)],
  ] as const)('%s from %s throws IllegalTransition', (_name, from, apply) => {
    const entry = inState(s.registry, from);
    expect(() => apply(s.registry, entry)).toThrow(IllegalTransition);
  });

  it('turnEnded moves the LRU clock to now', () => {
    const entry = inState(s.registry, 'busy');
    s.clock.now = 4_000;
    s.registry.turnEnded(entry);
    expect(entry.view).toMatchObject({ state: 'busy', lastUsedAt: 4_000 });
  });

  it('remove releases and forgets the entry once; a replaced entry is not removed', () => {
    const entry = inState(s.registry, 'busy');
    expect(s.registry.remove(entry)).toBe(true);
    expect(entry.view.state).toBe('released');
    expect(s.registry.remove(entry)).toBe(false);
    const replacement = inState(s.registry, 'busy');
    expect(s.registry.remove(entry)).toBe(false);
    expect(s.registry.has(replacement)).toBe(true);
  });

  it('stop releases every entry and returns them', () => {
    const a = inState(s.registry, 'held', 'run_a');
    const b = inState(s.registry, 'pooled', 'run_b');
    expect(s.registry.stop()).toEqual([a, b]);
    expect(s.registry.views()).toEqual([]);
    expect([a.view.state, b.view.state]).toEqual(['released', 'released']);
  });
});

describe('RunnerRegistry.heldFor / lapsedHolds', () => {
  it.each([
    ['before its deadline', 4_999, [], ['run_h']],
    ['at its deadline', 5_000, ['run_h'], ['run_h']],
    ['after its deadline', 6_000, ['run_h'], ['run_h']],
  ])('a hold until 5000 %s: lapsed %j, held for its conversation %j', (_name, now, lapsed, held) => {
    const s = setup();
    inState(s.registry, 'held', 'run_h');
    inState(s.registry, 'busy', 'run_b');
    s.clock.now = now;
    expect(s.registry.lapsedHolds().map((e) => e.runner.id)).toEqual(lapsed);
    expect(s.registry.heldFor('con_a').map((e) => e.runner.id)).toEqual(held);
    expect(s.registry.heldFor('con_other')).toEqual([]);
    s.registry.stop();
  });
});

describe('RunnerRegistry hold expiry timer', () => {
  beforeEach(() => vi.useFakeTimers());
  afterEach(() => vi.useRealTimers());

  it('fires once the earliest hold lapses, by the injected clock', async () => {
    const s = setup();
    const early = inState(s.registry, 'busy', 'run_early');
    const late = inState(s.registry, 'busy', 'run_late');
    s.registry.hold(late, 9_000);
    s.registry.hold(early, 3_000);
    await vi.advanceTimersByTimeAsync(1_999);
    expect(s.lapses.count).toBe(0);
    await vi.advanceTimersByTimeAsync(1);
    expect(s.lapses.count).toBe(1);
    s.registry.stop();
  });

  it('arms nothing after stop', async () => {
    const s = setup();
    s.registry.stop();
    s.registry.hold(inState(s.registry, 'busy'), 2_000);
    await vi.advanceTimersByTimeAsync(10_000);
    expect(s.lapses.count).toBe(0);
  });
});

describe('RunnerRegistry.egressRun(runnerId, token)', () => {
  it.each([
    ['a busy runner with the right token', 'busy', 'run_1', 'tok', 'msg_1'],
    ['a wrong token', 'busy', 'run_1', 'other', undefined],
    ['a token of another length', 'busy', 'run_1', 'tok-longer', undefined],
    ['an unknown runner', 'busy', 'run_x', 'tok', undefined],
    ['a held runner', 'held', 'run_1', 'tok', undefined],
    ['a pooled runner', 'pooled', 'run_1', 'tok', undefined],
  ] as const)('%s stands for %s', (_name, state, runnerId, token, expected) => {
    const s = setup();
    inState(s.registry, state, 'run_1', 'msg_1');
    expect(s.registry.egressRun(runnerId, token)).toBe(expected);
    s.registry.stop();
  });

  it('currentRun names the run on the runner whatever its state, nothing once removed', () => {
    const s = setup();
    const entry = inState(s.registry, 'held', 'run_1', 'msg_1');
    expect(s.registry.currentRun('run_1')).toBe('msg_1');
    s.registry.remove(entry);
    expect(s.registry.currentRun('run_1')).toBeUndefined();
  });
});

describe('RunnerRegistry.showWarm / showCold', () => {
  it('shows a conversation warm, then cold once; a conversation never shown warm is not shown cold', async () => {
    const s = setup();
    const warm = inState(s.registry, 'held', 'run_w');
    const never = inState(s.registry, 'busy', 'run_n');
    await s.registry.showWarm(warm, new Date(5_000));
    await s.registry.showCold(warm);
    await s.registry.showCold(warm);
    await s.registry.showCold(never);
    expect(s.shown).toEqual([
      ['con_a', { warm: true, expiresAt: new Date(5_000) }],
      ['con_a', { warm: false, expiresAt: null }],
    ]);
    s.registry.stop();
  });

  it('shows nothing for a runner that has no conversation', async () => {
    const s = setup();
    const pooled = inState(s.registry, 'pooled');
    await s.registry.showWarm(pooled, new Date(5_000));
    expect(s.shown).toEqual([]);
    s.registry.stop();
  });

  it('logs a failed write instead of throwing', async () => {
    const registry = new RunnerRegistry<RegisteredRunner>({
      logger: pino({ level: 'silent' }),
      onSandboxState: () => Promise.reject(new Error('db down')),
      onHoldsLapsed: async () => undefined,
      now: () => 0,
    });
    const entry = inState(registry, 'busy');
    await expect(registry.showWarm(entry, new Date(1))).resolves.toBeUndefined();
    expect(entry.shownWarm).toBe(true);
    registry.stop();
  });
});
