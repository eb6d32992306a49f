/**
 * The runners a provider has in hand and the bookkeeping both providers keep of them alike: each
 * runner's state as the capacity policy sees it, the run its egress credential stands for, the
 * timer that expires warm holds, and what the conversation record shows (warm until, or cold).
 *
 * Invariants: a runner's state changes only through sandbox-policy/transitions.ts (the view is
 * read-only outside this module), so a provider that lost track of a runner fails loudly instead of
 * serving two conversations on one. Fail-safe direction: a credential stands for a run only while
 * its runner is here, busy, and the token matches; anything else stands for nothing.
 */
import type { Logger } from 'pino';
import { expiredHolds, nextExpiry, type RunnerView } from '../../sandbox-policy/policy.js';
import * as transition from '../../sandbox-policy/transitions.js';
import { constantTimeEqual } from '../core/crypto.js';
import type { SandboxStateListener } from './provider.js';
import type { Runner } from './runner.js';

/** What the registry keeps of every runner; a provider's entries add what it needs of its own. */
export interface RegisteredRunner {
  readonly runner: Runner;
  /** The password of its egress credential (user: the runner id), fixed for the runner's life. */
  readonly egressToken: string;
  readonly view: RunnerView;
  /** Its conversation was last shown warm (so ending it must show the conversation cold). */
  readonly shownWarm: boolean;
}

/** How an entry is written, here only. */
type Writable<E> = { -readonly [K in keyof E]: E[K] };

export interface RunnerRegistryOptions {
  logger: Logger;
  onSandboxState: SandboxStateListener;
  /** Called when the earliest warm hold lapses; the timer is armed again once it settles. */
  onHoldsLapsed: () => Promise<void>;
  now: () => number;
}

export class RunnerRegistry<E extends RegisteredRunner> {
  private readonly entries = new Map<string, E>();
  private expiryTimer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly options: RunnerRegistryOptions) {}

  /** Registers a runner just asked for (`starting`, nobody's yet). */
  add(fields: Omit<E, 'view' | 'shownWarm'>, agentType: string): E {
    const entry = {
      ...fields,
      view: transition.newRunner(fields.runner.id, agentType, this.options.now()),
      shownWarm: false,
    } as unknown as E;
    this.entries.set(entry.runner.id, entry);
    return entry;
  }

  get(runnerId: string): E | undefined {
    return this.entries.get(runnerId);
  }

  /** Whether this very entry is still registered (not ended, nor replaced). */
  has(entry: E): boolean {
    return this.entries.get(entry.runner.id) === entry;
  }

  all(): E[] {
    return [...this.entries.values()];
  }

  /** A snapshot for the policy (and for metrics). */
  views(): RunnerView[] {
    return this.all().map((entry) => entry.view);
  }

  /** The runners held warm for the conversation (one at most, unless a provider lost track). */
  heldFor(conversationId: string): E[] {
    return this.all().filter((entry) => entry.view.state === 'held' && entry.view.conversationId === conversationId);
  }

  /** Held runners whose idle TTL has lapsed now. */
  lapsedHolds(): E[] {
    return expiredHolds(this.views(), this.options.now()).flatMap((id) => this.entries.get(id) ?? []);
  }

  ready(entry: E): void {
    this.write(entry).view = transition.ready(entry.view);
  }

  claim(entry: E, owner: { conversationId: string; tenantId: string }): void {
    this.write(entry).view = transition.claim(entry.view, owner);
  }

  resume(entry: E): void {
    this.write(entry).view = transition.resume(entry.view);
  }

  turnEnded(entry: E): void {
    this.write(entry).view = transition.turnEnded(entry.view, this.options.now());
  }

  /** Holds it warm until `heldUntil` and arms the expiry timer for the earliest hold. */
  hold(entry: E, heldUntil: number): void {
    this.write(entry).view = transition.hold(entry.view, heldUntil);
    this.armExpiry();
  }

  /** Ends this entry (released, forgotten); false when it had already ended. */
  remove(entry: E): boolean {
    if (!this.has(entry)) return false;
    this.entries.delete(entry.runner.id);
    this.write(entry).view = transition.release(entry.view);
    return true;
  }

  /** Stops the expiry timer and ends every entry, returned for the provider to dispose of. */
  stop(): E[] {
    this.stopped = true;
    clearTimeout(this.expiryTimer);
    const ended = this.all();
    for (const entry of ended) this.remove(entry);
    return ended;
  }

  /**
   * The run an egress credential stands for now: the run whose turn is in progress on that runner. A
   * pooled, held or ended runner's credential stands for nothing (the proxy answers 407).
   */
  egressRun(runnerId: string, token: string): string | undefined {
    return this.servingWith(runnerId, token) ? this.entries.get(runnerId)!.runner.currentRunId : undefined;
  }

  /** Whether the credential is the runner's own and the runner is serving a turn (busy), not pooled, held or ended. */
  servingWith(runnerId: string, token: string): boolean {
    const entry = this.entries.get(runnerId);
    return entry?.view.state === 'busy' && constantTimeEqual(Buffer.from(entry.egressToken), Buffer.from(token));
  }

  /** The run in progress on a runner (for the egress proxy's missing-secret hook, after it authenticated). */
  currentRun(runnerId: string): string | undefined {
    return this.entries.get(runnerId)?.runner.currentRunId;
  }

  /** Shows the runner's conversation warm until `expiresAt`. */
  showWarm(entry: E, expiresAt: Date): Promise<void> {
    return this.show(entry, { warm: true, expiresAt });
  }

  /** Shows the runner's conversation cold, if it was last shown warm. */
  async showCold(entry: E): Promise<void> {
    if (entry.shownWarm) await this.show(entry, { warm: false, expiresAt: null });
  }

  private async show(entry: E, state: { warm: boolean; expiresAt: Date | null }): Promise<void> {
    const { conversationId } = entry.view;
    if (!conversationId) return;
    this.write(entry).shownWarm = state.warm;
    try {
      await this.options.onSandboxState(conversationId, state);
    } catch (error) {
      this.options.logger.error({ err: error, conversation_id: conversationId }, 'recording sandbox state failed');
    }
  }

  /** One timer, for the earliest hold to lapse; re-armed after each expiry and each new hold. */
  private armExpiry(): void {
    clearTimeout(this.expiryTimer);
    const next = nextExpiry(this.views());
    if (next === undefined || this.stopped) return;
    this.expiryTimer = setTimeout(
      () => {
        void this.options.onHoldsLapsed().then(() => this.armExpiry());
      },
      Math.max(0, next - this.options.now()),
    );
    this.expiryTimer.unref();
  }

  private write(entry: E): Writable<RegisteredRunner> {
    return entry as Writable<RegisteredRunner>;
  }
}
