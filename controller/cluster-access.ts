/**
 * How every ACIS process finds its cluster: the namespace it works in (ACIS_K8S_NAMESPACE, else the
 * pod's own, else `default`) and its credentials (the KUBECONFIG file, else the pod's service account).
 * The controller and the API server (RepositorySync hand-over, the kubernetes sandbox provider) share it.
 */
import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';

const IN_CLUSTER_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

export function clusterNamespace(configured: string | undefined): string {
  if (configured) return configured;
  try {
    return readFileSync(IN_CLUSTER_NAMESPACE_FILE, 'utf8').trim() || 'default';
  } catch {
    return 'default';
  }
}

/** The kubeconfig file when one is given, else the in-cluster service account. */
export function loadKubeConfig(kubeconfigPath: string | undefined): KubeConfig {
  const kubeConfig = new KubeConfig();
  if (kubeconfigPath) kubeConfig.loadFromFile(kubeconfigPath);
  else kubeConfig.loadFromCluster();
  return kubeConfig;
}
