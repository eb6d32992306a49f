/**
 * A runner in a pod, reached over TLS through the resumable link (runner/link-client.ts): the API
 * server's certificate and a proof of the per-sandbox token authenticate this side, the runner's proof
 * of the same token authenticates the runner, a dropped connection is restored within
 * `reconnectSeconds` without losing or repeating a line, and a runner that cannot be reached again
 * ends (a turn in progress ends `crashed`). Another replica can take the link over mid-turn when this
 * one dies (`takeoverAfter`). Killing it tells the runner to exit; deleting its pod is
 * the provider's business.
 */
import type { Logger } from 'pino';
import { DEFAULT_RECONNECT_SECONDS } from '../../runner/runner-config.js';
import { LinkRefused, openLinkClient } from '../../runner/link-client.js';
import { ChannelRunner } from './channel-runner.js';
import { DEFAULT_RUNNER_BOUNDS, type Runner, type RunnerBounds } from './runner.js';

export { LinkRefused as RunnerRefused };

export interface RemoteRunnerOptions {
  /** The runner's id in this API server (logs, egress): the Sandbox's name, say. */
  id: string;
  host: string;
  port: number;
  /** The per-sandbox token (never logged, never sent: the link carries proofs of it). */
  token: string;
  /** The API server's certificate of the deployment CA, which the runner requires of its client. */
  clientCertificate: () => { cert: string; key: string };
  logger: Logger;
  /** How long a dropped connection may take to come back (default 30, as ACIS_RUNNER_RECONNECT_SECONDS). */
  reconnectSeconds?: number;
  /** Take over the runner's link mid-turn (its replica died), resuming after this runner line (see `continueTurn`). */
  takeoverAfter?: number | undefined;
  /** What the runner can make this side hold before it is dropped. */
  bounds?: RunnerBounds;
}

/**
 * Connects, authenticates and waits until the runner says it is up. Rejects with `RunnerRefused` when
 * the runner refuses (wrong token, another API connection live, ...), or with the connection error.
 */
export async function connectRemoteRunner(options: RemoteRunnerOptions): Promise<Runner> {
  const { id, logger } = options;
  const bounds = options.bounds ?? DEFAULT_RUNNER_BOUNDS;
  const channel = await openLinkClient({
    host: options.host,
    port: options.port,
    token: options.token,
    clientCertificate: options.clientCertificate,
    reconnectSeconds: options.reconnectSeconds ?? DEFAULT_RECONNECT_SECONDS,
    takeoverAfter: options.takeoverAfter,
    bounds: { maxLineBytes: bounds.maxLineBytes, maxUnreadBytes: bounds.maxBufferedBytes },
    onEvent: (event) => {
      if (event.kind === 'lost') logger.warn({ runner_id: id, reason: event.reason }, 'connection to the runner lost; reconnecting');
      else logger.info({ runner_id: id }, 'connection to the runner restored');
    },
  });
  // The runner keeps each line until this side has stored what came of it (a turn's lines, see ChannelRunner.settle).
  const runner = new ChannelRunner(id, channel, logger, () => channel.close('the runner was stopped'), {
    settling: channel,
    resuming: options.takeoverAfter !== undefined,
    bounds,
  });
  channel.onClosed((reason) => runner.end(reason));
  await runner.ready;
  return runner;
}
