/**
 * The API server's view of the namespace's runner pods: one label-selected watch (list, then watch,
 * as the controller keeps it), for the two steps of a claim that need not wait for the controller's
 * status write. A Sandbox's runner is known ready as soon as the pod it controls is (adopted from a
 * warm pool by the controller's patch, or started for it and passed the kubelet's probe), one write
 * before the status says so; and the tokens of a warm-pool pod are read while it waits in its pool
 * (its Secret by name, the same `get` a claim makes; never listed or watched), so a claim that adopts
 * it reads no Secret on its way to the runner. A token Secret is trusted only when the runner pod or
 * its Sandbox owns it (as the controller makes and hands it over): one that merely has the right name
 * is refused.
 */
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { LABELS, MANAGED_BY, RUNNER_COMPONENT, SANDBOX, type Sandbox, tokenSecretName } from '../../../controller/api/v1alpha1.js';
import { Informer, warnOnRestart } from '../../../kube/informer.js';
import { statusMessage } from '../../../kube/kube-errors.js';
import { isPodReady } from '../../../controller/api/pod-health.js';
import { type RunnerAddress, servingPod } from '../../../controller/api/sandbox-status.js';

const RUNNER_SELECTOR = `${LABELS.managedBy}=${MANAGED_BY},${LABELS.component}=${RUNNER_COMPONENT}`;

/** A runner's two credentials: the connection token and its egress password. */
export interface RunnerTokens {
  token: string;
  egressToken: string;
}

/** The tokens as read, with the uids of the Secret's owners (checked against the pod and Sandbox that use them). */
interface ReadTokens {
  tokens: RunnerTokens;
  secretName: string;
  ownerUids: string[];
}

export class RunnerPods {
  private readonly core: CoreV1Api;
  private readonly informer: Informer<V1Pod>;
  private readonly listeners = new Set<() => void>();
  /** Tokens read ahead for ready pool pods, by pod uid; dropped with the pod. */
  private readonly prefetched = new Map<string, Promise<ReadTokens>>();

  constructor(
    kubeConfig: KubeConfig,
    readonly namespace: string,
    private readonly logger: Logger,
    resyncMs: number,
  ) {
    this.core = kubeConfig.makeApiClient(CoreV1Api);
    this.informer = new Informer<V1Pod>({
      kubeConfig,
      path: `/api/v1/namespaces/${namespace}/pods`,
      labelSelector: RUNNER_SELECTOR,
      list: () => this.core.listNamespacedPod({ namespace, labelSelector: RUNNER_SELECTOR }),
      resyncMs,
      onEvent: (event, pod) => {
        const uid = pod.metadata?.uid;
        if (uid && event === 'delete') this.prefetched.delete(uid);
        else if (uid && pod.metadata?.labels?.[LABELS.pool] && isPodReady(pod) && !this.prefetched.has(uid))
          this.prefetch(uid, pod.metadata!.name!);
        for (const listener of this.listeners) listener();
      },
      onError: warnOnRestart(logger, 'pods'),
    });
  }

  start(): Promise<void> {
    return this.informer.start();
  }

  stop(): Promise<void> {
    this.listeners.clear();
    this.prefetched.clear();
    return this.informer.stop();
  }

  /** Told of every change the watch delivers; returns the unsubscribe. */
  subscribe(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The ready runner pod `sandbox` controls, as the cache shows it. */
  servingFor(sandbox: Sandbox): RunnerAddress | undefined {
    return servingPod(sandbox, this.informer.list(this.namespace));
  }

  /** The Sandbox controlling the runner pod of this name (its controller reference), as the cache shows it. */
  sandboxOf(podName: string): { name: string; uid: string } | undefined {
    const pod = this.informer.get(podName, this.namespace);
    const owner = pod?.metadata?.ownerReferences?.find((r) => r.controller && r.kind === SANDBOX.kind);
    return owner ? { name: owner.name, uid: owner.uid } : undefined;
  }

  /**
   * The runner's tokens: read ahead while it was a pool pod (read again if that read failed), else read
   * now from its Secret; refused unless the Secret belongs to the pod or to the Sandbox controlling it.
   */
  async tokens(address: RunnerAddress): Promise<RunnerTokens> {
    const trusted = (read: ReadTokens) => read.ownerUids.some((uid) => uid === address.podUid || uid === address.sandboxUid);
    const ahead = await this.prefetched.get(address.podUid)?.catch(() => undefined);
    // Read ahead before a hand-over the controller has made since (to the pod, then the Sandbox): read again.
    const read = ahead && trusted(ahead) ? ahead : await this.readTokens(address.tokenSecretName);
    if (!trusted(read)) {
      throw new Error(
        `Secret ${read.secretName} is owned by neither runner pod ${address.podName} nor its Sandbox: its tokens are not used`,
      );
    }
    return read.tokens;
  }

  private prefetch(uid: string, podName: string): void {
    const read = this.readTokens(tokenSecretName(podName));
    this.prefetched.set(uid, read);
    read.catch((error: unknown) => {
      // Read again on the pod's next event, or by a claim of it.
      if (this.prefetched.get(uid) === read) this.prefetched.delete(uid);
      this.logger.debug({ error: statusMessage(error), pod: podName }, 'reading a pool pod’s tokens ahead failed');
    });
  }

  /** From the Secret the controller made with the pod: keys `token` and `egress-token`. */
  private async readTokens(secretName: string): Promise<ReadTokens> {
    const secret = await this.core.readNamespacedSecret({ name: secretName, namespace: this.namespace });
    const [token, egressToken] = [secret.data?.token, secret.data?.['egress-token']];
    if (!token || !egressToken) throw new Error(`Secret ${secretName} lacks the runner's token or egress token`);
    return {
      tokens: { token: Buffer.from(token, 'base64').toString('utf8'), egressToken: Buffer.from(egressToken, 'base64').toString('utf8') },
      secretName,
      ownerUids: (secret.metadata?.ownerReferences ?? []).map((ref) => ref.uid),
    };
  }
}
