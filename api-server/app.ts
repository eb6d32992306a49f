import Router from '@koa/router';
import Koa from 'koa';
import { sql } from 'kysely';
import { authenticate } from './auth/authenticate.js';
import type { AppDeps } from './deps.js';
import { sandboxWeakenings } from './config.js';
import { constantTimeEqual } from './core/crypto.js';
import { jsonBody, requireJsonBody } from './core/http/json-body.js';
import { requestContext, requireWellFormedUrl } from './core/http/middleware.js';
import { buildOpenApi } from './core/http/openapi.js';
import { mountRoutes } from './core/http/route.js';
import { ProblemError, problems } from './core/problems.js';
import { allRoutes } from './routes.js';
import { shuttingDownProblem } from './runs/run-problems.js';

export const API_VERSION = '0.1.0';
const MAX_JSON_BODY_BYTES = 1024 * 1024;

/** Builds the Koa application; `server.ts` owns the process-level lifecycle around it. */
export function createApp(deps: AppDeps): Koa {
  const app = new Koa({ proxy: false });
  app.silent = true; // errors are logged once, by requestContext

  const router = new Router();
  router.get('/healthz', (ctx) => {
    ctx.body = { status: 'ok' };
  });
  router.get('/readyz', async (ctx) => {
    if (!deps.runtime.runs.accepting) throw shuttingDownProblem();
    const unavailable = deps.runtime.provider.unavailableReason;
    if (unavailable) throw new ProblemError('sandbox-unavailable', 503, { detail: unavailable });
    // Constant SQL without parameters: one simple-protocol round trip, no statement to prepare.
    await sql`select 1`.execute(deps.db);
    const weakenings = sandboxWeakenings(deps.config);
    ctx.body = weakenings.length > 0 ? { status: 'ready', sandbox_weakened_by: weakenings } : { status: 'ready' };
  });
  router.get('/metrics', async (ctx) => {
    requireMetricsToken(ctx, deps.config.metricsToken);
    ctx.type = deps.metrics.registry.contentType;
    ctx.body = await deps.metrics.registry.metrics();
  });
  let openApi: unknown;
  router.get('/openapi.json', (ctx) => {
    openApi ??= buildOpenApi(allRoutes, { version: API_VERSION, serverUrl: deps.config.publicUrl });
    ctx.body = openApi;
  });
  mountRoutes(router, allRoutes, deps, authenticate);

  app.use(requestContext(deps));
  app.use(closeWhileShuttingDown(deps));
  app.use(requireWellFormedUrl);
  app.use(requireJsonBody);
  app.use(jsonBody({ limitBytes: MAX_JSON_BODY_BYTES }));
  app.use(router.routes());
  app.use(router.allowedMethods({ throw: true }));
  return app;
}

/** While the node shuts down, connections close after their response, so keep-alive clients move to another node. */
function closeWhileShuttingDown(deps: AppDeps): Koa.Middleware {
  return async (ctx, next) => {
    if (!deps.runtime.runs.accepting) ctx.set('Connection', 'close');
    await next();
  };
}

/** With ACIS_METRICS_TOKEN set, `/metrics` wants it as a bearer token; without, it is open. */
function requireMetricsToken(ctx: Koa.Context, token: string | undefined): void {
  if (token === undefined) return;
  const given = Buffer.from(/^Bearer (.+)$/i.exec(ctx.get('Authorization'))?.[1] ?? '');
  const expected = Buffer.from(token);
  if (!constantTimeEqual(given, expected)) {
    throw problems.unauthorized('GET /metrics needs the metrics token (ACIS_METRICS_TOKEN) as a bearer token.');
  }
}
