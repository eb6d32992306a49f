/**
 * What a RepositorySync needs, as a pure function of (the resource, its Jobs and their pods as
 * observed, now): one Job per `requestGeneration`, whose pod runs `acis sync-repository` with the
 * attempt's claim and, mounted for it alone, that generation's credential Secret (its report token
 * and git's credential); the pod holds no database credential and hands its result to the API
 * server's sync report listener (ControllerConfig.syncReportUrl, HTTPS verified against the deployment
 * CA it mounts; without that CA no Job is started and the sync fails with reason NoDeploymentCa); the status the
 * Job's outcome (its pod's termination message `{state, commit?, error?}`) says; an Event when the
 * outcome changes; and each generation's credential Secret deleted once its Job has ended (or when
 * a newer generation means it will never run), so a credential exists only while its Job can use it.
 */
import type { V1EnvVar, V1Job, V1Pod } from '@kubernetes/client-node';
import {
  API_VERSION,
  LABELS,
  MANAGED_BY,
  REPOSITORY_SYNC,
  type RepositorySync,
  type RepositorySyncStatus,
  syncCredentialSecretName,
  SYNC_CREDENTIAL_KEY,
  SYNC_TOKEN_KEY,
} from './api/v1alpha1.js';
import { withoutUndefined } from './conditions.js';
import type { ControllerConfig } from './config.js';
import type { EventRecord } from '../kube/kube-client.js';
import { EGRESS_CA_DIR, egressCaVolume } from './pod-template.js';

export const SYNC_COMPONENT = 'repository-sync';
export const SYNC_LABEL = 'acis.dev/repository-sync';
const CREDENTIAL_DIR = '/var/run/acis/credential';
/** A finished Job stays this long for `kubectl logs`, then Kubernetes removes it. */
const FINISHED_JOB_TTL_SECONDS = 3600;
/** How many generations back one reconcile looks for credential Secrets left to delete. */
const CREDENTIAL_LOOKBACK = 50;

/**
 * Why no Job starts without the deployment CA: the Job could not verify the sync report listener, and
 * sending the attempt's token to an unverified peer is what TLS is there to prevent.
 */
const NO_DEPLOYMENT_CA =
  "the controller has no ACIS_EGRESS_CA_CONFIGMAP (the deployment CA's certificate): a sync Job could not verify the API server's sync report listener, so none is started; set it (chart: egressProxy.ca.configMap)";

export interface SyncObserved {
  /** The Job of the current requestGeneration, if it exists. */
  job?: V1Job | undefined;
  /** That Job's pod, if one exists (the newest). */
  pod?: V1Pod | undefined;
  /** Jobs of earlier generations still known (their credential waits until they end). */
  olderJobs?: V1Job[] | undefined;
}

export interface SyncDecision {
  createJob?: V1Job;
  /** Credential Secrets of generations whose Job has ended or will never run. */
  deleteCredentialSecrets: string[];
  events: EventRecord[];
  status: RepositorySyncStatus;
}

export function syncJobName(sync: RepositorySync, generation = sync.spec.requestGeneration): string {
  return `${sync.metadata.name}-${generation}`.slice(0, 63).replace(/-+$/, '');
}

export function decideRepositorySync(sync: RepositorySync, observed: SyncObserved, now: Date, config: ControllerConfig): SyncDecision {
  const previous = sync.status ?? {};
  const jobName = syncJobName(sync);
  const base: RepositorySyncStatus = {
    ...previous,
    jobName,
    observedRequestGeneration: sync.spec.requestGeneration,
  };
  const finished = observed.job ? jobFinished(observed.job) : undefined;
  const credentials = credentialsToDelete(sync, observed, finished !== undefined);
  base.credentialRemovedGeneration = credentials.removedThrough;
  let status: RepositorySyncStatus;
  let createJob: V1Job | undefined;
  const foreignCredential = foreignCredentialSecret(sync);
  if (!observed.job && foreignCredential) {
    const message = `spec.credentialSecretName is ${foreignCredential}: a sync Job mounts only the Secret ACIS made for its generation (${syncCredentialSecretName(sync.metadata.name, sync.spec.requestGeneration)})`;
    status = withoutUndefined({
      ...base,
      state: 'error',
      error: message,
      conditions: [synced(previous, 'False', 'CredentialRefused', message, now)],
    });
  } else if (!observed.job && !config.egressCaConfigMap) {
    status = withoutUndefined({
      ...base,
      state: 'error',
      error: NO_DEPLOYMENT_CA,
      conditions: [synced(previous, 'False', 'NoDeploymentCa', NO_DEPLOYMENT_CA, now)],
    });
  } else if (!observed.job) {
    createJob = syncJob(sync, jobName, config);
    status = syncing(base, previous, now, 'JobCreated', `started job ${jobName}`);
  } else if (!finished) {
    status = syncing(base, previous, now, 'JobRunning', `job ${jobName} is running`);
  } else {
    status = finishedStatus(base, previous, observed.job, finished, terminationOutcome(observed.pod), now);
  }
  return {
    ...(createJob && { createJob }),
    deleteCredentialSecrets: credentials.names,
    events: outcomeEvents(previous, status, sync.spec.requestGeneration),
    status,
  };
}

function finishedStatus(
  base: RepositorySyncStatus,
  previous: RepositorySyncStatus,
  job: V1Job,
  finished: 'complete' | 'failed',
  outcome: Outcome | undefined,
  now: Date,
): RepositorySyncStatus {
  if (finished === 'complete' && outcome?.state === 'ready' && outcome.commit) {
    return withoutUndefined({
      ...base,
      state: 'ready',
      commit: outcome.commit,
      shortCommit: outcome.commit.slice(0, 12),
      lastSyncedTime: job.status?.completionTime ? new Date(job.status.completionTime).toISOString() : now.toISOString(),
      error: undefined,
      conditions: [synced(previous, 'True', 'Synced', `synced at ${outcome.commit.slice(0, 12)}`, now)],
    });
  }
  if (outcome?.state === 'superseded' || outcome?.state === 'missing') {
    // A newer change made this attempt stale (or the repository is gone): it wrote nothing, the newer request reports.
    return withoutUndefined({
      ...base,
      state: previous.state === 'syncing' ? undefined : previous.state,
      conditions: [synced(previous, 'Unknown', 'Superseded', 'a newer change superseded this attempt', now)],
    });
  }
  const error = outcome?.error ?? jobFailureReason(job);
  return withoutUndefined({ ...base, state: 'error', error, conditions: [synced(previous, 'False', 'SyncFailed', error, now)] });
}

/**
 * The credential Secrets to delete now: every generation after the last one known removed whose
 * Job has ended, or which has no Job and never will (a newer generation came first); the current
 * generation's once its Job has ended. `removedThrough` advances over the unbroken run of those.
 */
function credentialsToDelete(
  sync: RepositorySync,
  observed: SyncObserved,
  currentFinished: boolean,
): { names: string[]; removedThrough: number } {
  const current = sync.spec.requestGeneration;
  const known = sync.status?.credentialRemovedGeneration ?? 0;
  let removedThrough = Math.max(known, current - CREDENTIAL_LOOKBACK);
  const names: string[] = [];
  let unbroken = true;
  for (let generation = removedThrough + 1; generation <= current; generation++) {
    const ended =
      generation === current
        ? currentFinished
        : (() => {
            const job = observed.olderJobs?.find((j) => j.metadata?.name === syncJobName(sync, generation));
            return !job || jobFinished(job) !== undefined;
          })();
    if (!ended) {
      unbroken = false;
      continue;
    }
    names.push(syncCredentialSecretName(sync.metadata.name, generation));
    if (unbroken) removedThrough = generation;
  }
  return { names, removedThrough };
}

/**
 * The Secret a RepositorySync names for its Job when it is not the one ACIS made for this generation
 * (by its fixed name): a spec that could name any Secret would mount the master key's or the
 * database's into a pod running git against a tenant's host. Undefined when it names none or its own.
 */
function foreignCredentialSecret(sync: RepositorySync): string | undefined {
  const named = sync.spec.credentialSecretName;
  return named && named !== syncCredentialSecretName(sync.metadata.name, sync.spec.requestGeneration) ? named : undefined;
}

/** One Event per outcome a generation reaches (the Job started, synced, failed). */
function outcomeEvents(previous: RepositorySyncStatus, status: RepositorySyncStatus, generation: number): EventRecord[] {
  const before = previous.conditions?.find((c) => c.type === 'Synced');
  const after = status.conditions?.find((c) => c.type === 'Synced');
  if (!after || (previous.observedRequestGeneration === generation && before?.reason === after.reason)) return [];
  if (after.reason === 'JobRunning') return [];
  const type = after.status === 'False' ? 'Warning' : 'Normal';
  return [{ type, reason: after.reason, message: `generation ${generation}: ${after.message ?? after.reason}` }];
}

function syncing(
  base: RepositorySyncStatus,
  previous: RepositorySyncStatus,
  now: Date,
  reason: string,
  message: string,
): RepositorySyncStatus {
  return withoutUndefined({ ...base, state: 'syncing', conditions: [synced(previous, 'Unknown', reason, message, now)] });
}

function synced(previous: RepositorySyncStatus, status: 'True' | 'False' | 'Unknown', reason: string, message: string, now: Date) {
  const before = previous.conditions?.find((c) => c.type === 'Synced');
  const lastTransitionTime = before && before.status === status ? before.lastTransitionTime : now.toISOString();
  return { type: 'Synced' as const, status, reason, message: message.slice(0, 2048), lastTransitionTime };
}

function jobFinished(job: V1Job): 'complete' | 'failed' | undefined {
  const conditions = job.status?.conditions ?? [];
  if (conditions.some((c) => c.type === 'Complete' && c.status === 'True')) return 'complete';
  if (conditions.some((c) => c.type === 'Failed' && c.status === 'True')) return 'failed';
  return undefined;
}

function jobFailureReason(job: V1Job): string {
  const failed = job.status?.conditions?.find((c) => c.type === 'Failed' && c.status === 'True');
  if (failed?.reason === 'DeadlineExceeded') return 'the sync job ran past its deadline and was stopped';
  return `the sync job failed${failed?.reason ? ` (${failed.reason})` : ''}; see kubectl logs job/${job.metadata?.name}`;
}

interface Outcome {
  state?: string;
  commit?: string;
  error?: string;
}

/** The attempt's outcome, as `acis sync-repository` wrote it to its termination message. */
function terminationOutcome(pod: V1Pod | undefined): Outcome | undefined {
  const message = pod?.status?.containerStatuses?.find((c) => c.name === 'sync')?.state?.terminated?.message;
  if (!message) return undefined;
  try {
    const parsed = JSON.parse(message) as Outcome;
    return {
      state: typeof parsed.state === 'string' ? parsed.state : undefined,
      commit: typeof parsed.commit === 'string' && /^[0-9a-f]{40,64}$/.test(parsed.commit) ? parsed.commit : undefined,
      error: typeof parsed.error === 'string' ? parsed.error.slice(0, 2048) : undefined,
    };
  } catch {
    return undefined;
  }
}

/**
 * Everything the Job's `acis sync-repository` reads from its environment, in one list: the
 * repository and the attempt's claim (from the spec), where it hands its result, the files of the
 * attempt's Secret (report token, git credential), and the API server's settings the request carries
 * (spec.settings), so the attempt validates and times out as the API server would. No database.
 */
export function syncJobEnv(sync: RepositorySync, config: ControllerConfig): V1EnvVar[] {
  const settings = sync.spec.settings ?? {};
  return [
    { name: 'ACIS_SYNC_CLAIM', value: sync.spec.claim },
    { name: 'ACIS_SYNC_REPOSITORY_URL', value: sync.spec.url },
    { name: 'ACIS_SYNC_BRANCH', value: sync.spec.branch },
    ...(sync.spec.provider ? [{ name: 'ACIS_SYNC_PROVIDER', value: sync.spec.provider }] : []),
    ...(sync.spec.sshKnownHosts ? [{ name: 'ACIS_SYNC_SSH_KNOWN_HOSTS', value: sync.spec.sshKnownHosts }] : []),
    { name: 'ACIS_SYNC_REPORT_URL', value: config.syncReportUrl },
    { name: 'ACIS_SYNC_REPORT_CA_FILE', value: `${EGRESS_CA_DIR}/ca.crt` },
    { name: 'ACIS_DATA_DIR', value: '/tmp/acis-sync' },
    ...(sync.spec.credentialSecretName
      ? [
          { name: 'ACIS_SYNC_TOKEN_FILE', value: `${CREDENTIAL_DIR}/${SYNC_TOKEN_KEY}` },
          { name: 'ACIS_SYNC_CREDENTIAL_FILE', value: `${CREDENTIAL_DIR}/${SYNC_CREDENTIAL_KEY}` },
        ]
      : []),
    ...(settings.allowFileRepos !== undefined ? [{ name: 'ACIS_ALLOW_FILE_REPOS', value: settings.allowFileRepos ? '1' : '0' }] : []),
    ...(settings.allowPlainRepos !== undefined ? [{ name: 'ACIS_ALLOW_PLAIN_REPOS', value: settings.allowPlainRepos ? '1' : '0' }] : []),
    ...(settings.repositoryAllow !== undefined ? [{ name: 'ACIS_REPOSITORY_ALLOW', value: settings.repositoryAllow }] : []),
    ...(settings.timeoutSeconds !== undefined ? [{ name: 'ACIS_SYNC_TIMEOUT_SECONDS', value: String(settings.timeoutSeconds) }] : []),
  ];
}

function syncJob(sync: RepositorySync, name: string, config: ControllerConfig): V1Job {
  const labels = {
    [LABELS.managedBy]: MANAGED_BY,
    [LABELS.component]: SYNC_COMPONENT,
    [SYNC_LABEL]: sync.metadata.name,
  };
  const credential = sync.spec.credentialSecretName;
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: {
      name,
      namespace: sync.metadata.namespace,
      labels,
      ownerReferences: [
        {
          apiVersion: API_VERSION,
          kind: REPOSITORY_SYNC.kind,
          name: sync.metadata.name,
          uid: sync.metadata.uid!,
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec: {
      backoffLimit: 0,
      activeDeadlineSeconds: config.syncJobDeadlineSeconds,
      ttlSecondsAfterFinished: FINISHED_JOB_TTL_SECONDS,
      template: {
        metadata: { labels },
        spec: {
          restartPolicy: 'Never',
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          ...(config.imagePullSecrets.length > 0 && { imagePullSecrets: config.imagePullSecrets.map((name) => ({ name })) }),
          securityContext: {
            runAsNonRoot: true,
            runAsUser: 1000,
            runAsGroup: 1000,
            fsGroup: 1000,
            seccompProfile: { type: 'RuntimeDefault' },
          },
          containers: [
            {
              name: 'sync',
              image: config.syncImage,
              ...(config.syncCommand.length > 0 && { command: config.syncCommand }),
              args: ['sync-repository', sync.spec.repositoryId],
              env: syncJobEnv(sync, config),
              securityContext: {
                allowPrivilegeEscalation: false,
                readOnlyRootFilesystem: true,
                privileged: false,
                capabilities: { drop: ['ALL'] },
              },
              resources: { requests: { cpu: '100m', memory: '256Mi' }, limits: { cpu: '1', memory: '1Gi' } },
              terminationMessagePolicy: 'FallbackToLogsOnError',
              volumeMounts: [
                { name: 'tmp', mountPath: '/tmp' },
                ...(credential ? [{ name: 'credential', mountPath: CREDENTIAL_DIR, readOnly: true }] : []),
                ...(config.egressCaConfigMap ? [{ name: 'egress-ca', mountPath: EGRESS_CA_DIR, readOnly: true }] : []),
              ],
            },
          ],
          volumes: [
            { name: 'tmp', emptyDir: {} },
            ...(credential ? [{ name: 'credential', secret: { secretName: credential, defaultMode: 0o440 } }] : []),
            ...(config.egressCaConfigMap ? [egressCaVolume(config.egressCaConfigMap)] : []),
          ],
        },
      },
    },
  };
}
