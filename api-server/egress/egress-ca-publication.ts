/**
 * Publishes the egress proxy's CA certificate (never its key) in a ConfigMap, key `ca.crt`, which the
 * controller mounts into runner pods (its ACIS_EGRESS_CA_CONFIGMAP), so pods trust the leaves the proxy
 * presents. Every replica publishes at start: replicas sharing one CA write the same bytes and nothing
 * changes; a replica with another CA replaces it and says so, since pods then distrust the others'
 * leaves (the chart refuses more than one proxy without a shared CA Secret).
 */
import { CoreV1Api, type KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { httpStatus } from '../../kube/kube-errors.js';

export const CA_CONFIGMAP_KEY = 'ca.crt';
const PUBLISH_ATTEMPTS = 5;

export async function publishEgressCa(options: {
  kubeConfig: KubeConfig;
  namespace: string;
  name: string;
  certificatePem: string;
  logger: Logger;
}): Promise<void> {
  const core = options.kubeConfig.makeApiClient(CoreV1Api);
  const { namespace, name, certificatePem, logger } = options;
  for (let attempt = 1; ; attempt++) {
    try {
      const existing = await readConfigMap(core, namespace, name);
      if (!existing) {
        await core.createNamespacedConfigMap({ namespace, body: caConfigMap(name, certificatePem) });
        logger.info({ configmap: name }, 'egress proxy CA published for runner pods');
        return;
      }
      if (existing.data?.[CA_CONFIGMAP_KEY] === certificatePem) return;
      logger.warn(
        { configmap: name },
        'the published egress proxy CA differs from this replica’s: replacing it (runner pods trust one CA; replicas must share it)',
      );
      // Replaced at the resourceVersion read: a concurrent writer makes this a 409 and another round.
      await core.replaceNamespacedConfigMap({
        namespace,
        name,
        body: { ...caConfigMap(name, certificatePem), metadata: { ...existing.metadata, name } },
      });
      return;
    } catch (err) {
      const status = httpStatus(err);
      if ((status !== 409 && status !== 404) || attempt >= PUBLISH_ATTEMPTS) throw err;
    }
  }
}

async function readConfigMap(core: CoreV1Api, namespace: string, name: string): Promise<V1ConfigMap | undefined> {
  try {
    return await core.readNamespacedConfigMap({ namespace, name });
  } catch (err) {
    if (httpStatus(err) === 404) return undefined;
    throw err;
  }
}

function caConfigMap(name: string, certificatePem: string): V1ConfigMap {
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, labels: { 'app.kubernetes.io/component': 'egress-ca', 'app.kubernetes.io/managed-by': 'acis-api-server' } },
    data: { [CA_CONFIGMAP_KEY]: certificatePem },
  };
}
