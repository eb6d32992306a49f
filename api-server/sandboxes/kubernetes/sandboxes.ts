/**
 * The API server's view of the cluster's Sandbox resources: one watch over the namespace (list,
 * then watch from the list's resourceVersion, re-listed on 410 and restarted on errors, see
 * kube/informer.ts) whose cache answers lookups, and whose events wake whoever waits for a
 * Sandbox to change, so nothing polls. Writes go straight to the API server; the cache catches up
 * through the watch. Beside it, the runner pods' watch (`pods`), started and stopped with it.
 */
import { CustomObjectsApi, type KubeConfig, KubernetesObjectApi, PatchStrategy } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { GROUP, LABELS, SANDBOX, type Sandbox, type SandboxSpec, VERSION } from '../../../controller/api/v1alpha1.js';
import { hostname } from 'node:os';
import { EventAggregator } from '../../../kube/event-aggregator.js';
import { Informer, type InformerEvent, warnOnRestart } from '../../../kube/informer.js';
import { httpStatus } from '../../../kube/kube-errors.js';
import { RunnerPods } from './runner-pods.js';

/** A missed event costs at most this long (the watch itself delivers changes at once). */
const RESYNC_MS = 60_000;
const FIELD_MANAGER = 'acis-api-server';
/** Status writes by the controller can race a spec patch; a few rounds settle it. */
const PATCH_ATTEMPTS = 5;

export type SandboxListener = (event: InformerEvent, sandbox: Sandbox) => void;

export class SandboxClient {
  private readonly custom: CustomObjectsApi;
  private readonly objects: KubernetesObjectApi;
  private readonly informer: Informer<Sandbox>;
  readonly pods: RunnerPods;
  /** Events on Sandboxes whose cause an untrusted runner can repeat (its egress refusals): aggregated. */
  readonly events: EventAggregator;
  private readonly listeners = new Set<SandboxListener>();
  /** Sandboxes this process deleted that the watch has not shown gone yet: the cache hides them (read your own writes). */
  private readonly deleting = new Set<string>();

  constructor(
    kubeConfig: KubeConfig,
    readonly namespace: string,
    logger: Logger,
  ) {
    this.custom = kubeConfig.makeApiClient(CustomObjectsApi);
    this.pods = new RunnerPods(kubeConfig, namespace, logger, RESYNC_MS);
    this.events = new EventAggregator(kubeConfig, {
      reporter: { component: FIELD_MANAGER, instance: hostname() },
      onError: (error) => logger.warn({ err: error }, 'recording an event on a Sandbox failed'),
    });
    this.objects = KubernetesObjectApi.makeApiClient(kubeConfig);
    this.informer = new Informer<Sandbox>({
      kubeConfig,
      path: `/apis/${GROUP}/${VERSION}/namespaces/${namespace}/${SANDBOX.plural}`,
      list: () => this.custom.listNamespacedCustomObject({ group: GROUP, version: VERSION, namespace, plural: SANDBOX.plural }),
      resyncMs: RESYNC_MS,
      onEvent: (event, sandbox) => {
        if (event === 'delete') this.deleting.delete(sandbox.metadata.uid!);
        for (const listener of this.listeners) listener(event, sandbox);
      },
      onError: warnOnRestart(logger, SANDBOX.plural),
    });
  }

  /** Resolves once the first lists are in the caches. */
  async start(): Promise<void> {
    await Promise.all([this.informer.start(), this.pods.start()]);
  }

  async stop(): Promise<void> {
    this.listeners.clear();
    await Promise.all([this.informer.stop(), this.pods.stop(), this.events.close()]);
  }

  /** Sees every change the watch delivers; returns the unsubscribe. */
  subscribe(listener: SandboxListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  cached(name: string): Sandbox | undefined {
    const sandbox = this.informer.get(name, this.namespace);
    return sandbox && !this.deleting.has(sandbox.metadata.uid!) ? sandbox : undefined;
  }

  cachedAll(): Sandbox[] {
    return this.informer.list(this.namespace).filter((s) => !this.deleting.has(s.metadata.uid!));
  }

  /** The conversation's Sandbox in the cache, by its label (any replica's). */
  cachedForConversation(conversationId: string): Sandbox | undefined {
    return this.cachedAll().find((s) => s.metadata.labels?.[LABELS.conversation] === conversationId);
  }

  /** Creates it; one of that name already there (another replica's) is read and answered instead. */
  async createOrGet(sandbox: Sandbox): Promise<{ sandbox: Sandbox; created: boolean }> {
    try {
      const created = (await this.custom.createNamespacedCustomObject({ ...this.collection(), body: sandbox })) as Sandbox;
      return { sandbox: created, created: true };
    } catch (error) {
      if (httpStatus(error) !== 409) throw error;
      const existing = await this.read(sandbox.metadata.name);
      if (!existing) throw error;
      return { sandbox: existing, created: false };
    }
  }

  async read(name: string): Promise<Sandbox | undefined> {
    try {
      return (await this.custom.getNamespacedCustomObject({ ...this.collection(), name })) as Sandbox;
    } catch (error) {
      if (httpStatus(error) === 404) return undefined;
      throw error;
    }
  }

  /**
   * A merge patch of the spec, only on the Sandbox with this uid (a newer one of the same name is left
   * alone): read, then patch at that resourceVersion, again when the controller wrote in between (409).
   * Answers whether it was written.
   */
  async patchSpec(sandbox: Sandbox, spec: Partial<SandboxSpec>): Promise<boolean> {
    for (let attempt = 1; ; attempt++) {
      const current = await this.read(sandbox.metadata.name);
      if (!current || current.metadata.uid !== sandbox.metadata.uid) return false;
      const metadata = { name: sandbox.metadata.name, namespace: this.namespace, resourceVersion: current.metadata.resourceVersion };
      try {
        await this.objects.patch(
          { apiVersion: sandbox.apiVersion, kind: sandbox.kind, metadata, spec } as never,
          undefined,
          undefined,
          FIELD_MANAGER,
          undefined,
          PatchStrategy.MergePatch,
        );
        return true;
      } catch (error) {
        if (httpStatus(error) !== 409 || attempt >= PATCH_ATTEMPTS) throw error;
      }
    }
  }

  /** Deletes this very Sandbox (by uid); its pod and token Secret go with it (owner references). Gone already is fine. */
  async delete(sandbox: Sandbox): Promise<void> {
    this.deleting.add(sandbox.metadata.uid!);
    try {
      await this.custom.deleteNamespacedCustomObject({
        ...this.collection(),
        name: sandbox.metadata.name,
        propagationPolicy: 'Background',
        body: { preconditions: { uid: sandbox.metadata.uid } },
      });
    } catch (error) {
      // 404: gone; 409: the name holds a newer Sandbox (the precondition failed), which is not ours to delete.
      if (httpStatus(error) === 404 || httpStatus(error) === 409) return;
      this.deleting.delete(sandbox.metadata.uid!);
      throw error;
    }
  }

  /** Resolves once the watch shows `sandbox` gone from the cluster (its name free for a new one). */
  whenGone(sandbox: Sandbox): Promise<void> {
    const present = () => this.informer.get(sandbox.metadata.name, this.namespace)?.metadata.uid === sandbox.metadata.uid;
    return new Promise((resolve) => {
      if (!present()) return resolve();
      const unsubscribe = this.subscribe(() => {
        if (present()) return;
        unsubscribe();
        resolve();
      });
    });
  }

  private collection() {
    return { group: GROUP, version: VERSION, namespace: this.namespace, plural: SANDBOX.plural };
  }
}
