import path from 'node:path';
import { z } from 'zod';

/**
 * Environment of the standalone egress proxy (`egress-proxy/main.ts`). ACIS_DATA_DIR, ACIS_EGRESS_ALLOW and
 * ACIS_EGRESS_EXTRA_CA are the names the architecture fixes, ANTHROPIC_BASE_URL and ANTHROPIC_API_KEY the API
 * server's; the rest are this entry point's own.
 */
const EnvSchema = z.object({
  ACIS_EGRESS_HOST: z.string().min(1).default('127.0.0.1'),
  ACIS_EGRESS_PORT: z.coerce.number().int().min(0).max(65535).default(8090),
  ACIS_DATA_DIR: z.string().min(1).default('./.data'),
  ACIS_EGRESS_ALLOW: z.string().optional(),
  ACIS_EGRESS_EXTRA_CA: z.string().min(1).optional(),
  ACIS_EGRESS_RUNS_FILE: z.string().min(1, 'must name the JSON file of runs'),
  ANTHROPIC_BASE_URL: z.string().url().refine((url) => /^https?:/.test(url), 'must be an http(s) URL').optional(),
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
  runsFile: string;
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
  if (!parsed.success) {
    // Every problem at once, so an operator fixes the environment in one go.
    const lines = parsed.error.issues.map((issue) => `  ${issue.path.join('.')}: ${issue.message}`);
    throw new Error(`invalid environment:\n${lines.join('\n')}`);
  }
  const e = parsed.data;
  return {
    host: e.ACIS_EGRESS_HOST,
    port: e.ACIS_EGRESS_PORT,
    caDir: path.resolve(e.ACIS_DATA_DIR, 'egress-ca'),
    allow: e.ACIS_EGRESS_ALLOW,
    extraCaPath: e.ACIS_EGRESS_EXTRA_CA ? path.resolve(e.ACIS_EGRESS_EXTRA_CA) : undefined,
    runsFile: path.resolve(e.ACIS_EGRESS_RUNS_FILE),
    modelEndpoint: e.ANTHROPIC_BASE_URL ? { baseUrl: e.ANTHROPIC_BASE_URL, apiKey: e.ANTHROPIC_API_KEY } : undefined,
    metricsPort: e.ACIS_EGRESS_METRICS_PORT,
    metricsToken: e.ACIS_METRICS_TOKEN,
    logLevel: e.LOG_LEVEL,
  };
}
