/**
 * Checks rendered built-in Kubernetes objects against the API's own schema, as the generated models of
 * @kubernetes/client-node carry it (OpenAPI of Kubernetes 1.36): every field must exist on its type
 * (strict, as `kubectl apply --validate=strict` is), have that type, and every required field must
 * be present. Required fields are read from the models' declarations (`'name': string` is required,
 * `'name'?: string` is not), which the generator writes from the OpenAPI `required` lists.
 * Custom resources are checked by the Kubernetes API test server against their CRDs instead.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import * as models from '@kubernetes/client-node';

interface Attribute {
  name: string;
  baseName: string;
  type: string;
}

type ModelClass = { getAttributeTypeMap(): Attribute[] };

const require = createRequire(import.meta.url);
const MODELS_DIR = path.join(path.dirname(require.resolve('@kubernetes/client-node')), 'gen', 'models');
const requiredCache = new Map<string, Set<string>>();

function modelClass(name: string): ModelClass | undefined {
  const candidate = (models as unknown as Record<string, unknown>)[name];
  return candidate && typeof (candidate as ModelClass).getAttributeTypeMap === 'function' ? (candidate as ModelClass) : undefined;
}

function requiredFields(className: string): Set<string> {
  let required = requiredCache.get(className);
  if (!required) {
    const declaration = readFileSync(path.join(MODELS_DIR, `${className}.d.ts`), 'utf8');
    required = new Set([...declaration.matchAll(/^\s+'([^']+)': /gm)].map((match) => match[1]!));
    requiredCache.set(className, required);
  }
  return required;
}

/** `apps/v1` + `Deployment` → `V1Deployment`. */
export function modelName(apiVersion: string, kind: string): string {
  const version = apiVersion.split('/').pop()!;
  return `${version.charAt(0).toUpperCase()}${version.slice(1)}${kind}`;
}

/** Problems of `object` against its kind's schema, as `path: problem` lines; empty when valid. */
export function schemaProblems(object: { apiVersion?: unknown; kind?: unknown }): string[] {
  if (typeof object.apiVersion !== 'string' || typeof object.kind !== 'string') return ['apiVersion and kind are required'];
  const className = modelName(object.apiVersion, object.kind);
  if (!modelClass(className)) return [`no schema for ${object.apiVersion} ${object.kind}`];
  const problems: string[] = [];
  checkValue(object, className, object.kind, problems);
  return problems;
}

function checkValue(value: unknown, type: string, at: string, problems: string[]): void {
  if (value === null || value === undefined) {
    problems.push(`${at}: null where ${type} is expected`);
    return;
  }
  const array = /^Array<(.+)>$/.exec(type);
  if (array) {
    if (!Array.isArray(value)) problems.push(`${at}: expected an array`);
    else {
      value.forEach((item, index) => {
        checkValue(item, array[1]!, `${at}[${index}]`, problems);
      });
    }
    return;
  }
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map) {
    if (!isPlainObject(value)) problems.push(`${at}: expected an object`);
    else for (const [key, item] of Object.entries(value)) checkValue(item, map[1]!, `${at}.${key}`, problems);
    return;
  }
  switch (type) {
    case 'string':
    case 'Date':
      if (typeof value !== 'string') problems.push(`${at}: expected a string, got ${typeof value}`);
      return;
    case 'number':
      if (typeof value !== 'number') problems.push(`${at}: expected a number, got ${typeof value}`);
      return;
    case 'boolean':
      if (typeof value !== 'boolean') problems.push(`${at}: expected a boolean, got ${typeof value}`);
      return;
    case 'IntOrString':
      if (typeof value !== 'string' && !Number.isInteger(value)) problems.push(`${at}: expected an integer or a string`);
      return;
    case 'any':
    case 'object':
      return;
  }
  const model = modelClass(type);
  if (!model) {
    problems.push(`${at}: unknown schema type ${type}`);
    return;
  }
  if (!isPlainObject(value)) {
    problems.push(`${at}: expected an object (${type})`);
    return;
  }
  const attributes = new Map(model.getAttributeTypeMap().map((attribute) => [attribute.baseName, attribute]));
  for (const [key, item] of Object.entries(value)) {
    const attribute = attributes.get(key);
    if (!attribute) problems.push(`${at}.${key}: unknown field of ${type}`);
    else checkValue(item, attribute.type, `${at}.${key}`, problems);
  }
  for (const name of requiredFields(type)) {
    const attribute = model.getAttributeTypeMap().find((a) => a.name === name);
    if (attribute && !(attribute.baseName in value)) problems.push(`${at}.${attribute.baseName}: required by ${type}`);
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
