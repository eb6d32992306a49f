import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import { bodyParser } from '@koa/bodyparser';
import type { Context, Next } from 'koa';
import { ProblemError } from '../problems.js';
import { bodyParseError } from './middleware.js';

/** Past this much, a refused body is not read to its end: the connection is closed instead. */
const MAX_DISCARDED_BYTES = 32 * 1024 * 1024;
const PARSED_METHODS = new Set(['POST', 'PUT', 'PATCH']);
/** The media types read as JSON (those of the generic parser); any other leaves the body `{}`. */
const JSON_TYPES = [
  'application/json',
  'application/json-patch+json',
  'application/vnd.api+json',
  'application/csp-report',
  'application/reports+json',
  'application/scim+json',
];
/** Only an object or an array is a body (after JSON's own whitespace). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: JSON's own whitespace (tab, LF, CR) is exactly what is skipped here
const OBJECT_OR_ARRAY = /^[\x20\x09\x0a\x0d]*[[{]/;
/** A `__proto__` key, possibly escaped: such a body is refused rather than risk prototype pollution. */
const PROTO_KEY =
  /"(?:_|\\u005[Ff])(?:_|\\u005[Ff])(?:p|\\u0070)(?:r|\\u0072)(?:o|\\u006[Ff])(?:t|\\u0074)(?:o|\\u006[Ff])(?:_|\\u005[Ff])(?:_|\\u005[Ff])"\s*:/;

/**
 * Parses JSON bodies up to `limitBytes` into `ctx.request.body` (and the text into `rawBody`, which
 * webhook signatures need), with two guarantees a generic parser does not give:
 * - bytes that are not UTF-8 are refused (400), where a decoder would put U+FFFD in their place and
 *   the altered text would be stored;
 * - a body over the limit is read to its end (up to a bound) before the 413 is sent, so a client
 *   that finishes its upload before reading the answer gets the answer instead of a stalled or
 *   reset connection.
 * Plain bodies, nearly all of them, are read here in one pass, cheaper than the generic parser with
 * a UTF-8 watcher beside it; compressed ones go through the generic parser, which inflates them,
 * and their decoded text is not checked for UTF-8 (as before).
 */
export function jsonBody(options: { limitBytes: number }) {
  const compressed = bodyParser({ enableTypes: ['json'], jsonLimit: options.limitBytes, onError: bodyParseError });
  return async (ctx: Context, next: Next): Promise<void> => {
    if (!PARSED_METHODS.has(ctx.method)) return next();
    const encoding = ctx.req.headers['content-encoding'];
    try {
      if (encoding !== undefined && encoding.toLowerCase() !== 'identity') {
        await compressed(ctx, async () => {});
      } else if (ctx.req.closed) {
        ctx.status = 499;
        ctx.body = 'Request already closed';
        return;
      } else if (hasBody(ctx.req) && verdictFor(parsedJsonVerdicts, ctx, JSON_TYPES)) {
        const text = await readUtf8Text(ctx.req, options.limitBytes);
        ctx.request.body = text === '' ? {} : parseJsonBody(text);
        (ctx.request as { rawBody?: string }).rawBody = text;
      } else {
        ctx.request.body = {};
      }
    } catch (error) {
      if (error instanceof ProblemError && error.kind === 'payload-too-large') {
        if (!(await discardBody(ctx.req, MAX_DISCARDED_BYTES))) ctx.set('Connection', 'close');
      }
      throw error;
    }
    await next();
  };
}

/** A body that is not JSON is refused outright rather than silently read as empty. */
export async function requireJsonBody(ctx: Context, next: Next): Promise<void> {
  if (PARSED_METHODS.has(ctx.method) && sendsBody(ctx.req) && !verdictFor(anyJsonVerdicts, ctx, JSON_OR_SUFFIX)) {
    throw new ProblemError('unsupported-media-type', 415, { detail: 'Send the request body as application/json.' });
  }
  await next();
}

const JSON_OR_SUFFIX = ['json', '+json'];

function sendsBody(req: IncomingMessage): boolean {
  return Number(req.headers['content-length'] || 0) > 0 || (req.headers['transfer-encoding'] ?? '') !== '';
}

/** As Koa's `is` counts it; a request without a body reads as `{}` whatever its type. */
function hasBody(req: IncomingMessage): boolean {
  return req.headers['transfer-encoding'] !== undefined || !Number.isNaN(Number(req.headers['content-length'] ?? NaN));
}

/**
 * Whether a request's Content-Type is one of `types`, as Koa's `is` says, remembered per header
 * value (a handful in practice; the bound only guards against a flood of odd ones). Only asked for
 * requests with a body, where `is` depends on the header alone.
 */
function verdictFor(verdicts: Map<string, boolean>, ctx: Context, types: string[]): boolean {
  const contentType = ctx.req.headers['content-type'];
  if (contentType === undefined) return false;
  let verdict = verdicts.get(contentType);
  if (verdict === undefined) {
    verdict = typeof ctx.request.is(types) === 'string';
    if (verdicts.size >= CONTENT_TYPE_VERDICTS_MAX) verdicts.clear();
    verdicts.set(contentType, verdict);
  }
  return verdict;
}

const CONTENT_TYPE_VERDICTS_MAX = 100;
const anyJsonVerdicts = new Map<string, boolean>();
const parsedJsonVerdicts = new Map<string, boolean>();

function parseJsonBody(text: string): unknown {
  if (!OBJECT_OR_ARRAY.test(text)) throw notJson();
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw notJson();
  }
  if (PROTO_KEY.test(text) && holdsProtoKey(parsed)) throw notJson();
  return parsed;
}

function holdsProtoKey(value: unknown): boolean {
  const pending = [value];
  while (pending.length > 0) {
    const node = pending.pop();
    if (typeof node !== 'object' || node === null) continue;
    if (Object.hasOwn(node, '__proto__')) return true;
    for (const child of Object.values(node)) pending.push(child);
  }
  return false;
}

function notJson(): ProblemError {
  return new ProblemError('validation-error', 400, { detail: 'The request body is not valid JSON.' });
}

function tooLarge(): ProblemError {
  return new ProblemError('payload-too-large', 413, { detail: 'The request body is too large.' });
}

/**
 * The body as text: 413 past `limitBytes` (at once when Content-Length says so), 400 when the
 * request ends early, its length disagrees with Content-Length or its bytes are not UTF-8. A
 * leading byte-order mark is dropped.
 */
async function readUtf8Text(req: IncomingMessage, limitBytes: number): Promise<string> {
  const bytes = await readBytes(req, limitBytes);
  if (!isUtf8(bytes)) throw new ProblemError('validation-error', 400, { detail: 'The request body is not valid UTF-8.' });
  const text = bytes.toString('utf8');
  return text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
}

function readBytes(req: IncomingMessage, limitBytes: number): Promise<Buffer> {
  const header = req.headers['content-length'];
  const declared = header === undefined ? null : Number(header);
  if (declared !== null && declared > limitBytes) return Promise.reject(tooLarge());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let received = 0;
    const settle = (error: ProblemError | null) => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onAborted);
      req.off('aborted', onAborted);
      req.off('close', onAborted);
      if (error) {
        req.pause();
        reject(error);
      } else {
        resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, received));
      }
    };
    const onData = (chunk: Buffer) => {
      received += chunk.length;
      if (received > limitBytes) settle(tooLarge());
      else chunks.push(chunk);
    };
    const onEnd = () => settle(declared !== null && received !== declared ? notJson() : null);
    const onAborted = () => settle(notJson());
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('error', onAborted);
    req.once('aborted', onAborted);
    req.once('close', onAborted);
  });
}

/** Reads and drops the rest of a request body; false when more than `maxBytes` remain. */
function discardBody(req: IncomingMessage, maxBytes: number): Promise<boolean> {
  const declared = Number(req.headers['content-length']);
  if (req.complete || req.destroyed) return Promise.resolve(true);
  if (Number.isFinite(declared) && declared > maxBytes) return Promise.resolve(false);
  return new Promise((resolve) => {
    let seen = 0;
    const settle = (drained: boolean) => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('close', onEnd);
      req.off('error', onEnd);
      if (!drained) req.pause();
      resolve(drained);
    };
    const onData = (chunk: Buffer) => {
      seen += chunk.length;
      if (seen > maxBytes) settle(false);
    };
    const onEnd = () => settle(true);
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('close', onEnd);
    req.once('error', onEnd);
    req.resume();
  });
}
