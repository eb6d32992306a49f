/**
 * How every ACIS process finds its cluster: the namespace it works in (ACIS_K8S_NAMESPACE, else the
 * pod's own, else `default`) and its credentials (the KUBECONFIG file, else the pod's service account).
 * The controller and the API server (RepositorySync hand-over, the kubernetes sandbox provider) share it.
 */
import { readFileSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';

type RequestContext = Parameters<KubeConfig['applySecurityAuthentication']>[0];
type Dispatcher = NonNullable<ReturnType<RequestContext['getDispatcher']>>;

const IN_CLUSTER_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';

export function clusterNamespace(configured: string | undefined): string {
  if (configured) return configured;
  try {
    return readFileSync(IN_CLUSTER_NAMESPACE_FILE, 'utf8').trim() || 'default';
  } catch {
    return 'default';
  }
}

/**
 * A KubeConfig whose API clients share their connections. client-node (2.0) gives every request a
 * dispatcher of its own whenever the cluster has TLS settings (a CA, a client certificate, or
 * skip-verify: every real cluster and the in-cluster service account), so each request opened a
 * new TCP connection and, on a cluster, a new TLS handshake. This keeps the first dispatcher made
 * for the current cluster and user and hands it to every later request, as client-node itself
 * does for its watch agents; like those, it holds the TLS settings it was made with (a bearer
 * token still comes fresh with each request).
 */
export class ConnectionSharingKubeConfig extends KubeConfig {
  private readonly dispatchers = new Map<string, Dispatcher>();

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    await super.applySecurityAuthentication(context);
    const made = context.getDispatcher();
    if (!made) return;
    const key = JSON.stringify([this.getCurrentCluster()?.name ?? '', this.getCurrentUser()?.name ?? '']);
    const shared = this.dispatchers.get(key);
    if (!shared) {
      this.dispatchers.set(key, made);
      return;
    }
    context.setDispatcher(shared);
    // Made for this request and never used: it holds no connection.
    void made.close();
  }
}

/** The kubeconfig file when one is given, else the in-cluster service account. */
export function loadKubeConfig(kubeconfigPath: string | undefined): KubeConfig {
  const kubeConfig = new ConnectionSharingKubeConfig();
  if (kubeconfigPath) kubeConfig.loadFromFile(kubeconfigPath);
  else kubeConfig.loadFromCluster();
  return kubeConfig;
}
