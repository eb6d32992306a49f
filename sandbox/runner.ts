/**
 * The in-sandbox runner: hosts one Agent SDK session for one conversation, in streaming-input mode
 * so the session (and its CLI process) stays live between user turns of a warm conversation.
 *
 * It speaks the protocol of protocol.ts over stdio: turns arrive on stdin; every SDK message goes
 * out on stdout verbatim, beside the runner's own `runner_*` lines. With ACIS_SESSION_STORE=1 the
 * session transcript is mirrored to (and resumed from) the API server's store through the same
 * pipe, so a runner on any node can resume it; without it, transcripts stay in HOME.
 *
 * Environment (set by the provider): ANTHROPIC_* (model endpoint, reached through a bound Unix
 * socket), CLAUDE_CONFIG_DIR, ACIS_FORWARD (`port=/socket,...`: loopback listeners bridged to bound
 * sockets, for tools that only speak TCP).
 */
import { createInterface } from 'node:readline';
import { createSdkMcpServer, query, type SDKUserMessage, type SessionStore, tool } from '@anthropic-ai/claude-agent-sdk';
import { z } from 'zod';
import { serveTcpToUnix } from './bridge.js';
import type { RunnerLine, ServerCommand, SessionKeyLike } from './protocol.js';

type Turn = Extract<ServerCommand, { type: 'turn' }>;

const pending = new Map<number, (reply: ServerCommand) => void>();
let nextRequestId = 1;

function emit(line: RunnerLine | object): void {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

/** Asks the server and waits for its answer with the same request id. */
function ask(line: (requestId: number) => RunnerLine): Promise<ServerCommand> {
  const requestId = nextRequestId++;
  return new Promise((resolve) => {
    pending.set(requestId, resolve);
    emit(line(requestId));
  });
}

/** The transcript store, proxied to the API server. projectKey is ignored: the store is the conversation's. */
const serverSessionStore: SessionStore = {
  async load(key) {
    const reply = await ask((request_id) => ({ type: 'runner_session_load', request_id, key: plainKey(key) }));
    return reply.type === 'session_entries' ? (reply.entries as Awaited<ReturnType<SessionStore['load']>>) : null;
  },
  async append(key, entries) {
    const reply = await ask((request_id) => ({ type: 'runner_session_append', request_id, key: plainKey(key), entries }));
    if (reply.type === 'session_ack' && reply.error) throw new Error(reply.error);
  },
};

function plainKey(key: SessionKeyLike): SessionKeyLike {
  return { projectKey: key.projectKey, sessionId: key.sessionId, ...(key.subpath && { subpath: key.subpath }) };
}

/**
 * The platform's own tools, served in-process (MCP server `platform`). `request_approval` parks the
 * turn: the call is handed to the API server, which raises an Approval and answers only once a human
 * resolves it (or the run ends), so the agent sees the decision as the tool's result.
 */
const platformTools = createSdkMcpServer({
  name: 'platform',
  version: '1.0.0',
  tools: [
    tool(
      'request_approval',
      'Ask a human approver before a risky step, or for a secret you need. The call waits for the decision; ' +
        'an approval can supply secrets, which you then use as {{secret:ALIAS}} placeholders.',
      {
        reason: z.string().describe('Why approval is needed, for the approver'),
        requested_items: z
          .array(
            z.object({
              kind: z.enum(['action', 'secret']),
              description: z.string(),
              alias: z.string().optional().describe('For kind secret: the alias the secret is supplied under'),
            }),
          )
          .describe('What is asked for: actions to permit, secrets to supply'),
        expires_in_seconds: z.number().int().min(1).optional().describe('How long the approver has (capped by the platform)'),
      },
      async (input) => {
        const reply = await ask((request_id) => ({ type: 'runner_approval_request', request_id, input }));
        return reply.type === 'approval_result'
          ? { content: [{ type: 'text', text: reply.text }], isError: reply.is_error }
          : { content: [{ type: 'text', text: 'The platform gave no decision.' }], isError: true };
      },
    ),
  ],
});

/** User turns for the SDK's streaming input, fed by `turn` commands. */
class TurnQueue implements AsyncIterable<SDKUserMessage> {
  private readonly queued: SDKUserMessage[] = [];
  private wake: (() => void) | undefined;
  private ended = false;

  push(content: string, env: Record<string, string> | undefined): void {
    const blocks: { type: 'text'; text: string }[] = [];
    if (env && Object.keys(env).length > 0) {
      // The message's run parameters, verbatim, in a block of their own ahead of the user's text.
      const lines = Object.entries(env).map(([name, value]) => `${name}=${value}`);
      blocks.push({ type: 'text', text: `<run-env>\n${lines.join('\n')}\n</run-env>` });
    }
    blocks.push({ type: 'text', text: content });
    this.queued.push({ type: 'user', message: { role: 'user', content: blocks }, parent_tool_use_id: null, session_id: '' });
    this.wake?.();
  }

  end(): void {
    this.ended = true;
    this.wake?.();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<SDKUserMessage> {
    for (;;) {
      const next = this.queued.shift();
      if (next) {
        yield next;
        continue;
      }
      if (this.ended) return;
      await new Promise<void>((resolve) => {
        this.wake = resolve;
      });
      this.wake = undefined;
    }
  }
}

const turns = new TurnQueue();
let session: Promise<void> | undefined;

/** The session starts with the first turn, which says whether to resume and which skills to offer. */
function startSession(first: Turn): Promise<void> {
  const useServerStore = process.env.ACIS_SESSION_STORE === '1';
  const messages = query({
    prompt: turns,
    options: {
      cwd: process.cwd(),
      resume: first.resume,
      // The sandbox is the permission boundary; inside it the agent runs its tools without asking.
      permissionMode: 'bypassPermissions',
      allowDangerouslySkipPermissions: true,
      includePartialMessages: true,
      settingSources: ['project'],
      ...(first.skills && { skills: first.skills }),
      // The SDK finds transcripts through CLAUDE_CONFIG_DIR (not HOME); without it nothing is mirrored.
      env: { ...process.env },
      mcpServers: { platform: platformTools },
      ...(useServerStore && { sessionStore: serverSessionStore }),
      stderr: (data) => process.stderr.write(data),
    },
  });
  return (async () => {
    for await (const message of messages) emit(message);
  })();
}

function handle(command: ServerCommand): void {
  switch (command.type) {
    case 'turn':
      session ??= startSession(command).then(
        () => process.exit(0),
        (error: unknown) => fail(error),
      );
      turns.push(command.content, command.env);
      return;
    case 'session_entries':
    case 'session_ack':
    case 'approval_result': {
      const resolve = pending.get(command.request_id);
      pending.delete(command.request_id);
      resolve?.(command);
      return;
    }
  }
}

function fail(error: unknown): never {
  emit({ type: 'runner_error', error: error instanceof Error ? error.message : String(error) });
  process.exit(1);
}

async function main(): Promise<void> {
  for (const entry of (process.env.ACIS_FORWARD ?? '').split(',').filter(Boolean)) {
    const [port, socket] = entry.split('=');
    if (!port || !socket) throw new Error(`ACIS_FORWARD entry "${entry}" is not port=/socket/path`);
    await serveTcpToUnix(Number(port), socket);
  }
  const input = createInterface({ input: process.stdin, crlfDelay: Infinity });
  input.on('line', (line) => {
    if (line.trim() === '') return;
    try {
      handle(JSON.parse(line) as ServerCommand);
    } catch (error) {
      fail(error);
    }
  });
  // End of stdin ends the session once its last turn is done (or at once, before any turn).
  input.on('close', () => {
    turns.end();
    if (!session) process.exit(0);
  });
  emit({ type: 'runner_ready' });
}

main().catch(fail);
