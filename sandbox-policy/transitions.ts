/**
 * The life of a runner as pure state transitions: a runner is `starting` until it answers, then
 * `pooled` (pre-started, nobody's) until a turn claims it (`busy`); after a warm turn it is `held`
 * for its conversation until the next turn resumes it or its idle TTL lapses; `released` is final.
 *
 *   starting ──ready──▶ pooled ──claim──▶ busy ──hold──▶ held ──resume──▶ busy
 *      └────────────claim───────────────▶ │                │
 *   any ─────────────────────────release──┴────────────────┴──▶ released
 *
 * Each function returns a new view and throws `IllegalTransition` from a state it does not leave,
 * so a caller that lost track of a runner fails loudly instead of serving two conversations on one.
 */
import type { RunnerState, RunnerView } from './runner-view.js';

export class IllegalTransition extends Error {
  constructor(
    readonly runnerId: string,
    readonly from: RunnerState,
    readonly transition: string,
  ) {
    super(`runner ${runnerId}: cannot ${transition} from ${from}`);
  }
}

/** A runner just asked for: nobody's yet. */
export function newRunner(id: string, agentType: string, now: number): RunnerView {
  return { id, agentType, state: 'starting', lastUsedAt: now };
}

/** It answered: a pre-started runner joins the pool. */
export function ready(view: RunnerView): RunnerView {
  expectState(view, ['starting'], 'become ready');
  return { ...view, state: 'pooled' };
}

/** A turn takes a runner that is nobody's yet (pre-started, or started for this turn). */
export function claim(view: RunnerView, owner: { conversationId: string; tenantId: string }): RunnerView {
  expectState(view, ['starting', 'pooled'], 'be claimed');
  return { ...view, state: 'busy', conversationId: owner.conversationId, tenantId: owner.tenantId };
}

/** The conversation's next turn takes its held runner back. */
export function resume(view: RunnerView): RunnerView {
  expectState(view, ['held'], 'resume');
  return { ...view, state: 'busy', heldUntil: undefined };
}

/** A turn ended on it: the LRU clock moves. */
export function turnEnded(view: RunnerView, now: number): RunnerView {
  expectState(view, ['busy'], 'end a turn');
  return { ...view, lastUsedAt: now };
}

/** Kept warm for its conversation until `heldUntil`. */
export function hold(view: RunnerView, heldUntil: number): RunnerView {
  expectState(view, ['busy'], 'be held');
  return { ...view, state: 'held', heldUntil };
}

/** Gone for good (recycled, expired, evicted, crashed). Releasing twice is harmless. */
export function release(view: RunnerView): RunnerView {
  return { ...view, state: 'released', heldUntil: undefined };
}

function expectState(view: RunnerView, from: RunnerState[], transition: string): void {
  if (!from.includes(view.state)) throw new IllegalTransition(view.id, view.state, transition);
}
