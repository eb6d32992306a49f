/**
 * The in-sandbox runner: hosts one Agent SDK session for one conversation, in streaming-input mode
 * so the session (and its CLI process) stays live between user turns of a warm conversation.
 *
 * It speaks the protocol of protocol.ts over a channel: stdio when the local provider started it, or
 * TCP when ACIS_RUNNER_LISTEN is set (a pod), through the resumable, token-authenticated link of
 * link-server.ts. Turns arrive on the channel; every SDK message goes out verbatim, beside the
 * runner's own `runner_*` lines. With ACIS_SESSION_STORE=1 the session transcript is mirrored to (and
 * resumed from) the API server's store through the same channel, so a runner on any node can resume
 * it; without it, transcripts stay in HOME. Skills and the workspace archive cross it too.
 *
 * Environment (runner-config.ts): ANTHROPIC_* (model endpoint), CLAUDE_CONFIG_DIR, ACIS_FORWARD
 * (`port=/socket,...`: loopback listeners bridged to bound sockets, for tools that only speak TCP),
 * ACIS_RUNNER_LISTEN, ACIS_RUNNER_TOKEN or ACIS_RUNNER_TOKEN_FILE, ACIS_RUNNER_RECONNECT_SECONDS,
 * ACIS_RUNNER_DRAIN_PORT (drain-server.ts).
 */
import { readFileSync } from 'node:fs';
import { createSdkMcpServer, type SDKUserMessage, type SessionStore, tool } from '@anthropic-ai/claude-agent-sdk';
import { z } from 'zod';
import { AgentSessions } from './agent-session.js';
import { serveTcpToUnix } from './bridge.js';
import type { Channel } from './channel.js';
import { serveDrain } from './drain-server.js';
import { type LinkEndpoint, PEER_CLOSED } from './link.js';
import { serveLink } from './link-server.js';
import type { RunnerLine, ServerCommand, SessionKeyLike } from './protocol.js';
import { agentEnvironment, type ListenConfig, readRunnerConfig } from './runner-config.js';
import { stdioChannel } from './stdio-channel.js';
import { exportWorkspace, importWorkspace, writeSkills } from './workspace-ops.js';

type Turn = Extract<ServerCommand, { type: 'turn' }>;

/** The server's answers awaited, with the line that asked (sent again to an API replica taking the link over). */
const pending = new Map<number, { resolve: (reply: ServerCommand) => void; line: RunnerLine }>();
let nextRequestId = 1;
/** Set once the channel is open (before any line can be emitted). */
let channel: Channel;
/** The TCP link, when serving one: exiting waits for the API side to have every line. */
let link: LinkEndpoint | undefined;
/** Turns sent and not yet ended by their `result`: while any is, a lost connection must come back. */
let turnsInProgress = 0;
/** Workspace archives being unpacked, by op_id. */
const imports = new Map<number, ReturnType<typeof importWorkspace>>();
/**
 * The workspace changes sent before the next turn (skills, an archive), settled: the server sends a
 * turn right behind them without waiting for their answers, so the turn waits here instead. Rejected
 * once one failed: the turn must not run in a workspace that is not what the server asked for.
 */
let workspaceSettled: Promise<void> = Promise.resolve();

function emit(line: RunnerLine | object): void {
  channel.send(JSON.stringify(line));
}

/** Asks the server and waits for its answer with the same request id. */
function ask(line: (requestId: number) => RunnerLine): Promise<ServerCommand> {
  const requestId = nextRequestId++;
  return new Promise((resolve) => {
    const asking = line(requestId);
    pending.set(requestId, { resolve, line: asking });
    emit(asking);
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
 * resolves it (or the run ends), so the agent sees the decision as the tool's result. One instance per
 * runtime process (a prewarmed one and a fresh one each need their own).
 */
function platformTools() {
  return createSdkMcpServer({
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
}

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
/** How the agent session starts: afresh, or in a runtime process prewarmed before the first turn. */
const sessions = new AgentSessions(
  () => ({
    // The sandbox is the permission boundary; inside it the agent runs its tools without asking.
    permissionMode: 'bypassPermissions',
    allowDangerouslySkipPermissions: true,
    includePartialMessages: true,
    settingSources: ['project'],
    // The SDK finds transcripts through CLAUDE_CONFIG_DIR (not HOME); without it nothing is mirrored.
    env: agentEnvironment(process.env),
    mcpServers: { platform: platformTools() },
    ...(process.env.ACIS_SESSION_STORE === '1' && { sessionStore: serverSessionStore }),
    stderr: (data) => process.stderr.write(data),
  }),
  (message) => log(message),
);

/** The session starts with the first turn, which says whether to resume and which skills to offer. */
async function startSession(first: Turn): Promise<void> {
  const { messages, prewarmed } = await sessions.start({ cwd: process.cwd(), resume: first.resume, skills: first.skills }, turns);
  if (prewarmed) log('session started in the prewarmed agent runtime');
  for await (const message of messages) {
    if (message.type === 'result') turnsInProgress = Math.max(0, turnsInProgress - 1);
    emit(message);
  }
}

function handle(command: ServerCommand): void {
  switch (command.type) {
    case 'turn':
      turnsInProgress += 1;
      workspaceSettled.then(
        () => {
          session ??= startSession(command).then(
            () => exit(0),
            (error: unknown) => fail(error),
          );
          turns.push(command.content, command.env);
        },
        (error: unknown) =>
          fail(new Error(`the workspace could not be prepared for the turn: ${error instanceof Error ? error.message : String(error)}`)),
      );
      return;
    case 'skills':
      answerOp(command.op_id, beforeNextTurn(writeSkills(process.cwd(), command.skills)));
      return;
    case 'workspace_export':
      answerOp(
        command.op_id,
        exportWorkspace(process.cwd(), { maxBytes: command.max_bytes, exclude: command.exclude }, (piece) =>
          emit({ type: 'runner_workspace_chunk', op_id: command.op_id, data: piece.toString('base64') }),
        ),
      );
      return;
    case 'workspace_import': {
      let unpacking = imports.get(command.op_id);
      if (!unpacking) {
        unpacking = importWorkspace(process.cwd());
        imports.set(command.op_id, unpacking);
      }
      if (command.data) unpacking.write(Buffer.from(command.data, 'base64'));
      if (command.last) {
        imports.delete(command.op_id);
        answerOp(command.op_id, beforeNextTurn(unpacking.end()));
      }
      return;
    }
    case 'session_entries':
    case 'session_ack':
    case 'approval_result': {
      const asked = pending.get(command.request_id);
      pending.delete(command.request_id);
      asked?.resolve(command);
      return;
    }
  }
}

/** A workspace change the turns sent after it wait for; it fails them if it fails. */
function beforeNextTurn<T>(work: Promise<T>): Promise<T> {
  const previous = workspaceSettled;
  workspaceSettled = Promise.all([previous, work]).then(() => undefined);
  // Its failure is reported by its own op and by the turn that meets it.
  workspaceSettled.catch(() => undefined);
  return work;
}

/** Ends a server call with `runner_op_done`, carrying the failure if there is one. */
function answerOp(opId: number, work: Promise<unknown>): void {
  work.then(
    () => emit({ type: 'runner_op_done', op_id: opId }),
    (error: unknown) => emit({ type: 'runner_op_done', op_id: opId, error: error instanceof Error ? error.message : String(error) }),
  );
}

function fail(error: unknown): void {
  emit({ type: 'runner_error', error: error instanceof Error ? error.message : String(error) });
  exit(1);
}

let exiting = false;
/** How long an exiting runner waits for the API side to acknowledge its last lines. */
const EXIT_GRACE_MS = 5000;

/** Exits once the API side has every line sent (over TCP; a pipe is written synchronously), or after a grace period. */
function exit(code: number): void {
  if (exiting) return;
  exiting = true;
  // A runtime prewarmed for a first turn that never came goes with the runner.
  sessions.close();
  if (!link) process.exit(code);
  const grace = setTimeout(() => process.exit(code), EXIT_GRACE_MS);
  void link.drained().then(() => {
    clearTimeout(grace);
    process.exit(code);
  });
}

function log(message: string): void {
  process.stderr.write(`acis-runner: ${message}\n`);
}

async function openChannel(listen: ListenConfig | undefined): Promise<Channel> {
  if (!listen) {
    const stdio = stdioChannel(process.stdin, process.stdout);
    // End of stdin ends the session once its last turn is done (or at once, before any turn).
    stdio.onClosed(() => {
      turns.end();
      if (!session) exit(0);
    });
    return stdio;
  }
  const server = await serveLink({
    ...listen,
    busy: () => turnsInProgress > 0,
    // A new API connection learns first that the runner is up.
    onNewClient: () => emit({ type: 'runner_ready' }),
    // One taking the link over gets the lines its predecessor had not stored, then this; the questions
    // still unanswered are asked again, as the predecessor's answers may have been lost with it.
    onTakeover: () => {
      emit({ type: 'runner_ready' });
      for (const { line } of pending.values()) emit(line);
    },
    log,
  });
  link = server.channel;
  const drain = listen.drainPort ? await serveDrain({ host: listen.host, port: listen.drainPort, link }) : undefined;
  server.channel.onClosed((reason) => {
    log(`link closed: ${reason}`);
    // The API side said goodbye (the sandbox is done), or never came back within the window; a
    // preStop hook waiting for that is answered first.
    const code = reason === PEER_CLOSED ? 0 : 1;
    void (drain?.settle() ?? Promise.resolve()).finally(() => process.exit(code));
  });
  log(`listening on ${server.address.address}:${server.address.port}`);
  return server.channel;
}

async function main(): Promise<void> {
  const { config, problems } = readRunnerConfig(process.env, (file) => readFileSync(file, 'utf8'));
  if (!config) {
    for (const problem of problems) log(problem);
    process.exit(2);
  }
  for (const forward of config.forwards) await serveTcpToUnix(forward.port, forward.socket);
  if (config.prewarm) void sessions.prewarm(process.cwd());
  channel = await openChannel(config.listen);
  channel.onLine((line) => {
    try {
      handle(JSON.parse(line) as ServerCommand);
    } catch (error) {
      fail(error);
    }
  });
  if (!config.listen) emit({ type: 'runner_ready' });
}

main().catch((error: unknown) => {
  if (channel) fail(error);
  else {
    log(`could not start: ${error instanceof Error ? error.message : String(error)}`);
    process.exit(1);
  }
});
