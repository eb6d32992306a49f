import type { Context, Next } from 'koa';
import type { Logger } from 'pino';
import type { CoreDeps } from '../deps.js';
import { type FieldError, ProblemError, problems } from '../problems.js';
import { problemResult, respond } from './route.js';
import { toPointer } from './validation.js';

/**
 * A caller's `X-Request-Id` we keep: short, and only characters that cannot break a log line, a
 * header or an annotation (no whitespace, no control or non-ASCII characters). Anything else is
 * replaced, never trimmed or escaped: an id that is not the caller's own would mislead a search.
 */
const INCOMING_REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * Correlation, access log and the one error boundary. A caller-supplied `X-Request-Id` is kept when
 * it is sane (so a host can trace its own ids through us); otherwise we mint `req_...`. The request's
 * logger (`ctx.state.logger`) carries it on every line the request's handling writes.
 */
export function requestContext(deps: CoreDeps) {
  return async (ctx: Context, next: Next): Promise<void> => {
    const started = process.hrtime.bigint();
    const incoming = ctx.get('X-Request-Id');
    const requestId = INCOMING_REQUEST_ID.test(incoming) ? incoming : deps.newId('request');
    const log = deps.logger.child({ request_id: requestId });
    ctx.state.requestId = requestId;
    ctx.state.logger = log;
    ctx.set('X-Request-Id', requestId);
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) {
        throw new ProblemError('not-found', 404, { detail: `No route for ${ctx.method} ${ctx.path}.` });
      }
    } catch (error) {
      handleError(ctx, error, deps);
    } finally {
      const durationMs = Number(process.hrtime.bigint() - started) / 1e6;
      // The route template, never the path: a path carries ids.
      const route = (ctx as { _matchedRoute?: unknown })._matchedRoute;
      deps.metrics.httpRequest(ctx.method, typeof route === 'string' ? route : 'unmatched', ctx.status, durationMs / 1000);
      // Only the path: query strings and bodies may carry user data and are never logged.
      log.info({ method: ctx.method, path: ctx.path, status: ctx.status, duration_ms: durationMs }, 'request');
    }
  };
}

function handleError(ctx: Context, error: unknown, deps: CoreDeps): void {
  let problem: ProblemError;
  if (error instanceof ProblemError) {
    problem = error;
  } else if (isHttpError(error) && error.status === 405) {
    problem = new ProblemError('method-not-allowed', 405, { detail: `${ctx.method} is not allowed here.` });
  } else {
    (ctx.state.logger as Logger).error({ err: error }, 'unhandled error');
    problem = new ProblemError('internal-error', 500, {
      detail: 'An unexpected error occurred; quote the request_id when reporting it.',
    });
  }
  respond(ctx, problemResult(problem, ctx, deps));
}

function isHttpError(error: unknown): error is { status: number } {
  return typeof error === 'object' && error !== null && typeof (error as { status?: unknown }).status === 'number';
}

/** Body-parser failures become problems: malformed JSON is 400, an oversized body 413. */
export function bodyParseError(error: Error & { status?: number; type?: string }): never {
  if (error.status === 413) {
    throw new ProblemError('payload-too-large', 413, { detail: 'The request body is too large.' });
  }
  if (error.status === 415) {
    throw new ProblemError('unsupported-media-type', 415, { detail: 'Send the request body as application/json.' });
  }
  throw new ProblemError('validation-error', 400, { detail: 'The request body is not valid JSON.' });
}

/**
 * Refuses a URL that does not percent-decode to UTF-8 (`%ED%A0%80`, `%C0%AF`, `%FF`, a stray `%`)
 * or holds raw bytes outside printable ASCII. Left alone, the router keeps such a path segment
 * undecoded (so `x%FF` would become an external id) and the query parser puts U+FFFD in its place.
 */
export async function requireWellFormedUrl(ctx: Context, next: Next): Promise<void> {
  if (!PRINTABLE_ASCII.test(ctx.url)) throw problems.badRequest([], 'The URL path is not valid percent-encoded UTF-8.');
  // Without a `%` every component decodes: most requests stop here.
  if (ctx.url.includes('%')) checkPercentEncoding(ctx);
  await next();
}

function checkPercentEncoding(ctx: Context): void {
  // The path decodes as a whole exactly when each segment does: a UTF-8 sequence never spans a `/`.
  if (!decodes(ctx.path)) throw problems.badRequest([], 'The URL path is not valid percent-encoded UTF-8.');
  if (ctx.querystring === '') return;
  const errors: FieldError[] = [];
  for (const pair of ctx.querystring.split('&')) {
    const [name = '', value = ''] = pair.replace(/\+/g, ' ').split(/=(.*)/s);
    if (decodes(name) && decodes(value)) continue;
    errors.push({
      pointer: decodes(name) ? toPointer([decodeURIComponent(name)]) : '',
      message: 'is not valid percent-encoded UTF-8',
    });
  }
  if (errors.length > 0) throw problems.badRequest(errors, 'The query string is not valid percent-encoded UTF-8.');
}

const PRINTABLE_ASCII = /^[\x21-\x7e]*$/;

function decodes(component: string): boolean {
  try {
    decodeURIComponent(component);
    return true;
  } catch {
    return false;
  }
}
