/**
 * `acis controller`: the controller process. Kubeconfig from KUBECONFIG (or ~/.kube/config), else
 * the pod's in-cluster service account. Stops on SIGINT/SIGTERM, releasing its Lease so a standby
 * replica takes over at once.
 */
import { pino } from 'pino';
import { ConnectionSharingKubeConfig } from '../kube/cluster-access.js';
import { type ControllerConfig, ControllerConfigError, loadControllerConfig } from './config.js';
import { startController } from './controller.js';

export async function runController(): Promise<number> {
  let config: ControllerConfig;
  try {
    config = loadControllerConfig();
  } catch (error) {
    if (error instanceof ControllerConfigError) {
      console.error(error.message);
      return 2;
    }
    throw error;
  }
  const logger = pino({ level: config.logLevel, base: { component: 'controller' } });
  const kubeConfig = new ConnectionSharingKubeConfig();
  kubeConfig.loadFromDefault();
  const controller = await startController({ config, kubeConfig, logger });
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    void (async () => {
      logger.info({ signal }, 'shutting down');
      await controller.stop();
      process.exit(0);
    })();
  };
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  return new Promise<number>(() => {});
}
