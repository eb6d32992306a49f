/**
 * Request bodies in Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`), for the
 * kinds clients send that way: helm stores its releases in Secrets (or ConfigMaps), kubectl sends
 * namespaces, service accounts, token requests and access reviews so. Only decoding, driven by the
 * message descriptors of protobuf-messages.ts; responses stay JSON, which those clients also accept.
 */
import { KubeStatusError } from './errors.js';
import { DELETE_OPTIONS, KINDS, type FieldSpec, type Message } from './protobuf-messages.js';
import type { KubeObject, ObjectMeta } from './store.js';

const MAGIC = Buffer.from([0x6b, 0x38, 0x73, 0x00]);

interface Field {
  number: number;
  /** A varint's value, or a length-delimited field's bytes. */
  value: bigint | Buffer;
}

function readVarint(buffer: Buffer, offset: number): [bigint, number] {
  let result = 0n;
  let shift = 0n;
  for (;;) {
    const byte = buffer[offset++];
    if (byte === undefined) throw new Error('truncated varint');
    result |= BigInt(byte & 0x7f) << shift;
    if ((byte & 0x80) === 0) return [result, offset];
    shift += 7n;
  }
}

function fields(buffer: Buffer): Field[] {
  const found: Field[] = [];
  let offset = 0;
  while (offset < buffer.length) {
    const [key, next] = readVarint(buffer, offset);
    offset = next;
    const number = Number(key >> 3n);
    const wireType = Number(key & 7n);
    if (wireType === 0) {
      const [value, after] = readVarint(buffer, offset);
      found.push({ number, value });
      offset = after;
    } else if (wireType === 2) {
      const [length, after] = readVarint(buffer, offset);
      found.push({ number, value: buffer.subarray(after, after + Number(length)) });
      offset = after + Number(length);
    } else if (wireType === 1) offset += 8;
    else if (wireType === 5) offset += 4;
    else throw new Error(`unsupported wire type ${wireType}`);
  }
  return found;
}

/** A message's fields by its descriptor, as JSON would carry them; fields it does not describe are skipped, as protobuf does. */
function decodeMessage(buffer: Buffer, message: Message): Record<string, unknown> {
  const object: Record<string, unknown> = {};
  for (const field of fields(buffer)) {
    const spec = message[field.number];
    if (!spec) continue;
    if (spec.type === 'map<string,string>' || spec.type === 'map<string,bytes>') {
      const entry = decodeMessage(field.value as Buffer, {
        1: { name: 'key', type: 'string' },
        2: { name: 'value', type: spec.type === 'map<string,bytes>' ? 'bytes' : 'string' },
      });
      object[spec.name] ??= {};
      const map = object[spec.name] as Record<string, unknown>;
      map[String(entry.key ?? '')] = entry.value ?? '';
      continue;
    }
    const value = fieldValue(field, spec.type);
    if (spec.repeated) {
      object[spec.name] ??= [];
      (object[spec.name] as unknown[]).push(value);
    } else {
      object[spec.name] = value;
    }
  }
  return object;
}

function fieldValue(field: Field, type: FieldSpec['type']): unknown {
  if (type === 'string') return (field.value as Buffer).toString('utf8');
  if (type === 'bytes') return (field.value as Buffer).toString('base64');
  if (type === 'int') return Number(BigInt.asIntN(64, field.value as bigint));
  if (type === 'bool') return field.value === 1n;
  return decodeMessage(field.value as Buffer, type as Message);
}

/** runtime.Unknown's envelope: the magic bytes, then TypeMeta (field 1) and the object's bytes (field 2). */
function unwrap(body: Buffer): { apiVersion: string; kind: string; raw: Buffer } {
  if (!body.subarray(0, 4).equals(MAGIC)) throw new KubeStatusError(400, 'BadRequest', 'protobuf body without the k8s envelope');
  const unknown = decodeMessage(body.subarray(4), {
    1: { name: 'typeMeta', type: { 1: { name: 'apiVersion', type: 'string' }, 2: { name: 'kind', type: 'string' } } },
    2: { name: 'raw', type: 'bytes' },
  });
  const typeMeta = (unknown.typeMeta ?? {}) as { apiVersion?: string; kind?: string };
  return {
    apiVersion: typeMeta.apiVersion ?? 'v1',
    kind: typeMeta.kind ?? '',
    raw: Buffer.from((unknown.raw as string | undefined) ?? '', 'base64'),
  };
}

export function decodeProtobuf(body: Buffer): KubeObject {
  const { apiVersion, kind, raw } = unwrap(body);
  const message = KINDS[kind];
  if (!message)
    throw new KubeStatusError(
      415,
      'UnsupportedMediaType',
      `this test server decodes protobuf only for ${Object.keys(KINDS).join(', ')}, not ${kind}`,
    );
  const object = decodeMessage(raw, message);
  return { apiVersion, kind, ...object, metadata: (object.metadata ?? {}) as ObjectMeta } as KubeObject;
}

/** A DELETE's body (meta/v1 DeleteOptions) in protobuf. */
export function decodeDeleteOptions(body: Buffer): { gracePeriodSeconds?: number; propagationPolicy?: string; dryRun?: string[] } {
  return decodeMessage(unwrap(body).raw, DELETE_OPTIONS);
}
