/**
 * Reading requests and writing responses: JSON bodies, protobuf bodies (protobuf.ts), DeleteOptions
 * from the body or the query, the write options of the query string.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { badRequest, KubeStatusError } from './errors.js';
import { managerFromUserAgent } from './managed-fields.js';
import type { DeleteOptions, WriteOptions } from './objects.js';
import { decodeDeleteOptions, decodeProtobuf } from './protobuf.js';
import type { KubeObject } from './store.js';

export function send(response: ServerResponse, code: number, body: unknown): void {
  const text = JSON.stringify(body);
  response.writeHead(code, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text) });
  response.end(text);
}

export async function readRaw(request: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export async function readBody(request: IncomingMessage): Promise<string> {
  return (await readRaw(request)).toString('utf8');
}

/** A create or update body: JSON, or protobuf for the kinds protobuf.ts knows. */
export async function readObject(request: IncomingMessage): Promise<KubeObject> {
  const raw = await readRaw(request);
  if ((request.headers['content-type'] ?? '').startsWith('application/vnd.kubernetes.protobuf')) return decodeProtobuf(raw);
  return parseBody(raw.toString('utf8'));
}

export async function readDeleteOptions(request: IncomingMessage): Promise<DeleteOptions & { dryRun?: unknown }> {
  const raw = await readRaw(request);
  if ((request.headers['content-type'] ?? '').startsWith('application/vnd.kubernetes.protobuf'))
    return decodeDeleteOptions(raw) as DeleteOptions;
  const text = raw.toString('utf8');
  return text.trim() ? (parseBody(text) as unknown as DeleteOptions) : {};
}

export function parseBody(text: string): KubeObject {
  if (!text.trim()) throw badRequest('the request body is empty');
  try {
    return JSON.parse(text) as KubeObject;
  } catch (error) {
    throw badRequest(`Object 'Kind' is missing in '${text.slice(0, 80)}': ${(error as Error).message}`);
  }
}

/** A write's options; its field manager is `?fieldManager=`, or else derived from the user agent (managed-fields.ts). */
export function writeOptionsOf(query: URLSearchParams, request?: IncomingMessage): WriteOptions {
  return {
    dryRun: query.getAll('dryRun').includes('All'),
    fieldValidation: query.get('fieldValidation') ?? undefined,
    fieldManager: query.get('fieldManager') || managerFromUserAgent(request?.headers['user-agent']),
  };
}

/** A PATCH's options; server-side apply needs a field manager, as on the real server. */
export function patchOptionsOf(query: URLSearchParams, contentType: string, request?: IncomingMessage): WriteOptions & { force: boolean } {
  if (contentType.startsWith('application/apply-patch') && !query.get('fieldManager')) {
    throw new KubeStatusError(
      422,
      'Invalid',
      'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required for apply patch',
    );
  }
  return { ...writeOptionsOf(query, request), force: query.get('force') === 'true' };
}

export function deleteOptionsOf(query: URLSearchParams, body: DeleteOptions & { dryRun?: unknown }): DeleteOptions {
  const grace = query.get('gracePeriodSeconds') ?? body.gracePeriodSeconds;
  const policy = (query.get('propagationPolicy') ?? body.propagationPolicy) as DeleteOptions['propagationPolicy'];
  if (policy && !['Background', 'Foreground', 'Orphan'].includes(policy)) {
    throw new KubeStatusError(
      422,
      'Invalid',
      `DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "${policy}": supported values: "Foreground", "Background", "Orphan"`,
    );
  }
  return {
    propagationPolicy: policy,
    gracePeriodSeconds: grace === undefined || grace === null ? undefined : Number(grace),
    preconditions: body.preconditions,
    dryRun: query.getAll('dryRun').includes('All') || (Array.isArray(body.dryRun) && body.dryRun.includes('All')),
  };
}
