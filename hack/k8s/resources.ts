/**
 * The kinds this server serves: the built-in ones a controller, kubectl and helm touch, and the
 * kinds of every CustomResourceDefinition created (or loaded at start). One entry per served
 * group/version/resource; versions of one kind share storage (`storageKey`), with no conversion
 * beyond rewriting apiVersion (a CRD's `strategy: None`).
 */
import { coreToEventsV1, eventsV1ToCore } from './event-conversion.js';
import type { JsonSchema } from './schema-validation.js';
import type { KubeObject } from './store.js';

export interface PrinterColumn {
  name: string;
  type: string;
  jsonPath: string;
  description?: string;
  format?: string;
  priority?: number;
}

export interface ScaleSubresource {
  specReplicasPath: string;
  statusReplicasPath: string;
  labelSelectorPath?: string;
}

export interface ResourceType {
  group: string;
  version: string;
  /** The plural, as in URLs. */
  resource: string;
  singular: string;
  kind: string;
  namespaced: boolean;
  shortNames: string[];
  categories: string[];
  /** Versions of one kind share it: `group/resource`. */
  storageKey: string;
  status: boolean;
  scale?: ScaleSubresource;
  /** pods/log. */
  log?: boolean;
  /** serviceaccounts/token. */
  token?: boolean;
  /** A question kubectl asks (access reviews): answered on create, never stored (reviews.ts). */
  createOnly?: boolean;
  /** A custom resource: validated by its schema, pruned, defaulted; no strategic merge patch. */
  custom: boolean;
  schema?: JsonSchema;
  printerColumns?: PrinterColumn[];
  /** What DELETE does to dependents when the request does not say (batch/v1 Jobs orphan, as the real server). */
  defaultPropagation: 'Background' | 'Orphan';
  /** For a kind stored in another kind's form (events.k8s.io Events are core Events). */
  conversion?: { toStorage(object: KubeObject): KubeObject; fromStorage(object: KubeObject): KubeObject };
}

export function apiVersionOf(type: { group: string; version: string }): string {
  return type.group ? `${type.group}/${type.version}` : type.version;
}

interface BuiltIn {
  group: string;
  version: string;
  resource: string;
  kind: string;
  namespaced?: boolean;
  shortNames?: string[];
  categories?: string[];
  status?: boolean;
  log?: boolean;
  token?: boolean;
  createOnly?: boolean;
  defaultPropagation?: 'Background' | 'Orphan';
  /** Stored under another group's storage key, converted on the way in and out. */
  storedAs?: { storageKey: string; conversion: NonNullable<ResourceType['conversion']> };
}

const BUILT_INS: BuiltIn[] = [
  { group: '', version: 'v1', resource: 'namespaces', kind: 'Namespace', namespaced: false, shortNames: ['ns'], status: true },
  { group: '', version: 'v1', resource: 'nodes', kind: 'Node', namespaced: false, shortNames: ['no'], status: true },
  { group: '', version: 'v1', resource: 'pods', kind: 'Pod', shortNames: ['po'], categories: ['all'], status: true, log: true },
  { group: '', version: 'v1', resource: 'secrets', kind: 'Secret' },
  { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', shortNames: ['cm'] },
  { group: '', version: 'v1', resource: 'services', kind: 'Service', shortNames: ['svc'], categories: ['all'], status: true },
  { group: '', version: 'v1', resource: 'serviceaccounts', kind: 'ServiceAccount', shortNames: ['sa'], token: true },
  { group: '', version: 'v1', resource: 'endpoints', kind: 'Endpoints', shortNames: ['ep'] },
  { group: '', version: 'v1', resource: 'events', kind: 'Event', shortNames: ['ev'] },
  { group: '', version: 'v1', resource: 'resourcequotas', kind: 'ResourceQuota', shortNames: ['quota'], status: true },
  { group: '', version: 'v1', resource: 'persistentvolumeclaims', kind: 'PersistentVolumeClaim', shortNames: ['pvc'], status: true },
  { group: '', version: 'v1', resource: 'limitranges', kind: 'LimitRange', shortNames: ['limits'] },
  {
    group: 'events.k8s.io',
    version: 'v1',
    resource: 'events',
    kind: 'Event',
    shortNames: ['ev'],
    storedAs: { storageKey: '/events', conversion: { toStorage: eventsV1ToCore, fromStorage: coreToEventsV1 } },
  },
  { group: 'coordination.k8s.io', version: 'v1', resource: 'leases', kind: 'Lease' },
  { group: 'batch', version: 'v1', resource: 'jobs', kind: 'Job', categories: ['all'], status: true, defaultPropagation: 'Orphan' },
  { group: 'apps', version: 'v1', resource: 'deployments', kind: 'Deployment', shortNames: ['deploy'], categories: ['all'], status: true },
  { group: 'apps', version: 'v1', resource: 'replicasets', kind: 'ReplicaSet', shortNames: ['rs'], categories: ['all'], status: true },
  { group: 'apps', version: 'v1', resource: 'statefulsets', kind: 'StatefulSet', shortNames: ['sts'], categories: ['all'], status: true },
  { group: 'apps', version: 'v1', resource: 'daemonsets', kind: 'DaemonSet', shortNames: ['ds'], categories: ['all'], status: true },
  {
    group: 'autoscaling',
    version: 'v2',
    resource: 'horizontalpodautoscalers',
    kind: 'HorizontalPodAutoscaler',
    shortNames: ['hpa'],
    categories: ['all'],
    status: true,
  },
  { group: 'rbac.authorization.k8s.io', version: 'v1', resource: 'roles', kind: 'Role' },
  { group: 'rbac.authorization.k8s.io', version: 'v1', resource: 'rolebindings', kind: 'RoleBinding' },
  { group: 'rbac.authorization.k8s.io', version: 'v1', resource: 'clusterroles', kind: 'ClusterRole', namespaced: false },
  { group: 'rbac.authorization.k8s.io', version: 'v1', resource: 'clusterrolebindings', kind: 'ClusterRoleBinding', namespaced: false },
  { group: 'networking.k8s.io', version: 'v1', resource: 'networkpolicies', kind: 'NetworkPolicy', shortNames: ['netpol'] },
  { group: 'networking.k8s.io', version: 'v1', resource: 'ingresses', kind: 'Ingress', shortNames: ['ing'], status: true },
  { group: 'policy', version: 'v1', resource: 'poddisruptionbudgets', kind: 'PodDisruptionBudget', shortNames: ['pdb'], status: true },
  {
    group: 'authorization.k8s.io',
    version: 'v1',
    resource: 'selfsubjectaccessreviews',
    kind: 'SelfSubjectAccessReview',
    namespaced: false,
    createOnly: true,
  },
  {
    group: 'authorization.k8s.io',
    version: 'v1',
    resource: 'selfsubjectrulesreviews',
    kind: 'SelfSubjectRulesReview',
    namespaced: false,
    createOnly: true,
  },
  {
    group: 'authentication.k8s.io',
    version: 'v1',
    resource: 'selfsubjectreviews',
    kind: 'SelfSubjectReview',
    namespaced: false,
    createOnly: true,
  },
  {
    group: 'apiextensions.k8s.io',
    version: 'v1',
    resource: 'customresourcedefinitions',
    kind: 'CustomResourceDefinition',
    namespaced: false,
    shortNames: ['crd', 'crds'],
    status: true,
  },
];

function builtInType(entry: BuiltIn): ResourceType {
  return {
    group: entry.group,
    version: entry.version,
    resource: entry.resource,
    singular: entry.kind.toLowerCase(),
    kind: entry.kind,
    namespaced: entry.namespaced ?? true,
    shortNames: entry.shortNames ?? [],
    categories: entry.categories ?? [],
    storageKey: entry.storedAs?.storageKey ?? `${entry.group}/${entry.resource}`,
    conversion: entry.storedAs?.conversion,
    status: entry.status ?? false,
    log: entry.log,
    token: entry.token,
    createOnly: entry.createOnly,
    custom: false,
    defaultPropagation: entry.defaultPropagation ?? 'Background',
  };
}

/** The subset of a CustomResourceDefinition this server reads. */
export interface CrdObject {
  metadata: { name?: string };
  spec: {
    group: string;
    scope: 'Namespaced' | 'Cluster';
    names: { plural: string; singular?: string; kind: string; shortNames?: string[]; categories?: string[]; listKind?: string };
    versions: Array<{
      name: string;
      served: boolean;
      storage: boolean;
      schema?: { openAPIV3Schema?: JsonSchema };
      subresources?: { status?: object; scale?: ScaleSubresource };
      additionalPrinterColumns?: PrinterColumn[];
    }>;
  };
}

export function crdTypes(crd: CrdObject): ResourceType[] {
  const { spec } = crd;
  return spec.versions
    .filter((version) => version.served)
    .map((version) => ({
      group: spec.group,
      version: version.name,
      resource: spec.names.plural,
      singular: spec.names.singular ?? spec.names.kind.toLowerCase(),
      kind: spec.names.kind,
      namespaced: spec.scope !== 'Cluster',
      shortNames: spec.names.shortNames ?? [],
      categories: spec.names.categories ?? [],
      storageKey: `${spec.group}/${spec.names.plural}`,
      status: version.subresources?.status !== undefined,
      scale: version.subresources?.scale,
      custom: true,
      schema: version.schema?.openAPIV3Schema,
      // A CRD without columns prints its age, as the real server does.
      printerColumns: version.additionalPrinterColumns ?? [{ name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' }],
      defaultPropagation: 'Background' as const,
    }));
}

export class ResourceRegistry {
  /** `group/version/resource` → type. */
  private readonly types = new Map<string, ResourceType>();

  constructor() {
    for (const entry of BUILT_INS) this.add(builtInType(entry));
  }

  add(type: ResourceType): void {
    this.types.set(`${type.group}/${type.version}/${type.resource}`, type);
  }

  /** Drops every version of a custom kind (its CRD went away). */
  removeStorage(storageKey: string): void {
    for (const [key, type] of this.types) if (type.storageKey === storageKey && type.custom) this.types.delete(key);
  }

  find(group: string, version: string, resource: string): ResourceType | undefined {
    return this.types.get(`${group}/${version}/${resource}`);
  }

  all(): ResourceType[] {
    return [...this.types.values()];
  }

  /** The preferred (first registered) version of a storage, for cross-kind lookups such as owner references. */
  byStorage(storageKey: string): ResourceType | undefined {
    return this.all().find((type) => type.storageKey === storageKey);
  }

  byKind(apiVersion: string, kind: string): ResourceType | undefined {
    return this.all().find((type) => apiVersionOf(type) === apiVersion && type.kind === kind);
  }

  /**
   * A resource as people type it: `pods`, `po`, `pod`, `sandboxes.acis.dev`, `sbx`,
   * `leases.coordination.k8s.io`. For the in-process API of tests.
   */
  resolve(name: string): ResourceType {
    const lower = name.toLowerCase();
    const matches = this.all().filter((type) => {
      const names = [type.resource, type.singular, type.kind.toLowerCase(), ...type.shortNames];
      if (names.includes(lower)) return true;
      return names.some((candidate) => `${candidate}.${type.group}` === lower || `${candidate}.${type.version}.${type.group}` === lower);
    });
    // The core group wins for bare names (`events`), as kubectl's resolution does.
    const chosen = matches.find((type) => type.group === '') ?? matches[0];
    if (!chosen) throw new Error(`no resource type named ${name}`);
    return chosen;
  }

  groups(): Array<{ group: string; versions: string[] }> {
    const groups = new Map<string, Set<string>>();
    for (const type of this.all()) {
      if (!type.group) continue;
      const versions = groups.get(type.group) ?? new Set<string>();
      versions.add(type.version);
      groups.set(type.group, versions);
    }
    return [...groups].map(([group, versions]) => ({ group, versions: [...versions] }));
  }
}
