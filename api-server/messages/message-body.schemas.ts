import { z } from 'zod';
import { Metadata } from '../core/schemas.js';
import { SecretsMap } from '../secrets/secrets.schemas.js';

/** Shapes shared by sends and conversations (which carry `initial_message`), kept apart to avoid an import cycle. */

export const Filler = z.object({ enabled: z.boolean() }).meta({ id: 'Filler' });
export const OnCapacity = z.enum(['reject', 'hold']);

/** A typed block; the type is an open enum (known: text, tool_call, tool_result) and unknown keys are kept. */
export const Part = z
  .object({ type: z.string().min(1).max(64), text: z.string().optional() })
  .catchall(z.unknown())
  .meta({ id: 'MessagePart' });

const MAX_CONTENT_LENGTH = 200_000;

export const SendMessageBody = z.object({
  content: z.string().min(1).max(MAX_CONTENT_LENGTH),
  parts: z.array(Part).max(100).optional(),
  skill_ids: z.array(z.string().min(1).max(100)).max(1000).optional(),
  env: z.record(z.string().min(1).max(255), z.string().max(10_000)).optional(),
  secrets: SecretsMap.refine((value) => Object.keys(value).length >= 1, { message: 'at least 1 property' })
    .optional()
    .describe('Alias to value, or to `{value, allowed_hosts}`; write-only; scoped to this run; never echoed'),
  filler: Filler.optional(),
  on_capacity: OnCapacity.optional(),
  metadata: Metadata.optional(),
});

/** One line of a run's NDJSON stream: an agent event verbatim, a platform line, or a keepalive ping. */
export const StreamLine = z.record(z.string(), z.unknown()).meta({
  id: 'StreamLine',
  description:
    'NDJSON: one JSON object per line. Agent events (type system, stream_event, assistant, user, result) verbatim; ' +
    'platform lines {"object":"platform.event","type":...}; keepalive {"event":"ping"}. Ignore unknown lines.',
});
