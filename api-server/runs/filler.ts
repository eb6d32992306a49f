import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import type { StreamLine } from './run-stream.js';

/** The filler is a quick acknowledgement; past this it is skipped rather than delay the agent. */
const FILLER_TIMEOUT_MS = 5_000;
const FILLER_MAX_TOKENS = 64;
const FILLER_SYSTEM =
  '[[filler]] You acknowledge the user in one short sentence while another assistant prepares the full answer. ' +
  'Do not answer the question itself.';

export interface FillerOptions {
  baseUrl: string;
  apiKey: string | undefined;
  model: string;
  logger: Logger;
}

/** Which scope decides: the message, then the conversation, then the tenant (the most specific wins). */
export function fillerEnabled(message: boolean | undefined, conversation: boolean | undefined, tenant: boolean): boolean {
  return message ?? conversation ?? tenant;
}

/**
 * Streams a short acknowledgement from a fast model call through the same model endpoint, as
 * ordinary text deltas (the same line shape as the agent's), and returns the text. Any failure
 * just means no filler: it must never fail the run.
 */
export async function streamFiller(options: FillerOptions, prompt: string, emit: (line: StreamLine) => void): Promise<string> {
  let text = '';
  try {
    const response = await fetch(`${options.baseUrl}/v1/messages`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'anthropic-version': '2023-06-01',
        ...(options.apiKey && { 'x-api-key': options.apiKey }),
      },
      body: JSON.stringify({
        model: options.model,
        max_tokens: FILLER_MAX_TOKENS,
        stream: true,
        system: FILLER_SYSTEM,
        messages: [{ role: 'user', content: prompt }],
      }),
      signal: AbortSignal.timeout(FILLER_TIMEOUT_MS),
    });
    if (!response.ok || !response.body) throw new Error(`filler call answered ${response.status}`);
    const uuid = randomUUID();
    for await (const event of sseEvents(response.body)) {
      const delta = (event as { type?: string; delta?: { type?: string; text?: string } }).delta;
      if ((event as { type?: string }).type === 'content_block_delta' && delta?.type === 'text_delta' && delta.text) {
        text += delta.text;
        emit({
          type: 'stream_event',
          event: { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: delta.text } },
          parent_tool_use_id: null,
          uuid,
        });
      }
    }
  } catch (err) {
    options.logger.warn({ err }, 'filler skipped');
  }
  return text;
}

/** The `data:` payloads of a server-sent-events body, parsed as JSON. */
async function* sseEvents(body: ReadableStream<Uint8Array>): AsyncGenerator<unknown> {
  const decoder = new TextDecoder();
  let buffered = '';
  for await (const chunk of body) {
    buffered += decoder.decode(chunk, { stream: true });
    let boundary = buffered.indexOf('\n\n');
    while (boundary >= 0) {
      const block = buffered.slice(0, boundary);
      buffered = buffered.slice(boundary + 2);
      const data = block
        .split('\n')
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(5).trim())
        .join('\n');
      if (data) yield JSON.parse(data);
      boundary = buffered.indexOf('\n\n');
    }
  }
}
