import { DEFAULT_RUNNER_RATE_LIMIT, type RunnerRateLimit } from './runner-rate-limit.js';
import path from 'node:path';
import { z } from 'zod';
import { resolveTokenSetting, type ResolveTokenSetting } from './resolve-protocol.js';

/**
 * Environment of the standalone egress proxy (`egress-proxy/main.ts`). ACIS_DATA_DIR, ACIS_EGRESS_ALLOW and
 * ACIS_EGRESS_EXTRA_CA are the names the architecture fixes, ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY the API
 * server's; the rest are this entry point's own. Runs come from the API server's resolve listener
 * (ACIS_EGRESS_RESOLVE_URL with ACIS_EGRESS_RESOLVE_TOKEN or _FILE) or, in development, from a file
 * (ACIS_EGRESS_RUNS_FILE): exactly one of the two.
 */
const EnvSchema = z.object({
  ACIS_EGRESS_HOST: z.string().min(1).default('127.0.0.1'),
  ACIS_EGRESS_PORT: z.coerce.number().int().min(0).max(65535).default(8090),
  ACIS_DATA_DIR: z.string().min(1).default('./.data'),
  ACIS_EGRESS_ALLOW: z.string().optional(),
  ACIS_EGRESS_EXTRA_CA: z.string().min(1).optional(),
  ACIS_EGRESS_RUNNER_RATE: z.coerce.number().positive().max(100_000).default(DEFAULT_RUNNER_RATE_LIMIT.perSecond),
  ACIS_EGRESS_RUNNER_BURST: z.coerce.number().int().min(1).max(1_000_000).default(DEFAULT_RUNNER_RATE_LIMIT.burst),
  ACIS_EGRESS_RUNS_FILE: z.string().min(1, 'must name the JSON file of runs').optional(),
  ACIS_EGRESS_RESOLVE_URL: z
    .string()
    .url()
    .refine((url) => /^https:/.test(url), 'must be an https URL: the resolve listener speaks TLS only')
    .optional(),
  ANTHROPIC_BASE_URL: z
    .string()
    .url()
    .refine((url) => /^https?:/.test(url), 'must be an http(s) URL')
    .optional(),
  ANTHROPIC_API_KEY: z.string().min(1).optional(),
  ACIS_EGRESS_METRICS_PORT: z.coerce.number().int().min(0).max(65535).optional(),
  ACIS_METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
});

export interface EgressConfig {
  host: string;
  port: number;
  /** Where the deployment CA is kept: `$ACIS_DATA_DIR/egress-ca`. */
  caDir: string;
  allow: string | undefined;
  extraCaPath: string | undefined;
  /** Requests each runner may make (per second, and at once after a quiet spell); over it, 429. */
  runnerRateLimit: RunnerRateLimit;
  /** Where runs come from: the API server's resolve listener (the token read at start), or a file of runs. */
  runs: { source: 'api'; url: string; token: ResolveTokenSetting } | { source: 'file'; file: string };
  /** The platform's model endpoint and key, for runner pods' model calls; absent: no endpoint is special. */
  modelEndpoint: { baseUrl: string; apiKey: string | undefined } | undefined;
  /** Where `/metrics` is served (on `host`); absent: not served. */
  metricsPort: number | undefined;
  /** Bearer token `/metrics` requires; absent: open. */
  metricsToken: string | undefined;
  logLevel: string;
}

export function loadEgressConfig(env: NodeJS.ProcessEnv = process.env): EgressConfig {
  const parsed = EnvSchema.safeParse(env);
  // Every problem at once, so an operator fixes the environment in one go.
  const problems = parsed.success ? [] : parsed.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`);
  const token = resolveTokenSetting(env, 'ACIS_EGRESS_RESOLVE_TOKEN');
  if (typeof token === 'string') problems.push(token);
  const url = env.ACIS_EGRESS_RESOLVE_URL;
  const file = env.ACIS_EGRESS_RUNS_FILE;
  if (url && file) problems.push('ACIS_EGRESS_RESOLVE_URL and ACIS_EGRESS_RUNS_FILE are both set: runs come from one source');
  else if (!url && !file)
    problems.push('set ACIS_EGRESS_RESOLVE_URL (with ACIS_EGRESS_RESOLVE_TOKEN) or, in development, ACIS_EGRESS_RUNS_FILE');
  else if (url && !token) problems.push('ACIS_EGRESS_RESOLVE_URL needs ACIS_EGRESS_RESOLVE_TOKEN or ACIS_EGRESS_RESOLVE_TOKEN_FILE');
  if (!parsed.success || problems.length > 0) throw new Error(`invalid environment:\n${problems.map((line) => `  ${line}`).join('\n')}`);
  const e = parsed.data;
  return {
    host: e.ACIS_EGRESS_HOST,
    port: e.ACIS_EGRESS_PORT,
    caDir: path.resolve(e.ACIS_DATA_DIR, 'egress-ca'),
    allow: e.ACIS_EGRESS_ALLOW,
    extraCaPath: e.ACIS_EGRESS_EXTRA_CA ? path.resolve(e.ACIS_EGRESS_EXTRA_CA) : undefined,
    runnerRateLimit: { perSecond: e.ACIS_EGRESS_RUNNER_RATE, burst: e.ACIS_EGRESS_RUNNER_BURST },
    runs:
      e.ACIS_EGRESS_RESOLVE_URL && token && typeof token !== 'string'
        ? { source: 'api', url: e.ACIS_EGRESS_RESOLVE_URL, token }
        : { source: 'file', file: path.resolve(e.ACIS_EGRESS_RUNS_FILE!) },
    modelEndpoint: e.ANTHROPIC_BASE_URL ? { baseUrl: e.ANTHROPIC_BASE_URL, apiKey: e.ANTHROPIC_API_KEY } : undefined,
    metricsPort: e.ACIS_EGRESS_METRICS_PORT,
    metricsToken: e.ACIS_METRICS_TOKEN,
    logLevel: e.LOG_LEVEL,
  };
}
