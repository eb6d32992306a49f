/**
 * A deterministic stand-in for the model vendor: a local HTTP server speaking the Anthropic Messages API
 * (`POST /v1/messages`, streaming SSE or plain JSON, and `POST /v1/messages/count_tokens`). Replies come
 * from script.ts; every request is recorded so tests can assert what the agent was offered.
 */
import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { isFillerRequest, type MessagesRequest, type Plan, planReply, type ReplyBlock } from './script.js';

export interface ModelStubOptions {
  /** TCP port; 0 (the default) picks a free one. */
  port?: number;
  host?: string;
  /** When set, requests must carry this key (x-api-key or Bearer) or get 401, the way the vendor checks keys. */
  apiKey?: string;
  /** Called with one line per request, for the CLI. */
  log?: (line: string) => void;
}

export type RequestKind = 'agent' | 'filler' | 'count_tokens' | 'unknown';

export interface RecordedRequest {
  seq: number;
  at: Date;
  method: string;
  /** Path without the query string (the SDK appends `?beta=true`). */
  path: string;
  query: string;
  /** Lower-cased header names; credential values are replaced by `[redacted]`. */
  headers: Record<string, string>;
  /** Parsed JSON when the body is JSON, else the raw text (undefined when empty). */
  body: unknown;
  kind: RequestKind;
  /** The HTTP status the stub answered with. */
  status: number;
}

export interface ModelStub {
  /** Base URL for ANTHROPIC_BASE_URL, e.g. `http://127.0.0.1:41234`. */
  url: string;
  port: number;
  /** Every request so far, oldest first (a live array). */
  requests: RecordedRequest[];
  /** The `POST /v1/messages` bodies of agent calls (not filler, not token counts), oldest first. */
  agentRequests(): MessagesRequest[];
  stop(): Promise<void>;
}

const REDACTED_HEADERS = new Set(['x-api-key', 'authorization', 'proxy-authorization', 'cookie']);

export async function startModelStub(options: ModelStubOptions = {}): Promise<ModelStub> {
  const requests: RecordedRequest[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks).toString('utf8');
      const url = new URL(req.url ?? '/', 'http://stub');
      const record: RecordedRequest = {
        seq: requests.length + 1,
        at: new Date(),
        method: req.method ?? 'GET',
        path: url.pathname,
        query: url.search,
        headers: recordHeaders(req.headers),
        body: parseBody(raw),
        kind: 'unknown',
        status: 0,
      };
      requests.push(record);
      void respond(record, req, res, options)
        .catch((error: unknown) => {
          if (!res.headersSent) sendError(res, 500, 'api_error', `stub: ${(error as Error).message}`);
          else res.destroy();
        })
        .finally(() => {
          record.status = res.statusCode;
          options.log?.(`${record.seq} ${record.method} ${record.path}${record.query} ${record.kind} -> ${record.status}`);
        });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve);
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return {
    url: `http://${host}:${address.port}`,
    port: address.port,
    requests,
    agentRequests: () => requests.filter((r) => r.kind === 'agent').map((r) => r.body as MessagesRequest),
    stop: () =>
      new Promise<void>((resolve, reject) => {
        server.close((error) => (error ? reject(error) : resolve()));
        server.closeAllConnections();
      }),
  };
}

async function respond(record: RecordedRequest, req: http.IncomingMessage, res: http.ServerResponse, options: ModelStubOptions) {
  if (options.apiKey !== undefined && presentedKey(req) !== options.apiKey) {
    return sendError(res, 401, 'authentication_error', 'stub: invalid x-api-key');
  }
  const body = record.body;
  const isJsonObject = typeof body === 'object' && body !== null && !Array.isArray(body);
  if (record.method === 'POST' && record.path === '/v1/messages/count_tokens' && isJsonObject) {
    record.kind = 'count_tokens';
    return sendJson(res, 200, { input_tokens: inputTokens(body as MessagesRequest) });
  }
  if (record.method === 'POST' && record.path === '/v1/messages' && isJsonObject) {
    const request = body as MessagesRequest & { stream?: boolean };
    record.kind = isFillerRequest(request) ? 'filler' : 'agent';
    const plan = planReply(request);
    if (plan.kind === 'error') return sendError(res, plan.status, plan.errorType, plan.message);
    const message = buildMessage(request, plan);
    if (request.stream) return streamMessage(res, message, plan.delayMs);
    return sendJson(res, 200, message);
  }
  return sendError(res, 404, 'not_found_error', `stub: no route for ${record.method} ${record.path}`);
}

type StubMessage = {
  id: string;
  type: 'message';
  role: 'assistant';
  model: string;
  content: ReplyBlock[];
  stop_reason: string;
  stop_sequence: null;
  usage: { input_tokens: number; output_tokens: number; cache_creation_input_tokens: number; cache_read_input_tokens: number };
};

function buildMessage(request: MessagesRequest, plan: Extract<Plan, { kind: 'message' }>): StubMessage {
  const outputChars = plan.blocks.reduce(
    (n, b) => n + (b.type === 'text' ? b.text.length : JSON.stringify(b.input).length + b.name.length),
    0,
  );
  return {
    id: `msg_stub_${createHash('sha256')
      .update(JSON.stringify([request.messages, plan.blocks]))
      .digest('hex')
      .slice(0, 24)}`,
    type: 'message',
    role: 'assistant',
    model: request.model ?? 'stub-model',
    content: plan.blocks,
    stop_reason: plan.stopReason,
    stop_sequence: null,
    usage: {
      input_tokens: inputTokens(request),
      output_tokens: Math.max(1, Math.ceil(outputChars / 4)),
      cache_creation_input_tokens: 0,
      cache_read_input_tokens: 0,
    },
  };
}

/** Writes the message as the vendor's SSE event sequence, text in word-sized `text_delta` chunks. */
async function streamMessage(res: http.ServerResponse, message: StubMessage, delayMs: number) {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    'request-id': `req_${message.id}`,
  });
  const send = (type: string, data: Record<string, unknown>) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
  const pause = () => (delayMs > 0 ? sleep(delayMs) : Promise.resolve());

  send('message_start', { message: { ...message, content: [], stop_reason: null, usage: { ...message.usage, output_tokens: 1 } } });
  send('ping', {});
  for (const [index, block] of message.content.entries()) {
    if (res.destroyed) return;
    if (block.type === 'text') {
      send('content_block_start', { index, content_block: { type: 'text', text: '' } });
      for (const piece of chunkText(block.text)) {
        await pause();
        if (res.destroyed) return;
        send('content_block_delta', { index, delta: { type: 'text_delta', text: piece } });
      }
    } else {
      send('content_block_start', { index, content_block: { type: 'tool_use', id: block.id, name: block.name, input: {} } });
      const json = JSON.stringify(block.input);
      const half = Math.ceil(json.length / 2);
      for (const piece of [json.slice(0, half), json.slice(half)]) {
        await pause();
        if (res.destroyed) return;
        send('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: piece } });
      }
    }
    send('content_block_stop', { index });
  }
  send('message_delta', {
    delta: { stop_reason: message.stop_reason, stop_sequence: null },
    usage: { output_tokens: message.usage.output_tokens },
  });
  send('message_stop', {});
  res.end();
}

/** Splits text into chunks of up to three words (whitespace kept), so every reply streams as several deltas. */
function chunkText(text: string): string[] {
  const words = text.match(/\S+\s*|\s+/g) ?? [text];
  const chunks: string[] = [];
  for (let i = 0; i < words.length; i += 3) chunks.push(words.slice(i, i + 3).join(''));
  return chunks.length > 0 ? chunks : [''];
}

/** A deterministic estimate (four characters a token) of the prompt size. */
function inputTokens(request: MessagesRequest): number {
  return Math.max(1, Math.ceil(JSON.stringify([request.system ?? '', request.messages ?? []]).length / 4));
}

function presentedKey(req: http.IncomingMessage): string | undefined {
  const key = req.headers['x-api-key'];
  if (typeof key === 'string') return key;
  const auth = req.headers.authorization;
  return auth?.startsWith('Bearer ') ? auth.slice(7) : undefined;
}

function recordHeaders(headers: http.IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    out[name] = REDACTED_HEADERS.has(name) ? '[redacted]' : Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

function parseBody(raw: string): unknown {
  if (raw === '') return undefined;
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

function sendJson(res: http.ServerResponse, status: number, body: unknown, headers: http.OutgoingHttpHeaders = {}) {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

function sendError(res: http.ServerResponse, status: number, errorType: string, message: string) {
  // Scripted errors are final: the vendor's `x-should-retry: false` keeps the agent from retrying for minutes.
  sendJson(res, status, { type: 'error', error: { type: errorType, message } }, { 'x-should-retry': 'false' });
}

function sleep(ms: number) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
