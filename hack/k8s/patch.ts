/**
 * The PATCH content types: JSON merge patch (RFC 7386), JSON patch (RFC 6902), strategic merge
 * patch for built-in kinds (merge, with the lists a kubelet and kubectl key by name or type merged
 * item by item, and `$patch: delete` / `$retainKeys` ignored). Server-side apply, with field
 * ownership, is managed-fields.ts.
 */
import { badRequest, KubeStatusError } from './errors.js';

type Json = unknown;

function isObject(value: Json): value is Record<string, Json> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export function mergePatch(target: Json, patch: Json): Json {
  if (!isObject(patch)) return structuredClone(patch);
  const result: Record<string, Json> = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = mergePatch(result[key], value);
  }
  return result;
}

/** List fields merged by key in strategic merge patches, as the built-in types declare them. */
const MERGE_KEYS: Record<string, string> = {
  containers: 'name',
  initContainers: 'name',
  ephemeralContainers: 'name',
  volumes: 'name',
  volumeMounts: 'mountPath',
  env: 'name',
  ports: 'containerPort',
  conditions: 'type',
  containerStatuses: 'name',
  initContainerStatuses: 'name',
  imagePullSecrets: 'name',
  tolerations: 'key',
  ownerReferences: 'uid',
};

export function strategicMergePatch(target: Json, patch: Json, field = ''): Json {
  if (Array.isArray(patch) && Array.isArray(target) && MERGE_KEYS[field]) {
    const key = MERGE_KEYS[field]!;
    const result = target.map((item) => structuredClone(item));
    for (const item of patch) {
      if (!isObject(item)) continue;
      if (item.$patch === 'delete') {
        const index = result.findIndex((existing) => isObject(existing) && existing[key] === item[key]);
        if (index >= 0) result.splice(index, 1);
        continue;
      }
      const index = result.findIndex((existing) => isObject(existing) && existing[key] === item[key]);
      if (index >= 0) result[index] = strategicMergePatch(result[index], item);
      else result.push(strategicMergePatch(undefined, item));
    }
    return result;
  }
  if (!isObject(patch)) return structuredClone(patch);
  const result: Record<string, Json> = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (key.startsWith('$')) continue;
    if (key.startsWith('$setElementOrder/')) continue;
    if (value === null) delete result[key];
    else result[key] = strategicMergePatch(result[key], value, key);
  }
  return result;
}

interface JsonPatchOperation {
  op: 'add' | 'remove' | 'replace' | 'move' | 'copy' | 'test';
  path: string;
  from?: string;
  value?: Json;
}

function pointer(path: string): string[] {
  if (path === '') return [];
  if (!path.startsWith('/')) throw badRequest(`invalid JSON pointer "${path}"`);
  return path
    .slice(1)
    .split('/')
    .map((part) => part.replaceAll('~1', '/').replaceAll('~0', '~'));
}

function parentOf(document: Json, parts: string[], path: string): { parent: Record<string, Json> | Json[]; last: string } {
  let current = document;
  for (const part of parts.slice(0, -1)) {
    if (Array.isArray(current)) current = current[Number(part)];
    else if (isObject(current)) current = current[part];
    else current = undefined;
    if (current === undefined) throw invalidPatch(`doc is missing path: "${path}"`);
  }
  if (!Array.isArray(current) && !isObject(current)) throw invalidPatch(`doc is missing path: "${path}"`);
  return { parent: current, last: parts[parts.length - 1]! };
}

function invalidPatch(message: string): KubeStatusError {
  return new KubeStatusError(422, 'Invalid', `the server rejected our request due to an error in our request: ${message}`);
}

function readPointer(document: Json, path: string): Json {
  let current = document;
  for (const part of pointer(path)) {
    if (Array.isArray(current)) current = current[Number(part)];
    else if (isObject(current)) current = current[part];
    else return undefined;
  }
  return current;
}

function addAt(document: Json, path: string, value: Json): Json {
  const parts = pointer(path);
  if (parts.length === 0) return value;
  const { parent, last } = parentOf(document, parts, path);
  if (Array.isArray(parent)) {
    const index = last === '-' ? parent.length : Number(last);
    if (!Number.isInteger(index) || index < 0 || index > parent.length) throw invalidPatch(`index out of range: "${path}"`);
    parent.splice(index, 0, value);
  } else parent[last] = value;
  return document;
}

function removeAt(document: Json, path: string): Json {
  const parts = pointer(path);
  const { parent, last } = parentOf(document, parts, path);
  if (Array.isArray(parent)) {
    const index = Number(last);
    if (!(index >= 0 && index < parent.length)) throw invalidPatch(`unable to remove nonexistent key: "${path}"`);
    parent.splice(index, 1);
  } else {
    if (!Object.hasOwn(parent, last)) throw invalidPatch(`unable to remove nonexistent key: ${last}: missing value`);
    delete parent[last];
  }
  return document;
}

export function jsonPatch(target: Json, operations: Json): Json {
  if (!Array.isArray(operations)) throw badRequest('json patch must be an array of operations');
  let document = structuredClone(target);
  for (const raw of operations as JsonPatchOperation[]) {
    switch (raw.op) {
      case 'add':
        document = addAt(document, raw.path, structuredClone(raw.value));
        break;
      case 'remove':
        document = removeAt(document, raw.path);
        break;
      case 'replace':
        if (readPointer(document, raw.path) === undefined)
          throw invalidPatch(`replace operation does not apply: doc is missing key: ${raw.path}: missing value`);
        document = addAt(removeAt(document, raw.path), raw.path, structuredClone(raw.value));
        break;
      case 'move': {
        const value = readPointer(document, raw.from!);
        if (value === undefined) throw invalidPatch(`move operation does not apply: doc is missing from path: ${raw.from}`);
        document = addAt(removeAt(document, raw.from!), raw.path, value);
        break;
      }
      case 'copy': {
        const value = readPointer(document, raw.from!);
        if (value === undefined) throw invalidPatch(`copy operation does not apply: doc is missing from path: ${raw.from}`);
        document = addAt(document, raw.path, structuredClone(value));
        break;
      }
      case 'test':
        if (JSON.stringify(readPointer(document, raw.path)) !== JSON.stringify(raw.value)) {
          throw invalidPatch(`testing value ${raw.path} failed: test failed`);
        }
        break;
      default:
        throw badRequest(`unexpected json patch operation "${String((raw as { op: unknown }).op)}"`);
    }
  }
  return document;
}
