import type Router from '@koa/router';
import type { Context } from 'koa';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { CoreDeps } from '../deps.js';
import { withIdempotency } from '../idempotency.js';
import type { Principal, ServicePrincipal, UserPrincipal } from '../principal.js';
import { type ProblemError, problemBody, problems } from '../problems.js';
import type { RateClass } from '../rate-limit.js';
import { sendNdjson } from './ndjson.js';
import type { RouteResult } from './route-result.js';
import { fieldErrors, unsafeInput } from './validation.js';

/**
 * A route is data: method, path, who may call it, the zod schemas of its inputs and outputs, and a
 * handler. The same definition drives validation, idempotency, the response and the OpenAPI
 * document, so they cannot drift apart.
 */
export type AuthMode = 'service' | 'service-or-user' | 'admin' | 'signature';

type PrincipalFor<A extends AuthMode> = A extends 'service'
  ? ServicePrincipal
  : A extends 'admin'
    ? Extract<Principal, { kind: 'admin' }>
    : A extends 'signature'
      ? Extract<Principal, { kind: 'webhook' }>
      : ServicePrincipal | UserPrincipal;

export interface ResponseSpec {
  description: string;
  schema?: z.ZodType;
  /** Defaults to application/json. */
  contentType?: string;
}

export interface RouteRequest<A extends AuthMode, P, Q, B, D extends CoreDeps = CoreDeps> {
  params: P;
  query: Q;
  body: B;
  principal: PrincipalFor<A>;
  deps: D;
  requestId: string;
  ctx: Context;
}

const NoInput = z.object({});
type NoInput = typeof NoInput;

export interface RouteDefinition<
  A extends AuthMode = AuthMode,
  P extends z.ZodType = NoInput,
  Q extends z.ZodType = NoInput,
  B extends z.ZodType = NoInput,
  D extends CoreDeps = CoreDeps,
> {
  method: 'get' | 'post' | 'put' | 'patch' | 'delete';
  /** Koa style: `/tenants/:tenant_id`. */
  path: string;
  operationId: string;
  summary: string;
  tag: string;
  auth: A;
  params?: P;
  query?: Q;
  body?: B;
  /** A typical body, shown in the OpenAPI document (a test checks it passes `body`). */
  bodyExample?: z.input<B>;
  /** Accepts `Idempotency-Key` (POSTs that create or trigger). */
  idempotent?: boolean;
  /**
   * The rate limit the route counts against; `other` when absent. A function reads the raw,
   * not yet validated body, for routes that only sometimes start a run.
   */
  rateClass?: RateClass | ((rawBody: unknown) => RateClass);
  responses: Record<number, ResponseSpec>;
  handler: (request: RouteRequest<A, z.output<P>, z.output<Q>, z.output<B>, D>) => Promise<RouteResult>;
}

/** A route of any input shape, as the registry holds them. */
// biome-ignore lint/suspicious/noExplicitAny: erases the generics on purpose so routes of different shapes share one list
export type AnyRoute = RouteDefinition<any, any, any, any, any>;

/**
 * `defineRoute` for an application whose handlers see deps of type D (the app binds it once, in
 * `api-server/define-route.ts`, so this machinery never names a feature).
 */
export function routeDefiner<D extends CoreDeps>() {
  return function defineRoute<
    A extends AuthMode,
    P extends z.ZodType = NoInput,
    Q extends z.ZodType = NoInput,
    B extends z.ZodType = NoInput,
  >(route: RouteDefinition<A, P, Q, B, D>): AnyRoute {
    return route as AnyRoute;
  };
}

/**
 * The responses the OpenAPI document shows: the declared ones, plus 429 `rate-limited` on every
 * route a service key or user calls (the operator's admin routes are not limited).
 */
export function documentedResponses(route: AnyRoute): Record<number, ResponseSpec> {
  if (route.auth === 'admin') return route.responses;
  const limited = 'rate-limited, with Retry-After';
  const declared = route.responses[429];
  return { ...route.responses, 429: { description: declared ? `${declared.description}; or ${limited}` : limited } };
}

export type Authenticate<D extends CoreDeps> = (ctx: Context, mode: AuthMode, deps: D) => Promise<Principal>;

export function mountRoutes<D extends CoreDeps>(router: Router, routes: AnyRoute[], deps: D, authenticate: Authenticate<D>): void {
  for (const route of routes) {
    router[route.method](route.operationId, route.path, async (ctx) => {
      const principal = await authenticate(ctx, route.auth, deps);
      await deps.rateLimiter.enforce(principal, rateClassOf(route, ctx.request.body));
      // Path and query problems are malformed requests (400); body problems are semantic (422).
      // Input that cannot be kept as sent is refused before anything, idempotency records included.
      refuseUnsafeInput(ctx.params, 400);
      refuseUnsafeInput(ctx.query, 400);
      refuseUnsafeInput(ctx.request.body, 422);
      const params = parseInput(route.params ?? NoInput, ctx.params, 400);
      const query = parseInput(route.query ?? NoInput, ctx.query, 400);
      const requestId = ctx.state.requestId as string;
      // What the handler and the services it calls log carries the request's id.
      const requestDeps: D = { ...deps, logger: ctx.state.logger as Logger };
      const run = async (): Promise<RouteResult> => {
        const body = parseInput(route.body ?? NoInput, ctx.request.body ?? {}, 422);
        return route.handler({ params, query, body, principal, deps: requestDeps, requestId, ctx });
      };
      const result = route.idempotent
        ? await withIdempotency(deps, ctx, principal, run, (error) => problemResult(error, ctx, deps))
        : await run();
      if (deps.validateResponses) checkResponse(route, result);
      if (result.stream) {
        const { messageId, after = 0 } = result.stream;
        sendNdjson(ctx, (signal) => deps.followRun(messageId, after, signal), {
          pingIntervalMs: deps.config.pingIntervalMs,
          headers: result.headers,
        });
        return;
      }
      respond(ctx, result);
    });
  }
}

/**
 * Text that cannot be kept as sent, or a body nested too deep, is refused whatever the field (even
 * one the schema would strip), so no route can pass it on to the database.
 */
function refuseUnsafeInput(input: unknown, status: 400 | 422): void {
  const errors = unsafeInput(input);
  if (errors.length > 0) throw status === 400 ? problems.badRequest(errors) : problems.invalid(errors);
}

function rateClassOf(route: AnyRoute, rawBody: unknown): RateClass {
  if (typeof route.rateClass === 'function') return route.rateClass(rawBody);
  return route.rateClass ?? 'other';
}

function parseInput(schema: z.ZodType, input: unknown, status: 400 | 422): unknown {
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  const errors = fieldErrors(parsed.error);
  throw status === 400 ? problems.badRequest(errors) : problems.invalid(errors);
}

export function problemResult(error: ProblemError, ctx: Context, deps: CoreDeps): RouteResult {
  return {
    status: error.status,
    body: problemBody(error, {
      baseUrl: deps.config.publicUrl ?? `${ctx.protocol}://${ctx.host}`,
      instance: ctx.path,
      requestId: ctx.state.requestId as string,
    }),
    headers: error.options.headers,
    contentType: 'application/problem+json',
  };
}

export function respond(ctx: Context, result: RouteResult): void {
  ctx.status = result.status;
  for (const [name, value] of Object.entries(result.headers ?? {})) ctx.set(name, value);
  if (result.body === undefined) {
    ctx.body = null;
    ctx.status = result.status;
    return;
  }
  if (isJsonResponse(result)) {
    // What Koa sends for a JSON body, without its MIME lookups on every response: the header set
    // first, so the text body keeps it.
    ctx.set('Content-Type', JSON_CONTENT_TYPE);
    ctx.body = typeof result.body === 'string' ? result.body : JSON.stringify(result.body);
    return;
  }
  ctx.body = result.body;
  if (result.contentType) ctx.type = result.contentType;
}

const JSON_CONTENT_TYPE = 'application/json; charset=utf-8';

/** A plain object or array with no content type, or JSON text (`pageJson`) declared as such. */
function isJsonResponse(result: RouteResult): boolean {
  const { body, contentType } = result;
  if (contentType === 'application/json') return typeof body === 'string' || isPlainJson(body);
  return contentType === undefined && isPlainJson(body);
}

function isPlainJson(body: unknown): boolean {
  if (typeof body !== 'object' || body === null) return false;
  return Array.isArray(body) || Object.getPrototypeOf(body) === Object.prototype;
}

function checkResponse(route: AnyRoute, result: RouteResult): void {
  if (result.contentType === 'application/problem+json' || result.stream) return;
  const spec = route.responses[result.status];
  if (!spec) throw new Error(`${route.operationId} answered ${result.status}, which it does not declare`);
  if (!spec.schema) return;
  // A body rendered ahead (JSON text) is checked as what the client will parse.
  const body = typeof result.body === 'string' && result.contentType === 'application/json' ? JSON.parse(result.body) : result.body;
  const parsed = spec.schema.safeParse(body);
  if (!parsed.success) {
    throw new Error(`${route.operationId} ${result.status} body does not match its schema: ${parsed.error.message}`);
  }
}
