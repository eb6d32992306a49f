/**
 * The RepositorySync reconciler: a thin shell around decideRepositorySync. Reads the resource, its
 * Jobs and the current Job's pod from the caches, creates the Job when the generation has none,
 * deletes the credential Secrets of ended generations (before the status records them removed, so
 * a failed delete is retried), records the outcome's Event, and writes the status once, when it changed.
 */
import type { V1Job, V1Pod } from '@kubernetes/client-node';
import { API_VERSION, REPOSITORY_SYNC, type RepositorySync } from './api/v1alpha1.js';
import { statusChanged } from './conditions.js';
import type { Informer } from '../kube/informer.js';
import { httpStatus, statusMessage } from '../kube/kube-errors.js';
import { decideRepositorySync, SYNC_LABEL, syncJobName } from './reposync-decisions.js';
import type { ReconcileContext } from './sandbox-reconciler.js';
import type { ProcessResult } from '../kube/work-queue.js';

export interface SyncCaches {
  syncs: Informer<RepositorySync>;
  jobs: Informer<V1Job>;
  pods: Informer<V1Pod>;
}

export async function reconcileRepositorySync(
  ctx: ReconcileContext,
  caches: SyncCaches,
  namespace: string,
  name: string,
): Promise<ProcessResult> {
  const { client, config } = ctx;
  const sync = caches.syncs.get(name, namespace);
  // Gone: its Jobs and Secrets go with it (owner references).
  if (!sync || sync.metadata.deletionTimestamp) return {};
  const jobName = syncJobName(sync);
  const jobs = caches.jobs.list(namespace).filter((j) => j.metadata?.labels?.[SYNC_LABEL] === name);
  const job = jobs.find((j) => j.metadata?.name === jobName);
  const pod = caches.pods
    .list(namespace)
    .filter(
      (p) => p.metadata?.labels?.[SYNC_LABEL] === name && p.metadata?.ownerReferences?.some((r) => r.kind === 'Job' && r.name === jobName),
    )
    .sort((a, b) => String(b.metadata?.creationTimestamp ?? '').localeCompare(String(a.metadata?.creationTimestamp ?? '')))[0];
  const olderJobs = jobs.filter((j) => j !== job);
  const decision = decideRepositorySync(sync, { job, pod, olderJobs }, new Date(ctx.now()), config);
  if (decision.createJob) await client.createIfAbsent(decision.createJob);
  for (const secret of decision.deleteCredentialSecrets) await client.deleteIfPresent('v1', 'Secret', namespace, secret);
  const resource = { ...sync, apiVersion: API_VERSION, kind: REPOSITORY_SYNC.kind };
  await Promise.all(
    decision.events.map((event) =>
      client
        .recordEvent(resource, event)
        .catch((error: unknown) => ctx.logger.warn({ error: statusMessage(error), repository_sync: name }, 'recording an event failed')),
    ),
  );
  if (statusChanged(sync.status, decision.status)) {
    await client.replaceStatus(REPOSITORY_SYNC.plural, { ...resource, status: decision.status }).catch((error: unknown) => {
      // A newer version (409) or none (404): the watch brings it and this runs again on it.
      if (httpStatus(error) !== 409 && httpStatus(error) !== 404) throw error;
    });
  }
  return {};
}
