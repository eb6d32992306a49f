/**
 * Waiting for a Sandbox's runner to be ready, by watching (each change either watch delivers is looked
 * at; nothing polls): ready once the Sandbox's status says so or, a write earlier, once the pod it
 * controls is running and ready (`servingPod`). Not admitted by the controller (every place of the
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
import { isAdmitted, type RunnerAddress, standingOf, statusAddress } from '../../../controller/api/sandbox-status.js';
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
  const { client } = context;
  const { name, uid } = sandbox.metadata;
  return new Promise<ReadySandbox>((resolve, reject) => {
    let announced = 0;
    let queued = false;
    let settled = false;
    const setQueued = (value: boolean) => {
      if (queued !== value) context.onQueuedChange(value ? 1 : -1);
      queued = value;
    };
    const finish = (outcome: { ready: ReadySandbox } | { error: Error; discard: boolean }) => {
      if (settled) return;
      settled = true;
      setQueued(false);
      unsubscribe();
      unsubscribePods();
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      context.stopping.removeEventListener('abort', onStop);
      if ('ready' in outcome) return resolve(outcome.ready);
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
    // The cache may be behind the create's answer, or ahead of it.
    const latest = () => {
      const cached = client.cached(name);
      return cached && cached.metadata.uid === uid && Number(cached.metadata.resourceVersion) >= Number(sandbox.metadata.resourceVersion)
        ? cached
        : sandbox;
    };
    const evaluate = (current: Sandbox) => {
      const standing = standingOf(current);
      const address = standing.kind === 'ended' ? undefined : (statusAddress(current) ?? client.pods.servingFor(current));
      if (address || (standing.kind === 'starting' && isAdmitted(current))) onAdmitted();
      if (address) return finish({ ready: { sandbox: current, address } });
      switch (standing.kind) {
        case 'ended':
          return finish({
            error: new SandboxUnavailable(`the sandbox could not start (${standing.reason}): ${standing.message}`),
            discard: false,
          });
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
      evaluate(latest());
    });
    const unsubscribePods = client.pods.subscribe(() => evaluate(latest()));
    const onAbort = () => finish({ error: refusal(), discard: true });
    const onStop = () => finish({ error: new CapacityExhausted(1), discard: false });
    options.signal?.addEventListener('abort', onAbort, { once: true });
    context.stopping.addEventListener('abort', onStop, { once: true });
    const timer = setTimeout(
      () =>
        finish({
          error: new SandboxUnavailable(
            `the sandbox was not ready within ${Math.round(context.readyTimeoutMs / 1000)} s; is the controller running?`,
          ),
          discard: true,
        }),
      context.readyTimeoutMs,
    );
    timer.unref();
    if (options.signal?.aborted) return onAbort();
    evaluate(latest());
  });
}
