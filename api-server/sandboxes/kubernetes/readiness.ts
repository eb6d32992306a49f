/**
 * Waiting for a Sandbox's runner to be ready, by watching (each change either watch delivers is looked
 * at; nothing polls): ready once the runner pod it controls is running and ready (`servingPod`),
 * which is often a write before its status says so. The address dialed and the token Secret read are
 * that pod's, whatever the status claims: a status naming another pod, address or Secret is logged
 * and ignored, and the turn waits for the pod as for any runner not ready yet. Not admitted by the controller (every place of the
 * cluster taken): refused at once (`wait: false`, the Sandbox deleted so it keeps no place in the
 * line), or queued with its place announced whenever it moves, until admitted or the hold limit
 * (`signal`). Ended (a terminal failure the controller reports with its reason): the turn cannot run.
 * Fail-safe direction: whatever ends the wait without a ready runner ends it with an error, never a
 * lease on a runner not known ready.
 */
import type { Logger } from 'pino';
import type { Sandbox } from '../../../controller/api/v1alpha1.js';
import { retryHintSeconds } from '../../../sandbox-policy/policy.js';
import { queuePosition } from '../../../controller/api/admission-order.js';
import { isAdmitted, type RunnerAddress, standingOf, untrustedStatus } from '../../../controller/api/sandbox-status.js';
import type { SandboxClient } from './sandboxes.js';
import { CapacityExhausted, SandboxUnavailable, type WaitOptions } from '../provider.js';

/** A rough turn length for `retry_hint_seconds`, as the local provider uses. */
export const TYPICAL_TURN_SECONDS = 5;

export interface ReadinessContext {
  client: SandboxClient;
  logger: Logger;
  /** The longest the wait lasts once admitted (and before, when nothing refuses it). */
  readyTimeoutMs: number;
  /** The provider is stopping: waits end. */
  stopping: AbortSignal;
  /** Waits entering (+1) or leaving (-1) the controller's line, for `queuedRuns()`. */
  onQueuedChange: (delta: number) => void;
}

/** A Sandbox whose runner serves, and where. */
export interface ReadySandbox {
  sandbox: Sandbox;
  address: RunnerAddress;
}

/** Resolves once the Sandbox's runner is ready; `onAdmitted` is told as soon as it has its place (at the latest, when ready). */
export function untilReady(
  sandbox: Sandbox,
  options: WaitOptions,
  context: ReadinessContext,
  onAdmitted: () => void = () => {},
): Promise<ReadySandbox> {
  return new Promise<ReadySandbox>((resolve, reject) => {
    new ReadinessWait(sandbox, options, context, onAdmitted, { resolve, reject }).start();
  });
}

type WaitOutcome = { ready: ReadySandbox } | { error: Error; discard: boolean };

/** One wait: its watches, its place in the line as last announced, and how it ends (once). */
class ReadinessWait {
  private announced = 0;
  private queued = false;
  private warnedUntrusted = false;
  private settled = false;
  private readonly cleanups: (() => void)[] = [];

  constructor(
    private readonly sandbox: Sandbox,
    private readonly options: WaitOptions,
    private readonly context: ReadinessContext,
    private readonly onAdmitted: () => void,
    private readonly settle: { resolve: (ready: ReadySandbox) => void; reject: (error: Error) => void },
  ) {}

  start(): void {
    const { client, stopping, readyTimeoutMs } = this.context;
    const { uid } = this.sandbox.metadata;
    this.cleanups.push(
      client.subscribe((event, changed) => {
        if (changed.metadata.uid === uid && event === 'delete') {
          this.finish({ error: new SandboxUnavailable('the sandbox was deleted before its runner was ready'), discard: false });
        } else {
          // Any Sandbox leaving the line moves this one up in it.
          this.evaluate(this.latest());
        }
      }),
      client.pods.subscribe(() => this.evaluate(this.latest())),
    );
    const onAbort = () => this.finish({ error: this.refusal(), discard: true });
    const onStop = () => this.finish({ error: new CapacityExhausted(1), discard: false });
    this.options.signal?.addEventListener('abort', onAbort, { once: true });
    stopping.addEventListener('abort', onStop, { once: true });
    const timer = setTimeout(() => this.finish({ error: this.notReadyInTime(), discard: true }), readyTimeoutMs);
    timer.unref();
    this.cleanups.push(
      () => clearTimeout(timer),
      () => this.options.signal?.removeEventListener('abort', onAbort),
      () => stopping.removeEventListener('abort', onStop),
    );
    if (this.options.signal?.aborted) onAbort();
    else this.evaluate(this.latest());
  }

  private evaluate(current: Sandbox): void {
    const standing = standingOf(current);
    const address = standing.kind === 'ended' ? undefined : this.context.client.pods.servingFor(current);
    this.warnIfUntrusted(current, address);
    if (address || (standing.kind === 'starting' && isAdmitted(current))) this.onAdmitted();
    if (address) {
      this.finish({ ready: { sandbox: current, address } });
    } else if (standing.kind === 'ended') {
      this.finish({
        error: new SandboxUnavailable(`the sandbox could not start (${standing.reason}): ${standing.message}`),
        discard: false,
      });
    } else if (standing.kind === 'starting') {
      this.setQueued(false);
    } else if (standing.kind === 'queued' && !this.options.wait) {
      this.finish({ error: this.refusal(), discard: true });
    } else if (standing.kind === 'queued') {
      this.setQueued(true);
      this.announcePosition();
    }
  }

  private warnIfUntrusted(current: Sandbox, address: RunnerAddress | undefined): void {
    const untrusted = untrustedStatus(current, address);
    if (!untrusted || this.warnedUntrusted) return;
    this.warnedUntrusted = true;
    this.context.logger.warn({ sandbox: current.metadata.name, reason: untrusted }, 'a Sandbox status names another runner than its pod');
  }

  private announcePosition(): void {
    const position = queuePosition(this.context.client.cachedAll(), this.sandbox.metadata.name);
    if (position === this.announced) return;
    this.announced = position;
    this.options.onQueued?.(position, retryHintSeconds(position, TYPICAL_TURN_SECONDS));
  }

  /** The cache may be behind the create's answer, or ahead of it. */
  private latest(): Sandbox {
    const { name, uid, resourceVersion } = this.sandbox.metadata;
    const cached = this.context.client.cached(name);
    return cached && cached.metadata.uid === uid && Number(cached.metadata.resourceVersion) >= Number(resourceVersion)
      ? cached
      : this.sandbox;
  }

  private refusal(): CapacityExhausted {
    const position = queuePosition(this.context.client.cachedAll(), this.sandbox.metadata.name);
    return new CapacityExhausted(retryHintSeconds(position, TYPICAL_TURN_SECONDS));
  }

  private notReadyInTime(): SandboxUnavailable {
    const seconds = Math.round(this.context.readyTimeoutMs / 1000);
    return new SandboxUnavailable(`the sandbox was not ready within ${seconds} s; is the controller running?`);
  }

  private setQueued(value: boolean): void {
    if (this.queued !== value) this.context.onQueuedChange(value ? 1 : -1);
    this.queued = value;
  }

  private finish(outcome: WaitOutcome): void {
    if (this.settled) return;
    this.settled = true;
    this.setQueued(false);
    for (const cleanup of this.cleanups) cleanup();
    if ('ready' in outcome) this.settle.resolve(outcome.ready);
    else if (!outcome.discard) this.settle.reject(outcome.error);
    else this.discardThenReject(outcome.error);
  }

  /** A Sandbox that never got its place is deleted, so it keeps none in the line. */
  private discardThenReject(error: Error): void {
    this.context.client.delete(this.sandbox).then(
      () => this.settle.reject(error),
      (deleteError: unknown) => {
        this.context.logger.warn({ err: deleteError, sandbox: this.sandbox.metadata.name }, 'deleting a Sandbox not admitted failed');
        this.settle.reject(error);
      },
    );
  }
}
