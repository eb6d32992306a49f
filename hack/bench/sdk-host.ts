/**
 * The Agent SDK driven directly, the three ways a turn can find it: the floors the conversation bench
 * compares ACIS with. The bench uses `openSdkHost` in its own process (plain floors), and runs this
 * file, compiled to JavaScript, as a script inside bubblewrap (sandboxed floors), where it speaks one
 * JSON object a line over stdio: `{"content": "..."}` in, every SDK message out, after a first
 * `{"type":"host_ready"}`.
 * Script environment: FLOOR_KIND (live | prestarted | fresh), FLOOR_RESUME (a session id), and what
 * the SDK needs (ANTHROPIC_*, CLAUDE_CONFIG_DIR, IS_SANDBOX).
 *
 * It imports nothing of ACIS, so the floors measure the SDK, not our runner.
 */
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { type Options, query, type SDKMessage, type SDKUserMessage, startup } from '@anthropic-ai/claude-agent-sdk';

/**
 * - live: a streaming-input session whose process stays up between turns (a warm conversation's floor);
 * - prestarted: a process started ahead with `startup()` for the session, fed the prompt when measured
 *   (a pooled claim's floor);
 * - fresh: `query()` started with the prompt, resuming the session (a cold start's floor).
 */
export const FLOOR_KINDS = ['live', 'prestarted', 'fresh'] as const;
export type FloorKind = (typeof FLOOR_KINDS)[number];

export interface SdkHost {
  /** Sends one user turn; yields the SDK's messages up to and including its result. */
  turn(content: string): AsyncGenerator<SDKMessage>;
  close(): Promise<void>;
}

/** The options runner/runner.ts gives the SDK, so a floor runs the same agent as a runner. */
export function runnerLikeOptions(cwd: string, env: Record<string, string | undefined>, resume?: string): Options {
  return {
    cwd,
    env,
    permissionMode: 'bypassPermissions',
    allowDangerouslySkipPermissions: true,
    includePartialMessages: true,
    settingSources: ['project'],
    ...(resume && { resume }),
  };
}

const userMessage = (content: string): SDKUserMessage => ({
  type: 'user',
  message: { role: 'user', content },
  parent_tool_use_id: null,
  session_id: '',
});

/** Yields messages until (and including) the first result, leaving the iterator open for the next turn. */
async function* untilResult(messages: AsyncIterator<SDKMessage>): AsyncGenerator<SDKMessage> {
  for (;;) {
    const next = await messages.next();
    if (next.done) throw new Error('the SDK ended before a result');
    yield next.value;
    if (next.value.type === 'result') return;
  }
}

/** Runs a one-shot query to its end (its process exits after the result). */
async function* drained(messages: AsyncIterable<SDKMessage>): AsyncGenerator<SDKMessage> {
  let seenResult = false;
  for await (const message of messages) {
    // Past the result only the process's exit is left; the caller has its timings by then.
    if (!seenResult) yield message;
    if (message.type === 'result') seenResult = true;
  }
}

export async function openSdkHost(kind: FloorKind, options: Options): Promise<SdkHost> {
  switch (kind) {
    case 'live': {
      const queued: SDKUserMessage[] = [];
      let wake: (() => void) | undefined;
      let ended = false;
      async function* input(): AsyncGenerator<SDKUserMessage> {
        for (;;) {
          const next = queued.shift();
          if (next) yield next;
          else if (ended) return;
          else await new Promise<void>((resolve) => (wake = resolve));
        }
      }
      const session = query({ prompt: input(), options });
      const messages = session[Symbol.asyncIterator]();
      return {
        turn(content) {
          queued.push(userMessage(content));
          wake?.();
          return untilResult(messages);
        },
        async close() {
          ended = true;
          wake?.();
          while (!(await messages.next()).done);
        },
      };
    }
    case 'prestarted': {
      const warm = await startup({ options });
      let used = false;
      return {
        turn(content) {
          used = true;
          return drained(warm.query(content));
        },
        async close() {
          if (!used) warm.close();
        },
      };
    }
    case 'fresh':
      return {
        turn: (content) => drained(query({ prompt: content, options })),
        async close() {},
      };
  }
}

/** The script inside the sandbox. */
async function main(): Promise<void> {
  const kind = process.env.FLOOR_KIND as FloorKind;
  if (!FLOOR_KINDS.includes(kind)) throw new Error(`FLOOR_KIND must be one of ${FLOOR_KINDS.join(', ')}`);
  const emit = (line: object) => process.stdout.write(`${JSON.stringify(line)}\n`);
  const host = await openSdkHost(kind, runnerLikeOptions(process.cwd(), { ...process.env }, process.env.FLOOR_RESUME || undefined));
  emit({ type: 'host_ready' });
  // Turns run one after another: the bench sends the next only after the previous result.
  let turns = Promise.resolve();
  const input = createInterface({ input: process.stdin, crlfDelay: Infinity });
  input.on('line', (line) => {
    if (line.trim() === '') return;
    const { content } = JSON.parse(line) as { content: string };
    turns = turns.then(async () => {
      for await (const message of host.turn(content)) emit(message);
    });
  });
  input.on('close', () => {
    void turns.then(() => host.close()).then(() => process.exit(0));
  });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((error: unknown) => {
    process.stdout.write(`${JSON.stringify({ type: 'host_error', error: String(error) })}\n`);
    process.exit(1);
  });
}
