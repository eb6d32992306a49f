/**
 * The custom resources of group acis.dev, version v1alpha1, as TypeScript types: the view of
 * crds/sandbox.yaml, crds/sandboxwarmpool.yaml and crds/repositorysync.yaml that the controller (and, next, the API server's
 * kubernetes provider) program against. Pure declarations: no client library, no I/O.
 */

export const GROUP = 'acis.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}` as const;

export const SANDBOX = { kind: 'Sandbox', plural: 'sandboxes' } as const;
export const SANDBOX_WARM_POOL = { kind: 'SandboxWarmPool', plural: 'sandboxwarmpools' } as const;
export const REPOSITORY_SYNC = { kind: 'RepositorySync', plural: 'repositorysyncs' } as const;

/** Label keys (contracts: kubectl habits, the chart, the API server's lookups). */
export const LABELS = {
  tenant: 'acis.dev/tenant',
  conversation: 'acis.dev/conversation',
  agentType: 'acis.dev/agent-type',
  pool: 'acis.dev/pool',
  /** On runner pods: the Sandbox that owns it (absent while it waits in a pool). */
  sandbox: 'acis.dev/sandbox',
  /** On warm-pool pods: the hash of the pod template they were made from (the pool replaces idle pods of an older one). */
  templateHash: 'acis.dev/template-hash',
  managedBy: 'app.kubernetes.io/managed-by',
  component: 'app.kubernetes.io/component',
} as const;
export const ANNOTATIONS = {
  /** On a runner pod adopted from a warm pool: the pool it came from and when (RFC 3339). */
  adoptedFrom: 'acis.dev/adopted-from',
  adoptedAt: 'acis.dev/adopted-at',
  /**
   * On a Sandbox the API server creates: the id of the REST request whose turn created it (the caller's
   * `X-Request-Id`, or the API's `req_...`). The controller's log lines about the Sandbox and its pod
   * carry it as `request_id`. A warm Sandbox keeps the id of the turn that created it.
   */
  requestId: 'acis.dev/request-id',
} as const;

/** The longest annotation value read as a request id (the API's own limit is 128). */
const MAX_REQUEST_ID_LENGTH = 128;

/**
 * The request id a Sandbox's annotation names, for log lines; undefined when absent or not a plausible
 * id (too long, or beyond printable ASCII), since anyone who may create Sandboxes may write it.
 */
export function requestIdOf(sandbox: { metadata: ObjectMeta }): string | undefined {
  const value = sandbox.metadata.annotations?.[ANNOTATIONS.requestId];
  return value !== undefined && value.length <= MAX_REQUEST_ID_LENGTH && /^[\x21-\x7e]+$/.test(value) ? value : undefined;
}
export const MANAGED_BY = 'acis-controller';
/** The container port of a runner's control connection. */
export const RUNNER_PORT_NAME = 'control';

/**
 * The pod a Sandbox starts for itself (a cold start): its name and a piece of its uid. The same for
 * every attempt of one Sandbox, so a retry after a lost answer finds the pod it made; different for a
 * Sandbox re-created under the same name, so it never meets the pod and token Secret of the earlier
 * one while the garbage collector is still removing them.
 */
export function coldPodName(sandbox: { metadata: { name: string; uid?: string | undefined } }): string {
  const uid = sandbox.metadata.uid?.replace(/-/g, '').slice(0, 8);
  if (!uid) throw new Error(`Sandbox ${sandbox.metadata.name} has no uid yet`);
  return `${sandbox.metadata.name}-${uid}`;
}

/** The Secret holding a runner pod's control and egress tokens (keys `token`, `egress-token`). */
export function tokenSecretName(podName: string): string {
  return `${podName}-token`;
}
export const RUNNER_COMPONENT = 'runner';

export interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
  generation?: number;
  creationTimestamp?: string;
  deletionTimestamp?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
  ownerReferences?: OwnerReference[];
}

export interface OwnerReference {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller?: boolean;
  blockOwnerDeletion?: boolean;
}

export interface ResourceList {
  cpu?: string;
  memory?: string;
  'ephemeral-storage'?: string;
}

export interface Resources {
  requests?: ResourceList;
  limits?: ResourceList;
}

export type SandboxMode = 'pooled' | 'warm';

export interface SandboxSpec {
  conversationId: string;
  tenantId: string;
  agentType: string;
  mode: SandboxMode;
  /** RFC 3339; absent: no idle TTL. */
  shutdownTime?: string;
  /** RFC 3339; the LRU key for the tenant's warm cap (creation time when absent). */
  lastActivityTime?: string;
  /** The tenant's max_concurrent_warm, as the API server last wrote it. */
  maxConcurrentWarm?: number;
  poolRef?: { name: string };
  image?: string;
  resources?: Resources;
}

export type SandboxPhase = 'Pending' | 'Starting' | 'Ready' | 'Expired' | 'Failed';
/** Sandboxes have Ready, Admitted and Expired; SandboxWarmPools Ready and Degraded. */
export type ConditionType = 'Ready' | 'Admitted' | 'Expired' | 'Degraded';
export type ConditionStatus = 'True' | 'False' | 'Unknown';

/** Reasons a user can act on; docs/kubernetes.md lists what each means and what to do. */
export const REASONS = {
  admitted: 'Admitted',
  capacityExhausted: 'CapacityExhausted',
  starting: 'Starting',
  runnerReady: 'RunnerReady',
  unschedulable: 'Unschedulable',
  imagePullFailed: 'ImagePullFailed',
  quotaExceeded: 'QuotaExceeded',
  podCreateRefused: 'PodCreateRefused',
  podCreateForbidden: 'PodCreateForbidden',
  invalidResources: 'InvalidResources',
  crashLoop: 'CrashLoop',
  // Recorded by the API server on a Sandbox whose runner's request the egress proxy refused.
  egressDestinationRefused: 'EgressDestinationRefused',
  egressSecretMissing: 'EgressSecretMissing',
  egressSecretDestinationDenied: 'EgressSecretDestinationDenied',
  runnerStopped: 'RunnerStopped',
  podDeleted: 'PodDeleted',
  startTimeout: 'StartTimeout',
  shutdownTimeReached: 'ShutdownTimeReached',
  tenantWarmCapReached: 'TenantWarmCapReached',
  notExpired: 'NotExpired',
  /** A pool: every desired pod is ready. */
  filled: 'Filled',
  /** A pool: pods are being created or are starting. */
  filling: 'Filling',
  /** A pool: its pod creates are accepted and none of its pods is failing. */
  asExpected: 'AsExpected',
} as const;
export type Reason = (typeof REASONS)[keyof typeof REASONS];

export interface Condition {
  type: ConditionType;
  status: ConditionStatus;
  reason: string;
  message?: string;
  lastTransitionTime: string;
  observedGeneration?: number;
}

export interface SandboxStatus {
  phase?: SandboxPhase;
  conditions?: Condition[];
  podName?: string;
  tokenSecretName?: string;
  endpoint?: string;
  launch?: 'pool' | 'cold';
  observedGeneration?: number;
  admittedTime?: string;
  readyTime?: string;
  expiredTime?: string;
}

export interface Sandbox {
  apiVersion: typeof API_VERSION;
  kind: 'Sandbox';
  metadata: ObjectMeta;
  spec: SandboxSpec;
  status?: SandboxStatus;
}

export interface SandboxWarmPoolSpec {
  agentType: string;
  replicas: number;
  image?: string;
  resources?: Resources;
}

export interface SandboxWarmPoolStatus {
  /** Ready: every desired pod is ready (else why not); Degraded: creates refused or pods failing, with the reason. */
  conditions?: Condition[];
  replicas?: number;
  desiredReplicas?: number;
  readyReplicas?: number;
  availableReplicas?: number;
  /** Unclaimed pods of the current template (`templateHash`); the others are replaced while idle. */
  updatedReplicas?: number;
  /** The hash of the pod template the pool makes pods of now (their `acis.dev/template-hash` label). */
  templateHash?: string;
  selector?: string;
  observedGeneration?: number;
}

export interface SandboxWarmPool {
  apiVersion: typeof API_VERSION;
  kind: 'SandboxWarmPool';
  metadata: ObjectMeta;
  spec: SandboxWarmPoolSpec;
  status?: SandboxWarmPoolStatus;
}

/** The phases after which a Sandbox never runs again (its client must create a new one). */
export function isTerminal(phase: SandboxPhase | undefined): boolean {
  return phase === 'Expired' || phase === 'Failed';
}

export function conditionOf(status: { conditions?: Condition[] } | undefined, type: ConditionType): Condition | undefined {
  return status?.conditions?.find((c) => c.type === type);
}

export interface RepositorySyncSpec {
  repositoryId: string;
  url: string;
  branch: string;
  /** The repository's provider (`generic`, `github`, ...): the user name git sends with a token. */
  provider?: string;
  /** The SSH host keys pinned for the repository (known_hosts lines); absent before its first SSH sync. */
  sshKnownHosts?: string;
  /**
   * The attempt's Secret, owned by the RepositorySync (see syncCredentialSecretName): key `token`, what
   * the Job hands its result to the API server with, and, when the repository has a credential, key
   * `credential`, what git authenticates with.
   */
  credentialSecretName?: string;
  /** The database claim of the attempt the Job runs. */
  claim: string;
  /** Bumped by the API server for every claimed sync; one Job per value. */
  requestGeneration: number;
  /** The API server's settings the attempt runs with (the Job's pod gets them as its environment, see syncJobEnv). */
  settings?: RepositorySyncSettings;
}

/** What a sync attempt needs of the API server's configuration, so the API server and its Job agree. */
export interface RepositorySyncSettings {
  /** ACIS_ALLOW_FILE_REPOS: file:// repositories may be synced. */
  allowFileRepos?: boolean;
  /** ACIS_ALLOW_PLAIN_REPOS: http:// and git:// repositories may be synced. */
  allowPlainRepos?: boolean;
  /** ACIS_REPOSITORY_ALLOW: private hosts a repository may name. */
  repositoryAllow?: string;
  /** ACIS_SYNC_TIMEOUT_SECONDS: the longest git command. */
  timeoutSeconds?: number;
}

/** The credential Secret's key for git's credential, and so the file name a sync Job mounts it under. */
export const SYNC_CREDENTIAL_KEY = 'credential';
/** The credential Secret's key for the attempt's report token (see api-server/repositories/sync-report.ts). */
export const SYNC_TOKEN_KEY = 'token';

/**
 * The credential Secret of one generation's attempt: one per generation, so the API server can write
 * the next before bumping while the controller deletes the one before, without either racing the other.
 */
export function syncCredentialSecretName(syncName: string, requestGeneration: number): string {
  return `${syncName}-credential-${requestGeneration}`;
}

export interface RepositorySyncCondition {
  type: 'Synced';
  status: ConditionStatus;
  reason: string;
  message?: string;
  lastTransitionTime: string;
}

export interface RepositorySyncStatus {
  state?: 'syncing' | 'ready' | 'error';
  commit?: string;
  shortCommit?: string;
  lastSyncedTime?: string;
  error?: string;
  jobName?: string;
  observedRequestGeneration?: number;
  /** Every generation up to this one has had its credential Secret deleted (or never had one). */
  credentialRemovedGeneration?: number;
  conditions?: RepositorySyncCondition[];
}

export interface RepositorySync {
  apiVersion: typeof API_VERSION;
  kind: 'RepositorySync';
  metadata: ObjectMeta;
  spec: RepositorySyncSpec;
  status?: RepositorySyncStatus;
}
