import { defineRoute } from '../define-route.js';
import { GitHubDeliveryBody, WebhookReceipt } from './webhooks.schemas.js';
import { receiveGitHubDelivery } from './webhooks.service.js';

export const webhookRoutes = [
  defineRoute({
    method: 'post',
    path: '/webhooks/github',
    operationId: 'receiveGitHubWebhook',
    summary: 'Receive a GitHub delivery: a push queues the sync of every registered repository on that URL and branch',
    tag: 'Webhooks',
    // GitHub signs the body with the integration's webhook secret (X-Hub-Signature-256); the handler checks it.
    auth: 'signature',
    body: GitHubDeliveryBody,
    bodyExample: {
      ref: 'refs/heads/main',
      after: '6113728f27ae82c7b1a177c8d03f9e96e0adf246',
      repository: { clone_url: 'https://github.com/acme/skills.git', pushed_at: 1764400000 },
    },
    responses: {
      200: { description: 'Verified; nothing to do (ping, another event or branch, a redelivery, already synced)', schema: WebhookReceipt },
      202: { description: 'Verified; syncs queued', schema: WebhookReceipt },
      401: { description: 'Missing signature, or one no webhook secret verifies; nothing was done' },
      422: { description: 'The body is not a JSON object' },
    },
    handler: async ({ deps, body, ctx }) => {
      const receipt = await receiveGitHubDelivery(deps, {
        event: ctx.get('X-GitHub-Event') || 'unknown',
        deliveryId: ctx.get('X-GitHub-Delivery') || undefined,
        signature: ctx.get('X-Hub-Signature-256') || undefined,
        rawBody: (ctx.request as { rawBody?: string }).rawBody ?? '',
        payload: body,
      });
      return { status: receipt.outcome === 'queued' ? 202 : 200, body: receipt };
    },
  }),
];
