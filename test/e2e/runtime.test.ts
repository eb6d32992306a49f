/**
 * The sandbox runtime end to end: pooled and warm runners (real Agent SDK in bubblewrap, against the
 * model stub), session resume from the transcript stored in Postgres, warm holds with their sliding
 * idle TTL and per-tenant cap, node capacity with on_capacity reject and hold, tool calls and agent
 * errors. Asserts stream lines, what the API shows afterwards, and (read-only) the provider's runners.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import pg from 'pg';
import { commandLine, processTree } from '../../hack/bench/proc-tree.js';
import { type ModelStub, startModelStub } from '../../hack/model-stub/model-stub.js';
import type { RunnerView } from '../../sandbox-policy/policy.js';
import { deltaText, isTerminal, type Line, readLines, withoutPings } from '../helpers/ndjson.js';
import { type ProvisionedUser, provisionUser } from '../helpers/provision.js';
import { type ApiResponse, problemSlug, startTestServer, type TestServer } from '../helpers/test-server.js';

const POOL_SIZE = 2;
const AGENT_TYPE = 'vendor-agent-sdk';

let stub: ModelStub;
let t: TestServer;
let key: string;
let user: ProvisionedUser;

beforeAll(async () => {
  stub = await startModelStub();
  t = await startTestServer({
    ANTHROPIC_BASE_URL: stub.url,
    ACIS_POOL_SIZE: String(POOL_SIZE),
    ACIS_MAX_SANDBOXES: '6',
    ACIS_PING_INTERVAL_MS: '200',
  });
  ({ serviceKey: key } = await t.createIntegration('runtime e2e'));
  // Exact agent text is asserted throughout, so the filler is off at the tenant.
  user = await provisionUser(t, key, { settings: { filler_enabled: false } });
});
afterAll(async () => {
  await t?.stop();
  await stub?.stop();
});

// ---------------------------------------------------------------- helpers

async function newConversation(server: TestServer, serviceKey: string, userId: string, body: object = {}): Promise<string> {
  const res = await server.request('POST', '/conversations', { token: serviceKey, body: { user_id: userId, ...body } });
  expect(res.status, res.text).toBe(201);
  return res.body.id;
}

const runtimeOf = async (server: TestServer, serviceKey: string, conversationId: string) => {
  const res = await server.request('GET', `/conversations/${conversationId}`, { token: serviceKey });
  expect(res.status).toBe(200);
  return res.body as {
    runtime: { mode: string; idle_ttl_seconds: number | null; sandbox_state: string; expires_at: string | null };
    message_count: number;
    last_message_at: string | null;
  };
};

const runners = (server: TestServer): RunnerView[] => server.server.deps.runtime.provider.views();
const runnerOf = (server: TestServer, conversationId: string) => runners(server).find((r) => r.conversationId === conversationId);

/** Opens a message stream without reading it (so a test can interleave several). */
function openStream(server: TestServer, serviceKey: string, conversationId: string, body: object): Promise<Response> {
  return fetch(`${server.url}/conversations/${conversationId}/messages`, {
    method: 'POST',
    headers: { authorization: `Bearer ${serviceKey}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
}

interface Turn {
  lines: Line[];
  /** The runner the turn ran on, seen while it ran. */
  runner: RunnerView;
}

/** Sends a message on the main server, notes which runner serves it, and reads the stream to its end. */
async function turn(conversationId: string, content: string): Promise<Turn> {
  const response = await openStream(t, key, conversationId, { content });
  expect(response.status).toBe(200);
  let runner: RunnerView | undefined;
  const lines = await readLines(response, (line) => {
    if (line.type === 'system' && line.subtype === 'init') runner = { ...runnerOf(t, conversationId)! };
  });
  expect(runner, 'a runner served the turn').toBeDefined();
  const visible = withoutPings(lines);
  expect(visible.filter(isTerminal)).toHaveLength(1);
  expect(visible.at(-1), JSON.stringify(visible.at(-1))).toMatchObject({ type: 'result', subtype: 'success', is_error: false });
  return { lines: visible, runner: runner! };
}

async function until<T>(what: string, probe: () => T | undefined | false, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const pooledIds = (server: TestServer) =>
  runners(server)
    .filter((r) => r.state === 'pooled' && r.agentType === AGENT_TYPE)
    .map((r) => r.id);
const poolIsFull = (server: TestServer) =>
  until('the pool to be topped up', () => pooledIds(server).length === POOL_SIZE && pooledIds(server));

const history = (...turns: string[]) =>
  `History: ${turns.length} earlier user turn${turns.length === 1 ? '' : 's'}: ${turns.map((text, i) => `[${i + 1}] "${text}"`).join(' ')}`;

async function assistantMessages(server: TestServer, serviceKey: string, conversationId: string) {
  const res = await server.request('GET', `/conversations/${conversationId}/messages?limit=100`, { token: serviceKey });
  expect(res.status).toBe(200);
  return (res.body.data as any[]).filter((m) => m.role === 'assistant').reverse();
}

const secondsBetween = (later: string | Date, earlier: string | Date) => (new Date(later).getTime() - new Date(earlier).getTime()) / 1000;

/** The agent runtime's processes among this process's descendants (the runners' CLIs), and whether each was prewarmed. */
const runtimeProcesses = () =>
  processTree(process.pid)
    .map((pid) => commandLine(pid))
    .filter((line) => line.includes('--input-format stream-json'))
    .map((line) => ({ prewarmed: line.includes('--await-claim') }));

// ---------------------------------------------------------------- pooled mode

describe('pooled mode', () => {
  it("pool runners prewarm the agent runtime; a new conversation's first message runs in it, a resumed turn starts the runtime afresh", async () => {
    await poolIsFull(t);
    await until('every pool runner to have its runtime prewarmed', () => runtimeProcesses().filter((p) => p.prewarmed).length >= POOL_SIZE);
    const conversationId = await newConversation(t, key, user.userId);
    const seenAtInit: Array<Array<{ prewarmed: boolean }>> = [];
    const send = async (content: string) => {
      const response = await openStream(t, key, conversationId, { content });
      expect(response.status).toBe(200);
      const lines = await readLines(response, (line) => {
        if (line.type === 'system' && line.subtype === 'init') seenAtInit.push(runtimeProcesses());
      });
      expect(withoutPings(lines).at(-1)).toMatchObject({ type: 'result', subtype: 'success' });
      return deltaText(withoutPings(lines));
    };
    expect(await send('My code word is HERON [[reply: noted]]')).toBe('noted');
    // Only prewarmed runtimes exist while the first turn runs: none was started for it.
    expect(seenAtInit[0]!.length).toBeGreaterThan(0);
    expect(seenAtInit[0]!.every((p) => p.prewarmed)).toBe(true);
    expect(await send('Again [[echo-history]]')).toBe(history('My code word is HERON [[reply: noted]]'));
    // A claim cannot resume a session: the second turn's runtime was started for it.
    expect(seenAtInit[1]!.some((p) => !p.prewarmed)).toBe(true);
  });

  it('pre-starts ACIS_POOL_SIZE runners; each message claims one, releases it, and resumes the session from the stored transcript', async () => {
    const conversationId = await newConversation(t, key, user.userId);
    expect((await runtimeOf(t, key, conversationId)).runtime).toEqual({
      agent_type: AGENT_TYPE,
      mode: 'pooled',
      idle_ttl_seconds: null,
      sandbox_state: 'cold',
      expires_at: null,
    });

    const preStarted = await poolIsFull(t);
    const first = await turn(conversationId, 'My code word is PELICAN [[reply: noted]]');
    expect(preStarted).toContain(first.runner.id);
    expect(first.runner).toMatchObject({ state: 'busy', tenantId: user.tenantId });
    expect(deltaText(first.lines)).toBe('noted');
    // Released and recycled: nothing stays bound to the conversation, and the pool is refilled.
    expect(runnerOf(t, conversationId)).toBeUndefined();
    const afterFirst = await runtimeOf(t, key, conversationId);
    expect(afterFirst.runtime).toMatchObject({ sandbox_state: 'cold', expires_at: null });

    const refilled = await poolIsFull(t);
    expect(refilled).not.toContain(first.runner.id);
    const second = await turn(conversationId, 'What was it? [[echo-history]]');
    expect(refilled).toContain(second.runner.id);
    // A fresh runner, yet the same session: the runtime loaded it from Postgres through the runner.
    const init = (turn: Turn) => turn.lines.find((l) => l.type === 'system' && l.subtype === 'init')!;
    expect(init(second).session_id).toBe(init(first).session_id);
    const expected = history('My code word is PELICAN [[reply: noted]]');
    expect(deltaText(second.lines)).toBe(expected);

    const after = await runtimeOf(t, key, conversationId);
    expect(after).toMatchObject({ message_count: 4, runtime: { mode: 'pooled', sandbox_state: 'cold', expires_at: null } });
    const replies = await assistantMessages(t, key, conversationId);
    expect(replies.map((m) => [m.status, m.content])).toEqual([
      ['completed', 'noted'],
      ['completed', expected],
    ]);

    // The transcript itself: both replies are in the stored entries of that one session.
    const db = new pg.Client({ connectionString: t.databaseUrl });
    await db.connect();
    try {
      const { rows } = await db.query<{ session_key: string; entry: any }>(
        'select session_key, entry from agent_session_entries where conversation_id = $1 order by seq',
        [conversationId],
      );
      expect(new Set(rows.map((r) => r.session_key))).toEqual(new Set([init(first).session_id]));
      const assistantTexts = rows
        .filter((r) => r.entry?.type === 'assistant')
        .flatMap((r) => (r.entry.message?.content ?? []) as any[])
        .filter((b) => b.type === 'text')
        .map((b) => b.text);
      expect(assistantTexts).toEqual(['noted', expected]);
    } finally {
      await db.end();
    }
  });
});

// ---------------------------------------------------------------- warm mode

describe('warm mode', () => {
  it('holds the runner under a sliding idle TTL, reuses the live session, and cold-starts with resume once the TTL lapses', async () => {
    const conversationId = await newConversation(t, key, user.userId, { runtime: { mode: 'warm', idle_ttl_seconds: 60 } });
    expect((await runtimeOf(t, key, conversationId)).runtime).toMatchObject({
      mode: 'warm',
      idle_ttl_seconds: 60,
      sandbox_state: 'cold',
      expires_at: null,
    });

    const first = await turn(conversationId, 'Remember HERON [[reply: ok]]');
    const afterFirst = (await runtimeOf(t, key, conversationId)).runtime;
    expect(afterFirst.sandbox_state).toBe('warm');
    expect(Math.abs(secondsBetween(afterFirst.expires_at!, t.clock.now()) - 60)).toBeLessThan(5);
    expect(runnerOf(t, conversationId)).toMatchObject({ id: first.runner.id, state: 'held' });

    // 20 s later: the same runner (live session), and the hold slides forward.
    t.clock.advance(20_000);
    const second = await turn(conversationId, 'And now? [[echo-history]]');
    expect(second.runner.id).toBe(first.runner.id);
    expect(deltaText(second.lines)).toBe(history('Remember HERON [[reply: ok]]'));
    const afterSecond = (await runtimeOf(t, key, conversationId)).runtime;
    expect(afterSecond.sandbox_state).toBe('warm');
    expect(secondsBetween(afterSecond.expires_at!, afterFirst.expires_at!)).toBeGreaterThanOrEqual(20);
    expect(Math.abs(secondsBetween(afterSecond.expires_at!, t.clock.now()) - 60)).toBeLessThan(5);

    // Nothing for longer than the TTL: the provider's expiry sweep (what its timer runs) recycles it.
    t.clock.advance(61_000);
    await t.server.deps.runtime.provider.expireLapsedHolds();
    expect(runnerOf(t, conversationId)).toBeUndefined();
    expect((await runtimeOf(t, key, conversationId)).runtime).toMatchObject({ sandbox_state: 'cold', expires_at: null });

    const third = await turn(conversationId, 'Still there? [[echo-history]]');
    expect(third.runner.id).not.toBe(first.runner.id);
    expect(deltaText(third.lines)).toBe(history('Remember HERON [[reply: ok]]', 'And now? [[echo-history]]'));
    const afterThird = (await runtimeOf(t, key, conversationId)).runtime;
    expect(afterThird.sandbox_state).toBe('warm');
    expect(Math.abs(secondsBetween(afterThird.expires_at!, t.clock.now()) - 60)).toBeLessThan(5);
    expect((await assistantMessages(t, key, conversationId)).map((m) => m.status)).toEqual(['completed', 'completed', 'completed']);
  });

  it('lapses a hold at a message too: a message after the TTL does not reuse the old runner', async () => {
    const conversationId = await newConversation(t, key, user.userId, { runtime: { mode: 'warm', idle_ttl_seconds: 60 } });
    const first = await turn(conversationId, 'Remember IBIS [[reply: ok]]');
    t.clock.advance(61_000);
    // No sweep has run yet; the lapsed hold must not be taken for a live one.
    const second = await turn(conversationId, 'Which bird? [[echo-history]]');
    expect(second.runner.id).not.toBe(first.runner.id);
    expect(deltaText(second.lines)).toBe(history('Remember IBIS [[reply: ok]]'));
    expect((await runtimeOf(t, key, conversationId)).runtime.sandbox_state).toBe('warm');
  });

  it('uses an existing warm runner after a switch to pooled, then does not keep it warm', async () => {
    const conversationId = await newConversation(t, key, user.userId, { runtime: { mode: 'warm', idle_ttl_seconds: 120 } });
    const first = await turn(conversationId, 'Remember CRANE [[reply: ok]]');
    expect((await runtimeOf(t, key, conversationId)).runtime.sandbox_state).toBe('warm');

    const patched = await t.request('PATCH', `/conversations/${conversationId}`, { token: key, body: { runtime: { mode: 'pooled' } } });
    expect(patched.status).toBe(200);
    expect(patched.body.runtime).toMatchObject({ mode: 'pooled', idle_ttl_seconds: null });
    // The switch alone does not drop the held runner.
    expect(runnerOf(t, conversationId)).toMatchObject({ id: first.runner.id, state: 'held' });

    const second = await turn(conversationId, 'Which bird? [[echo-history]]');
    expect(second.runner.id).toBe(first.runner.id);
    expect(deltaText(second.lines)).toBe(history('Remember CRANE [[reply: ok]]'));
    expect(runnerOf(t, conversationId)).toBeUndefined();
    expect((await runtimeOf(t, key, conversationId)).runtime).toMatchObject({
      mode: 'pooled',
      idle_ttl_seconds: null,
      sandbox_state: 'cold',
      expires_at: null,
    });
  });

  it('keeps at most max_concurrent_warm runners per tenant, releasing the least recently used hold', async () => {
    const capped = await provisionUser(t, key, { settings: { filler_enabled: false, max_concurrent_warm: 1 } });
    const warm = { runtime: { mode: 'warm', idle_ttl_seconds: 300 } };
    const a = await newConversation(t, key, capped.userId, warm);
    const b = await newConversation(t, key, capped.userId, warm);

    await turn(a, '[[reply: first]]');
    expect((await runtimeOf(t, key, a)).runtime.sandbox_state).toBe('warm');
    await turn(b, '[[reply: second]]');
    expect((await runtimeOf(t, key, b)).runtime).toMatchObject({ sandbox_state: 'warm', expires_at: expect.any(String) });
    expect((await runtimeOf(t, key, a)).runtime).toMatchObject({ sandbox_state: 'cold', expires_at: null });
    const held = runners(t).filter((r) => r.state === 'held' && r.tenantId === capped.tenantId);
    expect(held.map((r) => r.conversationId)).toEqual([b]);

    // Another tenant's holds are not counted against this one.
    const other = await newConversation(t, key, user.userId, warm);
    await turn(other, '[[reply: elsewhere]]');
    expect((await runtimeOf(t, key, b)).runtime.sandbox_state).toBe('warm');
    expect((await runtimeOf(t, key, other)).runtime.sandbox_state).toBe('warm');
  });
});

// ---------------------------------------------------------------- tools and agent errors

describe('tool calls', () => {
  it('streams the tool_use and tool_result turns and stores tool_call, tool_result and the final text', async () => {
    const conversationId = await newConversation(t, key, user.userId);
    const { lines } = await turn(conversationId, 'Run it [[tool:Bash {"command":"echo hi"}]]');

    const toolUse = lines
      .filter((l) => l.type === 'assistant')
      .flatMap((l) => l.message.content as any[])
      .find((b) => b.type === 'tool_use');
    expect(toolUse).toMatchObject({ name: 'Bash', input: { command: 'echo hi' }, id: expect.any(String) });
    const toolResult = lines
      .filter((l) => l.type === 'user')
      .flatMap((l) => (Array.isArray(l.message.content) ? l.message.content : []) as any[])
      .find((b) => b.type === 'tool_result');
    expect(toolResult).toMatchObject({ tool_use_id: toolUse.id, is_error: false });
    const finalText = 'Tool Bash returned: hi';
    expect(deltaText(lines)).toBe(finalText);

    const end = lines.find((l) => l.type === 'message_end')!;
    const [stored] = await assistantMessages(t, key, conversationId);
    expect(end.message).toEqual(stored);
    expect(stored).toMatchObject({ status: 'completed', content: finalText });
    expect(stored.parts).toEqual([
      { type: 'tool_call', id: toolUse.id, name: 'Bash', input: { command: 'echo hi' } },
      { type: 'tool_result', tool_use_id: toolUse.id, text: 'hi', is_error: false },
      { type: 'text', text: finalText },
    ]);
  });
});

describe('agent errors', () => {
  it('ends the run with the agent’s error result and a failed message; the conversation goes on', async () => {
    const conversationId = await newConversation(t, key, user.userId);
    const response = await openStream(t, key, conversationId, { content: 'Break [[error: 400]]' });
    expect(response.status).toBe(200);
    const lines = withoutPings(await readLines(response));
    expect(lines.filter(isTerminal)).toHaveLength(1);
    // An agent error is the agent's own terminal `result`, not a platform `error` line.
    expect(lines.at(-1)).toMatchObject({ type: 'result', is_error: true });
    expect(lines.some((l) => l.object === 'platform.event' && l.type === 'error')).toBe(false);
    const end = lines.at(-2)!;
    expect(end).toMatchObject({ object: 'platform.event', type: 'message_end', message: { status: 'failed' } });

    const [failed] = await assistantMessages(t, key, conversationId);
    expect(failed).toMatchObject({ id: end.message.id, status: 'failed' });
    expect((await runtimeOf(t, key, conversationId)).runtime).toMatchObject({ sandbox_state: 'cold', expires_at: null });

    const next = await t.request('POST', `/conversations/${conversationId}/messages?stream=false`, {
      token: key,
      body: { content: '[[reply: recovered]]' },
    });
    expect(next.status).toBe(201);
    expect(next.body).toMatchObject({ status: 'completed', content: 'recovered' });
  });

  it('in a warm conversation, the next message after an agent error still runs and remembers the conversation', async () => {
    const conversationId = await newConversation(t, key, user.userId, { runtime: { mode: 'warm', idle_ttl_seconds: 300 } });
    await turn(conversationId, 'Remember OSPREY [[reply: ok]]');
    const failed = await t.request('POST', `/conversations/${conversationId}/messages?stream=false`, {
      token: key,
      body: { content: 'Break [[error: 400]]' },
    });
    expect(failed.status).toBe(201);
    expect(failed.body.status).toBe('failed');
    const next = await turn(conversationId, 'Which bird? [[echo-history]]');
    // The failed turn is part of the session too.
    expect(deltaText(next.lines)).toBe(history('Remember OSPREY [[reply: ok]]', 'Break [[error: 400]]'));
    expect((await runtimeOf(t, key, conversationId)).runtime.sandbox_state).toBe('warm');
  });
});

describe('deleting a conversation', () => {
  it('gives up its warm runner at once', async () => {
    const conversationId = await newConversation(t, key, user.userId, { runtime: { mode: 'warm', idle_ttl_seconds: 300 } });
    await turn(conversationId, '[[reply: ok]]');
    expect(runnerOf(t, conversationId)).toMatchObject({ state: 'held' });
    const deleted = await t.request('DELETE', `/conversations/${conversationId}`, { token: key });
    expect(deleted.status).toBe(204);
    expect(runnerOf(t, conversationId)).toBeUndefined();
  });

  it('mid-run: the run ends its stream with a not-found error line and frees the runner', async () => {
    const conversationId = await newConversation(t, key, user.userId, { runtime: { mode: 'warm', idle_ttl_seconds: 300 } });
    const response = await openStream(t, key, conversationId, { content: '[[slow: 200]] [[reply: one two three four five six]]' });
    let deletion: Promise<ApiResponse> | undefined;
    const lines = withoutPings(
      await readLines(response, (line) => {
        if (line.type === 'system' && !deletion) deletion = t.request('DELETE', `/conversations/${conversationId}`, { token: key });
      }),
    );
    expect((await deletion!).status).toBe(204);
    expect(lines.filter(isTerminal)).toHaveLength(1);
    expect(lines.some((l) => l.type === 'message_end')).toBe(false);
    expect(lines.at(-1)).toMatchObject({
      object: 'platform.event',
      type: 'error',
      problem: { status: 404, type: expect.stringMatching(/\/problems\/not-found$/) },
    });
    // Not held for a conversation that no longer exists.
    expect(runnerOf(t, conversationId)).toBeUndefined();
    expect((await t.request('GET', `/conversations/${conversationId}`, { token: key })).status).toBe(404);
  });
});

// ---------------------------------------------------------------- capacity

/** A small node (one sandbox, no pool) of its own, sharing the model stub. */
async function capacityNode(maxHoldSeconds: number) {
  const server = await startTestServer({
    ANTHROPIC_BASE_URL: stub.url,
    ACIS_MAX_SANDBOXES: '1',
    ACIS_POOL_SIZE: '0',
    ACIS_MAX_HOLD_SECONDS: String(maxHoldSeconds),
    ACIS_PING_INTERVAL_MS: '200',
  });
  const { serviceKey } = await server.createIntegration('capacity e2e');
  const owner = await provisionUser(server, serviceKey, { settings: { filler_enabled: false } });
  return { server, serviceKey, owner };
}

/** Starts a slow run and resolves once the agent is running it (the node's only sandbox is busy). */
async function occupy(server: TestServer, serviceKey: string, conversationId: string, slowMs: number) {
  const response = await openStream(server, serviceKey, conversationId, {
    content: `[[slow: ${slowMs}]] [[reply: one two three four five six seven eight nine ten eleven twelve]]`,
  });
  expect(response.status).toBe(200);
  let started: () => void = () => {};
  const running = new Promise<void>((resolve) => {
    started = resolve;
  });
  const done = readLines(response, (line) => {
    if (line.type === 'system') started();
  });
  await running;
  // Wrapped: an async function returning the promise itself would wait for the whole stream.
  return { done };
}

function expectCapacityProblem(res: ApiResponse) {
  expect(res.status).toBe(429);
  expect(problemSlug(res)).toBe('capacity-exhausted');
  expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
}

describe('capacity (ACIS_MAX_SANDBOXES=1, no pool)', () => {
  let node: Awaited<ReturnType<typeof capacityNode>>;
  beforeAll(async () => {
    node = await capacityNode(60);
  });
  afterAll(async () => {
    await node?.server.stop();
  });

  // Four agent turns one after another on a one-runner node: 20-26 s on a quiet 2-core machine, past 30 s under load.
  it('rejects with 429 and Retry-After before any stream, storing nothing; with hold, queues FIFO and runs when capacity frees', async () => {
    const { server, serviceKey, owner } = node;
    const [busy, rejected, first, second] = await Promise.all([0, 1, 2, 3].map(() => newConversation(server, serviceKey, owner.userId)));
    const busyRun = await occupy(server, serviceKey, busy!, 700);

    for (const path of [`/conversations/${rejected}/messages`, `/conversations/${rejected}/messages?stream=false`]) {
      const res = await server.request('POST', path, { token: serviceKey, body: { content: 'hi', on_capacity: 'reject' } });
      expectCapacityProblem(res);
      expect(res.headers.get('x-service-stream-format')).toBeNull();
    }
    const defaulted = await server.request('POST', `/conversations/${rejected}/messages`, { token: serviceKey, body: { content: 'hi' } });
    expectCapacityProblem(defaulted);
    expect(await runtimeOf(server, serviceKey, rejected!)).toMatchObject({ message_count: 0, last_message_at: null });
    const nothing = await server.request('GET', `/conversations/${rejected}/messages`, { token: serviceKey });
    expect(nothing.body.data).toEqual([]);

    // Two holds, queued in the order they arrived.
    const seen: { conversation: string; line: Line; at: number }[] = [];
    const follow = (conversation: string, response: Response) =>
      readLines(response, (line) => {
        if (line.event !== 'ping') seen.push({ conversation, line, at: seen.length });
      });
    const firstResponse = await openStream(server, serviceKey, first!, { content: '[[reply: first served]]', on_capacity: 'hold' });
    expect(firstResponse.status).toBe(200);
    const firstLines = follow(first!, firstResponse);
    await until('the first hold to be queued', () => seen.some((s) => s.conversation === first && s.line.type === 'queued'));
    const secondResponse = await openStream(server, serviceKey, second!, { content: '[[reply: second served]]', on_capacity: 'hold' });
    const secondLines = follow(second!, secondResponse);

    const busyLines = withoutPings(await busyRun.done);
    expect(busyLines.at(-1)).toMatchObject({ type: 'result', subtype: 'success' });
    const [a, b] = (await Promise.all([firstLines, secondLines])).map(withoutPings);

    const queued = (lines: Line[]) => lines.filter((l) => l.type === 'queued');
    expect(queued(a!)).toEqual([{ object: 'platform.event', type: 'queued', position: 1, retry_hint_seconds: expect.any(Number) }]);
    // The second moved up when the first was served.
    expect(queued(b!).map((l) => l.position)).toEqual([2, 1]);
    for (const lines of [a!, b!]) {
      expect(lines[0]).toMatchObject({ object: 'platform.event', type: 'queued' });
      expect(lines.findIndex((l) => l.type === 'system')).toBe(queued(lines).length);
      expect(lines.at(-1)).toMatchObject({ type: 'result', subtype: 'success' });
    }
    expect(deltaText(a!)).toBe('first served');
    expect(deltaText(b!)).toBe('second served');
    // FIFO on one sandbox: the second run starts only after the first one ended.
    const order = (conversation: string, predicate: (l: Line) => boolean) =>
      seen.find((s) => s.conversation === conversation && predicate(s.line))!.at;
    expect(order(second!, (l) => l.type === 'system')).toBeGreaterThan(order(first!, (l) => l.type === 'result'));

    for (const [conversation, content] of [
      [first!, 'first served'],
      [second!, 'second served'],
    ] as const) {
      expect(await runtimeOf(server, serviceKey, conversation)).toMatchObject({ message_count: 2 });
      expect((await assistantMessages(server, serviceKey, conversation)).map((m) => [m.status, m.content])).toEqual([
        ['completed', content],
      ]);
    }
  }, 90_000);
});

describe('capacity hold past ACIS_MAX_HOLD_SECONDS', () => {
  let node: Awaited<ReturnType<typeof capacityNode>>;
  beforeAll(async () => {
    node = await capacityNode(1);
  });
  afterAll(async () => {
    await node?.server.stop();
  });

  it('ends a held stream with a capacity-exhausted error line and a failed message; stream=false answers 429', async () => {
    const { server, serviceKey, owner } = node;
    const [busy, waiting] = await Promise.all([0, 1].map(() => newConversation(server, serviceKey, owner.userId)));
    // Long enough for both holds below to run out (one second each).
    const busyRun = await occupy(server, serviceKey, busy!, 1_000);

    const response = await openStream(server, serviceKey, waiting!, { content: 'patience', on_capacity: 'hold' });
    expect(response.status).toBe(200);
    const lines = withoutPings(await readLines(response));
    expect(lines[0]).toMatchObject({ object: 'platform.event', type: 'queued', position: 1 });
    expect(lines.some((l) => l.type === 'system')).toBe(false);
    const end = lines.at(-2)!;
    expect(end).toMatchObject({ type: 'message_end', message: { status: 'failed', content: '' } });
    expect(lines.at(-1)).toMatchObject({
      object: 'platform.event',
      type: 'error',
      problem: { status: 429, type: expect.stringMatching(/\/problems\/capacity-exhausted$/) },
    });

    const blocking = await server.request('POST', `/conversations/${waiting}/messages?stream=false`, {
      token: serviceKey,
      body: { content: 'patience again', on_capacity: 'hold' },
    });
    expectCapacityProblem(blocking);

    const stored = await assistantMessages(server, serviceKey, waiting!);
    expect(stored.map((m) => m.status)).toEqual(['failed', 'failed']);
    expect(stored[0].id).toBe(end.message.id);
    expect(withoutPings(await busyRun.done).at(-1)).toMatchObject({ type: 'result', subtype: 'success' });
  });
});
