/**
 * The API's verbs on objects, shared by the HTTP layer, the garbage collector and the simulated
 * kubelet: create (generateName, uid, creationTimestamp, generation), get, list (selectors,
 * limit/continue), update and patch (optimistic concurrency on resourceVersion, generation bumped
 * only when something outside metadata and status changed, status kept apart from the main
 * resource when the kind has a status subresource), delete (finalizers and deletionTimestamp,
 * graceful pod deletion, propagation policies), and the scale subresource.
 *
 * Tests address resources as kubectl does (`pods`, `sbx`, `leases.coordination.k8s.io`).
 */
import { randomUUID } from 'node:crypto';
import { parse as parseYaml } from 'yaml';
import { alreadyExists, badRequest, conflict, gone, invalid, KubeStatusError, notFound, unsupportedMediaType } from './errors.js';
import { applyKindDefaults } from './defaults.js';
import { builtInType, schemaType } from './field-schema.js';
import { applyConfiguration, IN_PROCESS_MANAGER, recordUpdate, type Writer } from './managed-fields.js';
import type { PodLogProvider } from './pod-report.js';
import { jsonPatch, mergePatch, strategicMergePatch } from './patch.js';
import { ALL_POD_ADMISSION, mutatePod, validatePodAdmission, warnWorkload, type PodAdmission } from './pod-admission.js';
import { podReport } from './pod-report.js';
import { validatePodSpec } from './pod-validation.js';
import { admitQuota } from './quota.js';
import { apiVersionOf, crdTypes, type CrdObject, type ResourceRegistry, type ResourceType } from './resources.js';
import { pruneAndDefault, validateAgainstSchema } from './schema-validation.js';
import { parseFieldSelector, parseLabelSelector } from './selectors.js';
import type { KubeObject, ObjectStore, StoreChange } from './store.js';
import { validateMetadata, validatePod, validatePodUpdate } from './validation.js';

export type TypeRef = ResourceType | string;

export interface WriteOptions {
  dryRun?: boolean;
  /** `Strict` refuses unknown fields of custom resources instead of pruning them. */
  fieldValidation?: string;
  /** Where admission's warnings go (the response's `Warning` headers). */
  warnings?: string[];
  /** Who writes (managed-fields.ts): `?fieldManager=` or the user agent's; in-process writes are IN_PROCESS_MANAGER's. */
  fieldManager?: string;
}

/** A write through a subresource: `status` writes only status; `scale` is the main resource's replicas, owned as `scale`'s. */
export type Subresource = 'status' | 'scale';

/** A write whose managed fields server-side apply has already computed. */
type InternalWrite = WriteOptions & { subresource?: Subresource; applied?: boolean };

export interface ListOptions {
  labelSelector?: string;
  fieldSelector?: string;
  limit?: number;
  continue?: string;
}

export interface DeleteOptions extends WriteOptions {
  propagationPolicy?: 'Background' | 'Foreground' | 'Orphan';
  gracePeriodSeconds?: number;
  preconditions?: { uid?: string; resourceVersion?: string };
}

export interface ListResult {
  apiVersion: string;
  kind: string;
  metadata: { resourceVersion: string; continue?: string; remainingItemCount?: number };
  items: KubeObject[];
}

const NAME_SUFFIX_ALPHABET = 'bcdfghjklmnpqrstvwxz2456789';

export function timestamp(date = new Date()): string {
  return `${date.toISOString().slice(0, 19)}Z`;
}

function generatedSuffix(): string {
  let suffix = '';
  for (let index = 0; index < 5; index++) suffix += NAME_SUFFIX_ALPHABET[Math.floor(Math.random() * NAME_SUFFIX_ALPHABET.length)];
  return suffix;
}

/** Everything but metadata, status and the type fields: what `metadata.generation` counts changes of. */
function specPart(object: KubeObject): string {
  const { metadata: _metadata, status: _status, apiVersion: _apiVersion, kind: _kind, ...rest } = object;
  return JSON.stringify(rest);
}

export class KubeObjects {
  /** The deletion policy chosen for an owner, by uid, until the collector has handled its dependents. */
  readonly pendingPropagation = new Map<string, 'Background' | 'Foreground' | 'Orphan'>();

  constructor(
    readonly registry: ResourceRegistry,
    readonly store: ObjectStore,
    /** The kubelet's logs, which a wait that timed out on a pod quotes. */
    private readonly podLogs: { provider?: PodLogProvider } = {},
    readonly podAdmission: PodAdmission = ALL_POD_ADMISSION,
  ) {}

  type(ref: TypeRef): ResourceType {
    return typeof ref === 'string' ? this.registry.resolve(ref) : ref;
  }

  /** A stored object as this type's API shows it. */
  present(type: ResourceType, object: KubeObject): KubeObject {
    const shown = type.conversion ? type.conversion.fromStorage(object) : object;
    return { ...shown, apiVersion: apiVersionOf(type), kind: type.kind };
  }

  private outward(type: ResourceType, object: KubeObject): KubeObject {
    return this.present(type, object);
  }

  private inward(type: ResourceType, object: KubeObject): KubeObject {
    return type.conversion ? type.conversion.toStorage(object) : object;
  }

  get(ref: TypeRef, namespace: string | undefined, name: string): KubeObject {
    const type = this.type(ref);
    const object = this.store.get(type.storageKey, type.namespaced ? namespace : undefined, name);
    if (!object) throw notFound(type, name);
    return this.outward(type, object);
  }

  /** The object or undefined, for callers that expect absence. */
  find(ref: TypeRef, namespace: string | undefined, name: string): KubeObject | undefined {
    const type = this.type(ref);
    const object = this.store.get(type.storageKey, type.namespaced ? namespace : undefined, name);
    return object && this.outward(type, object);
  }

  list(ref: TypeRef, namespace?: string, options: ListOptions = {}): ListResult {
    const type = this.type(ref);
    const labels = parseLabelSelector(options.labelSelector);
    const fields = parseFieldSelector(options.fieldSelector);
    const { items, revision } = this.store.list(type.storageKey, type.namespaced ? namespace : undefined);
    let matching = items.map((object) => this.present(type, object)).filter((object) => labels(object) && fields(object));
    let listRevision = revision;
    if (options.continue) {
      const token = decodeContinue(options.continue);
      if (token.revision < this.oldestListableRevision()) {
        throw gone(
          'The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.',
        );
      }
      listRevision = token.revision;
      matching = matching.filter((object) => `${object.metadata.namespace ?? ''}/${object.metadata.name}` > token.after);
    }
    const metadata: ListResult['metadata'] = { resourceVersion: String(listRevision) };
    if (options.limit && options.limit > 0 && matching.length > options.limit) {
      const page = matching.slice(0, options.limit);
      const last = page[page.length - 1]!;
      metadata.continue = encodeContinue({ revision: listRevision, after: `${last.metadata.namespace ?? ''}/${last.metadata.name}` });
      metadata.remainingItemCount = matching.length - page.length;
      matching = page;
    }
    return {
      apiVersion: apiVersionOf(type),
      kind: `${type.kind}List`,
      metadata,
      items: matching,
    };
  }

  /** Continue tokens older than the kept history are refused, as etcd compaction makes the real server do. */
  private oldestListableRevision(): number {
    return this.store.oldestRevision;
  }

  /** The namespace must exist; new content may not go into one being deleted (`creating` names the new object). */
  private requireNamespace(type: ResourceType, namespace: string | undefined, creating: string | false): void {
    if (!type.namespaced) return;
    if (!namespace) throw badRequest('the server could not find the requested resource: a namespace is required');
    const found = this.store.get('/namespaces', undefined, namespace);
    if (!found) throw notFound(this.type('namespaces'), namespace);
    if (creating !== false && found.metadata.deletionTimestamp) {
      throw new KubeStatusError(
        403,
        'Forbidden',
        `${type.resource} "${creating}" is forbidden: unable to create new content in namespace ${namespace} because it is being terminated`,
        {
          name: creating,
          kind: type.resource,
        },
      );
    }
  }

  /** Prunes, defaults and validates the body of a custom resource; built-ins get their own few rules. */
  private admit(type: ResourceType, object: KubeObject, options: WriteOptions, previous?: KubeObject): void {
    const name = object.metadata.name ?? object.metadata.generateName ?? '';
    const causes = validateMetadata(type, object);
    if (type.custom && type.schema) {
      const unknown = pruneAndDefault(object as never, type.schema);
      if (unknown.length > 0 && options.fieldValidation === 'Strict') {
        throw badRequest(`strict decoding error: ${unknown.map((field) => `unknown field "${field}"`).join(', ')}`);
      }
      causes.push(...validateAgainstSchema(object as never, type.schema));
    }
    if (type.storageKey === '/pods') {
      causes.push(...validatePod(object));
      if (this.podAdmission.validation) causes.push(...validatePodSpec(object, this.podAdmission));
      if (previous) causes.push(...validatePodUpdate(previous, object));
    }
    if (causes.length > 0) throw invalid(type, name, causes);
  }

  create(ref: TypeRef, namespace: string | undefined, body: KubeObject, options: WriteOptions = {}): KubeObject {
    const type = this.type(ref);
    const object = this.inward(type, structuredClone(body));
    object.metadata = { ...(object.metadata ?? {}) };
    if (type.namespaced) {
      if (object.metadata.namespace && namespace && object.metadata.namespace !== namespace) {
        throw badRequest('the namespace of the provided object does not match the namespace sent on the request');
      }
      object.metadata.namespace = namespace ?? object.metadata.namespace;
      this.requireNamespace(type, object.metadata.namespace, object.metadata.name ?? object.metadata.generateName ?? '');
    } else delete object.metadata.namespace;
    if (!object.metadata.name && object.metadata.generateName) {
      object.metadata.name = `${object.metadata.generateName}${generatedSuffix()}`;
    }
    const ns = type.namespaced ? object.metadata.namespace : undefined;
    const pod = type.storageKey === '/pods' && ns !== undefined;
    if (pod) mutatePod(this.store, this.podAdmission, ns, object);
    this.admit(type, object, options);
    if (this.store.get(type.storageKey, ns, object.metadata.name!)) throw alreadyExists(type, object.metadata.name!);
    if (pod) options.warnings?.push(...validatePodAdmission(this.store, this.podAdmission, ns, object));
    else if (ns !== undefined) options.warnings?.push(...warnWorkload(this.store, this.podAdmission, type.storageKey, ns, object));
    admitQuota(this.store, type, ns, object);
    object.apiVersion = apiVersionOf(type);
    object.kind = type.kind;
    object.metadata.uid = randomUUID();
    object.metadata.creationTimestamp = timestamp();
    delete object.metadata.resourceVersion;
    delete object.metadata.deletionTimestamp;
    delete object.metadata.deletionGracePeriodSeconds;
    if (type.status || type.custom) object.metadata.generation = 1;
    else delete object.metadata.generation;
    // Status is the controllers' to write: a create does not set it (pods and namespaces start with a phase).
    if (type.status) delete object.status;
    applyKindDefaults(type, object);
    if (!(options as InternalWrite).applied) {
      object.metadata.managedFields = recordUpdate(undefined, object, body.metadata?.managedFields, this.writer(type, options));
    }
    dropEmptyManagedFields(object);
    if (options.dryRun) return this.outward(type, { ...object, metadata: { ...object.metadata } });
    const stored = this.store.put(type.storageKey, object);
    if (type.storageKey === 'apiextensions.k8s.io/customresourcedefinitions') return this.established(stored);
    return this.outward(type, stored);
  }

  /**
   * PUT: the whole object (or its status). A stale metadata.resourceVersion is a 409 Conflict; custom
   * resources must carry one, built-ins may omit it (an unconditional update), as on the real server.
   */
  update(
    ref: TypeRef,
    namespace: string | undefined,
    name: string,
    body: KubeObject,
    options: WriteOptions & { subresource?: Subresource } = {},
  ): KubeObject {
    const type = this.type(ref);
    this.requireNamespace(type, namespace, false);
    const ns = type.namespaced ? namespace : undefined;
    if (body.metadata?.name && body.metadata.name !== name) {
      throw badRequest(`the name of the object (${body.metadata.name}) does not match the name on the URL (${name})`);
    }
    const previous = this.store.get(type.storageKey, ns, name);
    if (!previous) throw notFound(type, name);
    const requested = body.metadata?.resourceVersion;
    if (!requested && type.custom) {
      throw invalid(type, name, [
        { reason: 'FieldValueInvalid', message: 'Invalid value: 0x0: must be specified for an update', field: 'metadata.resourceVersion' },
      ]);
    }
    if (requested && requested !== previous.metadata.resourceVersion) throw conflict(type, name);
    return this.write(type, previous, this.inward(type, structuredClone(body)), options);
  }

  /** Applies the update rules to a candidate next state of `previous` and stores it. */
  private write(type: ResourceType, previous: KubeObject, candidate: KubeObject, options: InternalWrite): KubeObject {
    let next: KubeObject;
    if (options.subresource === 'status') {
      next = { ...structuredClone(previous), status: candidate.status };
      if (candidate.status === undefined) delete next.status;
    } else {
      next = candidate;
      next.metadata = {
        ...candidate.metadata,
        name: previous.metadata.name,
        namespace: previous.metadata.namespace,
        uid: previous.metadata.uid,
        creationTimestamp: previous.metadata.creationTimestamp,
        deletionTimestamp: previous.metadata.deletionTimestamp,
        deletionGracePeriodSeconds: previous.metadata.deletionGracePeriodSeconds,
        generation: previous.metadata.generation,
      };
      if (type.status) {
        if (previous.status === undefined) delete next.status;
        else next.status = previous.status;
      }
    }
    next.apiVersion = apiVersionOf(type);
    next.kind = type.kind;
    for (const key of Object.keys(next.metadata) as Array<keyof typeof next.metadata>) {
      if (next.metadata[key] === undefined) delete next.metadata[key];
    }
    this.admit(type, next, options, type.storageKey === '/pods' ? previous : undefined);
    if (previous.metadata.deletionTimestamp) {
      const added = (next.metadata.finalizers ?? []).filter((finalizer) => !(previous.metadata.finalizers ?? []).includes(finalizer));
      if (added.length > 0) {
        throw invalid(type, previous.metadata.name!, [
          {
            reason: 'FieldValueForbidden',
            message: `Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers ${JSON.stringify(added)}`,
            field: 'metadata.finalizers',
          },
        ]);
      }
    }
    if (next.metadata.generation !== undefined && specPart(next) !== specPart(previous)) {
      next.metadata.generation = (previous.metadata.generation ?? 0) + 1;
    }
    next.metadata.resourceVersion = previous.metadata.resourceVersion;
    const requestedFields = candidate.metadata?.managedFields;
    next.metadata.managedFields = options.applied ? requestedFields : previous.metadata.managedFields;
    dropEmptyManagedFields(next);
    if (JSON.stringify(next) === JSON.stringify(previous)) return this.outward(type, previous);
    if (!options.applied) {
      // A status write keeps the stored entries (its body is the writer's copy of the object, often an older one).
      const starting = options.subresource === 'status' ? previous.metadata.managedFields : startingFields(previous, requestedFields);
      next.metadata.managedFields = recordUpdate(previous, next, starting, this.writer(type, options));
      dropEmptyManagedFields(next);
    }
    if (options.dryRun) return this.outward(type, next);
    if (next.metadata.deletionTimestamp && (next.metadata.finalizers ?? []).length === 0 && !this.awaitsController(type, next)) {
      this.store.put(type.storageKey, next);
      return this.outward(type, this.store.remove(type.storageKey, next.metadata.namespace, next.metadata.name!)!);
    }
    const stored = this.store.put(type.storageKey, next);
    if (type.storageKey === 'apiextensions.k8s.io/customresourcedefinitions') return this.established(stored);
    return this.outward(type, stored);
  }

  patch(
    ref: TypeRef,
    namespace: string | undefined,
    name: string,
    contentType: string,
    rawPatch: unknown,
    options: WriteOptions & { subresource?: Subresource; force?: boolean } = {},
  ): KubeObject {
    const type = this.type(ref);
    this.requireNamespace(type, namespace, false);
    const ns = type.namespaced ? namespace : undefined;
    const patchText = typeof rawPatch === 'string' ? rawPatch : JSON.stringify(rawPatch);
    const kind = contentType.split(';')[0]!.trim();
    const previous = this.store.get(type.storageKey, ns, name);
    if (kind === 'application/apply-patch+yaml')
      return this.apply(type, namespace, name, previous, parseYaml(patchText) as KubeObject, options);
    if (!previous) throw notFound(type, name);
    const base = this.present(type, previous);
    let patched: KubeObject;
    const parsed = parseJson(patchText);
    switch (kind) {
      case 'application/merge-patch+json':
        patched = mergePatch(base, parsed) as KubeObject;
        break;
      case 'application/json-patch+json':
        patched = jsonPatch(base, parsed) as KubeObject;
        break;
      case 'application/strategic-merge-patch+json':
        // Custom resources have no patch strategy metadata: the real server refuses this type for them.
        if (type.custom) throw unsupportedMediaType(kind);
        patched = strategicMergePatch(base, parsed) as KubeObject;
        break;
      default:
        throw unsupportedMediaType(kind);
    }
    const requested = (parsed as KubeObject | undefined)?.metadata?.resourceVersion;
    if (kind !== 'application/json-patch+json' && requested && requested !== previous.metadata.resourceVersion) throw conflict(type, name);
    if (kind === 'application/json-patch+json' && patched.metadata?.resourceVersion !== previous.metadata.resourceVersion) {
      throw conflict(type, name);
    }
    return this.write(type, previous, this.inward(type, patched), options);
  }

  /** Server-side apply (managed-fields.ts): creates the object, or merges the configuration into it with field ownership. */
  private apply(
    type: ResourceType,
    namespace: string | undefined,
    name: string,
    previous: KubeObject | undefined,
    config: KubeObject,
    options: WriteOptions & { subresource?: Subresource; force?: boolean },
  ): KubeObject {
    const writer = this.writer(type, options);
    if (!previous) {
      if (options.subresource) throw notFound(type, name);
      const created = applyConfiguration(undefined, { ...config, metadata: { ...config.metadata, name } }, writer, false);
      return this.create(type, namespace, created, { ...options, applied: true } as InternalWrite);
    }
    const requested = config.metadata?.resourceVersion;
    if (requested && requested !== previous.metadata.resourceVersion) throw conflict(type, name);
    const merged = applyConfiguration(this.present(type, previous), config, writer, options.force ?? false);
    return this.write(type, previous, this.inward(type, merged), { ...options, applied: true });
  }

  /** The field manager's view of a write: who, through which subresource, over which shape. */
  private writer(type: ResourceType, options: WriteOptions & { subresource?: Subresource }): Writer {
    return {
      manager: options.fieldManager || IN_PROCESS_MANAGER,
      apiVersion: apiVersionOf(type),
      subresource: options.subresource,
      type: type.custom ? schemaType(type.schema) : builtInType(),
      statusSubresource: type.status,
      now: timestamp(),
    };
  }

  delete(ref: TypeRef, namespace: string | undefined, name: string, options: DeleteOptions = {}): KubeObject {
    const type = this.type(ref);
    this.requireNamespace(type, namespace, false);
    const ns = type.namespaced ? namespace : undefined;
    const previous = this.store.get(type.storageKey, ns, name);
    if (!previous) throw notFound(type, name);
    const { preconditions } = options;
    if (preconditions?.uid && preconditions.uid !== previous.metadata.uid) {
      throw new KubeStatusError(
        409,
        'Conflict',
        `Precondition failed: UID in precondition: ${preconditions.uid}, UID in object meta: ${previous.metadata.uid}`,
        { name, group: type.group, kind: type.resource },
      );
    }
    if (preconditions?.resourceVersion && preconditions.resourceVersion !== previous.metadata.resourceVersion) {
      throw new KubeStatusError(
        409,
        'Conflict',
        `Precondition failed: ResourceVersion in precondition: ${preconditions.resourceVersion}, ResourceVersion in object meta: ${previous.metadata.resourceVersion}`,
        { name, group: type.group, kind: type.resource },
      );
    }
    if (options.dryRun) return this.outward(type, previous);
    const policy = options.propagationPolicy ?? type.defaultPropagation;
    const next = structuredClone(previous);
    if (policy === 'Foreground' && !(next.metadata.finalizers ?? []).includes('foregroundDeletion')) {
      next.metadata.finalizers = [...(next.metadata.finalizers ?? []), 'foregroundDeletion'];
    }
    this.pendingPropagation.set(previous.metadata.uid!, policy);
    if (type.storageKey === '/namespaces') {
      next.metadata.deletionTimestamp ??= timestamp();
      next.metadata.deletionGracePeriodSeconds ??= 0;
      next.status = { phase: 'Terminating' };
      return this.outward(type, this.store.put(type.storageKey, next));
    }
    const graceful = this.gracePeriod(type, previous, options);
    if ((next.metadata.finalizers ?? []).length > 0 || graceful !== undefined) {
      if (previous.metadata.deletionTimestamp && JSON.stringify(next) === JSON.stringify(previous)) return this.outward(type, previous);
      next.metadata.deletionTimestamp ??= timestamp(new Date(Date.now() + (graceful ?? 0) * 1000));
      next.metadata.deletionGracePeriodSeconds ??= graceful ?? 0;
      return this.outward(type, this.store.put(type.storageKey, next));
    }
    const removed = this.store.remove(type.storageKey, ns, name)!;
    if (type.storageKey === 'apiextensions.k8s.io/customresourcedefinitions') this.unserve(removed as unknown as CrdObject & KubeObject);
    return this.outward(type, removed);
  }

  /** A deleted CRD's kinds are no longer served and their objects are gone. */
  private unserve(crd: CrdObject): void {
    const storageKey = `${crd.spec.group}/${crd.spec.names.plural}`;
    this.registry.removeStorage(storageKey);
    this.store.dropStorage(storageKey);
  }

  /**
   * A pod on a node is deleted gracefully: it gets a deletionTimestamp and stays until its kubelet
   * has stopped the containers and deletes it with grace 0. Unscheduled pods go at once.
   */
  private gracePeriod(type: ResourceType, object: KubeObject, options: DeleteOptions): number | undefined {
    if (type.storageKey !== '/pods') return undefined;
    const spec = (object.spec ?? {}) as { nodeName?: string; terminationGracePeriodSeconds?: number };
    if (!spec.nodeName) return undefined;
    const grace = options.gracePeriodSeconds ?? object.metadata.deletionGracePeriodSeconds ?? spec.terminationGracePeriodSeconds ?? 30;
    if (grace === 0) return undefined;
    const phase = (object.status as { phase?: string } | undefined)?.phase;
    if (phase === 'Succeeded' || phase === 'Failed') return undefined;
    return grace;
  }

  /** Objects whose removal a controller finishes: pods on a node (the kubelet), namespaces (the namespace controller). */
  private awaitsController(type: ResourceType, object: KubeObject): boolean {
    return type.storageKey === '/namespaces' || this.gracePeriod(type, object, {}) !== undefined;
  }

  deleteCollection(ref: TypeRef, namespace: string | undefined, listOptions: ListOptions, options: DeleteOptions = {}): ListResult {
    const type = this.type(ref);
    const listed = this.list(type, namespace, { labelSelector: listOptions.labelSelector, fieldSelector: listOptions.fieldSelector });
    const items = listed.items.map((object) => this.delete(type, object.metadata.namespace, object.metadata.name!, options));
    return { ...listed, items };
  }

  /** Binds a pod to a node (what the scheduler does through pods/binding). */
  bind(namespace: string, name: string, nodeName: string): KubeObject {
    const type = this.type('pods');
    const previous = this.get(type, namespace, name);
    const spec = previous.spec as { nodeName?: string };
    if (spec.nodeName) {
      throw new KubeStatusError(
        409,
        'Conflict',
        `Operation cannot be fulfilled on pods/binding "${name}": pod ${name} is already assigned to node "${spec.nodeName}"`,
      );
    }
    const next = structuredClone(previous);
    (next.spec as { nodeName?: string }).nodeName = nodeName;
    return this.outward(type, this.store.put(type.storageKey, next));
  }

  /** A CRD is served as soon as it is stored; its status says so, as the real server's controllers would. */
  private established(stored: KubeObject): KubeObject {
    const crd = stored as unknown as CrdObject & KubeObject;
    const type = this.type('customresourcedefinitions');
    const conditions = [
      { type: 'NamesAccepted', status: 'True', reason: 'NoConflicts', message: 'no conflicts found', lastTransitionTime: timestamp() },
      {
        type: 'Established',
        status: 'True',
        reason: 'InitialNamesAccepted',
        message: 'the initial names have been accepted',
        lastTransitionTime: timestamp(),
      },
    ];
    const status = {
      conditions,
      acceptedNames: crd.spec.names,
      storedVersions: crd.spec.versions.filter((version) => version.storage).map((version) => version.name),
    };
    this.registry.removeStorage(`${crd.spec.group}/${crd.spec.names.plural}`);
    for (const served of crdTypes(crd)) this.registry.add(served);
    const previous = stored.status as { conditions?: Array<{ type: string }>; acceptedNames?: unknown } | undefined;
    const alreadyEstablished = previous?.conditions?.some((condition) => condition.type === 'Established');
    if (alreadyEstablished && JSON.stringify(previous?.acceptedNames) === JSON.stringify(crd.spec.names)) return this.outward(type, stored);
    return this.outward(type, this.store.put(type.storageKey, { ...stored, status }));
  }

  /**
   * Resolves with the predicate's first truthy answer, checked now and after every change in the store
   * (for conditions over lists: "three pods", "no sandbox left").
   */
  waitUntil<T>(predicate: () => T | undefined | false, timeoutMs = 10_000, what = 'a condition'): Promise<T> {
    return new Promise((resolve, reject) => {
      const check = () => {
        const answer = predicate();
        if (!answer) return;
        cleanup();
        resolve(answer);
      };
      const unsubscribe = this.store.subscribe(check);
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
      }, timeoutMs);
      const cleanup = () => {
        unsubscribe();
        clearTimeout(timer);
      };
      check();
    });
  }

  /** Resolves once `predicate` holds for the object (or for its absence, given undefined), on store events. */
  waitFor(
    ref: TypeRef,
    namespace: string | undefined,
    name: string,
    predicate: (object: KubeObject | undefined) => boolean,
    timeoutMs = 10_000,
  ): Promise<KubeObject | undefined> {
    const type = this.type(ref);
    return new Promise((resolve, reject) => {
      const check = () => {
        const object = this.find(type, namespace, name);
        if (!predicate(object)) return false;
        cleanup();
        resolve(object);
        return true;
      };
      const unsubscribe = this.store.subscribe((change: StoreChange) => {
        if (change.storageKey === type.storageKey && change.object.metadata.name === name) check();
      });
      const timer = setTimeout(() => {
        cleanup();
        const last = this.find(type, namespace, name);
        const report = type.resource === 'pods' && last ? `\n${podReport(last, this.podLogs.provider)}` : '';
        reject(
          new Error(
            `timed out after ${timeoutMs} ms waiting for ${type.resource} ${namespace ?? ''}/${name}${report}\nlast seen ${JSON.stringify(last)}`,
          ),
        );
      }, timeoutMs);
      const cleanup = () => {
        unsubscribe();
        clearTimeout(timer);
      };
      check();
    });
  }
}

/** No `managedFields` key when no manager owns anything, as the server omits it. */
function dropEmptyManagedFields(object: KubeObject): void {
  if (!object.metadata.managedFields?.length) delete object.metadata.managedFields;
}

/**
 * The entries an update starts from: the stored ones, unless the request set others (a request may
 * reset them with `[{}]`; an empty list leaves them as they are).
 */
function startingFields(previous: KubeObject, requested: unknown): unknown {
  const stored = previous.metadata.managedFields;
  if (!Array.isArray(requested) || requested.length === 0) return stored;
  return JSON.stringify(requested) === JSON.stringify(stored) ? stored : requested;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw badRequest(`error decoding patch: ${(error as Error).message}`);
  }
}

function encodeContinue(token: { revision: number; after: string }): string {
  return Buffer.from(JSON.stringify(token)).toString('base64url');
}

function decodeContinue(text: string): { revision: number; after: string } {
  try {
    const token = JSON.parse(Buffer.from(text, 'base64url').toString()) as { revision: number; after: string };
    if (typeof token.revision !== 'number' || typeof token.after !== 'string') throw new Error('bad token');
    return token;
  } catch {
    throw badRequest('continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)');
  }
}
