import type { AppDeps } from '../deps.js';
import { NDJSON, type RouteResult } from '../core/http/route-result.js';
import type { ScopedConversationRow } from '../conversations/conversations.repository.js';
import type { StreamLine } from '../runs/run-stream.js';
import { presentMessage } from './messages.presenter.js';
import { findMessage } from './messages.repository.js';
import { STREAM_FORMAT } from './messages.schemas.js';
import { type SendBody, startMessageRun } from './messages.service.js';

/** The NDJSON response of a run, with the headers every stream carries. */
export function streamResponse(messageId: string, after = 0, extraHeaders: Record<string, string> = {}): RouteResult {
  return {
    status: 200,
    contentType: NDJSON,
    stream: { messageId, after },
    headers: { 'X-Service-Stream-Format': STREAM_FORMAT, 'X-Service-Message-Id': messageId, ...extraHeaders },
  };
}

/**
 * Sends a message and shapes the answer: the run's stream (stream=true), or, once the run has
 * ended, 201 with the assistant message (stream=false; a platform abort becomes its problem).
 */
export async function sendAndRespond(
  deps: AppDeps,
  conversation: ScopedConversationRow,
  body: SendBody,
  options: {
    stream: boolean;
    onCapacity: 'reject' | 'hold';
    leadingLines: StreamLine[];
    baseUrl: string;
    requestId: string;
    extraHeaders?: Record<string, string>;
    /** Where the message sits in the request body, for validation pointers. */
    bodyPointer?: string;
  },
): Promise<RouteResult> {
  const run = await startMessageRun(deps, conversation, body, options);
  if (options.stream) return streamResponse(run.assistantMessageId, 0, options.extraHeaders);
  const outcome = await run.done;
  if (outcome.problem) throw outcome.problem;
  const message = await findMessage(deps.db, conversation.id, run.assistantMessageId);
  if (!message) throw new Error('assistant message vanished after its run');
  return { status: 201, body: presentMessage(message), headers: options.extraHeaders };
}
