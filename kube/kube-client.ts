/**
 * The few API calls an operator makes, over @kubernetes/client-node: creating, patching and
 * deleting pods and Secrets, writing the status subresource of custom resources of one API group
 * and version (with the resourceVersion read, so a stale write is refused with 409), and recording
 * Events.
 */
import {
  BatchV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  type V1Job,
  type V1Pod,
  type V1Secret,
} from '@kubernetes/client-node';
import { httpStatus } from './kube-errors.js';

/** The metadata this client reads of an object it writes. */
interface ObjectMeta {
  name: string;
  namespace?: string;
  uid?: string;
  resourceVersion?: string;
}

/** The API group and version of the custom resources a client writes status for. */
export interface CustomResourceGroup {
  group: string;
  version: string;
}

export interface EventRecord {
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

export class KubeClient {
  readonly core: CoreV1Api;
  readonly custom: CustomObjectsApi;
  readonly coordination: CoordinationV1Api;
  readonly batch: BatchV1Api;
  private readonly objects: KubernetesObjectApi;

  constructor(
    kubeConfig: KubeConfig,
    private readonly reporter: { component: string; instance: string },
    private readonly customResources: CustomResourceGroup,
  ) {
    this.core = kubeConfig.makeApiClient(CoreV1Api);
    this.custom = kubeConfig.makeApiClient(CustomObjectsApi);
    this.coordination = kubeConfig.makeApiClient(CoordinationV1Api);
    this.batch = kubeConfig.makeApiClient(BatchV1Api);
    this.objects = KubernetesObjectApi.makeApiClient(kubeConfig);
  }

  listCustom<T>(namespace: string, plural: string): Promise<{ items: T[]; metadata?: { resourceVersion?: string } }> {
    return this.custom.listNamespacedCustomObject({ ...this.customResources, namespace, plural }) as Promise<{ items: T[] }>;
  }

  /** Creates an object; one that already exists (a retry after a lost answer) is not an error. */
  async createIfAbsent(object: V1Pod | V1Secret | V1Job): Promise<'created' | 'exists'> {
    try {
      await this.objects.create(object);
      return 'created';
    } catch (error) {
      if (httpStatus(error) === 409) return 'exists';
      throw error;
    }
  }

  /** A JSON merge patch; with `metadata.resourceVersion` in it, refused (409) if the object changed since. */
  async mergePatch(object: { apiVersion: string; kind: string; metadata: Record<string, unknown> }): Promise<void> {
    await this.objects.patch(object, undefined, undefined, this.reporter.component, undefined, PatchStrategy.MergePatch);
  }

  /**
   * Deletes an object at once; one already gone is not an error. With `ownGracePeriod`, a pod gets
   * its own `terminationGracePeriodSeconds` (and its preStop hook) instead.
   */
  async deleteIfPresent(
    apiVersion: string,
    kind: string,
    namespace: string,
    name: string,
    options: { ownGracePeriod?: boolean } = {},
  ): Promise<void> {
    const grace = options.ownGracePeriod ? undefined : 0;
    try {
      await this.objects.delete({ apiVersion, kind, metadata: { name, namespace } }, undefined, undefined, grace, undefined, 'Background');
    } catch (error) {
      if (httpStatus(error) !== 404) throw error;
    }
  }

  /** Writes the status subresource; returns the object as the server stored it. */
  async replaceStatus<T extends { apiVersion?: string; kind?: string; metadata: ObjectMeta; status?: unknown }>(
    plural: string,
    object: T,
  ): Promise<T> {
    return (await this.custom.replaceNamespacedCustomObjectStatus({
      ...this.customResources,
      namespace: object.metadata.namespace!,
      plural,
      name: object.metadata.name,
      body: object,
    })) as T;
  }

  async recordEvent(involved: { apiVersion: string; kind: string; metadata: ObjectMeta }, event: EventRecord): Promise<void> {
    const now = new Date();
    await this.core.createNamespacedEvent({
      namespace: involved.metadata.namespace!,
      body: {
        metadata: { generateName: `${involved.metadata.name}.`, namespace: involved.metadata.namespace },
        involvedObject: {
          apiVersion: involved.apiVersion,
          kind: involved.kind,
          name: involved.metadata.name,
          namespace: involved.metadata.namespace,
          uid: involved.metadata.uid,
          resourceVersion: involved.metadata.resourceVersion,
        },
        type: event.type,
        reason: event.reason,
        message: event.message,
        count: 1,
        firstTimestamp: now,
        lastTimestamp: now,
        source: { component: this.reporter.component },
        reportingComponent: this.reporter.component,
        reportingInstance: this.reporter.instance,
      },
    });
  }
}
