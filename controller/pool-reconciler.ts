/**
 * The SandboxWarmPool reconciler: a thin shell around decidePool. New pool pods get random names
 * (several are created at once) and are counted by expectations until the cache shows them, so a
 * reconcile on a cache that lags its own creates never tops the pool up twice.
 */
import { randomBytes } from 'node:crypto';
import { expectCreate, expectDelete, lowerCreate } from '../sandbox-policy/expectations.js';
import { API_VERSION, SANDBOX_WARM_POOL } from './api/v1alpha1.js';
import { statusChanged } from './conditions.js';
import { httpStatus } from '../kube/kube-errors.js';
import { decidePool } from './pool-decisions.js';
import { runnerPod, tokenSecret } from './pod-template.js';
import type { ReconcileContext } from './sandbox-reconciler.js';
import type { ProcessResult } from '../kube/work-queue.js';

export async function reconcilePool(ctx: ReconcileContext, namespace: string, name: string): Promise<ProcessResult> {
  const { view, client, config } = ctx;
  const pool = view.pools.get(name, namespace);
  if (!pool || pool.metadata.deletionTimestamp) return {};
  const key = view.poolKey(pool);
  const at = ctx.now();
  const used = view.placesUsed(at, pool.metadata.uid);
  const picked = new Set([...view.picked.keys()]);
  const decision = decidePool(pool, {
    pods: view.ownedPods(pool.metadata.uid),
    inFlight: view.pendingCreates(key, at).length,
    picked,
    usedElsewhere: used.sandboxes + used.poolPods,
    waitingClaims: view.waiting().length,
    maxSandboxes: config.maxSandboxes,
    claimedAt: view.claimedSince(pool, at - config.poolRefillDelayMs),
    refillDelayMs: config.poolRefillDelayMs,
    now: at,
  });

  const creates = Array.from({ length: decision.create }, () => `${pool.metadata.name}-${randomBytes(4).toString('hex')}`);
  for (const podName of creates) view.expectations = expectCreate(view.expectations, key, podName, at);
  for (const podName of decision.delete) view.expectations = expectDelete(view.expectations, key, podName, at);
  const results = await Promise.allSettled([
    ...creates.map(async (podName) => {
      try {
        await client.createIfAbsent(
          tokenSecret(pool, podName, { token: randomBytes(32).toString('base64url'), egressToken: randomBytes(32).toString('base64url') }),
        );
        await client.createIfAbsent(runnerPod(pool, podName, config));
      } catch (error) {
        view.expectations = lowerCreate(view.expectations, key, podName);
        throw error;
      }
    }),
    ...decision.delete.map((podName) => client.deleteIfPresent('v1', 'Pod', namespace, podName)),
  ]);

  ctx.metrics.poolReplicas.set({ pool: pool.metadata.name, state: 'desired' }, decision.status.desiredReplicas ?? 0);
  ctx.metrics.poolReplicas.set({ pool: pool.metadata.name, state: 'ready' }, decision.status.readyReplicas ?? 0);
  if (statusChanged(pool.status, decision.status)) {
    // A newer version (409) or none (404): the watch brings it and the pool runs again on it.
    await client
      .replaceStatus(SANDBOX_WARM_POOL.plural, { ...pool, apiVersion: API_VERSION, status: decision.status })
      .catch((error: unknown) => {
        if (httpStatus(error) !== 409 && httpStatus(error) !== 404) throw error;
      });
  }
  const failure = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failure) throw failure.reason;
  return { requeueAt: decision.requeueAt };
}
