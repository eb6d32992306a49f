/**
 * The SandboxWarmPool reconciler: a thin shell around decidePool. New pool pods get random names
 * (several are created at once) and are counted by expectations until the cache shows them, so a
 * reconcile on a cache that lags its own creates never tops the pool up twice.
 *
 * A pool pod's token Secret is created before the pod (the kubelet needs it at the container's first
 * start: a pod created ahead of its Secret fails CreateContainerConfigError and the kubelet tries again
 * only after its sync back-off, ~10 s), owned by the pool. A refused pod create deletes it at once; once
 * the pod exists its owner becomes the pod, so it goes with the pod however the pod goes (scaled down,
 * failed, replaced by a new template, evicted, `kubectl delete`). On adoption the Sandbox takes it over.
 * The controller never lists Secrets: only a controller stopped between the two creates leaves one,
 * owned by the pool, which goes with the pool.
 */
import { randomBytes } from 'node:crypto';
import { expectCreate, expectDelete, inFlight, lowerCreate } from '../sandbox-policy/expectations.js';
import { API_VERSION, SANDBOX_WARM_POOL, type SandboxWarmPool, tokenSecretName } from './api/v1alpha1.js';
import { statusChanged } from './conditions.js';
import { httpStatus, statusMessage } from '../kube/kube-errors.js';
import { createRefusal, isCreateRefusal } from './create-refusal.js';
import { decidePool, type PoolDecision, type PoolRefusal } from './pool-decisions.js';
import { runnerPod, templateHash, tokenSecret } from './pod-template.js';
import type { ReconcileContext } from './sandbox-reconciler.js';
import type { ProcessResult } from '../kube/work-queue.js';

export async function reconcilePool(ctx: ReconcileContext, namespace: string, name: string): Promise<ProcessResult> {
  const { view, config } = ctx;
  const pool = view.pools.get(name, namespace);
  if (!pool || pool.metadata.deletionTimestamp) {
    view.poolRefusals.delete(`SandboxWarmPool/${namespace}/${name}`);
    return {};
  }
  const key = view.poolKey(pool);
  const at = ctx.now();
  const used = view.placesUsed(at, pool.metadata.uid);
  const observation = {
    pods: view.ownedPods(pool.metadata.uid),
    inFlight: view.pendingCreates(key, at).length,
    deleting: inFlight(view.expectations, key, at, 60_000)?.deletes.length ?? 0,
    templateHash: templateHash(pool, config),
    picked: new Set([...view.picked.keys()]),
    usedElsewhere: used.sandboxes + used.poolPods,
    waitingClaims: view.waiting().length,
    maxSandboxes: config.maxSandboxes,
    claimedAt: view.claimedSince(pool, at - config.poolRefillDelayMs),
    refillDelayMs: config.poolRefillDelayMs,
    refusal: view.poolRefusals.get(key),
    now: at,
  };
  let decision = decidePool(pool, observation);

  const creates = Array.from({ length: decision.create }, () => `${pool.metadata.name}-${randomBytes(4).toString('hex')}`);
  for (const podName of creates) view.expectations = expectCreate(view.expectations, key, podName, at);
  for (const podName of decision.delete) view.expectations = expectDelete(view.expectations, key, podName, at);
  const results = await Promise.allSettled([
    ...creates.map(async (podName) => {
      try {
        await createPoolPod(ctx, pool, podName);
      } catch (error) {
        view.expectations = lowerCreate(view.expectations, key, podName);
        throw error;
      }
    }),
    ...decision.delete.map((podName) => ctx.client.deleteIfPresent('v1', 'Pod', namespace, podName)),
  ]);
  const failures = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => r.reason as unknown);

  const refusedAt = creates.findIndex(
    (_, i) => results[i]!.status === 'rejected' && isCreateRefusal((results[i] as PromiseRejectedResult).reason),
  );
  const previous = observation.refusal;
  if (refusedAt >= 0) {
    const error = (results[refusedAt] as PromiseRejectedResult).reason;
    const refusal = describeRefusal(error, pool, creates[refusedAt]!, ctx.now(), (previous?.attempts ?? 0) + 1);
    view.poolRefusals.set(key, refusal);
    decision = decidePool(pool, { ...observation, refusal, now: refusal.at });
  } else if (previous && (decision.wanted === 0 || (creates.length > 0 && failures.length === 0))) {
    view.poolRefusals.delete(key);
    decision = { ...decidePool(pool, { ...observation, refusal: undefined }), create: decision.create };
  }

  ctx.metrics.poolReplicas.set({ pool: pool.metadata.name, state: 'desired' }, decision.status.desiredReplicas ?? 0);
  ctx.metrics.poolReplicas.set({ pool: pool.metadata.name, state: 'ready' }, decision.status.readyReplicas ?? 0);
  await writeStatus(ctx, pool, decision);
  // A refusal is retried by the decision's own backoff; anything else by the queue's.
  const failure = failures.find((error) => !isCreateRefusal(error));
  if (failure) throw failure;
  return { requeueAt: decision.requeueAt };
}

/** The token Secret, then the pod; the Secret is deleted if the pod is refused, and owned by the pod once it exists. */
async function createPoolPod(ctx: ReconcileContext, pool: SandboxWarmPool, podName: string): Promise<void> {
  const { client, config } = ctx;
  const namespace = pool.metadata.namespace!;
  const secretName = tokenSecretName(podName);
  await client.createIfAbsent(
    tokenSecret(pool, podName, { token: randomBytes(32).toString('base64url'), egressToken: randomBytes(32).toString('base64url') }),
  );
  let uid: string | undefined;
  try {
    const created = await client.core.createNamespacedPod({ namespace, body: runnerPod(pool, podName, config) });
    uid = created.metadata?.uid;
  } catch (error) {
    // Refused: no pod will ever use it. Any other failure (a timeout) may have created the pod: the Secret stays for it.
    if (isCreateRefusal(error)) await client.deleteIfPresent('v1', 'Secret', namespace, secretName);
    throw error;
  }
  if (!uid) return;
  // The pod exists whatever happens now: a failed hand-over is logged, never taken for a failed create
  // (the pool would count the pod as missing and make another). The Secret then stays the pool's.
  // No blockOwnerDeletion: that would need update on pods/finalizers, and nothing waits on it.
  await client
    .mergePatch({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { name: secretName, namespace, ownerReferences: [{ apiVersion: 'v1', kind: 'Pod', name: podName, uid }] },
    })
    .catch((error: unknown) =>
      ctx.logger.warn({ error: statusMessage(error), pod: podName }, 'handing a token Secret to its pool pod failed'),
    );
}

/**
 * The refusal as the pool's conditions say it. The API server names the pod in its message (`pods
 * "agents-1a2b3c4d" is forbidden: exceeded quota: ...`); each try has a new name, so the pool's message
 * says `agents-*` instead, and one refusal stays one message (one Event, no status write per retry).
 */
function describeRefusal(error: unknown, pool: SandboxWarmPool, podName: string, at: number, attempts: number): PoolRefusal {
  return { ...createRefusal(httpStatus(error), statusMessage(error).replaceAll(podName, `${pool.metadata.name}-*`)), at, attempts };
}

/** Records the decision's events and writes the status if it changed (a lost write, 409 or 404, waits for the watch). */
async function writeStatus(ctx: ReconcileContext, pool: SandboxWarmPool, decision: PoolDecision): Promise<void> {
  const involved = { apiVersion: API_VERSION, kind: SANDBOX_WARM_POOL.kind, metadata: pool.metadata };
  const events = decision.events.map((event) =>
    ctx.client
      .recordEvent(involved, event)
      .catch((error: unknown) => ctx.logger.warn({ error: statusMessage(error), pool: pool.metadata.name }, 'recording an event failed')),
  );
  if (statusChanged(pool.status, decision.status)) {
    await ctx.client
      .replaceStatus(SANDBOX_WARM_POOL.plural, { ...pool, apiVersion: API_VERSION, status: decision.status })
      .catch((error: unknown) => {
        if (httpStatus(error) !== 409 && httpStatus(error) !== 404) throw error;
      });
  }
  await Promise.all(events);
}
