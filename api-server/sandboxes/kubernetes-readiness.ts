/**
 * Waiting for a Sandbox to be Ready, by watching (each change the watch delivers is looked at; nothing
 * polls). Not admitted by the controller (every place of the cluster taken): refused at once
 * (`wait: false`, the Sandbox deleted so it keeps no place in the line), or queued with its place
 * announced whenever it moves, until admitted or the hold limit (`signal`). Ended (a terminal failure
 * the controller reports with its reason): the turn cannot run. Fail-safe direction: whatever ends
 * the wait without a Ready Sandbox ends it with an error, never a lease on a runner not known ready.
 */
import type { Logger } from 'pino';
import type { Sandbox } from '../../controller/api/v1alpha1.js';
import { retryHintSeconds } from '../../sandbox-policy/policy.js';
import { isAdmitted, queuePosition, standingOf } from './kubernetes-decisions.js';
import type { SandboxClient } from './kubernetes-sandboxes.js';
import { CapacityExhausted, SandboxUnavailable, type WaitOptions } from './provider.js';

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

/** Resolves with the Sandbox once Ready; `onAdmitted` is told as soon as it has its place (at the latest, when Ready). */
export function untilReady(sandbox: Sandbox, options: WaitOptions, context: ReadinessContext, onAdmitted: () => void = () => {}): Promise<Sandbox> {
  const { client } = context;
  const { name, uid } = sandbox.metadata;
  return new Promise<Sandbox>((resolve, reject) => {
    let announced = 0;
    let queued = false;
    let settled = false;
    const setQueued = (value: boolean) => {
      if (queued !== value) context.onQueuedChange(value ? 1 : -1);
      queued = value;
    };
    const finish = (outcome: { sandbox: Sandbox } | { error: Error; discard: boolean }) => {
      if (settled) return;
      settled = true;
      setQueued(false);
      unsubscribe();
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      context.stopping.removeEventListener('abort', onStop);
      if ('sandbox' in outcome) return resolve(outcome.sandbox);
      if (!outcome.discard) return reject(outcome.error);
      client.delete(sandbox).then(
        () => reject(outcome.error),
        (error: unknown) => {
          context.logger.warn({ err: error, sandbox: name }, 'deleting a Sandbox not admitted failed');
          reject(outcome.error);
        },
      );
    };
    const refusal = () => new CapacityExhausted(retryHintSeconds(queuePosition(client.cachedAll(), name), TYPICAL_TURN_SECONDS));
    const evaluate = (current: Sandbox | undefined) => {
      if (!current || current.metadata.uid !== uid) return;
      const standing = standingOf(current);
      if (standing.kind === 'ready' || (standing.kind === 'starting' && isAdmitted(current))) onAdmitted();
      switch (standing.kind) {
        case 'ready':
          return finish({ sandbox: current });
        case 'ended':
          return finish({ error: new SandboxUnavailable(`the sandbox could not start (${standing.reason}): ${standing.message}`), discard: false });
        case 'queued': {
          if (!options.wait) return finish({ error: refusal(), discard: true });
          setQueued(true);
          const position = queuePosition(client.cachedAll(), name);
          if (position !== announced) {
            announced = position;
            options.onQueued?.(position, retryHintSeconds(position, TYPICAL_TURN_SECONDS));
          }
          return;
        }
        case 'starting':
          setQueued(false);
      }
    };
    const unsubscribe = client.subscribe((event, changed) => {
      if (changed.metadata.uid === uid && event === 'delete') {
        return finish({ error: new SandboxUnavailable('the sandbox was deleted before its runner was ready'), discard: false });
      }
      // Any Sandbox leaving the line moves this one up in it.
      evaluate(client.cached(name));
    });
    const onAbort = () => finish({ error: refusal(), discard: true });
    const onStop = () => finish({ error: new CapacityExhausted(1), discard: false });
    options.signal?.addEventListener('abort', onAbort, { once: true });
    context.stopping.addEventListener('abort', onStop, { once: true });
    const timer = setTimeout(
      () =>
        finish({
          error: new SandboxUnavailable(`the sandbox was not ready within ${Math.round(context.readyTimeoutMs / 1000)} s; is the controller running?`),
          discard: true,
        }),
      context.readyTimeoutMs,
    );
    timer.unref();
    if (options.signal?.aborted) return onAbort();
    // The cache may be behind the create's answer, or ahead of it.
    const cached = client.cached(name);
    evaluate(cached && cached.metadata.uid === uid && Number(cached.metadata.resourceVersion) >= Number(sandbox.metadata.resourceVersion) ? cached : sandbox);
  });
}
