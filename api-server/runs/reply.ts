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
      const usage = event.usage as { input_tokens?: unknown; output_tokens?: unknown } | undefined;
      if (typeof usage?.input_tokens === 'number' && typeof usage.output_tokens === 'number') {
        this.usage = { input_tokens: usage.input_tokens, output_tokens: usage.output_tokens };
      }
      this.agentFailed = event.is_error === true || (typeof event.subtype === 'string' && event.subtype !== 'success');
    }
  }

  build(): Reply {
    return { content: this.texts.join('\n\n'), parts: this.parts, usage: this.usage, agentFailed: this.agentFailed };
  }
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
