/**
 * Request bodies in Kubernetes' protobuf encoding, for the kinds clients send that way: helm stores
 * its releases in Secrets (or ConfigMaps) written as `application/vnd.kubernetes.protobuf`. Only
 * decoding, of Secret and ConfigMap with their ObjectMeta; responses stay JSON, which those clients
 * also accept. Field numbers are those of k8s.io/api/core/v1 and apimachinery's meta/v1 generated.proto.
 */
import { KubeStatusError } from './errors.js';
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

const text = (field: Field) => (field.value as Buffer).toString('utf8');

function map(entries: Field[], asBytes: boolean): Record<string, string> {
  const result: Record<string, string> = {};
  for (const entry of entries) {
    const parts = fields(entry.value as Buffer);
    const key = parts.find((part) => part.number === 1);
    const value = parts.find((part) => part.number === 2);
    if (!key) continue;
    const bytes = (value?.value as Buffer | undefined) ?? Buffer.alloc(0);
    result[text(key)] = asBytes ? bytes.toString('base64') : bytes.toString('utf8');
  }
  return result;
}

function objectMeta(buffer: Buffer): ObjectMeta {
  const parts = fields(buffer);
  const meta: ObjectMeta = {};
  const one = (number: number) => parts.find((part) => part.number === number);
  const many = (number: number) => parts.filter((part) => part.number === number);
  if (one(1)) meta.name = text(one(1)!);
  if (one(2)) meta.generateName = text(one(2)!);
  if (one(3)) meta.namespace = text(one(3)!);
  if (one(6)) meta.resourceVersion = text(one(6)!);
  if (many(11).length) meta.labels = map(many(11), false);
  if (many(12).length) meta.annotations = map(many(12), false);
  if (many(13).length) {
    meta.ownerReferences = many(13).map((reference) => {
      const referenceParts = fields(reference.value as Buffer);
      const get = (number: number) => referenceParts.find((part) => part.number === number);
      return {
        kind: get(1) ? text(get(1)!) : '',
        name: get(3) ? text(get(3)!) : '',
        uid: get(4) ? text(get(4)!) : '',
        apiVersion: get(5) ? text(get(5)!) : '',
        ...(get(6) ? { controller: get(6)!.value === 1n } : {}),
        ...(get(7) ? { blockOwnerDeletion: get(7)!.value === 1n } : {}),
      };
    });
  }
  if (many(14).length) meta.finalizers = many(14).map(text);
  return meta;
}

export function decodeProtobuf(body: Buffer): KubeObject {
  if (!body.subarray(0, 4).equals(MAGIC)) throw new KubeStatusError(400, 'BadRequest', 'protobuf body without the k8s envelope');
  const unknown = fields(body.subarray(4));
  const typeMeta = fields((unknown.find((part) => part.number === 1)?.value as Buffer | undefined) ?? Buffer.alloc(0));
  const apiVersion = typeMeta.find((part) => part.number === 1);
  const kind = typeMeta.find((part) => part.number === 2);
  const raw = (unknown.find((part) => part.number === 2)?.value as Buffer | undefined) ?? Buffer.alloc(0);
  const kindName = kind ? text(kind) : '';
  const parts = fields(raw);
  const metadata = objectMeta((parts.find((part) => part.number === 1)?.value as Buffer | undefined) ?? Buffer.alloc(0));
  const many = (number: number) => parts.filter((part) => part.number === number);
  const flag = (number: number) => parts.find((part) => part.number === number)?.value === 1n;
  const object: KubeObject = { apiVersion: apiVersion ? text(apiVersion) : 'v1', kind: kindName, metadata };
  if (kindName === 'Secret') {
    if (many(2).length) object.data = map(many(2), true);
    const type = parts.find((part) => part.number === 3);
    if (type) object.type = text(type);
    if (many(4).length) object.stringData = map(many(4), false);
    if (flag(5)) object.immutable = true;
    return object;
  }
  if (kindName === 'ConfigMap') {
    if (many(2).length) object.data = map(many(2), false);
    if (many(3).length) object.binaryData = map(many(3), true);
    if (flag(4)) object.immutable = true;
    return object;
  }
  throw new KubeStatusError(415, 'UnsupportedMediaType', `this test server decodes protobuf only for Secret and ConfigMap, not ${kindName}`);
}

/** A DELETE's body (meta/v1 DeleteOptions) in protobuf: grace period, propagation policy, dry run. */
export function decodeDeleteOptions(body: Buffer): { gracePeriodSeconds?: number; propagationPolicy?: string; dryRun?: string[] } {
  if (!body.subarray(0, 4).equals(MAGIC)) throw new KubeStatusError(400, 'BadRequest', 'protobuf body without the k8s envelope');
  const raw = (fields(body.subarray(4)).find((part) => part.number === 2)?.value as Buffer | undefined) ?? Buffer.alloc(0);
  const parts = fields(raw);
  const grace = parts.find((part) => part.number === 1);
  const policy = parts.find((part) => part.number === 4);
  const dryRun = parts.filter((part) => part.number === 5).map(text);
  return {
    ...(grace ? { gracePeriodSeconds: Number(BigInt.asIntN(64, grace.value as bigint)) } : {}),
    ...(policy ? { propagationPolicy: text(policy) } : {}),
    ...(dryRun.length ? { dryRun } : {}),
  };
}
