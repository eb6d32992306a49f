#!/usr/bin/env node
/**
 * The egress proxy on its own: `tsx egress-proxy/main.ts`. Reads its environment once (egress-config.ts),
 * takes runs from ACIS_EGRESS_RUNS_FILE, serves until SIGINT/SIGTERM; with ACIS_EGRESS_METRICS_PORT, also
 * serves its metrics there. A missing secret is logged: a standalone proxy has no run to abort, the
 * request itself is already refused.
 */
import { pino } from 'pino';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { loadEgressConfig } from './egress-config.js';
import { createEgressMetrics } from './egress-metrics.js';
import { createEgressProxy } from './egress-proxy.js';
import { serveMetrics } from './metrics-server.js';
import { createRunsFileResolver } from './runs-file.js';

async function main(): Promise<void> {
  const config = loadEgressConfig();
  const logger = pino({ level: config.logLevel, base: { service: 'acis-egress' } });
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
    allow: config.allow,
    extraCaPath: config.extraCaPath,
    logger,
    resolveRun: createRunsFileResolver(config.runsFile),
    onMissing: (runId, alias) => logger.warn({ run_id: runId, alias }, 'missing secret'),
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

main().catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
