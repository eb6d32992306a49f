/**
 * The API server's side of the egress proxy: whose runs a proxy credential stands for (as the
 * sandbox provider says), the run's values it gets, and the in-process proxy itself. The standalone
 * proxy reaches the same answers through the resolve listener (resolve-server.ts).
 */
import type { Logger } from 'pino';
import type { DeploymentCa } from '../../egress-proxy/deployment-ca.js';
import { createEgressMetrics } from '../../egress-proxy/egress-metrics.js';
import { createEgressProxy, type EgressProxy, type ResolvedRun } from '../../egress-proxy/egress-proxy.js';
import { placeholderFor } from '../../egress-proxy/placeholder.js';
import { ProblemError } from '../core/problems.js';
import type { AppDeps } from '../deps.js';
import type { RunManager } from '../runs/run-manager.js';
import type { RunAbortSignals } from '../runs/run-aborts.js';
import type { EgressCredentials, SandboxProvider } from '../sandboxes/provider.js';
import { runForEgress } from '../secrets/secrets.service.js';

/**
 * Whose runs the egress proxy serves, as the provider says; a run missing a secret is ended here, or
 * on the replica hosting it through a NOTIFY (`aborts`, absent on the embedded database or with
 * runners only this process uses: one node only).
 */
export function egressCredentials(
  provider: SandboxProvider,
  runs: RunManager,
  aborts: RunAbortSignals | undefined,
  logger: Logger,
): EgressCredentials {
  return provider.egressCredentials({
    here: (runId, alias, destination) => {
      // The run's own record of the refusal (the proxy's log knows the runner, not the run).
      if (destination !== undefined) logger.warn({ run_id: runId, alias, destination }, 'secret destination denied: run ended');
      runs.abortRun(runId, secretRefusedAtEgress(alias, destination));
    },
    elsewhere: aborts && ((runId, alias, destination) => aborts.send({ runId, alias, destination })),
  });
}

/** Why the egress proxy ended a run: `alias` is vaulted nowhere, or (with `destination`) is bound elsewhere. */
export function secretRefusedAtEgress(alias: string, destination: string | undefined): ProblemError {
  if (destination !== undefined) {
    return new ProblemError('secret-destination-denied', 403, {
      detail:
        `The run sent ${placeholderFor(alias)} toward ${destination}, which is not among the allowed_hosts of ${alias}; ` +
        'the request was refused and nothing was sent.',
    });
  }
  return new ProblemError('missing-secret', 422, {
    detail: `The run sent ${placeholderFor(alias)} to the network, but no secret is vaulted under ${alias} at any scope; re-send the message with the secret attached.`,
  });
}

/** The values and request id of the run a runner's credential stands for now; undefined when it stands for none. */
export async function egressRun(
  deps: AppDeps,
  credentials: EgressCredentials,
  runnerId: string,
  token: string,
): Promise<ResolvedRun | undefined> {
  const runId = await credentials.egressRun(runnerId, token);
  return runId ? runForEgress(deps, runId) : undefined;
}

export function startEgressProxy(deps: AppDeps, credentials: EgressCredentials, ca: DeploymentCa, logger: Logger): Promise<EgressProxy> {
  return createEgressProxy({
    host: deps.config.egressListen.host,
    port: deps.config.egressListen.port,
    caDir: deps.config.deploymentCaDir,
    ca,
    allow: deps.config.egressAllow,
    runnerRateLimit: deps.config.egressRunnerRateLimit,
    extraCaPath: deps.config.egressExtraCaPath,
    logger: logger.child({ component: 'egress' }),
    // In-process, the proxy's metrics are served on the API server's /metrics.
    metrics: createEgressMetrics(deps.metrics.registry),
    // Runner pods share no socket with this process: their model calls come through the proxy, which
    // adds the platform's key there. Local runners use the model gateway, and the proxy knows no model.
    modelEndpoint:
      deps.config.sandboxProvider === 'kubernetes'
        ? { baseUrl: deps.config.anthropicBaseUrl, apiKey: deps.config.anthropicApiKey }
        : undefined,
    resolveRun: ({ runnerId, token }) => egressRun(deps, credentials, runnerId, token),
    onMissing: (runnerId, alias, _token, destination) => {
      credentials
        .abortMissing(runnerId, alias, destination)
        .catch((err: unknown) => logger.warn({ err, runner_id: runnerId }, 'ending a run for a missing secret failed'));
    },
    onRefused: (runnerId, _token, refusal) => credentials.refused?.(runnerId, refusal),
  });
}
