/**
 * Custom resources against their CRD's structural OpenAPI v3 schema, in the order the API server
 * works: nulls dropped where not nullable, unknown fields pruned (reported, so `fieldValidation=Strict`
 * can refuse them), defaults applied, then validation collecting every failure as a Status cause with
 * the server's reasons and wording.
 *
 * Supported: type (with x-kubernetes-int-or-string), properties, additionalProperties, items, required,
 * enum, minimum/maximum (and exclusive), minLength/maxLength, minItems/maxItems, pattern, format
 * date-time, nullable, x-kubernetes-preserve-unknown-fields, default. Not supported: CEL rules
 * (x-kubernetes-validations), oneOf/anyOf/allOf/not, list-type/map-type uniqueness.
 */
import type { StatusCause } from './errors.js';

export interface JsonSchema {
  type?: 'object' | 'array' | 'string' | 'integer' | 'number' | 'boolean';
  properties?: Record<string, JsonSchema>;
  additionalProperties?: JsonSchema | boolean;
  items?: JsonSchema;
  required?: string[];
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: boolean;
  exclusiveMaximum?: boolean;
  minLength?: number;
  maxLength?: number;
  minItems?: number;
  maxItems?: number;
  pattern?: string;
  format?: string;
  nullable?: boolean;
  default?: unknown;
  description?: string;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-int-or-string'?: boolean;
  'x-kubernetes-embedded-resource'?: boolean;
  [keyword: string]: unknown;
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

function isObject(value: unknown): value is Record<string, Json> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The fields of the object root the server owns: never pruned, never checked against the schema. */
const ROOT_FIELDS = new Set(['apiVersion', 'kind', 'metadata']);

/** Drops unknown fields and non-nullable nulls in place; returns the dotted paths of unknown fields. */
export function pruneAndDefault(value: Record<string, Json>, schema: JsonSchema): string[] {
  const unknown: string[] = [];
  walk(value, schema, '', unknown, true);
  return unknown;
}

function walk(value: Json, schema: JsonSchema, path: string, unknown: string[], root = false): void {
  if (Array.isArray(value)) {
    if (schema.items) for (const [index, item] of value.entries()) walk(item, schema.items, `${path}[${index}]`, unknown);
    return;
  }
  if (!isObject(value)) return;
  const properties = schema.properties ?? {};
  for (const key of Object.keys(value)) {
    if (root && ROOT_FIELDS.has(key)) continue;
    const child = path ? `${path}.${key}` : key;
    const propertySchema =
      properties[key] ?? (isObject(schema.additionalProperties) ? (schema.additionalProperties as JsonSchema) : undefined);
    if (!propertySchema) {
      if (schema['x-kubernetes-preserve-unknown-fields'] || schema.additionalProperties === true) continue;
      unknown.push(child);
      delete value[key];
      continue;
    }
    if (value[key] === null && !propertySchema.nullable) {
      delete value[key];
      continue;
    }
    walk(value[key]!, propertySchema, child, unknown);
  }
  for (const [key, propertySchema] of Object.entries(properties)) {
    if (value[key] === undefined && propertySchema.default !== undefined) {
      value[key] = structuredClone(propertySchema.default) as Json;
      walk(value[key]!, propertySchema, path ? `${path}.${key}` : key, unknown);
    }
  }
}

function show(value: unknown): string {
  return typeof value === 'string' ? JSON.stringify(value) : (JSON.stringify(value) ?? String(value));
}

function typeOk(value: Json, schema: JsonSchema): boolean {
  if (schema['x-kubernetes-int-or-string']) return typeof value === 'string' || Number.isInteger(value);
  switch (schema.type) {
    case undefined:
      return true;
    case 'object':
      return isObject(value);
    case 'array':
      return Array.isArray(value);
    case 'string':
      return typeof value === 'string';
    case 'integer':
      return typeof value === 'number' && Number.isInteger(value);
    case 'number':
      return typeof value === 'number';
    case 'boolean':
      return typeof value === 'boolean';
  }
}

const DATE_TIME = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;

export function validateAgainstSchema(value: Record<string, Json>, schema: JsonSchema): StatusCause[] {
  const causes: StatusCause[] = [];
  check(value, schema, '', causes, true);
  return causes;
}

function check(value: Json, schema: JsonSchema, path: string, causes: StatusCause[], root = false): void {
  const fail = (reason: string, message: string) => causes.push({ reason, message, field: path });
  if (value === null) {
    if (!schema.nullable) fail('FieldValueInvalid', `Invalid value: "null": ${path} in body must be of type ${schema.type}: "null"`);
    return;
  }
  if (!typeOk(value, schema)) {
    const actual = Array.isArray(value) ? 'array' : typeof value === 'number' && Number.isInteger(value) ? 'integer' : typeof value;
    const expected = schema['x-kubernetes-int-or-string'] ? 'integer or string' : schema.type;
    fail('FieldValueTypeInvalid', `Invalid value: "${actual}": ${path} in body must be of type ${expected}: "${actual}"`);
    return;
  }
  if (schema.enum && !schema.enum.some((allowed) => JSON.stringify(allowed) === JSON.stringify(value))) {
    fail('FieldValueNotSupported', `Unsupported value: ${show(value)}: supported values: ${schema.enum.map(show).join(', ')}`);
  }
  if (typeof value === 'number') {
    if (schema.minimum !== undefined && (schema.exclusiveMinimum ? value <= schema.minimum : value < schema.minimum)) {
      fail(
        'FieldValueInvalid',
        `Invalid value: ${value}: ${path} in body should be greater than ${schema.exclusiveMinimum ? '' : 'or equal to '}${schema.minimum}`,
      );
    }
    if (schema.maximum !== undefined && (schema.exclusiveMaximum ? value >= schema.maximum : value > schema.maximum)) {
      fail(
        'FieldValueInvalid',
        `Invalid value: ${value}: ${path} in body should be less than ${schema.exclusiveMaximum ? '' : 'or equal to '}${schema.maximum}`,
      );
    }
  }
  if (typeof value === 'string') {
    const length = [...value].length;
    if (schema.minLength !== undefined && length < schema.minLength) {
      fail('FieldValueInvalid', `Invalid value: ${show(value)}: ${path} in body should be at least ${schema.minLength} chars long`);
    }
    if (schema.maxLength !== undefined && length > schema.maxLength) {
      fail('FieldValueTooLong', `Too long: may not be more than ${schema.maxLength} bytes`);
    }
    if (schema.pattern !== undefined && !new RegExp(schema.pattern, 'u').test(value)) {
      fail('FieldValueInvalid', `Invalid value: ${show(value)}: ${path} in body should match '${schema.pattern}'`);
    }
    if (schema.format === 'date-time' && !(DATE_TIME.test(value) && !Number.isNaN(Date.parse(value)))) {
      fail('FieldValueInvalid', `Invalid value: ${show(value)}: ${path} in body must be of type date-time: ${show(value)}`);
    }
  }
  if (Array.isArray(value)) {
    if (schema.minItems !== undefined && value.length < schema.minItems) {
      fail('FieldValueInvalid', `Invalid value: ${value.length}: ${path} in body should have at least ${schema.minItems} items`);
    }
    if (schema.maxItems !== undefined && value.length > schema.maxItems) {
      fail('FieldValueTooMany', `Too many: ${value.length}: must have at most ${schema.maxItems} items`);
    }
    if (schema.items) for (const [index, item] of value.entries()) check(item, schema.items, `${path}[${index}]`, causes);
  }
  if (isObject(value)) {
    for (const key of schema.required ?? []) {
      if (value[key] === undefined)
        causes.push({ reason: 'FieldValueRequired', message: 'Required value', field: path ? `${path}.${key}` : key });
    }
    for (const [key, child] of Object.entries(value)) {
      if (root && ROOT_FIELDS.has(key)) continue;
      const childSchema =
        schema.properties?.[key] ?? (isObject(schema.additionalProperties) ? (schema.additionalProperties as JsonSchema) : undefined);
      if (childSchema) check(child, childSchema, path ? `${path}.${key}` : key, causes);
    }
  }
}
