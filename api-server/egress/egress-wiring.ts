/**
 * The API server's side of the egress proxy: whose runs a proxy credential stands for, the run's
 * values it gets, and the in-process proxy itself. The standalone proxy reaches the same answers
 * through the resolve listener (resolve-server.ts).
 */
import path from 'node:path';
import type { Logger } from 'pino';
import { createEgressMetrics } from '../../egress-proxy/egress-metrics.js';
import { createEgressProxy, type EgressProxy, type RunSecrets } from '../../egress-proxy/egress-proxy.js';
import type { Db } from '../core/db/database.js';
import { ProblemError } from '../core/problems.js';
import type { AppDeps } from '../deps.js';
import type { RunManager } from '../runs/run-manager.js';
import type { KubernetesSandboxProvider } from '../sandboxes/kubernetes/provider.js';
import { egressRunOf, runOfRunner } from '../sandboxes/kubernetes/records.js';
import type { RunAbortSignals } from '../runs/run-aborts.js';
import { LocalSandboxProvider } from '../sandboxes/local/provider.js';
import { secretsForRun } from '../secrets/secrets.service.js';
import type { EgressRunners } from './egress-runners.js';

/**
 * Whose runs the egress proxy serves: the local provider's runners are this process's alone; a runner
 * pod's request may reach the proxy of any replica (or a standalone proxy asking any replica), so
 * beyond this process's own runners its credential is looked up in the records every replica writes,
 * and its run is ended on the replica hosting it through a NOTIFY (`aborts`, absent on the embedded
 * database: one node only).
 */
export function egressRunners(
  db: Db,
  provider: LocalSandboxProvider | KubernetesSandboxProvider,
  runs: RunManager,
  aborts: RunAbortSignals | undefined,
): EgressRunners {
  const abortHere = (runId: string, alias: string) => runs.abortRun(runId, missingSecretAtEgress(alias));
  if (provider instanceof LocalSandboxProvider) {
    return {
      egressRun: (runnerId, token) => provider.egressRun(runnerId, token),
      abortMissing: async (runnerId, alias) => {
        const runId = provider.currentRun(runnerId);
        if (runId) abortHere(runId, alias);
      },
    };
  }
  return {
    egressRun: async (runnerId, token) => provider.egressRun(runnerId, token) ?? egressRunOf(db, runnerId, token),
    abortMissing: async (runnerId, alias) => {
      const here = provider.currentRun(runnerId);
      if (here) return void abortHere(here, alias);
      const runId = await runOfRunner(db, runnerId);
      if (runId) await aborts?.send({ runId, alias });
    },
  };
}

export function missingSecretAtEgress(alias: string): ProblemError {
  return new ProblemError('missing-secret', 422, {
    detail: `The run sent {{secret:${alias}}} to the network, but no secret is vaulted under ${alias} at any scope; re-send the message with the secret attached.`,
  });
}

/** The values of the run a runner's credential stands for now; undefined when it stands for none. */
export async function egressSecrets(deps: AppDeps, runners: EgressRunners, runnerId: string, token: string): Promise<RunSecrets | undefined> {
  const runId = await runners.egressRun(runnerId, token);
  return runId ? secretsForRun(deps, runId) : undefined;
}

export function startEgressProxy(deps: AppDeps, runners: EgressRunners, logger: Logger): Promise<EgressProxy> {
  return createEgressProxy({
    host: deps.config.egressListen.host,
    port: deps.config.egressListen.port,
    caDir: path.join(deps.config.dataDir, 'egress-ca'),
    allow: deps.config.egressAllow,
    extraCaPath: deps.config.egressExtraCaPath,
    logger: logger.child({ component: 'egress' }),
    // In-process, the proxy's metrics are served on the API server's /metrics.
    metrics: createEgressMetrics(deps.metrics.registry),
    // Runner pods share no socket with this process: their model calls come through the proxy, which
    // adds the platform's key there. Local runners use the model gateway, and the proxy knows no model.
    modelEndpoint:
      deps.config.sandboxProvider === 'kubernetes' ? { baseUrl: deps.config.anthropicBaseUrl, apiKey: deps.config.anthropicApiKey } : undefined,
    resolveRun: ({ runnerId, token }) => egressSecrets(deps, runners, runnerId, token),
    onMissing: (runnerId, alias) => {
      runners.abortMissing(runnerId, alias).catch((err: unknown) => logger.warn({ err, runner_id: runnerId }, 'ending a run for a missing secret failed'));
    },
  });
}
