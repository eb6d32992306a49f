import { bodyParser } from '@koa/bodyparser';
import Router from '@koa/router';
import Koa from 'koa';
import { authenticate } from './auth/authenticate.js';
import type { AppDeps } from './core/deps.js';
import { bodyParseError, requestContext } from './core/http/middleware.js';
import { buildOpenApi } from './core/http/openapi.js';
import { mountRoutes } from './core/http/route.js';
import { ProblemError } from './core/problems.js';
import { allRoutes } from './routes.js';
import { shuttingDownProblem } from './runs/run-manager.js';

export const API_VERSION = '0.1.0';
const MAX_JSON_BODY = '1mb';

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
    await deps.db.selectNoFrom((eb) => eb.val(1).as('one')).execute();
    ctx.body = { status: 'ready' };
  });
  let openApi: unknown;
  router.get('/openapi.json', (ctx) => {
    openApi ??= buildOpenApi(allRoutes, { version: API_VERSION, serverUrl: deps.config.publicUrl });
    ctx.body = openApi;
  });
  mountRoutes(router, allRoutes, deps, authenticate);

  app.use(requestContext(deps));
  app.use(closeWhileShuttingDown(deps));
  app.use(requireJsonBody);
  app.use(bodyParser({ enableTypes: ['json'], jsonLimit: MAX_JSON_BODY, onError: bodyParseError }));
  app.use(router.routes());
  app.use(router.allowedMethods({ throw: true }));
  return app;
}

/** A body that is not JSON is refused outright rather than silently read as empty. */
async function requireJsonBody(ctx: Koa.Context, next: Koa.Next): Promise<void> {
  const hasBody = Number(ctx.get('Content-Length') || 0) > 0 || ctx.get('Transfer-Encoding') !== '';
  if (hasBody && ['POST', 'PUT', 'PATCH'].includes(ctx.method) && !ctx.is('json', '+json')) {
    throw new ProblemError('unsupported-media-type', 415, { detail: 'Send the request body as application/json.' });
  }
  await next();
}

/** While the node shuts down, connections close after their response, so keep-alive clients move to another node. */
function closeWhileShuttingDown(deps: AppDeps): Koa.Middleware {
  return async (ctx, next) => {
    if (!deps.runtime.runs.accepting) ctx.set('Connection', 'close');
    await next();
  };
}
