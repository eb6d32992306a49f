import type { MessagePart, Usage } from '../core/db/schema.js';

type Block = {
  type?: unknown;
  text?: unknown;
  id?: unknown;
  name?: unknown;
  input?: unknown;
  tool_use_id?: unknown;
  content?: unknown;
  is_error?: unknown;
};
type AgentEvent = Record<string, unknown>;

export interface Reply {
  content: string;
  parts: MessagePart[];
  usage: Usage | null;
  /** The agent's own outcome was an error (an error `result` subtype). */
  agentFailed: boolean;
}

/**
 * Folds a run's agent events into the persisted assistant message: `content` is the text the agent
 * (and the filler) wrote, `parts` the text, tool-call and tool-result blocks in order, `usage` the
 * token accounting of the final `result`.
 */
export class ReplyBuilder {
  private readonly texts: string[] = [];
  private readonly parts: MessagePart[] = [];
  private usage: Usage | null = null;
  private agentFailed = false;

  /** Text that precedes the agent's (the filler's acknowledgement), whenever it arrives. */
  addLeadingText(text: string): void {
    if (!text) return;
    this.texts.unshift(text);
    this.parts.unshift({ type: 'text', text });
  }

  add(event: AgentEvent): void {
    if (event.type === 'assistant') {
      for (const block of contentBlocks(event)) {
        if (block.type === 'text' && typeof block.text === 'string') {
          this.texts.push(block.text);
          this.parts.push({ type: 'text', text: block.text });
        } else if (block.type === 'tool_use') {
          this.parts.push({ type: 'tool_call', id: block.id, name: block.name, input: block.input });
        }
      }
    } else if (event.type === 'user') {
      for (const block of contentBlocks(event)) {
        if (block.type === 'tool_result') {
          this.parts.push({
            type: 'tool_result',
            tool_use_id: block.tool_use_id,
            text: toolResultText(block.content),
            is_error: block.is_error === true,
          });
        }
      }
    } else if (event.type === 'result') {
      this.usage = reportedUsage(event.usage);
      this.agentFailed = event.is_error === true || (typeof event.subtype === 'string' && event.subtype !== 'success');
    }
  }

  build(): Reply {
    return { content: this.texts.join('\n\n'), parts: this.parts, usage: this.usage, agentFailed: this.agentFailed };
  }
}

/** Beyond any real turn's count: a figure past it is not one. */
const MAX_REPORTED_TOKENS = 1_000_000_000;

/**
 * The token counts the runner's `result` reports, shown on the message. They come from the sandbox,
 * which runs agent code: informational only, never what ACIS bills or limits by (it does neither;
 * a deployment that bills counts at the model endpoint, whose traffic the egress proxy carries).
 * Anything but two whole numbers within reason is dropped rather than stored.
 */
function reportedUsage(value: unknown): Usage | null {
  const usage = value as { input_tokens?: unknown; output_tokens?: unknown } | null | undefined;
  const count = (n: unknown): n is number => Number.isSafeInteger(n) && (n as number) >= 0 && (n as number) <= MAX_REPORTED_TOKENS;
  return count(usage?.input_tokens) && count(usage?.output_tokens)
    ? { input_tokens: usage.input_tokens, output_tokens: usage.output_tokens }
    : null;
}

function contentBlocks(event: AgentEvent): Block[] {
  const content = (event.message as { content?: unknown } | undefined)?.content;
  return Array.isArray(content) ? (content as Block[]) : [];
}

function toolResultText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    return content.map((item) => (typeof (item as Block).text === 'string' ? ((item as Block).text as string) : '')).join('');
  }
  return '';
}
