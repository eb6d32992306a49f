import { adminRoutes } from './admin/admin.routes.js';
import { authRoutes } from './auth/auth.routes.js';
import type { AnyRoute } from './core/http/route.js';
import { integrationRoutes } from './integrations/integrations.routes.js';
import { tenantRoutes } from './tenants/tenants.routes.js';

/** Every API route, by resource module. The OpenAPI document is generated from this list. */
export const allRoutes: AnyRoute[] = [
  ...authRoutes,
  ...integrationRoutes,
  ...tenantRoutes,
  ...adminRoutes,
];
