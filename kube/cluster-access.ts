/**
 * How every ACIS process finds its cluster: the namespace it works in (ACIS_K8S_NAMESPACE, else the
 * pod's own, else `default`) and its credentials (the KUBECONFIG file, else the pod's service account).
 * The controller and the API server (RepositorySync hand-over, the kubernetes sandbox provider) share it.
 */
import { readFileSync } from 'node:fs';
import type https from 'node:https';
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
 * How long a shared connection to the API may stay idle before this side closes it: under
 * kube-apiserver's own idle timeout (90 s). kube-apiserver (Go's net/http) announces no
 * `Keep-Alive: timeout` in its answers, so undici would keep an idle connection its default 4 s only,
 * and a process quiet for longer (a controller between claims) would open a new connection and TLS
 * handshake for its next request, on the claim's path.
 */
export const API_KEEP_ALIVE_MS = 60_000;

/**
 * A KubeConfig whose API clients share their connections, and keep them through quiet spells.
 * client-node (2.0) gives every request a dispatcher of its own whenever the cluster has TLS
 * settings (a CA, a client certificate, or skip-verify: every real cluster and the in-cluster
 * service account), so each request opened a new TCP connection and, on a cluster, a new TLS
 * handshake. This makes one dispatcher for the current cluster and user, with the TLS settings
 * client-node derives and `API_KEEP_ALIVE_MS`, and hands it to every request, as client-node itself
 * does for its watch agents; like those, it holds the TLS settings it was made with (a bearer
 * token still comes fresh with each request). A cluster reached through a proxy keeps client-node's
 * own dispatcher, shared the same way.
 */
export class ConnectionSharingKubeConfig extends KubeConfig {
  private readonly dispatchers = new Map<string, Promise<Dispatcher>>();

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    await super.applySecurityAuthentication(context);
    const made = context.getDispatcher();
    if (!made) return;
    const key = JSON.stringify([this.getCurrentCluster()?.name ?? '', this.getCurrentUser()?.name ?? '']);
    let shared = this.dispatchers.get(key);
    if (!shared) {
      shared = this.keptAlive(made);
      this.dispatchers.set(key, shared);
      // A failure (the credentials could not be read just then) is this request's; the next tries again.
      shared.catch(() => this.dispatchers.delete(key));
    }
    const dispatcher = await shared;
    context.setDispatcher(dispatcher);
    // Made for this request and never used: it holds no connection.
    if (dispatcher !== made) void made.close();
  }

  /** A dispatcher like `made` (client-node's, for this request), keeping idle connections `API_KEEP_ALIVE_MS`. */
  private async keptAlive(made: Dispatcher): Promise<Dispatcher> {
    const tls: https.RequestOptions = {};
    await this.applyToHTTPSOptions(tls);
    const options = this.createDispatcherOptions(this.getCurrentCluster(), {
      ca: tls.ca,
      cert: tls.cert,
      key: tls.key,
      pfx: tls.pfx,
      passphrase: tls.passphrase,
      ...(tls.rejectUnauthorized !== undefined && { rejectUnauthorized: tls.rejectUnauthorized }),
      ...(tls.servername !== undefined && { servername: tls.servername }),
    });
    if (options.type !== 'agent') return made;
    // The Agent class of the undici client-node's fetch runs on (so the two always match), with only
    // the keep-alive changed from what client-node builds.
    const Agent = made.constructor as new (options: {
      connect: unknown;
      keepAliveTimeout: number;
      keepAliveMaxTimeout: number;
    }) => Dispatcher;
    return new Agent({ connect: options.connect, keepAliveTimeout: API_KEEP_ALIVE_MS, keepAliveMaxTimeout: API_KEEP_ALIVE_MS });
  }
}

/** The kubeconfig file when one is given, else the in-cluster service account. */
export function loadKubeConfig(kubeconfigPath: string | undefined): KubeConfig {
  const kubeConfig = new ConnectionSharingKubeConfig();
  if (kubeconfigPath) kubeConfig.loadFromFile(kubeconfigPath);
  else kubeConfig.loadFromCluster();
  return kubeConfig;
}
