/**
 * A rate-limited work queue keyed by namespace/name, as controllers use: adding a key that is
 * already waiting does nothing, a key is processed by one worker at a time (added while in
 * process, it runs again right after), a failure retries the key with exponential backoff, and
 * `addAfter` keeps only the earliest pending deadline per key. Keys, not objects: the handler
 * re-reads the object, so reconciles stay level-triggered.
 */

export interface ProcessResult {
  /** Look again at this time (ms since epoch) even if nothing changes. */
  requeueAt?: number | undefined;
  /** A write lost to a newer version of the object: not an error, counted apart. */
  conflict?: boolean;
}

export interface WorkQueueOptions {
  workers: number;
  baseDelayMs?: number;
  maxDelayMs?: number;
  now?: () => number;
  onError?: (key: string, error: unknown, retryInMs: number) => void;
}

export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly queued = new Set<string>();
  private readonly processing = new Set<string>();
  /** Added again while in process: queued once it finishes. */
  private readonly dirty = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private active = 0;
  private running = false;
  private idleWaiters: (() => void)[] = [];
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;
  private readonly now: () => number;

  constructor(
    private readonly handler: (key: string) => Promise<ProcessResult>,
    private readonly options: WorkQueueOptions,
  ) {
    this.baseDelayMs = options.baseDelayMs ?? 50;
    this.maxDelayMs = options.maxDelayMs ?? 30_000;
    this.now = options.now ?? Date.now;
  }

  /** Keys waiting (not counting those in process): the queue depth metric. */
  get depth(): number {
    return this.queue.length;
  }

  start(): void {
    this.running = true;
    this.pump();
  }

  /** Stops taking keys and forgets the waiting ones (leadership lost); keys in process finish. */
  stop(): void {
    this.running = false;
    this.queue.length = 0;
    this.queued.clear();
    this.dirty.clear();
    this.failures.clear();
    for (const { timer } of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
  }

  add(key: string): void {
    if (!this.running) return;
    if (this.processing.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    this.queued.add(key);
    this.queue.push(key);
    this.pump();
  }

  addAfter(key: string, delayMs: number): void {
    if (!this.running) return;
    if (delayMs <= 0) {
      this.add(key);
      return;
    }
    const at = this.now() + delayMs;
    const pending = this.timers.get(key);
    if (pending && pending.at <= at) return;
    if (pending) clearTimeout(pending.timer);
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, delayMs);
    timer.unref();
    this.timers.set(key, { at, timer });
  }

  /** Resolves once no key is waiting or in process (tests, shutdown). */
  idle(): Promise<void> {
    if (this.active === 0 && this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private pump(): void {
    while (this.running && this.active < this.options.workers && this.queue.length > 0) {
      const key = this.queue.shift()!;
      this.queued.delete(key);
      this.processing.add(key);
      this.active++;
      void this.process(key);
    }
    if (this.active === 0 && this.queue.length === 0) for (const resolve of this.idleWaiters.splice(0)) resolve();
  }

  private async process(key: string): Promise<void> {
    try {
      const result = await this.handler(key);
      this.failures.delete(key);
      if (result.requeueAt !== undefined) this.addAfter(key, Math.max(0, result.requeueAt - this.now()));
    } catch (error) {
      const failures = (this.failures.get(key) ?? 0) + 1;
      this.failures.set(key, failures);
      const retryInMs = Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** (failures - 1));
      this.options.onError?.(key, error, retryInMs);
      this.addAfter(key, retryInMs);
    } finally {
      this.processing.delete(key);
      this.active--;
      if (this.dirty.delete(key)) this.add(key);
      this.pump();
    }
  }
}
