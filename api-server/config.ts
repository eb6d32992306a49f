import path from 'node:path';
import { z } from 'zod';
import { parseAllowList } from '../egress-proxy/destination-policy.js';
import { resolveTokenSetting, type ResolveTokenSetting } from '../egress-proxy/resolve-protocol.js';
import { DEFAULT_RUNNER_RATE_LIMIT, type RunnerRateLimit } from '../egress-proxy/runner-rate-limit.js';
import type { RateLimitConfig } from './core/rate-limit.js';
import { DEFAULT_RUNNER_BOUNDS, type RunnerBounds } from './sandboxes/runner.js';

/**
 * Runtime configuration, read once from the environment. Every variable is documented in the
 * README; names are a contract (ARCHITECTURE.md), so rename nothing here without changing both.
 */
/** Keeps a window's reserved count (limit plus the nodes' chunks) well inside a PostgreSQL integer. */
const MAX_RATE_LIMIT = 1_000_000_000;
/** The largest busy-sandbox cap a deployment or a tenant may set (tenants.schemas.ts uses the same bound). */
export const MAX_BUSY_SANDBOXES = 10_000;

const EnvSchema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  HOST: z.string().min(1).default('127.0.0.1'),
  DATABASE_URL: z.string().min(1).optional(),
  ACIS_DATA_DIR: z.string().min(1).default('./.data'),
  ACIS_MASTER_KEY: z.string().min(1).optional(),
  ACIS_MASTER_KEY_PREVIOUS: z
    .string()
    .refine(
      (value) => value.split(',').every((key) => key.trim() === '' || Buffer.from(key.trim(), 'base64').length === 32),
      'must be comma-separated base64 encodings of 32 bytes',
    )
    .optional(),
  ACIS_BOOTSTRAP_SERVICE_KEY: z
    .string()
    .regex(/^sk_int_[A-Za-z0-9_-]{16,}$/, 'must look like sk_int_ followed by at least 16 characters')
    .optional(),
  ACIS_ADMIN_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  ACIS_PUBLIC_URL: z.string().url().optional(),
  ACIS_STORAGE_BUCKET: z
    .string()
    .regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/)
    .default('acis-platform'),
  ACIS_ALLOW_FILE_REPOS: z.enum(['0', '1']).default('0'),
  ACIS_ALLOW_PLAIN_REPOS: z.enum(['0', '1']).default('0'),
  ACIS_REPOSITORY_ALLOW: z.string().optional(),
  ACIS_SYNC_TIMEOUT_SECONDS: z.coerce.number().int().min(5).max(3600).default(120),
  ACIS_GITHUB_API_URL: z.string().url().default('https://api.github.com'),
  ACIS_REPOSITORY_SYNC_RUNNER: z.enum(['local', 'kubernetes']).default('local'),
  ACIS_SYNC_JOB_DEADLINE_SECONDS: z.coerce.number().int().min(10).max(86_400).default(600),
  ACIS_SANDBOX_PROVIDER: z.enum(['local', 'kubernetes']).default('local'),
  ACIS_SANDBOX_READY_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(3600).default(180),
  KUBECONFIG: z.string().min(1).optional(),
  ACIS_K8S_NAMESPACE: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, 'must be a namespace name')
    .optional(),
  ACIS_K8S_SANDBOX_NAMESPACE: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, 'must be a namespace name')
    .optional(),
  ACIS_EGRESS_CA_CONFIGMAP: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/, 'must be a ConfigMap name')
    .optional(),
  ACIS_DB_POOL_SIZE: z.coerce.number().int().min(1).max(200).default(20),
  ANTHROPIC_BASE_URL: z.string().url().default('https://api.anthropic.com'),
  ANTHROPIC_API_KEY: z.string().min(1).optional(),
  ACIS_FILLER_MODEL: z.string().min(1).default('claude-haiku-4-5'),
  ACIS_PING_INTERVAL_MS: z.coerce.number().int().min(100).max(300_000).default(15_000),
  ACIS_MAX_SANDBOXES: z.coerce.number().int().min(1).max(1000).default(8),
  ACIS_POOL_SIZE: z.coerce.number().int().min(0).max(100).default(1),
  ACIS_POOL_PREWARM: z.enum(['0', '1']).default('1'),
  ACIS_MAX_HOLD_SECONDS: z.coerce.number().int().min(0).max(3600).default(30),
  ACIS_TENANT_MAX_BUSY_SANDBOXES: z.coerce.number().int().min(1).max(MAX_BUSY_SANDBOXES).optional(),
  ACIS_USER_MAX_BUSY_SANDBOXES: z.coerce.number().int().min(1).max(MAX_BUSY_SANDBOXES).optional(),
  ACIS_TURN_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(86_400).default(3600),
  ACIS_WORKSPACE_MAX_MB: z.coerce.number().int().min(1).max(1_048_576).default(2048),
  ACIS_RUNNER_CPUS: z.coerce.number().min(0.01).max(1024).default(2),
  ACIS_RUNNER_MEMORY_MB: z.coerce.number().int().min(64).max(1_048_576).default(2048),
  ACIS_APPROVAL_TTL_SECONDS: z.coerce
    .number()
    .int()
    .min(1)
    .max(7 * 86400)
    .default(900),
  ACIS_RUNNER_MAX_LINE_BYTES: z.coerce
    .number()
    .int()
    .min(64 * 1024)
    .max(64 * 1024 * 1024)
    .default(DEFAULT_RUNNER_BOUNDS.maxLineBytes),
  ACIS_RUNNER_MAX_BUFFERED_BYTES: z.coerce
    .number()
    .int()
    .min(1024 * 1024)
    .max(16 * 1024 * 1024 * 1024)
    .default(DEFAULT_RUNNER_BOUNDS.maxBufferedBytes),
  ACIS_SANDBOX_ISOLATION: z.enum(['bwrap', 'none']).default('bwrap'),
  ACIS_SANDBOX_DNS: z.enum(['0', '1']).default('0'),
  ACIS_BWRAP_PATH: z.string().min(1).default('bwrap'),
  ACIS_SHUTDOWN_GRACE_SECONDS: z.coerce.number().int().min(0).max(3600).default(25),
  ACIS_NODE_HEARTBEAT_SECONDS: z.coerce.number().min(0.1).max(60).default(3),
  ACIS_NODE_STALE_SECONDS: z.coerce.number().min(0.5).max(3600).default(10),
  ACIS_EGRESS_ALLOW: z.string().optional(),
  ACIS_EGRESS_LISTEN: z
    .string()
    .regex(/^(\[[0-9a-fA-F:]+\]|[^:\s]+):\d{1,5}$/, 'must be host:port')
    .default('127.0.0.1:0'),
  ACIS_EGRESS_EXTRA_CA: z.string().min(1).optional(),
  ACIS_EGRESS_RUNNER_RATE: z.coerce.number().positive().max(100_000).default(DEFAULT_RUNNER_RATE_LIMIT.perSecond),
  ACIS_EGRESS_RUNNER_BURST: z.coerce.number().int().min(1).max(1_000_000).default(DEFAULT_RUNNER_RATE_LIMIT.burst),
  ACIS_SECRETS_REQUIRE_HOSTS: z.enum(['0', '1']).default('0'),
  ACIS_EGRESS_RESOLVE_LISTEN: z
    .string()
    .regex(/^(\[[0-9a-fA-F:]+\]|[^:\s]+):\d{1,5}$/, 'must be host:port')
    .optional(),
  ACIS_DEPLOYMENT_CA_DIR: z.string().min(1).optional(),
  ACIS_EGRESS_RESOLVE_TLS_NAMES: z
    .string()
    .regex(/^[a-z0-9.-]+(,[a-z0-9.-]+)*$/, 'must be comma-separated DNS names')
    .optional(),
  ACIS_SYNC_REPORT_LISTEN: z
    .string()
    .regex(/^(\[[0-9a-fA-F:]+\]|[^:\s]+):\d{1,5}$/, 'must be host:port')
    .optional(),
  ACIS_SYNC_REPORT_TLS_NAMES: z
    .string()
    .regex(/^[a-z0-9.-]+(,[a-z0-9.-]+)*$/, 'must be comma-separated DNS names')
    .optional(),
  ACIS_RATE_LIMITS: z.enum(['on', 'off']).default('on'),
  ACIS_RATE_LIMIT_WINDOW_SECONDS: z.coerce.number().int().min(1).max(86400).default(60),
  ACIS_RATE_LIMIT_TOKEN_EXCHANGE: z.coerce.number().int().min(1).max(MAX_RATE_LIMIT).default(6000),
  ACIS_RATE_LIMIT_MESSAGE_SENDS: z.coerce.number().int().min(1).max(MAX_RATE_LIMIT).default(600),
  ACIS_RATE_LIMIT_OTHER: z.coerce.number().int().min(1).max(MAX_RATE_LIMIT).default(30000),
  ACIS_METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

export interface Config {
  port: number;
  host: string;
  /** Absent: the embedded PGlite database under `dataDir`. */
  databaseUrl: string | undefined;
  dataDir: string;
  /** base64 of 32 bytes; absent: generated into `dataDir` on first start. */
  masterKey: string | undefined;
  /** Retired master keys (base64 each) that still decrypt what was written under them; rotation. */
  previousMasterKeys: string[];
  bootstrapServiceKey: string | undefined;
  adminToken: string | undefined;
  /** `{base_url}` of problem types; absent: the origin of each request. */
  publicUrl: string | undefined;
  storageBucket: string;
  allowFileRepos: boolean;
  /** Unencrypted `http://` and `git://` repositories may be registered and synced. */
  allowPlainRepos: boolean;
  /** `host` or `host:port` entries a repository may name although loopback or private (as egressAllow). */
  repositoryAllow: string | undefined;
  /** The longest one repository sync's git work may take before it is killed and the sync fails. */
  syncTimeoutSeconds: number;
  /** REST base of GitHub (or GitHub Enterprise Server: https://HOST/api/v3), for App installation tokens. */
  githubApiUrl: string;
  /** Where repository syncs run: in this process, or as RepositorySync Jobs on the cluster. */
  repositorySyncRunner: 'local' | 'kubernetes';
  /** The controller's deadline for a sync Job (the same variable it reads): past it plus syncTimeoutSeconds, a handed-off attempt is orphaned. */
  syncJobDeadlineSeconds: number;
  /** Where runners run: bubblewrap children of this process, or pods the controller makes for Sandbox resources. */
  sandboxProvider: 'local' | 'kubernetes';
  /** Under the kubernetes provider: how long a turn waits for its Sandbox to be Ready (after admission) before it fails. */
  sandboxReadyTimeoutSeconds: number;
  /**
   * The namespace of runner pods and sync Jobs, and so of all that owns them or they own (owner
   * references cannot cross namespaces): Sandboxes, RepositorySyncs, the runner token and sync
   * credential Secrets, the egress CA ConfigMap, their Events. ACIS_K8S_SANDBOX_NAMESPACE, else
   * ACIS_K8S_NAMESPACE; unset: the pod's own, else `default`.
   */
  k8sSandboxNamespace: string | undefined;
  /** Under the kubernetes provider: the ConfigMap the egress proxy's CA certificate is published in for runner pods. */
  egressCaConfigMap: string | undefined;
  /** A kubeconfig file for the cluster; unset: the in-cluster service account. */
  kubeconfigPath: string | undefined;
  dbPoolSize: number;
  /** Model endpoint for the agent runtime and the filler. */
  anthropicBaseUrl: string;
  anthropicApiKey: string | undefined;
  /** The fast model of the filler's acknowledgement. */
  fillerModel: string;
  pingIntervalMs: number;
  /** Runner capacity of this node. */
  maxSandboxes: number;
  /** Runners per agent type kept started ahead of demand. */
  poolSize: number;
  /** Pool runners start the agent runtime's process ahead too, for a new conversation's first turn to claim. */
  poolPrewarm: boolean;
  /** How long `on_capacity=hold` may wait for a runner. */
  maxHoldSeconds: number;
  /**
   * Deployment defaults of the caps on sandboxes busy at once, per tenant and per user, for tenants
   * whose settings leave them null; undefined: no cap beyond the capacity of the nodes or cluster.
   */
  busySandboxDefaults: { tenant: number | undefined; user: number | undefined };
  /** The longest one turn may take on its runner before it is aborted and the run ends `failed` (turn-timeout). */
  turnTimeoutSeconds: number;
  /** Local runners: the most their workspace and HOME may hold (workspace-too-large past it). */
  workspaceMaxBytes: number;
  /** Local runners: CPU and memory each may use, through cgroups v2 where this machine allows (resource-limits.ts). */
  runnerLimits: { cpus: number; memoryBytes: number };
  /** Default and cap of an approval's life: a parked run holds its runner that long at most. */
  approvalTtlSeconds: number;
  /** What one runner can make this server hold (longest line, bytes held on its behalf) before it is dropped. */
  runnerBounds: RunnerBounds;
  /** Under the kubernetes provider, runner pods may query the cluster DNS (the controller's setting of the same name; here to be named as a weakening). */
  sandboxDns: boolean;
  /** `bwrap` (the default) isolates runners with bubblewrap; `none` runs them as plain processes (debugging only). */
  sandboxIsolation: 'bwrap' | 'none';
  /** The bubblewrap binary: a path, or a name looked up on PATH. */
  bwrapPath: string;
  /** How long a shutdown (SIGTERM) lets the runs in progress finish before ending them `failed`. */
  shutdownGraceSeconds: number;
  /** How often this node renews its liveness row (`nodes.heartbeat_at`), and looks for the runs of nodes that stopped. */
  nodeHeartbeatSeconds: number;
  /** A node whose liveness row is older than this is gone: the runs it hosted are taken over. */
  nodeStaleSeconds: number;
  /** `host` or `host:port` entries the egress proxy may reach although loopback or private. */
  egressAllow: string | undefined;
  /** Where the in-process egress proxy listens: loopback for local runners; an address pods reach under the kubernetes provider. */
  egressListen: { host: string; port: number };
  /** Requests each runner may make through the in-process egress proxy (per second, and at once); over it, 429. */
  egressRunnerRateLimit: RunnerRateLimit;
  /** A PEM bundle the egress proxy trusts for upstream TLS beside Node's roots. */
  egressExtraCaPath: string | undefined;
  /** Every written secret must name its `allowed_hosts`: a plain string value is refused (secret-hosts-required). */
  secretsRequireHosts: boolean;
  /**
   * The internal listener standalone egress proxies resolve runners' credentials on, and the bearer
   * token they must send (ACIS_EGRESS_RESOLVE_TOKEN or _FILE, read at start); absent: not served.
   */
  egressResolve: { listen: { host: string; port: number }; token: ResolveTokenSetting; tlsNames: string[] } | undefined;
  /**
   * The deployment CA (ca.crt, ca.key) the in-process egress proxy presents leaves of and the API server
   * takes its own TLS certificate from (runner links, the resolve listener); created there when absent.
   */
  deploymentCaDir: string;
  /**
   * The internal listener sync Jobs hand their results to (sync-report-server.ts); absent: not
   * served. Required with the kubernetes sync runner: a Job holds no database credential.
   */
  syncReportListen: { host: string; port: number } | undefined;
  /** The DNS names sync Jobs reach that listener by, which the API server's certificate carries (ACIS_SYNC_REPORT_TLS_NAMES). */
  syncReportTlsNames: string[];
  /** Requests per principal and class per window, shared by every API node through the database. */
  rateLimits: RateLimitConfig;
  /** Bearer token `/metrics` requires; absent: `/metrics` is open. */
  metricsToken: string | undefined;
  logLevel: string;
}

export class ConfigError extends Error {}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    // Report every problem at once, so an operator fixes the environment in one go.
    const lines = parsed.error.issues.map((issue) => `  ${issue.path.join('.')}: ${issue.message}`);
    throw new ConfigError(`invalid environment:\n${lines.join('\n')}`);
  }
  const e = parsed.data;
  if (e.ACIS_NODE_STALE_SECONDS < 2 * e.ACIS_NODE_HEARTBEAT_SECONDS) {
    // One late renewal must not make a live node look gone.
    throw new ConfigError('invalid environment:\n  ACIS_NODE_STALE_SECONDS: must be at least twice ACIS_NODE_HEARTBEAT_SECONDS');
  }
  const egressResolve = egressResolveConfig(env, e.ACIS_EGRESS_RESOLVE_LISTEN, e.ACIS_EGRESS_RESOLVE_TLS_NAMES);
  if (e.ACIS_REPOSITORY_SYNC_RUNNER === 'kubernetes' && !e.ACIS_SYNC_REPORT_LISTEN) {
    throw new ConfigError(
      'invalid environment:\n  ACIS_SYNC_REPORT_LISTEN: must be set (host:port) with ACIS_REPOSITORY_SYNC_RUNNER=kubernetes: sync Jobs hand their results there',
    );
  }
  if (e.ACIS_SYNC_REPORT_TLS_NAMES && !e.ACIS_SYNC_REPORT_LISTEN) {
    throw new ConfigError('invalid environment:\n  ACIS_SYNC_REPORT_TLS_NAMES is set without ACIS_SYNC_REPORT_LISTEN');
  }
  try {
    parseAllowList(e.ACIS_REPOSITORY_ALLOW);
  } catch (error) {
    throw new ConfigError(`invalid environment:\n  ${(error as Error).message.replace('ACIS_EGRESS_ALLOW', 'ACIS_REPOSITORY_ALLOW')}`);
  }
  return {
    port: e.PORT,
    host: e.HOST,
    databaseUrl: e.DATABASE_URL,
    dataDir: path.resolve(e.ACIS_DATA_DIR),
    masterKey: e.ACIS_MASTER_KEY,
    previousMasterKeys: (e.ACIS_MASTER_KEY_PREVIOUS ?? '')
      .split(',')
      .map((key) => key.trim())
      .filter((key) => key !== ''),
    bootstrapServiceKey: e.ACIS_BOOTSTRAP_SERVICE_KEY,
    adminToken: e.ACIS_ADMIN_TOKEN,
    publicUrl: e.ACIS_PUBLIC_URL?.replace(/\/+$/, ''),
    storageBucket: e.ACIS_STORAGE_BUCKET,
    allowFileRepos: e.ACIS_ALLOW_FILE_REPOS === '1',
    allowPlainRepos: e.ACIS_ALLOW_PLAIN_REPOS === '1',
    repositoryAllow: e.ACIS_REPOSITORY_ALLOW?.trim() || undefined,
    syncTimeoutSeconds: e.ACIS_SYNC_TIMEOUT_SECONDS,
    githubApiUrl: e.ACIS_GITHUB_API_URL.replace(/\/+$/, ''),
    repositorySyncRunner: e.ACIS_REPOSITORY_SYNC_RUNNER,
    syncJobDeadlineSeconds: e.ACIS_SYNC_JOB_DEADLINE_SECONDS,
    sandboxProvider: e.ACIS_SANDBOX_PROVIDER,
    sandboxReadyTimeoutSeconds: e.ACIS_SANDBOX_READY_TIMEOUT_SECONDS,
    k8sSandboxNamespace: e.ACIS_K8S_SANDBOX_NAMESPACE ?? e.ACIS_K8S_NAMESPACE,
    egressCaConfigMap: e.ACIS_EGRESS_CA_CONFIGMAP,
    kubeconfigPath: e.KUBECONFIG,
    dbPoolSize: e.ACIS_DB_POOL_SIZE,
    anthropicBaseUrl: e.ANTHROPIC_BASE_URL.replace(/\/+$/, ''),
    anthropicApiKey: e.ANTHROPIC_API_KEY,
    fillerModel: e.ACIS_FILLER_MODEL,
    pingIntervalMs: e.ACIS_PING_INTERVAL_MS,
    maxSandboxes: e.ACIS_MAX_SANDBOXES,
    poolSize: e.ACIS_POOL_SIZE,
    poolPrewarm: e.ACIS_POOL_PREWARM === '1',
    maxHoldSeconds: e.ACIS_MAX_HOLD_SECONDS,
    busySandboxDefaults: { tenant: e.ACIS_TENANT_MAX_BUSY_SANDBOXES, user: e.ACIS_USER_MAX_BUSY_SANDBOXES },
    turnTimeoutSeconds: e.ACIS_TURN_TIMEOUT_SECONDS,
    workspaceMaxBytes: e.ACIS_WORKSPACE_MAX_MB * 1024 * 1024,
    runnerLimits: { cpus: e.ACIS_RUNNER_CPUS, memoryBytes: e.ACIS_RUNNER_MEMORY_MB * 1024 * 1024 },
    approvalTtlSeconds: e.ACIS_APPROVAL_TTL_SECONDS,
    runnerBounds: { maxLineBytes: e.ACIS_RUNNER_MAX_LINE_BYTES, maxBufferedBytes: e.ACIS_RUNNER_MAX_BUFFERED_BYTES },
    sandboxIsolation: e.ACIS_SANDBOX_ISOLATION,
    sandboxDns: e.ACIS_SANDBOX_DNS === '1',
    bwrapPath: e.ACIS_BWRAP_PATH,
    shutdownGraceSeconds: e.ACIS_SHUTDOWN_GRACE_SECONDS,
    nodeHeartbeatSeconds: e.ACIS_NODE_HEARTBEAT_SECONDS,
    nodeStaleSeconds: e.ACIS_NODE_STALE_SECONDS,
    egressAllow: e.ACIS_EGRESS_ALLOW,
    egressListen: hostPort(e.ACIS_EGRESS_LISTEN),
    egressRunnerRateLimit: { perSecond: e.ACIS_EGRESS_RUNNER_RATE, burst: e.ACIS_EGRESS_RUNNER_BURST },
    egressExtraCaPath: e.ACIS_EGRESS_EXTRA_CA === undefined ? undefined : path.resolve(e.ACIS_EGRESS_EXTRA_CA),
    secretsRequireHosts: e.ACIS_SECRETS_REQUIRE_HOSTS === '1',
    egressResolve,
    deploymentCaDir: path.resolve(e.ACIS_DEPLOYMENT_CA_DIR ?? path.join(e.ACIS_DATA_DIR, 'egress-ca')),
    syncReportListen: e.ACIS_SYNC_REPORT_LISTEN === undefined ? undefined : hostPort(e.ACIS_SYNC_REPORT_LISTEN),
    syncReportTlsNames: e.ACIS_SYNC_REPORT_TLS_NAMES?.split(',') ?? [],
    rateLimits: {
      enabled: e.ACIS_RATE_LIMITS === 'on',
      windowSeconds: e.ACIS_RATE_LIMIT_WINDOW_SECONDS,
      limits: {
        'token-exchange': e.ACIS_RATE_LIMIT_TOKEN_EXCHANGE,
        'message-send': e.ACIS_RATE_LIMIT_MESSAGE_SENDS,
        other: e.ACIS_RATE_LIMIT_OTHER,
      },
    },
    metricsToken: e.ACIS_METRICS_TOKEN,
    logLevel: e.LOG_LEVEL,
  };
}

/** The resolve listener needs its token, and a token without the listener is a mistake worth naming. */
function egressResolveConfig(env: NodeJS.ProcessEnv, listen: string | undefined, tlsNames: string | undefined): Config['egressResolve'] {
  const token = resolveTokenSetting(env, 'ACIS_EGRESS_RESOLVE_TOKEN');
  const problem =
    typeof token === 'string'
      ? token
      : listen && !token
        ? 'ACIS_EGRESS_RESOLVE_LISTEN needs ACIS_EGRESS_RESOLVE_TOKEN or ACIS_EGRESS_RESOLVE_TOKEN_FILE'
        : !listen && token
          ? 'ACIS_EGRESS_RESOLVE_TOKEN(_FILE) is set without ACIS_EGRESS_RESOLVE_LISTEN'
          : undefined;
  if (problem) throw new ConfigError(`invalid environment:\n  ${problem}`);
  return listen && token && typeof token !== 'string'
    ? { listen: hostPort(listen), token, tlsNames: tlsNames ? tlsNames.split(',') : [] }
    : undefined;
}

function hostPort(value: string): { host: string; port: number } {
  const colon = value.lastIndexOf(':');
  return { host: value.slice(0, colon).replace(/^\[(.*)\]$/, '$1'), port: Number(value.slice(colon + 1)) };
}

/**
 * The settings in force that weaken what keeps agent code in, each said as a sentence an operator
 * can act on. They are logged at start and listed in /readyz's body, so a setting meant for a test
 * machine cannot reach production unseen.
 */
export function sandboxWeakenings(config: Config): string[] {
  const weakenings: string[] = [];
  if (config.sandboxProvider === 'local' && config.sandboxIsolation === 'none') {
    weakenings.push('ACIS_SANDBOX_ISOLATION=none: agent code runs as plain processes of this server, with its user, files and network');
  }
  if (config.sandboxProvider === 'kubernetes' && config.sandboxDns) {
    weakenings.push("ACIS_SANDBOX_DNS=1: runner pods may query the cluster DNS, a covert channel out and a map of the cluster's Services");
  }
  if (config.allowFileRepos) weakenings.push("ACIS_ALLOW_FILE_REPOS=1: repositories may be read from this machine's file system");
  if (config.allowPlainRepos) weakenings.push('ACIS_ALLOW_PLAIN_REPOS=1: repositories may be fetched over unencrypted http:// and git://');
  if (config.repositoryAllow)
    weakenings.push(`ACIS_REPOSITORY_ALLOW: repositories may be fetched from these private destinations: ${config.repositoryAllow}`);
  if (config.egressAllow) weakenings.push(`ACIS_EGRESS_ALLOW: sandboxes may reach these private destinations: ${config.egressAllow}`);
  return weakenings;
}
