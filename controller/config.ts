/**
 * The controller's configuration, from the environment, validated once with every problem
 * reported together. Defaults fit a cluster installed by the chart.
 */
import { hostname } from 'node:os';
import { z } from 'zod';
import type { Resources } from './api/v1alpha1.js';
import { clusterNamespace } from '../kube/cluster-access.js';
import { resourcesProblem } from './runner-resources.js';

const quantity = z.string().regex(/^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$/, 'must be a Kubernetes quantity such as 250m or 1Gi');
const port = z.coerce.number().int().min(1).max(65535);
const dnsSubdomain = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
/** A label or annotation key: an optional DNS-subdomain prefix and a name (Kubernetes "Syntax and character set"). */
const metadataKey = z
  .string()
  .regex(/^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/, 'must be a label key');
const labelValue = z.string().regex(/^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/, 'must be a label value');
/** Keys the controller sets on runner pods itself (ownership, selection, the template hash): not the operator's. */
const ownKey = (key: string) =>
  key.startsWith('acis.dev/') || key === 'app.kubernetes.io/managed-by' || key === 'app.kubernetes.io/component';
const extraKeys = <T extends z.ZodTypeAny>(values: T) =>
  z
    .record(metadataKey, values)
    .refine(
      (keys) => Object.keys(keys).every((key) => !ownKey(key)),
      'may not set acis.dev/*, app.kubernetes.io/managed-by or app.kubernetes.io/component',
    );

/** A JSON value in an environment variable (the chart renders it with toJson), checked by `schema`. */
function json<T extends z.ZodTypeAny>(schema: T) {
  return z
    .string()
    .transform((text, ctx) => {
      try {
        return JSON.parse(text) as unknown;
      } catch {
        ctx.addIssue({ code: z.ZodIssueCode.custom, message: 'must be JSON' });
        return z.NEVER;
      }
    })
    .pipe(schema);
}

const toleration = z
  .object({
    key: z.string().optional(),
    operator: z.enum(['Exists', 'Equal']).optional(),
    value: z.string().optional(),
    effect: z.enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute']).optional(),
    tolerationSeconds: z.number().int().optional(),
  })
  .strict();

const EnvSchema = z.object({
  ACIS_K8S_NAMESPACE: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/)
    .optional(),
  ACIS_K8S_SANDBOX_NAMESPACE: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/)
    .optional(),
  ACIS_RUNNER_IMAGE: z.string().min(1).default('acis-runner:latest'),
  ACIS_RUNNER_COMMAND: z.string().optional(),
  ACIS_RUNNER_PORT: port.default(7070),
  ACIS_RUNNER_DRAIN_PORT: port.optional(),
  ACIS_POOL_PREWARM: z.enum(['0', '1']).default('1'),
  ACIS_RUNNER_RUNTIME_CLASS: z.string().regex(dnsSubdomain, 'must be a RuntimeClass name').optional(),
  ACIS_RUNNER_NODE_SELECTOR: json(z.record(metadataKey, labelValue)).default({}),
  ACIS_RUNNER_TOLERATIONS: json(z.array(toleration)).default([]),
  // Checked by the API server on the first pod create (a refusal the pool and Sandboxes report).
  ACIS_RUNNER_AFFINITY: json(z.record(z.string(), z.unknown())).default({}),
  ACIS_RUNNER_POD_LABELS: json(extraKeys(labelValue)).default({}),
  ACIS_RUNNER_POD_ANNOTATIONS: json(extraKeys(z.string())).default({}),
  ACIS_RUNNER_CPU_REQUEST: quantity.default('250m'),
  ACIS_RUNNER_MEMORY_REQUEST: quantity.default('512Mi'),
  ACIS_RUNNER_CPU_LIMIT: quantity.default('2'),
  ACIS_RUNNER_MEMORY_LIMIT: quantity.default('2Gi'),
  ACIS_RUNNER_EPHEMERAL_STORAGE_REQUEST: quantity.default('1Gi'),
  ACIS_RUNNER_EPHEMERAL_STORAGE_LIMIT: quantity.default('4Gi'),
  ACIS_EGRESS_PROXY_HOST: z.string().min(1).default('acis-egress-proxy'),
  ACIS_EGRESS_PROXY_PORT: port.default(3128),
  ACIS_SANDBOX_DNS: z.enum(['0', '1']).default('0'),
  ACIS_EGRESS_CA_CONFIGMAP: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/)
    .optional(),
  ACIS_MODEL_BASE_URL: z
    .string()
    .url()
    .refine((url) => /^https?:/.test(url), 'must be an http(s) URL')
    .default('https://api.anthropic.com'),
  ACIS_CLUSTER_MAX_SANDBOXES: z.coerce.number().int().min(1).max(100_000).default(100),
  ACIS_SANDBOX_START_TIMEOUT_SECONDS: z.coerce.number().min(1).max(3600).default(120),
  ACIS_POOL_REFILL_DELAY_SECONDS: z.coerce.number().min(0).max(60).default(0.3),
  ACIS_CONTROLLER_METRICS_HOST: z.string().min(1).default('0.0.0.0'),
  ACIS_CONTROLLER_METRICS_PORT: z.coerce.number().int().min(0).max(65535).default(9090),
  ACIS_CONTROLLER_LEASE_NAME: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/)
    .default('acis-controller'),
  ACIS_CONTROLLER_LEASE_SECONDS: z.coerce.number().min(1).max(300).default(15),
  ACIS_CONTROLLER_IDENTITY: z.string().min(1).optional(),
  ACIS_CONTROLLER_RESYNC_SECONDS: z.coerce.number().min(1).max(86_400).default(300),
  ACIS_CONTROLLER_WORKERS: z.coerce.number().int().min(1).max(64).default(4),
  ACIS_SYNC_IMAGE: z.string().min(1).default('acis:latest'),
  ACIS_SYNC_COMMAND: z.string().optional(),
  ACIS_SYNC_REPORT_URL: z
    .string()
    .url()
    .refine((url) => url.startsWith('https://'), 'must be an https URL: the sync report listener speaks TLS only')
    .default('https://acis-sync-report:8082'),
  ACIS_SYNC_JOB_DEADLINE_SECONDS: z.coerce.number().int().min(10).max(86_400).default(600),
  ACIS_IMAGE_PULL_SECRETS: z
    .string()
    .default('')
    .transform((names) =>
      names
        .split(',')
        .map((name) => name.trim())
        .filter(Boolean),
    )
    .refine(
      (names) => names.every((name) => /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(name)),
      'must be Secret names separated by commas',
    ),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

export interface ControllerConfig {
  /** The controller's own namespace: its Lease. */
  namespace: string;
  /**
   * Where runner pods and sync Jobs run, and so all that owns them or they own (owner references
   * cannot cross namespaces): Sandboxes, SandboxWarmPools, RepositorySyncs, Secrets, Events.
   */
  sandboxNamespace: string;
  runnerImage: string;
  /** The runner container's command; empty: the image's entrypoint. */
  runnerCommand: string[];
  runnerPort: number;
  /** Where a runner pod's preStop hook waits for the API server to be done with it (runner/drain-server.ts). */
  runnerDrainPort: number;
  /** Warm-pool pods start the agent runtime's process ahead too, for a new conversation's first turn to claim. */
  poolPrewarm: boolean;
  runnerResources: Resources;
  /** Scheduling and metadata of every runner pod (Sandbox and warm pool) beyond what the controller sets itself. */
  runnerPodTemplate: RunnerPodTemplate;
  /** The egress proxy runner pods are given: with sandbox DNS off, an address (startController resolves a name once). */
  egressProxyHost: string;
  egressProxyPort: number;
  /**
   * Runner pods may query the cluster DNS (and find the proxy by name). Off by default: the proxy
   * resolves every name a runner's requests need, so DNS in the pod would only be a covert channel
   * out and a map of the cluster's Services.
   */
  sandboxDns: boolean;
  /**
   * The ConfigMap (key `ca.crt`) holding the deployment CA's certificate (the egress proxy's): runner pods
   * trust it, and sync Jobs verify the sync report listener with it. Absent: runner pods get none (and
   * refuse to start), and no sync Job is started (its RepositorySync fails with reason NoDeploymentCa).
   */
  egressCaConfigMap: string | undefined;
  /** The platform's model endpoint runner pods are given as ANTHROPIC_BASE_URL (the egress proxy adds the key there). */
  modelBaseUrl: string;
  /** Sandboxes (admitted ones and warm-pool pods) the whole cluster may run at once. */
  maxSandboxes: number;
  /** A Sandbox not ready this long after admission fails with the reason it was stuck on. */
  startTimeoutMs: number;
  /** A warm pool waits this long after a claim before it starts the replacement pod. */
  poolRefillDelayMs: number;
  metricsHost: string;
  /** 0: an ephemeral port (tests). */
  metricsPort: number;
  leaseName: string;
  leaseDurationMs: number;
  identity: string;
  resyncMs: number;
  workers: number;
  /** The image a RepositorySync's Job runs (the API server's image: `acis sync-repository`). */
  syncImage: string;
  /** The sync container's command; empty: the image's entrypoint (the `acis` CLI). */
  syncCommand: string[];
  /** The API server's sync report listener (ACIS_SYNC_REPORT_LISTEN, https) a sync Job hands its result to: it holds no database credential. */
  syncReportUrl: string;
  /** A sync Job running longer than this is stopped and its RepositorySync reports the timeout. */
  syncJobDeadlineSeconds: number;
  /** Secrets (names) every pod the controller makes (runners, warm-pool pods, sync Jobs) pulls its image with. */
  imagePullSecrets: string[];
  logLevel: string;
}

export interface RunnerPodTemplate {
  /** A RuntimeClass (gVisor, Kata) runner pods run under; absent: the cluster's default runtime. */
  runtimeClassName: string | undefined;
  nodeSelector: Record<string, string>;
  tolerations: z.infer<typeof toleration>[];
  affinity: Record<string, unknown>;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}

export class ControllerConfigError extends Error {}

export function loadControllerConfig(env: NodeJS.ProcessEnv = process.env): ControllerConfig {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((issue) => `  ${issue.path.join('.')}: ${issue.message}`);
    throw new ControllerConfigError(`invalid environment:\n${lines.join('\n')}`);
  }
  const e = parsed.data;
  const runnerResources: Resources = {
    requests: {
      cpu: e.ACIS_RUNNER_CPU_REQUEST,
      memory: e.ACIS_RUNNER_MEMORY_REQUEST,
      'ephemeral-storage': e.ACIS_RUNNER_EPHEMERAL_STORAGE_REQUEST,
    },
    limits: {
      cpu: e.ACIS_RUNNER_CPU_LIMIT,
      memory: e.ACIS_RUNNER_MEMORY_LIMIT,
      'ephemeral-storage': e.ACIS_RUNNER_EPHEMERAL_STORAGE_LIMIT,
    },
  };
  // Every runner pod would be refused (422): said at startup, not on each Sandbox.
  const problem = resourcesProblem(runnerResources, runnerResources);
  if (problem) throw new ControllerConfigError(`invalid environment:\n  ACIS_RUNNER_*_REQUEST/LIMIT: ${problem}`);
  const drainPort = e.ACIS_RUNNER_DRAIN_PORT ?? e.ACIS_RUNNER_PORT + 1;
  if (drainPort === e.ACIS_RUNNER_PORT || drainPort > 65535)
    throw new ControllerConfigError('invalid environment:\n  ACIS_RUNNER_DRAIN_PORT: must be a port other than ACIS_RUNNER_PORT');
  return {
    namespace: clusterNamespace(e.ACIS_K8S_NAMESPACE),
    sandboxNamespace: clusterNamespace(e.ACIS_K8S_SANDBOX_NAMESPACE ?? e.ACIS_K8S_NAMESPACE),
    runnerImage: e.ACIS_RUNNER_IMAGE,
    runnerCommand: e.ACIS_RUNNER_COMMAND ? e.ACIS_RUNNER_COMMAND.split(' ').filter(Boolean) : [],
    runnerPort: e.ACIS_RUNNER_PORT,
    runnerDrainPort: drainPort,
    poolPrewarm: e.ACIS_POOL_PREWARM === '1',
    runnerResources,
    runnerPodTemplate: {
      runtimeClassName: e.ACIS_RUNNER_RUNTIME_CLASS,
      nodeSelector: e.ACIS_RUNNER_NODE_SELECTOR,
      tolerations: e.ACIS_RUNNER_TOLERATIONS,
      affinity: e.ACIS_RUNNER_AFFINITY,
      labels: e.ACIS_RUNNER_POD_LABELS,
      annotations: e.ACIS_RUNNER_POD_ANNOTATIONS,
    },
    egressProxyHost: e.ACIS_EGRESS_PROXY_HOST,
    egressProxyPort: e.ACIS_EGRESS_PROXY_PORT,
    sandboxDns: e.ACIS_SANDBOX_DNS === '1',
    egressCaConfigMap: e.ACIS_EGRESS_CA_CONFIGMAP,
    modelBaseUrl: e.ACIS_MODEL_BASE_URL.replace(/\/+$/, ''),
    maxSandboxes: e.ACIS_CLUSTER_MAX_SANDBOXES,
    startTimeoutMs: e.ACIS_SANDBOX_START_TIMEOUT_SECONDS * 1000,
    poolRefillDelayMs: Math.round(e.ACIS_POOL_REFILL_DELAY_SECONDS * 1000),
    metricsHost: e.ACIS_CONTROLLER_METRICS_HOST,
    metricsPort: e.ACIS_CONTROLLER_METRICS_PORT,
    leaseName: e.ACIS_CONTROLLER_LEASE_NAME,
    leaseDurationMs: e.ACIS_CONTROLLER_LEASE_SECONDS * 1000,
    identity: e.ACIS_CONTROLLER_IDENTITY ?? `${hostname()}-${process.pid}`,
    resyncMs: e.ACIS_CONTROLLER_RESYNC_SECONDS * 1000,
    workers: e.ACIS_CONTROLLER_WORKERS,
    syncImage: e.ACIS_SYNC_IMAGE,
    syncCommand: e.ACIS_SYNC_COMMAND ? e.ACIS_SYNC_COMMAND.split(' ').filter(Boolean) : [],
    syncReportUrl: e.ACIS_SYNC_REPORT_URL.replace(/\/+$/, ''),
    syncJobDeadlineSeconds: e.ACIS_SYNC_JOB_DEADLINE_SECONDS,
    imagePullSecrets: e.ACIS_IMAGE_PULL_SECRETS,
    logLevel: e.LOG_LEVEL,
  };
}
