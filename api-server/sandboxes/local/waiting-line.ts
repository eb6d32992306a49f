/**
 * The turns waiting for a runner of this node (`on_capacity=hold`), served first come first served.
 * Each waiter is told its place whenever it changes (1 = next to be served); one that gives up (its
 * signal aborts) leaves the line with `CapacityExhausted`, and those behind it move up.
 */
import { retryHintSeconds } from '../../../sandbox-policy/policy.js';
import { type AcquireRequest, CapacityExhausted, type Lease, type WaitOptions } from '../provider.js';

/** A rough turn length for `retry_hint_seconds` until real figures exist. */
const TYPICAL_TURN_SECONDS = 5;

interface Waiter {
  request: AcquireRequest;
  resolve: (lease: Lease) => void;
  reject: (error: Error) => void;
  onQueued?: ((position: number, retryHintSeconds: number) => void) | undefined;
  /** The position last announced to it. */
  position: number;
}

export class WaitingLine {
  private readonly waiters: Waiter[] = [];

  get length(): number {
    return this.waiters.length;
  }

  /** The refusal for a request that would join the line now but may not wait. */
  refusal(): CapacityExhausted {
    return new CapacityExhausted(retryHintSeconds(this.waiters.length + 1, TYPICAL_TURN_SECONDS));
  }

  /** Joins the end of the line; resolves once `serve` finds the request a runner. */
  join(request: AcquireRequest, options: WaitOptions): Promise<Lease> {
    return new Promise<Lease>((resolve, reject) => {
      const waiter: Waiter = { request, resolve, reject, onQueued: options.onQueued, position: 0 };
      this.waiters.push(waiter);
      this.announcePositions();
      options.signal?.addEventListener('abort', () => this.leave(waiter), { once: true });
    });
  }

  /** Serves the waiters in order while `tryAcquire` finds the first one a runner. */
  serve(tryAcquire: (request: AcquireRequest) => Promise<Lease> | undefined): void {
    let served = false;
    while (this.waiters.length > 0) {
      const lease = tryAcquire(this.waiters[0]!.request);
      if (!lease) break;
      const waiter = this.waiters.shift()!;
      lease.then(waiter.resolve, waiter.reject);
      served = true;
    }
    if (served) this.announcePositions();
  }

  rejectAll(error: Error): void {
    for (const waiter of this.waiters.splice(0)) waiter.reject(error);
  }

  private leave(waiter: Waiter): void {
    const index = this.waiters.indexOf(waiter);
    if (index < 0) return;
    this.waiters.splice(index, 1);
    waiter.reject(this.refusal());
    this.announcePositions();
  }

  /** Tells each waiter its place whenever it changes. */
  private announcePositions(): void {
    this.waiters.forEach((waiter, index) => {
      const position = index + 1;
      if (waiter.position === position) return;
      waiter.position = position;
      waiter.onQueued?.(position, retryHintSeconds(position, TYPICAL_TURN_SECONDS));
    });
  }
}
