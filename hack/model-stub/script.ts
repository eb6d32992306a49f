/**
 * The model stub's script: a pure function from a Messages API request body to the reply the stub gives.
 * Behaviour is chosen by directives written into the latest user prompt (see README.md beside this file),
 * so a test controls the "model" through the very text it sends to the service.
 */
import { createHash } from 'node:crypto';

/** A request whose system prompt contains this marker is a filler call (see `isFillerRequest`). */
export const FILLER_MARKER = '[[filler]]';
/** Requests asking for at most this many tokens are filler calls too (the agent asks for tens of thousands). */
export const FILLER_MAX_TOKENS = 256;
/** The canned acknowledgement every filler call gets. */
export const FILLER_REPLY = 'One moment, I am looking into that.';

export type ReplyBlock = { type: 'text'; text: string } | { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> };

export type Plan =
  | { kind: 'message'; blocks: ReplyBlock[]; stopReason: 'end_turn' | 'tool_use'; delayMs: number }
  | { kind: 'error'; status: number; errorType: string; message: string };

/** The parts of a Messages API request body the script reads; everything else is ignored. */
export interface MessagesRequest {
  model?: string;
  max_tokens?: number;
  system?: string | Array<{ type: string; text?: string }>;
  messages?: Array<{ role: string; content: string | ContentBlock[] }>;
}

type ContentBlock = {
  type: string;
  text?: string;
  id?: string;
  name?: string;
  tool_use_id?: string;
  is_error?: boolean;
  content?: string | Array<{ type: string; text?: string }>;
};

type Directive =
  | { name: 'reply'; text: string }
  | { name: 'tool'; tool: string; input: Record<string, unknown> }
  | { name: 'slow'; ms: number }
  | { name: 'slow-filler'; ms: number }
  | { name: 'error'; status: number }
  | { name: 'echo-history' }
  | { name: 'echo-skills' };

const ERROR_TYPES: Record<number, string> = {
  400: 'invalid_request_error',
  401: 'authentication_error',
  403: 'permission_error',
  404: 'not_found_error',
  413: 'request_too_large',
  429: 'rate_limit_error',
  500: 'api_error',
  529: 'overloaded_error',
};

function errorTypeFor(status: number): string {
  return ERROR_TYPES[status] ?? 'api_error';
}

export function isFillerRequest(body: MessagesRequest): boolean {
  if (typeof body.max_tokens === 'number' && body.max_tokens <= FILLER_MAX_TOKENS) return true;
  return systemText(body).includes(FILLER_MARKER);
}

export function planReply(body: MessagesRequest): Plan {
  if (isFillerRequest(body)) {
    return { kind: 'message', blocks: [{ type: 'text', text: FILLER_REPLY }], stopReason: 'end_turn', delayMs: fillerDelay(body) };
  }
  const messages = body.messages ?? [];
  const turns = userTurns(messages);
  const prompt = turns.at(-1);
  if (!prompt) return invalid('stub: the request has no user prompt text');

  let directives: Directive[];
  try {
    directives = parseDirectives(prompt.text);
  } catch (error) {
    return invalid(`stub: ${(error as Error).message}`);
  }

  const error = directives.find((d) => d.name === 'error');
  if (error) {
    const errorType = errorTypeFor(error.status);
    return { kind: 'error', status: error.status, errorType, message: `stub: scripted ${error.status} ${errorType}` };
  }
  const delayMs = directives.find((d) => d.name === 'slow')?.ms ?? 0;

  // One scripted tool call per model round, in the order written; rounds already answered are those since the prompt.
  const tools = directives.filter((d) => d.name === 'tool');
  const after = messages.slice(prompt.index + 1);
  const roundsDone = after.filter((m) => m.role === 'assistant' && blocksOf(m.content).some((b) => b.type === 'tool_use')).length;
  const nextTool = tools[roundsDone];
  if (nextTool) {
    const id = `toolu_stub_${digest([messages.length, roundsDone, nextTool.tool, prompt.text])}`;
    return {
      kind: 'message',
      blocks: [{ type: 'tool_use', id, name: nextTool.tool, input: nextTool.input }],
      stopReason: 'tool_use',
      delayMs,
    };
  }

  const parts: string[] = [];
  // The runtime may put a system message after the latest user message, so look for the user message itself.
  const lastUser = after.findLast((m) => m.role === 'user');
  if (lastUser) parts.push(...quoteToolResults(lastUser.content, messages));
  for (const d of directives) {
    if (d.name === 'reply') parts.push(d.text);
    if (d.name === 'echo-history') parts.push(historySummary(turns.slice(0, -1).map((t) => t.text)));
    if (d.name === 'echo-skills') parts.push(skillsSummary(offeredSkills(body)));
  }
  if (parts.length === 0) parts.push(`You said: "${excerpt(prompt.text, 80)}".`);
  return { kind: 'message', blocks: [{ type: 'text', text: parts.join('\n') }], stopReason: 'end_turn', delayMs };
}

/**
 * The prompts users sent, oldest first: every text block of a user message, except the agent runtime's own
 * `<system-reminder>` blocks and messages that carry tool results. Each block counts as one turn because the
 * runtime merges consecutive user messages (a turn that failed has no assistant reply between) into one.
 */
function userTurns(messages: NonNullable<MessagesRequest['messages']>): Array<{ index: number; text: string }> {
  const turns: Array<{ index: number; text: string }> = [];
  messages.forEach((message, index) => {
    if (message.role !== 'user') return;
    const blocks = blocksOf(message.content);
    if (blocks.some((b) => b.type === 'tool_result')) return;
    for (const b of blocks) {
      if (b.type === 'text' && typeof b.text === 'string' && !b.text.trimStart().startsWith('<system-reminder>')) {
        turns.push({ index, text: b.text });
      }
    }
  });
  return turns;
}

/** `[[slow-filler: N]]` in the user's text slows the filler call's deltas (a malformed prompt: no delay, the agent call reports it). */
function fillerDelay(body: MessagesRequest): number {
  const text = userTurns(body.messages ?? []).at(-1)?.text ?? '';
  try {
    return parseDirectives(text).find((d) => d.name === 'slow-filler')?.ms ?? 0;
  } catch {
    return 0;
  }
}

function historySummary(earlier: string[]): string {
  if (earlier.length === 0) return 'History: no earlier user turns.';
  const items = earlier.map((text, i) => `[${i + 1}] "${excerpt(text, 200)}"`);
  return `History: ${earlier.length} earlier user turn${earlier.length === 1 ? '' : 's'}: ${items.join(' ')}`;
}

/** The heading under which the agent runtime lists the skills its Skill tool offers (`- name: description` lines). */
export const SKILL_LISTING_HEADING = 'The following skills are available for use with the Skill tool:';

/**
 * The skill names the request offers the model, in listing order: the `- name: description` lines under
 * the runtime's skill listing, wherever it is (system prompt or a system-reminder in the messages).
 */
export function offeredSkills(body: MessagesRequest): string[] {
  const texts = [systemText(body)];
  for (const message of body.messages ?? [])
    for (const block of blocksOf(message.content)) if (typeof block.text === 'string') texts.push(block.text);
  const names: string[] = [];
  for (const text of texts) {
    let at = text.indexOf(SKILL_LISTING_HEADING);
    while (at !== -1) {
      const lines = text.slice(at + SKILL_LISTING_HEADING.length).split('\n');
      let index = 0;
      while (index < lines.length && lines[index]!.trim() === '') index += 1;
      for (; index < lines.length; index += 1) {
        const match = /^- ([^:\s]+):/.exec(lines[index]!);
        if (!match) break;
        if (!names.includes(match[1]!)) names.push(match[1]!);
      }
      at = text.indexOf(SKILL_LISTING_HEADING, at + 1);
    }
  }
  return names;
}

function skillsSummary(names: string[]): string {
  return names.length === 0 ? 'Skills: none.' : `Skills: ${[...names].sort().join(', ')}`;
}

/** Reads `[[name]]`, `[[name: argument]]` and `[[tool:Name {json}]]` directives; an unknown or malformed one is an error. */
function parseDirectives(text: string): Directive[] {
  const directives: Directive[] = [];
  let at = text.indexOf('[[');
  while (at !== -1) {
    const { directive, end } = parseOne(text, at + 2);
    directives.push(directive);
    at = text.indexOf('[[', end);
  }
  return directives;
}

function parseOne(text: string, start: number): { directive: Directive; end: number } {
  if (text.startsWith('tool:', start)) {
    const nameMatch = /^[A-Za-z0-9_.-]+/.exec(text.slice(start + 5));
    if (!nameMatch) throw new Error(`a tool directive needs a tool name at offset ${start}`);
    let cursor = start + 5 + nameMatch[0].length;
    while (text[cursor] === ' ') cursor += 1;
    let input: Record<string, unknown> = {};
    if (text[cursor] === '{') {
      const close = matchingBrace(text, cursor);
      const parsed: unknown = JSON.parse(text.slice(cursor, close + 1));
      if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('tool input must be a JSON object');
      input = parsed as Record<string, unknown>;
      cursor = close + 1;
      while (text[cursor] === ' ') cursor += 1;
    }
    if (!text.startsWith(']]', cursor)) throw new Error(`unterminated tool directive for ${nameMatch[0]}`);
    return { directive: { name: 'tool', tool: nameMatch[0], input }, end: cursor + 2 };
  }
  const close = text.indexOf(']]', start);
  if (close === -1) throw new Error(`unterminated directive at offset ${start - 2}`);
  const body = text.slice(start, close);
  const colon = body.indexOf(':');
  const name = (colon === -1 ? body : body.slice(0, colon)).trim();
  const argument = colon === -1 ? undefined : body.slice(colon + 1).trim();
  return { directive: toDirective(name, argument), end: close + 2 };
}

function toDirective(name: string, argument: string | undefined): Directive {
  switch (name) {
    case 'reply':
      if (argument === undefined) throw new Error('[[reply: text]] needs a text');
      return { name, text: argument };
    case 'slow':
    case 'slow-filler':
      return { name, ms: nonNegativeInteger(name, argument) };
    case 'error':
      return { name, status: nonNegativeInteger(name, argument) };
    case 'echo-history':
    case 'echo-skills':
      return { name };
    default:
      throw new Error(`unknown directive [[${name}]]`);
  }
}

function nonNegativeInteger(name: string, argument: string | undefined): number {
  const value = Number(argument);
  if (argument === undefined || !Number.isInteger(value) || value < 0) throw new Error(`[[${name}: N]] needs a whole number`);
  return value;
}

/** Index of the `}` closing the object opened at `open`, honouring JSON strings. */
function matchingBrace(text: string, open: number): number {
  let depth = 0;
  let inString = false;
  for (let i = open; i < text.length; i += 1) {
    const c = text[i];
    if (inString) {
      if (c === '\\') i += 1;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === '{') depth += 1;
    else if (c === '}') {
      depth -= 1;
      if (depth === 0) return i;
    }
  }
  throw new Error('tool input JSON is not closed');
}

function quoteToolResults(content: string | ContentBlock[], messages: NonNullable<MessagesRequest['messages']>): string[] {
  const names = new Map<string, string>();
  for (const m of messages) for (const b of blocksOf(m.content)) if (b.type === 'tool_use' && b.id && b.name) names.set(b.id, b.name);
  return blocksOf(content)
    .filter((b) => b.type === 'tool_result')
    .map((b) => {
      const name = names.get(b.tool_use_id ?? '') ?? 'unknown';
      return `Tool ${name} ${b.is_error ? 'failed' : 'returned'}: ${toolResultText(b.content).trim()}`;
    });
}

function toolResultText(content: ContentBlock['content']): string {
  if (typeof content === 'string') return content;
  return (content ?? []).map((b) => (b.type === 'text' ? (b.text ?? '') : `[${b.type}]`)).join('\n');
}

function blocksOf(content: string | ContentBlock[]): ContentBlock[] {
  return typeof content === 'string' ? [{ type: 'text', text: content }] : content;
}

function systemText(body: MessagesRequest): string {
  if (typeof body.system === 'string') return body.system;
  return (body.system ?? []).map((b) => b.text ?? '').join('\n');
}

function excerpt(text: string, max: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= max ? flat : `${flat.slice(0, max - 1)}…`;
}

function invalid(message: string): Plan {
  return { kind: 'error', status: 400, errorType: 'invalid_request_error', message };
}

function digest(parts: unknown[]): string {
  return createHash('sha256').update(JSON.stringify(parts)).digest('hex').slice(0, 24);
}
