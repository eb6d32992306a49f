/**
 * Pure pieces of HTTP the egress proxy needs on both legs: reading an absolute-form target, which headers
 * belong to one hop only, which bodies it can read (to substitute) or decode (to mask), and relaying a
 * response. Nothing here knows a run or a secret.
 */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { isIP } from 'node:net';
import type { Readable, Transform } from 'node:stream';
import { createBrotliDecompress, createGunzip, createInflate } from 'node:zlib';
import { parseAuthority, type Destination } from './destination-policy.js';

export type Scheme = 'http' | 'https';

export const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);
const DECODABLE_CODINGS = new Set(['gzip', 'x-gzip', 'deflate', 'br', 'identity']);
const TEXT_TYPES = new Set([
  'application/json',
  'application/xml',
  'application/x-www-form-urlencoded',
  'application/javascript',
  'application/x-ndjson',
  'application/graphql',
  'application/yaml',
  'application/x-yaml',
  'multipart/form-data',
]);

/** Splits `http(s)://[userinfo@]authority[/path?query]` keeping the target exactly as the client spelled it. */
export function parseAbsoluteForm(url: string): { scheme: Scheme; destination: Destination; target: string } | undefined {
  const match = /^(https?):\/\/(?:[^@/?#]*@)?([^/?#]*)([^#]*)/i.exec(url);
  if (!match) return undefined;
  const scheme = match[1]!.toLowerCase() as Scheme;
  const parsed = parseAuthority(match[2]!);
  if (!parsed) return undefined;
  const rest = match[3]!;
  return {
    scheme,
    destination: { host: parsed.host, port: parsed.port ?? (scheme === 'https' ? 443 : 80) },
    target: rest === '' ? '/' : rest.startsWith('?') ? `/${rest}` : rest,
  };
}

export function authority(destination: Destination, defaultPort?: number): string {
  const host = isIP(destination.host) === 6 ? `[${destination.host}]` : destination.host;
  return destination.port === defaultPort ? host : `${host}:${destination.port}`;
}

export function connectionTokens(header: string | undefined): Set<string> {
  return new Set(
    (header ?? '')
      .split(',')
      .map((t) => t.trim().toLowerCase())
      .filter(Boolean),
  );
}

/** Adds one header line to `headers`, keeping the lines of a repeated name in order. */
export function appendHeader(headers: OutgoingHttpHeaders, name: string, value: string): void {
  const existing = headers[name];
  headers[name] = existing === undefined ? value : Array.isArray(existing) ? [...existing, value] : [String(existing), value];
}

export function isEncoded(contentEncoding: string | undefined): boolean {
  return contentEncoding !== undefined && contentEncoding.trim().toLowerCase() !== 'identity' && contentEncoding.trim() !== '';
}

export function isTextual(contentType: string | undefined): boolean {
  if (contentType === undefined) return true;
  const type = contentType.split(';')[0]!.trim().toLowerCase();
  return type.startsWith('text/') || type.endsWith('+json') || type.endsWith('+xml') || TEXT_TYPES.has(type);
}

/** Keeps only the codings the proxy can decode for masking; identity when none is left. */
export function decodableCodings(acceptEncoding: string): string {
  const kept = acceptEncoding
    .split(',')
    .map((t) => t.trim())
    .filter((t) => DECODABLE_CODINGS.has(t.split(';')[0]!.trim().toLowerCase()));
  return kept.length > 0 ? kept.join(', ') : 'identity';
}

/** Decoders for a response's content-encoding, outermost last as applied; undefined when one is unknown. */
export function decodersFor(contentEncoding: string | undefined): Transform[] | undefined {
  const codings = (contentEncoding ?? '')
    .split(',')
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
  const decoders: Transform[] = [];
  for (const coding of codings.reverse()) {
    if (coding === 'gzip' || coding === 'x-gzip') decoders.push(createGunzip());
    else if (coding === 'deflate') decoders.push(createInflate());
    else if (coding === 'br') decoders.push(createBrotliDecompress());
    else return undefined;
  }
  return decoders;
}

export function collect(stream: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on('data', (chunk: Buffer) => chunks.push(chunk));
    stream.once('end', () => resolve(Buffer.concat(chunks)));
    stream.once('error', reject);
    stream.once('close', () => reject(new Error('client went away mid-body'))); // a no-op after 'end'
  });
}

/**
 * Pipes `stages` into one another and into `res`; any failure tears the whole chain down (the client sees a
 * cut response, never a partial one presented as complete). Plain pipe() rather than stream.pipeline: this
 * runs for every response, and pipeline pays for an AbortController and an AbortError per call.
 */
export function relay(stages: Readable[], res: ServerResponse, done: () => void): void {
  const teardown = () => {
    for (const stage of stages) stage.destroy();
    res.destroy();
  };
  stages.forEach((stage, i) => {
    stage.once('error', teardown);
    stage.pipe(i + 1 < stages.length ? (stages[i + 1] as unknown as NodeJS.WritableStream) : res);
  });
  res.once('finish', done);
  res.once('close', () => {
    if (!res.writableFinished) teardown();
  });
}
