import { z } from 'zod';

const Url = z.string().max(2048);

/** What a GitHub delivery is read for; every other field is accepted and ignored. */
export const GitHubDeliveryBody = z
  .looseObject({
    ref: z.string().max(1024).optional(),
    after: z.string().max(64).optional(),
    deleted: z.boolean().optional(),
    repository: z
      .looseObject({
        clone_url: Url.optional(),
        html_url: Url.optional(),
        ssh_url: Url.optional(),
        git_url: Url.optional(),
        pushed_at: z
          .union([z.number(), z.string().max(64)])
          .optional()
          .describe('unix seconds in push events'),
      })
      .optional(),
  })
  .meta({ id: 'GitHubDelivery', description: 'A GitHub webhook payload (push and ping are acted on)' });
export type GitHubDeliveryBody = z.output<typeof GitHubDeliveryBody>;

export const WebhookReceipt = z
  .object({
    object: z.literal('webhook_delivery'),
    delivery_id: z.string().nullable(),
    event: z.string(),
    outcome: z.enum(['queued', 'up_to_date', 'ignored', 'duplicate', 'pong']),
    /** Repositories a sync was started or queued for. */
    syncs_queued: z.number().int(),
    detail: z.string(),
  })
  .meta({ id: 'WebhookReceipt', description: 'What a webhook delivery did' });
export type WebhookReceipt = z.output<typeof WebhookReceipt>;
