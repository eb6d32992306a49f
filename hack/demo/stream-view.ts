/**
 * Prints a run's NDJSON stream as it arrives, in a readable form: text deltas inline, tool calls
 * and results as short lines, platform lines by name, keepalive pings as dots on a line of their own
 * (inline they would read as part of the text).
 */

import type { MessageStream } from '../../clients/typescript/src/index.js';

// biome-ignore lint/suspicious/noExplicitAny: a stream line is JSON read field by field by a demo script
type Line = Record<string, any>;

export interface StreamSummary {
  /** Every line of the run (pings are not lines of it).*/
  lines: Line[];
  /** The terminal line (agent `result` or platform `error`), if the stream was complete. */
  terminal: Line | undefined;
  /** The text of the deltas, in order. */
  text: string;
}

const INDENT = '  ';
const LABEL_WIDTH = 26;
const TEXT_PREFIX = `${INDENT}${'text'.padEnd(LABEL_WIDTH)} `;
const MAX_SHOWN = 100;

export async function printStream(stream: MessageStream): Promise<StreamSummary> {
  const out = new Printer();
  const lines: Line[] = [];
  let text = '';
  stream.onPing = () => out.dot();
  for await (const line of stream as AsyncIterable<Line>) {
    lines.push(line);
    if (line.object === 'platform.event') {
      out.line(`platform ${line.type}`, describePlatform(line));
    } else if (line.type === 'stream_event') {
      const delta = line.event?.type === 'content_block_delta' ? line.event.delta : undefined;
      if (delta?.type === 'text_delta') {
        out.text(delta.text);
        text += delta.text;
      }
      // Other stream events (block starts and stops, tool input JSON) are covered by the complete lines.
    } else if (line.type === 'system') {
      out.line(`agent system/${line.subtype ?? '?'}`, describeSystem(line));
    } else if (line.type === 'assistant') {
      for (const block of contentBlocks(line)) {
        if (block.type === 'tool_use') out.line('agent tool call', `${block.name} ${shorten(JSON.stringify(block.input))}`);
      }
    } else if (line.type === 'user') {
      for (const block of contentBlocks(line)) {
        if (block.type === 'tool_result') {
          out.line(`agent tool result${block.is_error ? ' (error)' : ''}`, shorten(toolResultText(block.content)));
        }
      }
    } else if (line.type === 'result') {
      out.line(`agent result/${line.subtype}`, describeResult(line));
    } else {
      // Stream rule: unknown line shapes are ignored; named here so the demo shows they exist.
      out.line('(unknown line)', shorten(JSON.stringify(line)));
    }
  }
  out.end();
  const terminal = lines.find((l) => l.type === 'result' || (l.object === 'platform.event' && l.type === 'error'));
  return { lines, terminal, text };
}

/** Keeps inline output (text, dots) and whole lines from running into each other. */
class Printer {
  private mode: 'line' | 'text' | 'dots' = 'line';

  dot(): void {
    if (this.mode !== 'dots') {
      this.end();
      process.stdout.write(`${INDENT}${'keepalive'.padEnd(LABEL_WIDTH)} `);
      this.mode = 'dots';
    }
    process.stdout.write('.');
  }

  text(chars: string): void {
    if (this.mode !== 'text') {
      this.end();
      process.stdout.write(TEXT_PREFIX);
      this.mode = 'text';
    }
    process.stdout.write(chars.replaceAll('\n', `\n${' '.repeat(TEXT_PREFIX.length)}`));
  }

  line(label: string, detail: string): void {
    this.end();
    process.stdout.write(`${`${INDENT}${label.padEnd(LABEL_WIDTH)} ${detail}`.trimEnd()}\n`);
  }

  end(): void {
    if (this.mode !== 'line') process.stdout.write('\n');
    this.mode = 'line';
  }
}

function describePlatform(line: Line): string {
  switch (line.type) {
    case 'conversation':
      return `${line.conversation?.id} (agent ${line.conversation?.runtime?.agent_type}, ${line.conversation?.context?.skill_ids?.length ?? 0} skill(s) in context)`;
    case 'message_end':
      return `${line.message?.id} ${line.message?.status}${line.message?.usage ? `, ${usage(line.message.usage)}` : ''}`;
    case 'queued':
      return `position ${line.position}, retry in ${line.retry_hint_seconds} s`;
    case 'error':
      return `${String(line.problem?.type ?? '')
        .split('/')
        .pop()}: ${line.problem?.detail ?? ''}`;
    default:
      return '';
  }
}

function describeSystem(line: Line): string {
  if (line.subtype === 'status') return line.status ?? 'idle';
  if (line.subtype !== 'init') return '';
  const tools = Array.isArray(line.tools) ? `${line.tools.length} tools` : 'tools unknown';
  return `session ${line.session_id}, ${tools}${line.model ? `, model ${line.model}` : ''}`;
}

function describeResult(line: Line): string {
  const parts = [
    line.num_turns !== undefined && `${line.num_turns} model round(s)`,
    line.duration_ms !== undefined && `${line.duration_ms} ms`,
    line.usage && usage(line.usage),
  ];
  return parts.filter(Boolean).join(', ');
}

function usage(value: Line): string {
  return `${value.input_tokens ?? '?'} tokens in / ${value.output_tokens ?? '?'} out`;
}

function contentBlocks(line: Line): Line[] {
  const content = line.message?.content;
  return Array.isArray(content) ? content : [];
}

function toolResultText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((block: Line) => (block.type === 'text' ? block.text : `[${block.type}]`)).join(' ');
  return JSON.stringify(content);
}

function shorten(value: string): string {
  const flat = value.replace(/\s+/g, ' ').trim();
  return flat.length > MAX_SHOWN ? `${flat.slice(0, MAX_SHOWN - 1)}…` : flat;
}
