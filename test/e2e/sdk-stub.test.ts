/**
 * The real Agent SDK (and its bundled CLI) running fully offline against the model stub: the stream it yields,
 * a tool round trip, resuming by session id, resuming elsewhere through a sessionStore, and a live
 * streaming-input session.
 */
import { spawn } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { type Options, query, type SDKMessage, type SDKUserMessage } from '@anthropic-ai/claude-agent-sdk';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ModelStub, startModelStub } from '../../hack/model-stub/model-stub.js';
import { createFileSessionStore } from '../helpers/file-session-store.js';
import { collect, conversationDirs, resultOf, sdkEnv, streamedText, userMessage } from '../helpers/agent-sdk.js';

let stub: ModelStub;
let root: string;
beforeAll(async () => {
  stub = await startModelStub();
  root = await mkdtemp(path.join(tmpdir(), 'acis-sdk-stub-'));
});
afterAll(async () => {
  await stub.stop();
  await rm(root, { recursive: true, force: true });
});

function options(dirs: { cwd: string; home: string }, extra: Options = {}): Options {
  return {
    cwd: dirs.cwd,
    env: sdkEnv(stub.url, dirs.home),
    permissionMode: 'bypassPermissions',
    allowDangerouslySkipPermissions: true,
    includePartialMessages: true,
    ...extra,
  };
}

/** The stub requests made while `run` ran. */
async function requestsDuring<T>(run: () => Promise<T>) {
  const before = stub.requests.length;
  const value = await run();
  return { value, requests: stub.requests.slice(before) };
}

describe('Agent SDK against the model stub', () => {
  it('streams a turn (init, text deltas, assistant, result with usage) from one model request, offering what it was given', async () => {
    const dirs = await conversationDirs(root, 'plain');
    const skillDir = path.join(dirs.cwd, '.claude', 'skills', 'heron-facts');
    await mkdir(skillDir, { recursive: true });
    await writeFile(
      path.join(skillDir, 'SKILL.md'),
      '---\nname: heron-facts\ndescription: Answers questions about herons.\n---\nHerons wade.\n',
    );

    const { value: run, requests } = await requestsDuring(() =>
      collect(
        query({
          prompt: 'Say hello [[reply: Hello from the stub, streamed in pieces]]',
          options: options(dirs, {
            systemPrompt: { type: 'preset', preset: 'claude_code', append: 'ACIS-SYSTEM-APPEND' },
            skills: ['heron-facts'],
          }),
        }),
      ),
    );
    expect(run.error).toBeUndefined();
    const { messages } = run;

    const init = messages[0]!;
    expect(init).toMatchObject({ type: 'system', subtype: 'init', cwd: dirs.cwd, permissionMode: 'bypassPermissions' });
    if (init.type !== 'system' || init.subtype !== 'init') throw new Error('no init');
    expect(init.tools).toContain('Bash');
    expect(init.session_id).toMatch(/^[0-9a-f-]{36}$/);

    const deltas = messages.filter((m) => m.type === 'stream_event' && m.event.type === 'content_block_delta');
    expect(deltas.length).toBeGreaterThan(1);
    expect(streamedText(messages)).toBe('Hello from the stub, streamed in pieces');
    const assistant = messages.find((m) => m.type === 'assistant');
    expect(assistant?.type === 'assistant' && assistant.message.content).toEqual([
      { type: 'text', text: 'Hello from the stub, streamed in pieces' },
    ]);

    const result = resultOf(messages);
    expect(messages.at(-1)).toBe(result);
    expect(result).toMatchObject({
      subtype: 'success',
      is_error: false,
      result: 'Hello from the stub, streamed in pieces',
      session_id: init.session_id,
    });
    expect(result.usage.input_tokens).toBeGreaterThan(0);
    expect(result.usage.output_tokens).toBe(10);

    // Exactly one model call, and it shows what the agent was offered.
    expect(requests.map((r) => `${r.method} ${r.path} ${r.kind}`)).toEqual(['POST /v1/messages agent']);
    const body = requests[0]!.body as { stream: boolean; tools: Array<{ name: string }>; system: Array<{ text: string }> };
    expect(body.stream).toBe(true);
    expect(body.tools.map((t) => t.name)).toContain('Bash');
    expect(body.system.map((b) => b.text).join('\n')).toContain('ACIS-SYSTEM-APPEND');
    const offered = JSON.stringify(body);
    expect(offered).toContain('heron-facts: Answers questions about herons.');
    expect(offered).not.toContain('- dataviz:');
    expect(requests[0]!.headers['x-api-key']).toBe('[redacted]');
    expect(requests[0]!.headers['x-claude-code-session-id']).toBe(init.session_id);
  });

  it('runs a Bash tool call in the cwd and answers with its result', async () => {
    const dirs = await conversationDirs(root, 'bash');
    const { value: run, requests } = await requestsDuring(() =>
      collect(
        query({ prompt: 'Compute [[tool:Bash {"command":"echo $((6*7)) > answer.txt && cat answer.txt"}]]', options: options(dirs) }),
      ),
    );
    expect(run.error).toBeUndefined();

    const toolUse = run.messages.flatMap((m) => (m.type === 'assistant' ? m.message.content : [])).find((b) => b.type === 'tool_use');
    expect(toolUse).toMatchObject({ name: 'Bash', input: { command: 'echo $((6*7)) > answer.txt && cat answer.txt' } });
    const toolResult = run.messages
      .flatMap((m) => (m.type === 'user' && Array.isArray(m.message.content) ? m.message.content : []))
      .find((b) => b.type === 'tool_result');
    expect(toolResult).toMatchObject({ type: 'tool_result', tool_use_id: (toolUse as { id: string }).id, content: '42', is_error: false });
    expect(resultOf(run.messages)).toMatchObject({ subtype: 'success', result: 'Tool Bash returned: 42', num_turns: 2 });
    expect(await readFile(path.join(dirs.cwd, 'answer.txt'), 'utf8')).toBe('42\n');
    expect(requests.filter((r) => r.kind === 'agent')).toHaveLength(2);
  });

  it('resumes a session by id and sees the earlier turns', async () => {
    const dirs = await conversationDirs(root, 'resume');
    const first = await collect(query({ prompt: 'Remember the word heron [[reply: noted]]', options: options(dirs) }));
    const sessionId = resultOf(first.messages).session_id;

    const second = await collect(query({ prompt: 'What did I say? [[echo-history]]', options: options(dirs, { resume: sessionId }) }));
    expect(second.error).toBeUndefined();
    expect(resultOf(second.messages)).toMatchObject({
      session_id: sessionId,
      result: 'History: 1 earlier user turn: [1] "Remember the word heron [[reply: noted]]"',
    });
  });

  it('resumes from another cwd and HOME through a sessionStore, as a recycled runner does', async () => {
    const store = createFileSessionStore(path.join(root, 'store', 'conversation-1'));
    const before = await conversationDirs(root, 'runner-a');
    const first = await collect(
      query({ prompt: 'The code word is osprey [[reply: ok]]', options: options(before, { sessionStore: store }) }),
    );
    const sessionId = resultOf(first.messages).session_id;
    // The first runner and everything on its disk is gone.
    await rm(path.join(root, 'runner-a'), { recursive: true, force: true });

    const after = await conversationDirs(root, 'runner-b');
    const second = await collect(
      query({ prompt: 'Which code word? [[echo-history]]', options: options(after, { sessionStore: store, resume: sessionId }) }),
    );
    expect(second.error).toBeUndefined();
    expect(resultOf(second.messages)).toMatchObject({
      session_id: sessionId,
      result: 'History: 1 earlier user turn: [1] "The code word is osprey [[reply: ok]]"',
    });
    const stored = (await store.load({ projectKey: 'any', sessionId })) ?? [];
    const prompts = stored.filter((e) => e.type === 'user').map((e) => JSON.stringify(e));
    expect(prompts.some((p) => p.includes('osprey'))).toBe(true);
    expect(prompts.some((p) => p.includes('Which code word?'))).toBe(true);
  });

  it('keeps one live session, in one CLI process, across two turns in streaming-input mode', async () => {
    const dirs = await conversationDirs(root, 'live');
    let releaseSecond!: () => void;
    const firstDone = new Promise<void>((resolve) => (releaseSecond = resolve));
    async function* turns(): AsyncGenerator<SDKUserMessage> {
      yield userMessage('First live turn [[reply: one]]');
      await firstDone;
      yield userMessage('Second live turn [[echo-history]]');
    }
    const spawned: number[] = [];
    const session = query({
      prompt: turns(),
      options: options(dirs, {
        spawnClaudeCodeProcess: (spawnOptions) => {
          const child = spawn(spawnOptions.command, spawnOptions.args, {
            cwd: spawnOptions.cwd,
            env: spawnOptions.env,
            stdio: ['pipe', 'pipe', 'ignore'],
            signal: spawnOptions.signal,
          });
          spawned.push(child.pid ?? -1);
          return child;
        },
      }),
    });
    const messages: SDKMessage[] = [];
    for await (const message of session) {
      messages.push(message);
      if (message.type === 'result') releaseSecond();
    }

    const results = messages.filter((m) => m.type === 'result');
    expect(results.map((r) => (r.type === 'result' && r.subtype === 'success' ? r.result : r.subtype))).toEqual([
      'one',
      'History: 1 earlier user turn: [1] "First live turn [[reply: one]]"',
    ]);
    expect(new Set(messages.map((m) => m.session_id)).size).toBe(1);
    expect(spawned).toHaveLength(1);
  });

  it('ends a turn whose model call fails with an error result, without retrying a final error', async () => {
    const dirs = await conversationDirs(root, 'error');
    const { value: run, requests } = await requestsDuring(() => collect(query({ prompt: 'Try [[error: 529]]', options: options(dirs) })));
    expect(resultOf(run.messages)).toMatchObject({ is_error: true, api_error_status: 529 });
    // The SDK throws after yielding an error result of a one-shot query.
    expect(run.error?.message).toContain('529');
    expect(requests.filter((r) => r.kind === 'agent').map((r) => r.status)).toEqual([529]);
  });
});
