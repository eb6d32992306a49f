/**
 * `acis serve`: the API server process. It serves until a signal, then shuts down within
 * ACIS_SHUTDOWN_GRACE_SECONDS, letting the runs in progress finish (see `serve`).
 */
import { loadConfig } from './config.js';
import { startServer } from './server.js';

/** A SIGINT this soon after the first signal is the same Ctrl-C, relayed, not a second one. */
const RELAYED_SIGINT_MS = 1000;

export async function serve(): Promise<number> {
  const config = loadConfig();
  const server = await startServer(config);
  const { logger } = server.deps;
  let firstSignalAt: number | undefined;
  // The first signal shuts down gracefully (Kubernetes sends SIGTERM on every rollout); a second one
  // exits at once. Runners die with this process (bwrap --die-with-parent) and the runs it leaves
  // in progress are failed by the next node to start or to see its heartbeat stop.
  const onSignal = (signal: NodeJS.Signals, code: number) => {
    if (firstSignalAt !== undefined) {
      // A terminal's Ctrl-C reaches this process directly and once more relayed by npm or tsx.
      if (signal === 'SIGINT' && Date.now() - firstSignalAt < RELAYED_SIGINT_MS) return;
      logger.warn({ signal }, 'second signal: exiting at once');
      logger.flush();
      process.exit(code);
    }
    firstSignalAt = Date.now();
    logger.info({ signal, grace_seconds: config.shutdownGraceSeconds }, 'shutting down: no new messages; runs in progress may finish');
    server.shutdown(config.shutdownGraceSeconds * 1000).then(
      () => {
        logger.info('shut down');
        logger.flush();
        process.exit(0);
      },
      (error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        logger.flush();
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', () => onSignal('SIGINT', 130));
  process.on('SIGTERM', () => onSignal('SIGTERM', 143));
  return new Promise<number>(() => {}); // serve until a signal
}
