import { routeDefiner } from './core/http/route.js';
import type { AppDeps } from './deps.js';

/** Defines a route whose handler sees the application's deps (see core/http/route.ts). */
export const defineRoute = routeDefiner<AppDeps>();
