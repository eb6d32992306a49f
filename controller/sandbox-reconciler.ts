/**
 * The Sandbox reconciler: a thin shell around decideSandbox. Read from the cache, observe (owned
 * pod, admission, warm cap, pool candidate), decide, act, write the status once if it changed,
 * requeue at the next deadline. An adoption is a merge patch of the pool pod carrying the
 * resourceVersion it was picked at: a 409 or 404 means another claim (or the pool) got there first,
 * and the next pass picks again or starts cold, never a second pod for this Sandbox.
 *
 * Every line it logs about a Sandbox names it and the REST request that created it (`request_id`, from
 * the `acis.dev/request-id` annotation): each action on its pod and each Event it records is also a log
 * line, so `kubectl logs` on the controller and one request id tell that Sandbox's part of a turn.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { expectCreate, expectDelete, lowerCreate } from '../sandbox-policy/expectations.js';
import { ANNOTATIONS, API_VERSION, coldPodName, LABELS, requestIdOf, SANDBOX, type Sandbox, tokenSecretName } from './api/v1alpha1.js';
import type { ClusterView } from './cluster-view.js';
import { creationTime } from './api/admission-order.js';
import type { ControllerConfig } from './config.js';
import type { KubeClient } from '../kube/kube-client.js';
import { httpStatus, statusMessage } from '../kube/kube-errors.js';
import { createRefusal, isCreateRefusal } from './create-refusal.js';
import type { ControllerMetrics } from './metrics.js';
import { controllerRef, runnerPod, sandboxPodLabels, tokenSecret } from './pod-template.js';
import { resourcesProblem } from './runner-resources.js';
import { statusChanged } from './conditions.js';
import { decideSandbox, type SandboxAction, type SandboxDecision, type SandboxObservation } from './sandbox-decisions.js';
import type { ProcessResult } from '../kube/work-queue.js';

export interface ReconcileContext {
  view: ClusterView;
  client: KubeClient;
  config: ControllerConfig;
  metrics: ControllerMetrics;
  logger: Logger;
  now: () => number;
}

export async function reconcileSandbox(ctx: ReconcileContext, namespace: string, name: string): Promise<ProcessResult> {
  const { view, now } = ctx;
  const cached = view.sandboxes.get(name, namespace);
  const sandbox = cached && view.freshest(cached);
  const refused = view.createRefusals;
  if (!sandbox || sandbox.metadata.deletionTimestamp) {
    // Its pod and token go with it (owner references); only our bookkeeping remains.
    const key = `Sandbox/${namespace}/${name}`;
    view.admitted.delete(key);
    refused.delete(key);
    view.ownWrites.delete(key);
    return {};
  }
  const key = view.sandboxKey(sandbox);
  // This Sandbox's lines name it and its request.
  const own: ReconcileContext = { ...ctx, logger: sandboxLogger(ctx.logger, sandbox) };
  const at = now();
  const owned = view.ownedPods(sandbox.metadata.uid);
  const pod = owned.find((p) => !p.metadata?.deletionTimestamp) ?? owned[0];
  const podInFlight = view.pendingCreates(key, at).length > 0;
  const observation: SandboxObservation = {
    now: at,
    pod,
    podInFlight,
    admission: view.admission(sandbox, at),
    releasedByWarmCap: view.releasedByWarmCap(sandbox),
    poolCandidate: pod || podInFlight ? undefined : view.poolCandidate(sandbox),
    createRefused: refused.get(key),
    specProblem: resourcesProblem(ctx.config.runnerResources, sandbox.spec.resources),
    startTimeoutMs: ctx.config.startTimeoutMs,
    runnerPort: ctx.config.runnerPort,
  };
  let decision = decideSandbox(sandbox, observation);
  // Writes that follow an action but that the status need not wait for (they go beside its write).
  const trailing: Promise<void>[] = [];
  try {
    for (const action of decision.actions) await act(own, sandbox, key, action, trailing);
    refused.delete(key);
  } catch (error) {
    if (error instanceof LostAdoption) return { requeueAt: at, conflict: true };
    if (!(error instanceof CreateRefused)) throw error;
    // The API server refused the pod: say so with its message, and retry with backoff until the start deadline.
    refused.set(key, createRefusal(httpStatus(error.cause), statusMessage(error.cause)));
    decision = decideSandbox(sandbox, { ...observation, createRefused: refused.get(key) });
    await writeStatus(own, sandbox, { ...decision, actions: [] });
    throw error.cause;
  }
  const [written] = await Promise.all([writeStatus(own, sandbox, decision), ...trailing]);
  if (!written) return { conflict: true };
  return { requeueAt: decision.requeueAt };
}

/** The logger of a Sandbox's lines: its name, and the request that created it when the annotation names one. */
function sandboxLogger(logger: Logger, sandbox: Sandbox): Logger {
  const requestId = requestIdOf(sandbox);
  return logger.child(
    requestId === undefined ? { sandbox: sandbox.metadata.name } : { sandbox: sandbox.metadata.name, request_id: requestId },
  );
}

class LostAdoption extends Error {}

/** The API server answered a create of the runner pod (or its token Secret) with an error status. */
class CreateRefused extends Error {}

async function act(ctx: ReconcileContext, sandbox: Sandbox, key: string, action: SandboxAction, trailing: Promise<void>[]): Promise<void> {
  const { view, client, config } = ctx;
  const namespace = sandbox.metadata.namespace!;
  switch (action.kind) {
    case 'create-pod': {
      const podName = coldPodName(sandbox);
      ctx.logger.info({ pod: podName }, 'creating the runner pod');
      view.expectations = expectCreate(view.expectations, key, podName, ctx.now());
      try {
        await client.createIfAbsent(
          tokenSecret(sandbox, podName, {
            token: randomBytes(32).toString('base64url'),
            egressToken: randomBytes(32).toString('base64url'),
          }),
        );
        await client.createIfAbsent(runnerPod(sandbox, podName, config));
      } catch (error) {
        view.expectations = lowerCreate(view.expectations, key, podName);
        if (isCreateRefusal(error)) throw new CreateRefused(statusMessage(error), { cause: error });
        throw error;
      }
      return;
    }
    case 'adopt-pod': {
      const podName = action.pod.metadata!.name!;
      const pool = action.pod.metadata?.labels?.[LABELS.pool] ?? '';
      ctx.logger.info({ pod: podName, pool }, 'adopting a warm pool pod');
      const at = ctx.now();
      view.picked.set(podName, { pool, at });
      view.expectations = expectCreate(view.expectations, key, podName, at);
      try {
        await client.mergePatch({
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: {
            name: podName,
            namespace,
            resourceVersion: action.pod.metadata!.resourceVersion,
            labels: { ...sandboxPodLabels(sandbox), [LABELS.pool]: null },
            annotations: { [ANNOTATIONS.adoptedFrom]: pool, [ANNOTATIONS.adoptedAt]: new Date(at).toISOString() },
            ownerReferences: [controllerRef(sandbox)],
          },
        });
      } catch (error) {
        view.expectations = lowerCreate(view.expectations, key, podName);
        view.picked.delete(podName);
        const status = httpStatus(error);
        if (status === 409 || status === 404) throw new LostAdoption();
        throw error;
      }
      // The token now lives and dies with this Sandbox, not with the pool. The pod is bound, so the
      // Ready status need not wait for this write: it goes out beside it.
      const owned = client
        .mergePatch({
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name: tokenSecretName(podName), namespace, ownerReferences: [controllerRef(sandbox)] },
        })
        .then(
          () => undefined,
          (error: unknown) => {
            if (httpStatus(error) !== 404) throw error;
          },
        );
      // Awaited beside the status write; marked handled here in case a later action throws first.
      owned.catch(() => undefined);
      trailing.push(owned);
      return;
    }
    case 'delete-pod':
      ctx.logger.info({ pod: action.podName }, 'deleting the runner pod');
      view.expectations = expectDelete(view.expectations, key, action.podName, ctx.now());
      await client.deleteIfPresent('v1', 'Pod', namespace, action.podName, { ownGracePeriod: action.graceful });
      return;
  }
}

/**
 * Records the decision's events and writes its status if it changed, side by side (a claim's Ready
 * waits for no event). False when the write lost to a newer version of the object (409) or the
 * object is gone (404): the watch brings that version and the key runs again on it, so this is no
 * error and no retry of its own. A lost write may repeat an event (kubectl shows a count).
 */
async function writeStatus(ctx: ReconcileContext, sandbox: Sandbox, decision: SandboxDecision): Promise<boolean> {
  const events = Promise.all(
    decision.events.map((event) => {
      ctx.logger[event.type === 'Warning' ? 'warn' : 'info']({ reason: event.reason, phase: decision.status.phase }, event.message);
      return ctx.client
        .recordEvent(sandbox, event)
        .catch((error: unknown) => ctx.logger.warn({ error: statusMessage(error) }, 'recording an event failed'));
    }),
  );
  try {
    return await replaceStatusIfChanged(ctx, sandbox, decision);
  } finally {
    await events;
  }
}

async function replaceStatusIfChanged(ctx: ReconcileContext, sandbox: Sandbox, decision: SandboxDecision): Promise<boolean> {
  if (statusChanged(sandbox.status, decision.status)) {
    try {
      const written = await ctx.client.replaceStatus(SANDBOX.plural, { ...sandbox, apiVersion: API_VERSION, status: decision.status });
      ctx.view.ownWrites.set(ctx.view.sandboxKey(sandbox), { over: sandbox.metadata.resourceVersion, object: written });
    } catch (error) {
      const code = httpStatus(error);
      if (code !== 409 && code !== 404) throw error;
      return false;
    }
  }
  if (!statusChanged(sandbox.status, decision.status)) return true;
  if (decision.status.phase === 'Ready' && sandbox.status?.phase !== 'Ready') {
    ctx.metrics.claimLatency.observe({ launch: decision.status.launch ?? 'cold' }, Math.max(0, ctx.now() - creationTime(sandbox)) / 1000);
  }
  return true;
}
