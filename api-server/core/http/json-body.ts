import type { IncomingMessage } from 'node:http';
import { bodyParser } from '@koa/bodyparser';
import type { Context, Next } from 'koa';
import { ProblemError } from '../problems.js';
import { bodyParseError } from './middleware.js';

/** Past this much, a refused body is not read to its end: the connection is closed instead. */
const MAX_DISCARDED_BYTES = 32 * 1024 * 1024;
const PARSED_METHODS = ['POST', 'PUT', 'PATCH'];

/**
 * Parses JSON bodies up to `limit` bytes, with two guarantees the parser alone does not give:
 * - bytes that are not UTF-8 are refused (400), where the parser's decoder would put U+FFFD in
 *   their place and the altered text would be stored;
 * - a body over the limit is read to its end (up to a bound) before the 413 is sent, so a client
 *   that finishes its upload before reading the answer gets the answer instead of a stalled or
 *   reset connection.
 */
export function jsonBody(options: { limit: string }) {
  const parse = bodyParser({ enableTypes: ['json'], jsonLimit: options.limit, onError: bodyParseError });
  return async (ctx: Context, next: Next): Promise<void> => {
    if (!PARSED_METHODS.includes(ctx.method)) return next();
    const utf8 = watchUtf8(ctx);
    let parsed = false;
    try {
      await parse(ctx, async () => {
        parsed = true;
        if (!utf8.finish()) {
          throw new ProblemError('validation-error', 400, { detail: 'The request body is not valid UTF-8.' });
        }
        await next();
      });
    } catch (error) {
      utf8.finish();
      if (!parsed && error instanceof ProblemError && error.kind === 'payload-too-large') {
        if (!(await discardBody(ctx.req, MAX_DISCARDED_BYTES))) ctx.set('Connection', 'close');
      }
      throw error;
    }
  };
}

/**
 * Checks the raw bytes as the parser reads them. The listener is added in the same tick as the
 * parser's own (the stream only starts flowing on the next one), so it sees every chunk the parser
 * sees. Compressed bodies are decoded by the parser itself, so they are not checked here.
 */
function watchUtf8(ctx: Context): { finish(): boolean } {
  const encoding = ctx.get('Content-Encoding').toLowerCase();
  if (encoding !== '' && encoding !== 'identity') return { finish: () => true };
  const decoder = new TextDecoder('utf-8', { fatal: true });
  let valid = true;
  let finished = false;
  const check = (chunk: Buffer) => {
    if (!valid) return;
    try {
      decoder.decode(chunk, { stream: true });
    } catch {
      valid = false;
    }
  };
  ctx.req.on('data', check);
  return {
    finish() {
      if (finished) return valid;
      finished = true;
      ctx.req.off('data', check);
      if (valid) {
        try {
          decoder.decode();
        } catch {
          valid = false;
        }
      }
      return valid;
    },
  };
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
