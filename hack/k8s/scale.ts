/**
 * The scale subresource of custom resources: an autoscaling/v1 Scale read and written through the
 * CRD's specReplicasPath, statusReplicasPath and labelSelectorPath. A write goes through the
 * object's own update, so its resourceVersion check, validation and generation apply; its manager owns
 * the replicas field as the `scale` subresource's (an Update entry with `subresource: scale`).
 */
import { conflict, invalid, notFound } from './errors.js';
import type { KubeObjects, TypeRef, WriteOptions } from './objects.js';
import type { ResourceType } from './resources.js';
import { fieldValue } from './selectors.js';
import type { KubeObject } from './store.js';

function trimPath(path: string): string {
  return path.replace(/^\./, '');
}

function setPath(object: KubeObject, path: string, value: unknown): void {
  const parts = path.split('.');
  let current = object as Record<string, unknown>;
  for (const part of parts.slice(0, -1)) {
    if (typeof current[part] !== 'object' || current[part] === null) current[part] = {};
    current = current[part] as Record<string, unknown>;
  }
  current[parts[parts.length - 1]!] = value;
}

function scaleOf(type: ResourceType) {
  if (!type.scale) throw notFound({ group: type.group, resource: `${type.resource}/scale`, kind: type.kind }, '');
  return type.scale;
}

export function getScale(objects: KubeObjects, ref: TypeRef, namespace: string | undefined, name: string): KubeObject {
  const type = objects.type(ref);
  const scale = scaleOf(type);
  const object = objects.get(type, namespace, name);
  const selector = scale.labelSelectorPath ? fieldValue(object, trimPath(scale.labelSelectorPath)) : undefined;
  return {
    kind: 'Scale',
    apiVersion: 'autoscaling/v1',
    metadata: {
      name,
      namespace: object.metadata.namespace,
      uid: object.metadata.uid,
      resourceVersion: object.metadata.resourceVersion,
      creationTimestamp: object.metadata.creationTimestamp,
    },
    spec: { replicas: Number(fieldValue(object, trimPath(scale.specReplicasPath)) ?? 0) },
    status: {
      replicas: Number(fieldValue(object, trimPath(scale.statusReplicasPath)) ?? 0),
      ...(typeof selector === 'string' ? { selector } : {}),
    },
  };
}

/** PUT or PATCH of the scale: `nextScale` turns the current Scale into the requested one. */
export function updateScale(
  objects: KubeObjects,
  ref: TypeRef,
  namespace: string | undefined,
  name: string,
  nextScale: (current: KubeObject) => KubeObject,
  options: WriteOptions = {},
): KubeObject {
  const type = objects.type(ref);
  const scale = scaleOf(type);
  const requested = nextScale(getScale(objects, type, namespace, name));
  const replicas = (requested.spec as { replicas?: unknown } | undefined)?.replicas;
  if (typeof replicas !== 'number' || !Number.isInteger(replicas) || replicas < 0) {
    throw invalid({ group: 'autoscaling', resource: 'scale', kind: 'Scale' }, name, [
      {
        reason: 'FieldValueInvalid',
        message: `Invalid value: ${JSON.stringify(replicas)}: must be greater than or equal to 0`,
        field: 'spec.replicas',
      },
    ]);
  }
  const object = objects.get(type, namespace, name);
  const requestedVersion = requested.metadata?.resourceVersion;
  if (requestedVersion && requestedVersion !== object.metadata.resourceVersion) throw conflict(type, name);
  setPath(object, trimPath(scale.specReplicasPath), replicas);
  objects.update(type, namespace, name, object, { ...options, subresource: 'scale' });
  return getScale(objects, type, namespace, name);
}
