import { adminRoutes } from './admin/admin.routes.js';
import { approvalRoutes } from './approvals/approvals.routes.js';
import { authRoutes } from './auth/auth.routes.js';
import { conversationRoutes } from './conversations/conversations.routes.js';
import type { AnyRoute } from './core/http/route.js';
import { credentialRoutes } from './credentials/credentials.routes.js';
import { integrationRoutes } from './integrations/integrations.routes.js';
import { messageRoutes } from './messages/messages.routes.js';
import { repositoryRoutes } from './repositories/repositories.routes.js';
import { roleRoutes } from './roles/roles.routes.js';
import { secretRoutes } from './secrets/secrets.routes.js';
import { skillRoutes } from './skills/skills.routes.js';
import { tenantRoutes } from './tenants/tenants.routes.js';
import { userRoutes } from './users/users.routes.js';
import { webhookRoutes } from './webhooks/webhooks.routes.js';

/** Every API route, by resource module. The OpenAPI document is generated from this list. */
export const allRoutes: AnyRoute[] = [
  ...authRoutes,
  ...integrationRoutes,
  ...tenantRoutes,
  ...userRoutes,
  ...roleRoutes,
  ...credentialRoutes,
  ...repositoryRoutes,
  ...skillRoutes,
  ...conversationRoutes,
  ...messageRoutes,
  ...secretRoutes,
  ...approvalRoutes,
  ...adminRoutes,
  ...webhookRoutes,
];
