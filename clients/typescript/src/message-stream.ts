import { problemOf } from './errors.js';

/** An agent event, passed through as the agent runtime wrote it (`system`, `stream_event`, `assistant`, `user`, `result`). */
export interface AgentLine {
  type: string;
  object?: undefined;
  [field: string]: unknown;
}

/** A line of ACIS itself: `conversation`, `queued`, `approval`, `resumed`, `message_end`, `error`, ... */
export interface PlatformLine {
  object: 'platform.event';
  type: string;
  [field: string]: unknown;
}

export type StreamLine = AgentLine | PlatformLine;

/** The one terminal line of a stream: the agent's `result`, or a platform `error`. */
export function isTerminal(line: StreamLine): boolean {
  return line.type === 'result' || (line.object === 'platform.event' && line.type === 'error');
}

export interface HttpTarget {
  baseUrl: string;
  fetch: typeof fetch;
  headers: Record<string, string>;
}

/** Re-attaches in a row without a new line before the stream gives up (the run goes on; its reply lands in history). */
const MAX_REATTACHES_WITHOUT_PROGRESS = 5;

/**
 * A run's lines as an async iterator, ending after its one terminal line. Pings are dropped. When
 * the connection drops before the terminal line, it re-attaches (`GET …/stream?after=<lines seen>`),
 * so the caller sees every line once, in order, whatever node the run is on.
 */
export class MessageStream implements AsyncIterable<StreamLine> {
  /** The assistant message's id, known once the first answer's headers arrived. */
  messageId: string | undefined;
  /** Lines seen so far (pings excluded): what a re-attach passes as `after`. */
  seen = 0;
  /** Called for each keepalive ping (they are not lines of the run, so they are not yielded). */
  onPing: (() => void) | undefined;

  /** `conversationId` undefined: a conversation created with its first message, named by the answer's header. */
  constructor(
    private readonly http: HttpTarget,
    public conversationId: string | undefined,
    private readonly open: () => Promise<Response>,
  ) {}

  async *[Symbol.asyncIterator](): AsyncIterator<StreamLine> {
    let response = await this.open();
    let fruitless = 0;
    for (;;) {
      if (!response.ok) throw await problemOf(response);
      this.messageId ??= response.headers.get('x-service-message-id') ?? undefined;
      this.conversationId ??= response.headers.get('x-service-conversation-id') ?? undefined;
      const before = this.seen;
      try {
        for await (const line of ndjsonLines(response)) {
          if ((line as { event?: unknown }).event === 'ping') {
            this.onPing?.();
            continue;
          }
          this.seen += 1;
          yield line;
          if (isTerminal(line)) return;
        }
      } catch {
        // The connection dropped mid-stream: re-attach below.
      }
      fruitless = this.seen > before ? 0 : fruitless + 1;
      if (!this.messageId || !this.conversationId || fruitless >= MAX_REATTACHES_WITHOUT_PROGRESS) {
        throw new Error(`the stream ended before its terminal line after ${this.seen} lines`);
      }
      response = await this.reattach();
    }
  }

  private reattach(): Promise<Response> {
    const url = `${this.http.baseUrl}/conversations/${encodeURIComponent(this.conversationId!)}/messages/${encodeURIComponent(this.messageId!)}/stream?after=${this.seen}`;
    return this.http.fetch(url, { headers: this.http.headers });
  }
}

/** The JSON objects of an NDJSON body, one per line, as they arrive. */
async function* ndjsonLines(response: Response): AsyncGenerator<StreamLine> {
  if (!response.body) return;
  const decoder = new TextDecoder();
  let buffered = '';
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    buffered += decoder.decode(chunk, { stream: true });
    let newline = buffered.indexOf('\n');
    while (newline >= 0) {
      const text = buffered.slice(0, newline).trim();
      buffered = buffered.slice(newline + 1);
      if (text) yield JSON.parse(text) as StreamLine;
      newline = buffered.indexOf('\n');
    }
  }
  const rest = (buffered + decoder.decode()).trim();
  if (rest) yield JSON.parse(rest) as StreamLine;
}
