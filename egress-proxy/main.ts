#!/usr/bin/env node
/**
 * The egress proxy on its own: `tsx egress-proxy/main.ts`. Reads its environment once (egress-config.ts),
 * takes runs from the API server's resolve listener (ACIS_EGRESS_RESOLVE_URL), or in development from
 * ACIS_EGRESS_RUNS_FILE, serves until SIGINT/SIGTERM; with ACIS_EGRESS_METRICS_PORT, also serves its
 * metrics there. A missing secret ends the run through the API server; from a runs file there is no run
 * to end, and it is only logged (the request itself is already refused).
 */
import { type Logger, pino } from 'pino';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { type EgressConfig, loadEgressConfig } from './egress-config.js';
import { createEgressMetrics } from './egress-metrics.js';
import { createEgressProxy, type EgressProxyOptions } from './egress-proxy.js';
import { serveMetrics } from './metrics-server.js';
import { type DeploymentCa, loadOrCreateDeploymentCa } from './deployment-ca.js';
import { createApiRunResolver, type ResolveClientTls } from './resolve-client.js';
import { EGRESS_PROXY_NAME, readResolveToken } from './resolve-protocol.js';
import { createRunsFileResolver } from './runs-file.js';

async function main(): Promise<void> {
  const config = loadEgressConfig();
  const logger = pino({ level: config.logLevel, base: { service: 'acis-egress' } });
  // One load of the CA: the proxy presents its leaves, and takes its own client certificate from it.
  const ca = await loadOrCreateDeploymentCa(config.caDir);
  const runs = await runSource(config, ca, logger);
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'acis_egress_' });
  // Metrics first: the proxy port answering (the readiness probe) then means everything is up.
  const metricsServer =
    config.metricsPort === undefined
      ? undefined
      : await serveMetrics(registry, { host: config.host, port: config.metricsPort, token: config.metricsToken });
  const proxy = await createEgressProxy({
    host: config.host,
    port: config.port,
    caDir: config.caDir,
    ca,
    allow: config.allow,
    runnerRateLimit: config.runnerRateLimit,
    extraCaPath: config.extraCaPath,
    logger,
    resolveRun: runs.resolveRun,
    onMissing: runs.onMissing,
    onRefused: runs.onRefused,
    metrics: createEgressMetrics(registry),
    modelEndpoint: config.modelEndpoint,
  });
  if (metricsServer) logger.info({ port: metricsServer.port }, 'metrics served on /metrics');
  logger.info({ ca_certificate: `${config.caDir}/ca.crt` }, 'runners must trust this CA');
  const shutdown = (signal: string) => {
    logger.info({ signal }, 'shutting down');
    void Promise.all([proxy.close(), metricsServer?.close()]).then(() => process.exit(0));
  };
  process.once('SIGINT', () => shutdown('SIGINT'));
  process.once('SIGTERM', () => shutdown('SIGTERM'));
}

async function runSource(
  config: EgressConfig,
  ca: DeploymentCa,
  logger: Logger,
): Promise<Pick<EgressProxyOptions, 'resolveRun' | 'onMissing' | 'onRefused'>> {
  if (config.runs.source === 'file') {
    return {
      resolveRun: createRunsFileResolver(config.runs.file),
      onMissing: (runnerId, alias) => logger.warn({ runner_id: runnerId, alias }, 'missing secret'),
    };
  }
  const api = createApiRunResolver(config.runs.url, await readResolveToken(config.runs.token), await resolveClientTls(ca));
  logger.info({ resolve_url: config.runs.url }, 'runs resolved by the API server');
  return {
    resolveRun: api.resolveRun,
    onMissing: (runnerId, alias, token, destination) => {
      api
        .reportMissing({ runnerId, token }, alias, destination)
        .catch((err: unknown) =>
          logger.warn(
            { runner_id: runnerId, err: err instanceof Error ? err.message : String(err) },
            'ending a run for a missing secret failed',
          ),
        );
    },
    onRefused: (runnerId, token, refusal) => {
      api
        .reportRefused({ runnerId, token }, refusal)
        .catch((err: unknown) =>
          logger.warn({ runner_id: runnerId, err: err instanceof Error ? err.message : String(err) }, 'reporting a refusal failed'),
        );
    },
  };
}

/**
 * The proxy's certificate for the resolve listener, made from the CA key it holds. Valid a year: it lives
 * in this process's memory only, and a restart makes another.
 */
async function resolveClientTls(ca: DeploymentCa): Promise<ResolveClientTls> {
  const leaf = await ca.issueIdentity({ commonName: EGRESS_PROXY_NAME, usages: ['client'], validityMs: 365 * 86_400_000 });
  return { ca: ca.certPem, cert: `${leaf.certPem}\n${ca.certPem}`, key: leaf.keyPem };
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
