/**
 * Streams end to end: disconnects and re-attach, keepalive pings, one run at a time per conversation,
 * idempotent streaming sends, initial messages on create and upsert, message body rules, tenant
 * suspension, per-user isolation, runs orphaned by a process that died, and history pagination.
 * The real Agent SDK in bubblewrap runners against the model stub; every case asserts the stream
 * lines and what is persisted.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { json } from '../../api-server/core/db/database.js';
import { type ModelStub, startModelStub } from '../../hack/model-stub/model-stub.js';
import { insertAssistantMessage } from '../helpers/assistant-message.js';
import { deltaText, isPing, isTerminal, type Line, parseNdjson, readLines, withoutPings } from '../helpers/ndjson.js';
import { type ProvisionedUser, provisionUser, unique, userToken } from '../helpers/provision.js';
import { problemSlug, startTestServer, type TestServer } from '../helpers/test-server.js';

let stub: ModelStub;
let t: TestServer;
let key: string;
let user: ProvisionedUser;

beforeAll(async () => {
  stub = await startModelStub();
  t = await startTestServer({
    ANTHROPIC_BASE_URL: stub.url,
    ACIS_POOL_SIZE: '1',
    ACIS_MAX_SANDBOXES: '4',
    ACIS_PING_INTERVAL_MS: '100',
  });
  ({ serviceKey: key } = await t.createIntegration('streams e2e'));
  // Exact agent text is asserted throughout, so the filler is off at the tenant.
  user = await provisionUser(t, key, { settings: { filler_enabled: false } });
});
afterAll(async () => {
  await t?.stop();
  await stub?.stop();
});

const NDJSON_TYPE = /^application\/x-ndjson/;
const isTextDelta = (line: Line) =>
  line.type === 'stream_event' && line.event?.type === 'content_block_delta' && line.event.delta?.type === 'text_delta';
/** `count` distinct words: the stub streams them three to a delta. */
const words = (count: number, label = 'w') => Array.from({ length: count }, (_, i) => `${label}${i}`).join(' ');

async function newConversation(body: object = {}, owner: ProvisionedUser = user): Promise<string> {
  const res = await t.request('POST', '/conversations', { token: key, body: { user_id: owner.userId, ...body } });
  expect(res.status).toBe(201);
  return res.body.id;
}

/** A streaming send whose body the test reads itself (incrementally, or not at all). */
function postStream(urlPath: string, body: object, options: { token?: string; headers?: Record<string, string> } = {}) {
  return fetch(`${t.url}${urlPath}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${options.token ?? key}`, 'content-type': 'application/json', ...options.headers },
    body: JSON.stringify(body),
  });
}

function reattachPath(conversationId: string, messageId: string, after?: number): string {
  return `/conversations/${conversationId}/messages/${messageId}/stream${after === undefined ? '' : `?after=${after}`}`;
}

async function reattach(conversationId: string, messageId: string, after?: number, token = key) {
  return t.request('GET', reattachPath(conversationId, messageId, after), { token });
}

async function history(conversationId: string, token = key): Promise<any[]> {
  const res = await t.request('GET', `/conversations/${conversationId}/messages?limit=100`, { token });
  expect(res.status).toBe(200);
  return res.body.data;
}

async function conversation(conversationId: string): Promise<any> {
  const res = await t.request('GET', `/conversations/${conversationId}`, { token: key });
  expect(res.status).toBe(200);
  return res.body;
}

/** The run's stored lines, in order, with their sequence numbers. */
async function storedLines(messageId: string) {
  return t.server.deps.db.selectFrom('run_lines').select(['seq', 'line']).where('message_id', '=', messageId).orderBy('seq').execute();
}

/** Waits until this node no longer hosts the run in memory, so a re-attach is served from storage. */
async function untilStoredOnly(messageId: string): Promise<void> {
  for (let i = 0; t.server.deps.runtime.runs.liveStream(messageId); i++) {
    if (i > 200) throw new Error(`run ${messageId} is still live`);
    await sleep(25);
  }
}

/** The request id a run made by `insertRun` was started by. */
const requestIdOf = (messageId: string) => `host-trace:${messageId}`;

/** An assistant message written straight to the database (a run of another process), with one line already stored. */
async function insertRun(conversationId: string, fields: { status: 'in_progress' | 'completed'; nodeId: string | null }): Promise<string> {
  const { db, newId } = t.server.deps;
  const id = newId('message');
  await insertAssistantMessage(db, { id, conversationId, ...fields, requestId: requestIdOf(id) });
  await storeLines(id, 1, [{ type: 'system', subtype: 'init' }]);
  return id;
}

async function storeLines(messageId: string, firstSeq: number, lines: Line[]): Promise<void> {
  await t.server.deps.db
    .insertInto('run_lines')
    .values(lines.map((line, i) => ({ message_id: messageId, seq: firstSeq + i, line: json(line), created_at: new Date() })))
    .execute();
}

/** The shape every complete stream ends with: message_end (the stored message), then exactly one terminal line, last. */
function expectCompleteEnding(raw: Line[], messageId: string): Line {
  expect(raw.filter(isTerminal)).toHaveLength(1);
  expect(isTerminal(raw[raw.length - 1]!)).toBe(true); // nothing (not even a ping) after it
  const real = withoutPings(raw);
  const end = real[real.length - 2]!;
  expect(end).toMatchObject({ object: 'platform.event', type: 'message_end', message: { id: messageId, role: 'assistant' } });
  return end.message;
}

describe('a client that disconnects, then re-attaches', () => {
  it('leaves the run going; re-attaching with after=N yields exactly the remaining lines, live and from storage', async () => {
    const conversationId = await newConversation();
    const reply = words(36); // 12 deltas, 100 ms apart
    const response = await postStream(`/conversations/${conversationId}/messages`, { content: `[[slow: 100]] [[reply: ${reply}]]` });
    expect(response.status).toBe(200);
    expect(response.headers.get('content-type')).toMatch(NDJSON_TYPE);
    const messageId = response.headers.get('x-service-message-id')!;
    expect(messageId).toMatch(/^msg_/);

    let deltas = 0;
    const read = withoutPings(await readLines(response, (line) => isTextDelta(line) && ++deltas === 3));
    const seenText = deltaText(read);
    expect(seenText.length).toBeGreaterThan(0);
    expect(reply.startsWith(seenText)).toBe(true);
    expect(seenText).not.toBe(reply);

    // Nobody listens for a while; the run must go on meanwhile.
    await sleep(300);
    const [midwayAssistant] = await history(conversationId);
    expect(midwayAssistant).toMatchObject({ id: messageId, role: 'assistant', status: 'in_progress' });

    const live = await fetch(`${t.url}${reattachPath(conversationId, messageId, read.length)}`, {
      headers: { authorization: `Bearer ${key}` },
    });
    expect(live.status).toBe(200);
    expect(live.headers.get('content-type')).toMatch(NDJSON_TYPE);
    expect(live.headers.get('x-service-message-id')).toBe(messageId);
    expect(live.headers.get('x-service-stream-format')).toBe('vendor-sdk/1');
    const rawRest = await readLines(live);
    expect(rawRest.some(isPing)).toBe(true); // keepalives while the slow run is followed live
    const stored = expectCompleteEnding(rawRest, messageId);
    expect(stored).toMatchObject({ status: 'completed', content: reply });
    const rest = withoutPings(rawRest);
    expect(rest[rest.length - 1]).toMatchObject({ type: 'result', subtype: 'success' });
    const whole = [...read, ...rest];
    expect(deltaText(whole)).toBe(reply);
    expect(whole[0]).toMatchObject({ type: 'system', subtype: 'init' });

    // History has the whole reply.
    const [assistant, userMessage] = await history(conversationId);
    expect(assistant).toMatchObject({ id: messageId, status: 'completed', content: reply, parts: [{ type: 'text', text: reply }] });
    expect(userMessage).toMatchObject({ role: 'user', status: 'completed' });

    // Every line is stored once, numbered from 1, and equal to what the client received.
    await untilStoredOnly(messageId);
    const rows = await storedLines(messageId);
    expect(rows.map((r) => r.seq)).toEqual(whole.map((_, i) => i + 1));
    expect(rows.map((r) => r.line)).toEqual(whole);

    // After the run: replays from storage.
    const full = await reattach(conversationId, messageId, 0);
    expect(full.status).toBe(200);
    expect(full.headers.get('x-service-message-id')).toBe(messageId);
    expect(withoutPings(parseNdjson(full.text))).toEqual(whole);
    const defaultAfter = await reattach(conversationId, messageId);
    expect(withoutPings(parseNdjson(defaultAfter.text))).toEqual(whole);
    const remaining = await reattach(conversationId, messageId, read.length);
    expect(withoutPings(parseNdjson(remaining.text))).toEqual(rest);
    const lastTwo = await reattach(conversationId, messageId, whole.length - 2);
    expect(withoutPings(parseNdjson(lastTwo.text)).map((l) => l.type)).toEqual(['message_end', 'result']);
    for (const after of [whole.length, whole.length + 5]) {
      const past = await reattach(conversationId, messageId, after);
      expect(past.status).toBe(200);
      expect(withoutPings(parseNdjson(past.text))).toEqual([]);
    }
  });

  it('follows a run hosted by another node from the stored lines, to the terminal line', async () => {
    const conversationId = await newConversation();
    const reply = words(15);
    const response = await postStream(`/conversations/${conversationId}/messages`, { content: `[[slow: 100]] [[reply: ${reply}]]` });
    const messageId = response.headers.get('x-service-message-id')!;
    const otherNode = await startTestServer({ DATABASE_URL: t.databaseUrl });
    try {
      expect(otherNode.server.deps.runtime.nodeId).not.toBe(t.server.deps.runtime.nodeId);
      const [viaOrigin, viaOther] = await Promise.all([
        readLines(response),
        (async () => {
          const res = await fetch(`${otherNode.url}${reattachPath(conversationId, messageId, 0)}`, {
            headers: { authorization: `Bearer ${key}` },
          });
          expect(res.status).toBe(200);
          expect(res.headers.get('x-service-message-id')).toBe(messageId);
          return readLines(res);
        })(),
      ]);
      expectCompleteEnding(viaOrigin, messageId);
      expectCompleteEnding(viaOther, messageId);
      expect(deltaText(viaOther)).toBe(reply);
      expect(withoutPings(viaOther)).toEqual(withoutPings(viaOrigin));
    } finally {
      await otherNode.stop();
    }
  });

  it('waits for the last stored lines of a run whose status ended before they were written', async () => {
    // Another node marks the message completed, then stores message_end and the terminal line.
    const conversationId = await newConversation();
    const messageId = await insertRun(conversationId, { status: 'completed', nodeId: null });
    const reading = reattach(conversationId, messageId, 0);
    await sleep(400);
    const [stored] = await history(conversationId);
    await storeLines(messageId, 2, [
      { object: 'platform.event', type: 'message_end', message: stored },
      { type: 'result', subtype: 'success' },
    ]);
    const res = await reading;
    expect(res.status).toBe(200);
    expect(withoutPings(parseNdjson(res.text)).map((l) => l.type)).toEqual(['system', 'message_end', 'result']);
  });

  it('rejects a malformed `after` with 400', async () => {
    const conversationId = await newConversation();
    for (const after of ['-1', 'x', '1.5']) {
      const res = await t.request('GET', `/conversations/${conversationId}/messages/msg_0000000000000000000000000/stream?after=${after}`, {
        token: key,
      });
      expect(res.status).toBe(400);
      expect(problemSlug(res)).toBe('validation-error');
    }
  });
});

describe('one run at a time per conversation', () => {
  it('refuses a second send while a run is in flight with 409 conversation-busy, storing nothing', async () => {
    const externalId = unique('test:conversation');
    const conversationId = await newConversation({ external_id: externalId });
    const first = await postStream(`/conversations/${conversationId}/messages`, { content: `[[slow: 100]] [[reply: ${words(12)}]]` });
    expect(first.status).toBe(200);
    const messageId = first.headers.get('x-service-message-id')!;

    const stream = await t.request('POST', `/conversations/${conversationId}/messages`, { token: key, body: { content: 'second' } });
    expect(stream.status).toBe(409);
    expect(problemSlug(stream)).toBe('conversation-busy');
    const blocking = await t.request('POST', `/conversations/${conversationId}/messages?stream=false`, {
      token: key,
      body: { content: 'second' },
    });
    expect(blocking.status).toBe(409);
    expect(problemSlug(blocking)).toBe('conversation-busy');
    const upsert = await t.request('PUT', `/conversations/by-external-id/${externalId}`, {
      token: key,
      body: { user_id: user.userId, initial_message: { content: 'second' } },
    });
    expect(upsert.status).toBe(409);
    expect(problemSlug(upsert)).toBe('conversation-busy');
    expect((await conversation(conversationId)).message_count).toBe(2);

    const lines = await readLines(first);
    expectCompleteEnding(lines, messageId);
    const messages = await history(conversationId);
    expect(messages.map((m) => [m.role, m.content])).toEqual([
      ['assistant', words(12)],
      ['user', `[[slow: 100]] [[reply: ${words(12)}]]`],
    ]);

    // Once the terminal line is out, the conversation takes the next message.
    const next = await t.request('POST', `/conversations/${conversationId}/messages?stream=false`, {
      token: key,
      body: { content: '[[reply: next]]' },
    });
    expect(next.status).toBe(201);
    expect(next.body).toMatchObject({ status: 'completed', content: 'next' });
    expect((await conversation(conversationId)).message_count).toBe(4);
  });
});

describe('Idempotency-Key on a streaming send', () => {
  it('re-serves the same run’s stream, live and after the end, without a second run; another payload gets 409', async () => {
    const conversationId = await newConversation();
    const messagesPath = `/conversations/${conversationId}/messages`;
    const body = { content: `[[slow: 100]] [[reply: ${words(9)}]]` };
    const idempotencyKey = unique('idem');
    const agentCallsBefore = stub.agentRequests().length;

    const first = await postStream(messagesPath, body, { headers: { 'Idempotency-Key': idempotencyKey } });
    expect(first.status).toBe(200);
    expect(first.headers.get('idempotency-replayed')).toBeNull();
    const messageId = first.headers.get('x-service-message-id')!;
    // The retry arrives while the run is still in flight: it follows the same run.
    const retry = await postStream(messagesPath, body, { headers: { 'Idempotency-Key': idempotencyKey } });
    expect(retry.status).toBe(200);
    expect(retry.headers.get('idempotency-replayed')).toBe('true');
    expect(retry.headers.get('content-type')).toMatch(NDJSON_TYPE);
    expect(retry.headers.get('x-service-message-id')).toBe(messageId);
    expect(retry.headers.get('x-service-stream-format')).toBe('vendor-sdk/1');
    const [midway] = await history(conversationId);
    expect(midway).toMatchObject({ id: messageId, status: 'in_progress' });

    const [firstRaw, retryRaw] = await Promise.all([readLines(first), readLines(retry)]);
    // Keepalives go out during the slow run, and none after the terminal line.
    expect(firstRaw.some(isPing)).toBe(true);
    expectCompleteEnding(firstRaw, messageId);
    expectCompleteEnding(retryRaw, messageId);
    const lines = withoutPings(firstRaw);
    expect(deltaText(lines)).toBe(words(9));
    expect(withoutPings(retryRaw)).toEqual(lines);
    const agentCalls = stub.agentRequests().length;
    expect(agentCalls).toBeGreaterThan(agentCallsBefore);

    await untilStoredOnly(messageId);
    const late = await t.request('POST', messagesPath, { token: key, body, headers: { 'Idempotency-Key': idempotencyKey } });
    expect(late.status).toBe(200);
    expect(late.headers.get('idempotency-replayed')).toBe('true');
    expect(late.headers.get('x-service-message-id')).toBe(messageId);
    expect(withoutPings(parseNdjson(late.text))).toEqual(lines);

    const otherPayload = await t.request('POST', messagesPath, {
      token: key,
      body: { content: 'something else' },
      headers: { 'Idempotency-Key': idempotencyKey },
    });
    expect(otherPayload.status).toBe(409);
    expect(problemSlug(otherPayload)).toBe('idempotency-key-conflict');
    const otherQuery = await t.request('POST', `${messagesPath}?stream=false`, {
      token: key,
      body,
      headers: { 'Idempotency-Key': idempotencyKey },
    });
    expect(otherQuery.status).toBe(409);
    expect(problemSlug(otherQuery)).toBe('idempotency-key-conflict');

    expect(stub.agentRequests().length).toBe(agentCalls);
    expect((await conversation(conversationId)).message_count).toBe(2);
    expect(await history(conversationId)).toHaveLength(2);
  });
});

describe('initial_message on create and upsert', () => {
  it('POST /conversations streams a leading conversation line, then the run; re-attach counts that line', async () => {
    const idempotencyKey = unique('idem');
    const body = { user_id: user.userId, title: 'Greeting', initial_message: { content: '[[reply: welcome aboard]]' } };
    const res = await t.request('POST', '/conversations', { token: key, body, headers: { 'Idempotency-Key': idempotencyKey } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(NDJSON_TYPE);
    expect(res.headers.get('x-service-stream-format')).toBe('vendor-sdk/1');
    const conversationId = res.headers.get('x-service-conversation-id')!;
    expect(conversationId).toMatch(/^con_/);
    const messageId = res.headers.get('x-service-message-id')!;
    const raw = parseNdjson(res.text);
    const lines = withoutPings(raw);
    expect(lines[0]).toEqual({
      object: 'platform.event',
      type: 'conversation',
      conversation: expect.objectContaining({
        object: 'conversation',
        id: conversationId,
        user_id: user.userId,
        title: 'Greeting',
        status: 'active',
      }),
    });
    expect(lines[1]).toMatchObject({ type: 'system', subtype: 'init' });
    expect(deltaText(lines)).toBe('welcome aboard');
    expect(expectCompleteEnding(raw, messageId)).toMatchObject({ status: 'completed', content: 'welcome aboard' });

    const stored = await conversation(conversationId);
    expect(stored).toMatchObject({ id: conversationId, title: 'Greeting', message_count: 2 });
    expect((await history(conversationId)).map((m) => [m.role, m.content])).toEqual([
      ['assistant', 'welcome aboard'],
      ['user', '[[reply: welcome aboard]]'],
    ]);

    await untilStoredOnly(messageId);
    expect(withoutPings(parseNdjson((await reattach(conversationId, messageId, 0)).text))).toEqual(lines);
    expect(withoutPings(parseNdjson((await reattach(conversationId, messageId, 1)).text))).toEqual(lines.slice(1));

    // The replay is the same stream, with the same headers, and creates nothing.
    const agentCalls = stub.agentRequests().length;
    const replay = await t.request('POST', '/conversations', { token: key, body, headers: { 'Idempotency-Key': idempotencyKey } });
    expect(replay.status).toBe(200);
    expect(replay.headers.get('idempotency-replayed')).toBe('true');
    expect(replay.headers.get('x-service-conversation-id')).toBe(conversationId);
    expect(replay.headers.get('x-service-message-id')).toBe(messageId);
    expect(withoutPings(parseNdjson(replay.text))).toEqual(lines);
    expect(stub.agentRequests().length).toBe(agentCalls);
    const owned = await t.request('GET', `/conversations?user_id=${user.userId}&limit=100`, { token: key });
    expect(owned.body.data.filter((c: any) => c.title === 'Greeting')).toHaveLength(1);
  });

  it('PUT /conversations/by-external-id streams on create and on continue; an archived conversation refuses with 409', async () => {
    const externalId = unique('test:conversation');
    const upsertPath = `/conversations/by-external-id/${externalId}`;
    const created = await t.request('PUT', upsertPath, {
      token: key,
      body: { user_id: user.userId, title: 'Ticket', initial_message: { content: '[[reply: opened]]' } },
    });
    expect(created.status).toBe(200);
    expect(created.headers.get('content-type')).toMatch(NDJSON_TYPE);
    const conversationId = created.headers.get('x-service-conversation-id')!;
    const createdLines = withoutPings(parseNdjson(created.text));
    expect(createdLines[0]).toMatchObject({
      object: 'platform.event',
      type: 'conversation',
      conversation: { id: conversationId, external_id: externalId, title: 'Ticket' },
    });
    expect(deltaText(createdLines)).toBe('opened');
    expectCompleteEnding(parseNdjson(created.text), created.headers.get('x-service-message-id')!);

    const continued = await t.request('PUT', upsertPath, {
      token: key,
      body: { user_id: user.userId, metadata: { ticket: '42' }, initial_message: { content: '[[reply: continued]]' } },
    });
    expect(continued.status).toBe(200);
    expect(continued.headers.get('x-service-conversation-id')).toBe(conversationId);
    const continuedLines = withoutPings(parseNdjson(continued.text));
    expect(continuedLines[0]).toMatchObject({
      type: 'conversation',
      conversation: { id: conversationId, title: 'Ticket', metadata: { ticket: '42' } },
    });
    expect(deltaText(continuedLines)).toBe('continued');
    expectCompleteEnding(parseNdjson(continued.text), continued.headers.get('x-service-message-id')!);
    expect(await conversation(conversationId)).toMatchObject({ message_count: 4, metadata: { ticket: '42' } });
    expect((await history(conversationId)).map((m) => m.content)).toEqual([
      'continued',
      '[[reply: continued]]',
      'opened',
      '[[reply: opened]]',
    ]);

    await t.request('PATCH', `/conversations/${conversationId}`, { token: key, body: { status: 'archived' } });
    const archived = await t.request('PUT', upsertPath, {
      token: key,
      body: { user_id: user.userId, title: 'Renamed', initial_message: { content: 'hello?' } },
    });
    expect(archived.status).toBe(409);
    expect(problemSlug(archived)).toBe('conversation-archived');
    // Refused as a whole: the rest of the call is not merged either.
    expect(await conversation(conversationId)).toMatchObject({ status: 'archived', title: 'Ticket', message_count: 4 });
  });

  it('refuses an invalid initial message with pointers into it, creating no conversation', async () => {
    const before = await t.request('GET', `/conversations?user_id=${user.userId}&limit=100`, { token: key });
    const empty = await t.request('POST', '/conversations', {
      token: key,
      body: { user_id: user.userId, initial_message: { content: '' } },
    });
    expect(empty.status).toBe(422);
    expect(empty.body.errors).toContainEqual(expect.objectContaining({ pointer: '/initial_message/content' }));
    const skills = await t.request('POST', '/conversations', {
      token: key,
      body: { user_id: user.userId, initial_message: { content: 'x', skill_ids: ['skl_unknown'] } },
    });
    expect(skills.status).toBe(422);
    expect(problemSlug(skills)).toBe('validation-error');
    expect(skills.body.errors).toEqual([expect.objectContaining({ pointer: '/initial_message/skill_ids/0' })]);
    const externalId = unique('test:conversation');
    const upsert = await t.request('PUT', `/conversations/by-external-id/${externalId}`, {
      token: key,
      body: { user_id: user.userId, initial_message: { content: 'x', skill_ids: ['skl_unknown'] } },
    });
    expect(upsert.status).toBe(422);
    expect(upsert.body.errors).toEqual([expect.objectContaining({ pointer: '/initial_message/skill_ids/0' })]);

    const after = await t.request('GET', `/conversations?user_id=${user.userId}&limit=100`, { token: key });
    expect(after.body.data.map((c: any) => c.id)).toEqual(before.body.data.map((c: any) => c.id));
    const lookup = await t.request('GET', `/conversations/by-external-id/${externalId}?tenant_id=${user.tenantId}`, { token: key });
    expect(lookup.status).toBe(404);
  });
});

describe('message body rules', () => {
  let owner: ProvisionedUser;
  let skillId: string;

  beforeAll(async () => {
    owner = await provisionUser(t, key, { settings: { filler_enabled: false } });
    const repository = await t.request('POST', '/repositories', {
      token: key,
      body: { name: unique('repo'), repo_url: 'https://git.example.com/acme/skills.git' },
    });
    expect(repository.status).toBe(201);
    const skill = await t.request('POST', `/repositories/${repository.body.id}/skills`, { token: key, body: { name: 'summarize' } });
    expect(skill.status).toBe(201);
    skillId = skill.body.id;
    const attached = await t.request('PUT', `/tenants/${owner.tenantId}/repository`, {
      token: key,
      body: { repository_id: repository.body.id },
    });
    expect(attached.status).toBe(200);
  });

  it('refuses invalid bodies with 422 and pointers, storing nothing', async () => {
    const conversationId = await newConversation({}, owner);
    expect((await conversation(conversationId)).context.skill_ids).toEqual([skillId]);
    const cases: [object, string][] = [
      [{}, '/content'],
      [{ content: '' }, '/content'],
      [{ content: 'x', secrets: {} }, '/secrets'],
      [{ content: 'x', secrets: { 'bad-alias': 'v' } }, '/secrets'],
      [{ content: 'x', secrets: { lower: 'v' } }, '/secrets'],
      [{ content: 'x', secrets: { API_TOKEN: '' } }, '/secrets/API_TOKEN'],
      [{ content: 'x', skill_ids: ['skl_elsewhere'] }, '/skill_ids/0'],
      [{ content: 'x', skill_ids: [skillId, 'skl_elsewhere'] }, '/skill_ids/1'],
      [{ content: 'x', parts: [{ text: 'untyped' }] }, '/parts/0/type'],
      [{ content: 'x', env: { REGION: 1 } }, '/env/REGION'],
      [{ content: 'x', on_capacity: 'later' }, '/on_capacity'],
    ];
    for (const [body, pointer] of cases) {
      const res = await t.request('POST', `/conversations/${conversationId}/messages`, { token: key, body });
      expect(res.status, JSON.stringify(body)).toBe(422);
      expect(problemSlug(res)).toBe('validation-error');
      const pointers = (res.body.errors as { pointer: string }[]).map((e) => e.pointer);
      expect(
        pointers.some((p) => p === pointer || p.startsWith(`${pointer}/`)),
        `${JSON.stringify(body)} → ${pointers}`,
      ).toBe(true);
    }
    expect((await conversation(conversationId)).message_count).toBe(0);
    expect(await history(conversationId)).toEqual([]);
  });

  it('accepts parts, skills, env and metadata and echoes them; secret values appear nowhere', async () => {
    const conversationId = await newConversation({}, owner);
    const canary = `canary-${unique('secret')}`;
    const parts = [
      { type: 'text', text: 'see the attachment' },
      { type: 'x-attachment', url: 'https://files.example.com/a.pdf', size: 1024 },
    ];
    const body = {
      content: 'Call the API with {{secret:API_TOKEN}} [[reply: done]]',
      parts,
      skill_ids: [skillId],
      env: { REGION: 'eu', MODE: 'fast' },
      secrets: { API_TOKEN: canary },
      metadata: { trace: 't-1' },
    };
    const res = await t.request('POST', `/conversations/${conversationId}/messages`, {
      token: key,
      body,
      headers: { 'Idempotency-Key': unique('idem') },
    });
    expect(res.status).toBe(200);
    const messageId = res.headers.get('x-service-message-id')!;
    const end = expectCompleteEnding(parseNdjson(res.text), messageId);
    expect(end).toMatchObject({ status: 'completed', content: 'done', skill_ids: [skillId], env: body.env });

    const [assistant, userMessage] = await history(conversationId);
    expect(userMessage).toEqual({
      object: 'message',
      id: expect.stringMatching(/^msg_/),
      conversation_id: conversationId,
      role: 'user',
      content: body.content,
      parts,
      skill_ids: [skillId],
      env: { REGION: 'eu', MODE: 'fast' },
      status: 'completed',
      metadata: { trace: 't-1' },
      created_at: expect.any(String),
    });
    expect(assistant).toMatchObject({ id: messageId, status: 'completed', content: 'done' });
    expect(assistant).not.toHaveProperty('secrets');

    await untilStoredOnly(messageId);
    const db = t.server.deps.db;
    const places: Record<string, string> = {
      stream: res.text,
      history: (await t.request('GET', `/conversations/${conversationId}/messages`, { token: key })).text,
      conversation: (await t.request('GET', `/conversations/${conversationId}`, { token: key })).text,
      reattach: (await reattach(conversationId, messageId, 0)).text,
      logs: t.logs.join(''),
      model: JSON.stringify(stub.requests),
      messages: JSON.stringify(await db.selectFrom('messages').selectAll().execute()),
      run_lines: JSON.stringify(await db.selectFrom('run_lines').selectAll().execute()),
      idempotency_keys: JSON.stringify(await db.selectFrom('idempotency_keys').selectAll().execute()),
    };
    for (const [place, text] of Object.entries(places)) expect(text.includes(canary), place).toBe(false);
    // The search is not vacuous: the places do hold this run.
    expect(places.reattach).toContain('done');
    expect(places.model).toContain('{{secret:API_TOKEN}}');
  });
});

describe('a suspended tenant', () => {
  it('refuses sends with 403 tenant-suspended while reads keep working; reactivation restores sends', async () => {
    const owner = await provisionUser(t, key, { settings: { filler_enabled: false } });
    const externalId = unique('test:conversation');
    const conversationId = await newConversation({ external_id: externalId }, owner);
    const first = await t.request('POST', `/conversations/${conversationId}/messages`, {
      token: key,
      body: { content: '[[reply: before]]' },
    });
    const firstMessageId = first.headers.get('x-service-message-id')!;
    expect(deltaText(parseNdjson(first.text))).toBe('before');

    expect((await t.request('PATCH', `/tenants/${owner.tenantId}`, { token: key, body: { status: 'suspended' } })).status).toBe(200);
    const refused = [
      await t.request('POST', `/conversations/${conversationId}/messages`, { token: key, body: { content: 'x' } }),
      await t.request('POST', `/conversations/${conversationId}/messages?stream=false`, { token: key, body: { content: 'x' } }),
      await t.request('POST', '/conversations', { token: key, body: { user_id: owner.userId, initial_message: { content: 'x' } } }),
      await t.request('PUT', `/conversations/by-external-id/${externalId}`, {
        token: key,
        body: { user_id: owner.userId, initial_message: { content: 'x' } },
      }),
    ];
    for (const res of refused) {
      expect(res.status).toBe(403);
      expect(problemSlug(res)).toBe('tenant-suspended');
    }
    expect(await conversation(conversationId)).toMatchObject({ message_count: 2 });
    expect((await history(conversationId)).map((m) => m.content)).toEqual(['before', '[[reply: before]]']);
    const replay = await reattach(conversationId, firstMessageId, 0);
    expect(replay.status).toBe(200);
    expect(deltaText(parseNdjson(replay.text))).toBe('before');
    const owned = await t.request('GET', `/conversations?user_id=${owner.userId}`, { token: key });
    expect(owned.body.data.map((c: any) => c.id)).toEqual([conversationId]);

    expect((await t.request('PATCH', `/tenants/${owner.tenantId}`, { token: key, body: { status: 'active' } })).status).toBe(200);
    const after = await t.request('POST', `/conversations/${conversationId}/messages?stream=false`, {
      token: key,
      body: { content: '[[reply: after]]' },
    });
    expect(after.status).toBe(201);
    expect(after.body).toMatchObject({ status: 'completed', content: 'after' });
    expect(await conversation(conversationId)).toMatchObject({ message_count: 4 });
  });
});

describe('who may reach a run', () => {
  let owner: ProvisionedUser;
  let neighbour: ProvisionedUser;
  let ownerToken: string;
  let neighbourToken: string;
  let conversationId: string;
  let messageId: string;
  let userMessageId: string;
  let lines: Line[];

  beforeAll(async () => {
    owner = await provisionUser(t, key, { settings: { filler_enabled: false } });
    // A second user of the same tenant (the helper names a fresh tenant external id; this one is the owner's).
    neighbour = { ...(await provisionUser(t, key, { tenantId: owner.tenantId })), tenantExternalId: owner.tenantExternalId };
    ownerToken = await userToken(t, key, owner);
    neighbourToken = await userToken(t, key, neighbour);
    conversationId = await newConversation({}, owner);
    const res = await t.request('POST', `/conversations/${conversationId}/messages`, {
      token: ownerToken,
      body: { content: '[[reply: private]]' },
    });
    expect(res.status).toBe(200);
    messageId = res.headers.get('x-service-message-id')!;
    lines = withoutPings(parseNdjson(res.text));
    expect(deltaText(lines)).toBe('private');
    userMessageId = (await history(conversationId))[1].id;
    await untilStoredOnly(messageId);
  });

  it('lets the owner’s JWT list and re-attach', async () => {
    const listed = await history(conversationId, ownerToken);
    expect(listed.map((m) => m.id)).toEqual([messageId, userMessageId]);
    const replay = await reattach(conversationId, messageId, 0, ownerToken);
    expect(replay.status).toBe(200);
    expect(withoutPings(parseNdjson(replay.text))).toEqual(lines);
  });

  it('refuses another user’s JWT of the same tenant with 403 insufficient-scope, storing nothing', async () => {
    const attempts = [
      await t.request('POST', `/conversations/${conversationId}/messages`, { token: neighbourToken, body: { content: 'let me in' } }),
      await t.request('GET', `/conversations/${conversationId}/messages`, { token: neighbourToken }),
      await reattach(conversationId, messageId, 0, neighbourToken),
    ];
    for (const res of attempts) {
      expect(res.status).toBe(403);
      expect(problemSlug(res)).toBe('insufficient-scope');
    }
    expect(await conversation(conversationId)).toMatchObject({ message_count: 2 });
  });

  it('answers 404 to another integration, and for ids that are not a run of this conversation', async () => {
    const { serviceKey: otherKey } = await t.createIntegration('another integration');
    const other = [
      await t.request('POST', `/conversations/${conversationId}/messages`, { token: otherKey, body: { content: 'x' } }),
      await t.request('GET', `/conversations/${conversationId}/messages`, { token: otherKey }),
      await reattach(conversationId, messageId, 0, otherKey),
    ];
    for (const res of other) {
      expect(res.status).toBe(404);
      expect(problemSlug(res)).toBe('not-found');
    }
    const elsewhere = await newConversation({}, owner);
    for (const res of [
      await reattach(conversationId, 'msg_0000000000000000000000000', 0),
      await reattach(conversationId, userMessageId, 0),
      await reattach(elsewhere, messageId, 0),
      await reattach('con_0000000000000000000000000', messageId, 0),
    ]) {
      expect(res.status).toBe(404);
      expect(problemSlug(res)).toBe('not-found');
    }
    expect(await conversation(conversationId)).toMatchObject({ message_count: 2 });
  });
});

describe('runs left in progress by a process that died', () => {
  async function expectFailedWithErrorLine(conversationId: string, messageId: string, server: TestServer): Promise<void> {
    const [assistant] = await history(conversationId);
    expect(assistant).toMatchObject({ id: messageId, status: 'failed' });
    const res = await server.request('GET', reattachPath(conversationId, messageId, 0), { token: key });
    expect(res.status).toBe(200);
    const raw = parseNdjson(res.text);
    const lines = withoutPings(raw);
    expect(lines.map((l) => l.type)).toEqual(['system', 'message_end', 'error']);
    expect(expectCompleteEnding(raw, messageId)).toMatchObject({ status: 'failed' });
    // The problem names the request that started the run, as its other lines would have.
    expect(lines[2]).toMatchObject({
      object: 'platform.event',
      type: 'error',
      problem: { status: 500, request_id: requestIdOf(messageId) },
    });
    expect(lines[2]!.problem.type).toMatch(/\/problems\/internal-error$/);
    const rest = await server.request('GET', reattachPath(conversationId, messageId, 1), { token: key });
    expect(withoutPings(parseNdjson(rest.text)).map((l) => l.type)).toEqual(['message_end', 'error']);
  }

  it('fails, at the next start of any server, the runs of a node that stopped heartbeating long ago', async () => {
    const conversationId = await newConversation();
    const deadNode = `node_${unique('gone').replace('-', '')}`;
    const longAgo = new Date(Date.now() - 3600_000);
    await t.server.deps.db.insertInto('nodes').values({ id: deadNode, started_at: longAgo, heartbeat_at: longAgo }).execute();
    const messageId = await insertRun(conversationId, { status: 'in_progress', nodeId: deadNode });

    const next = await startTestServer({ DATABASE_URL: t.databaseUrl });
    try {
      await expectFailedWithErrorLine(conversationId, messageId, next);
    } finally {
      await next.stop();
    }
  });

  it('fails, when a server restarts on the same data dir, the runs its previous life left behind', async () => {
    const conversationId = await newConversation();
    const dataDir = await mkdtemp(path.join(tmpdir(), 'acis-streams-node-'));
    try {
      const env = { DATABASE_URL: t.databaseUrl, ACIS_DATA_DIR: dataDir };
      const before = await startTestServer(env);
      const nodeId = before.server.deps.runtime.nodeId;
      await before.stop();
      // Its heartbeat is fresh, so only the restart (which knows the node id is its own) may fail it.
      const messageId = await insertRun(conversationId, { status: 'in_progress', nodeId });
      const [stillRunning] = await history(conversationId);
      expect(stillRunning).toMatchObject({ id: messageId, status: 'in_progress' });

      const after = await startTestServer(env);
      try {
        expect(after.server.deps.runtime.nodeId).toBe(nodeId);
        await expectFailedWithErrorLine(conversationId, messageId, after);
      } finally {
        await after.stop();
      }
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});

describe('GET /conversations/{id}/messages', () => {
  it('pages newest first, forwards and backwards', async () => {
    const conversationId = await newConversation();
    for (const reply of ['one', 'two']) {
      const res = await t.request('POST', `/conversations/${conversationId}/messages?stream=false`, {
        token: key,
        body: { content: `[[reply: ${reply}]]` },
      });
      expect(res.status).toBe(201);
    }
    const all = await history(conversationId);
    expect(all.map((m) => [m.role, m.content])).toEqual([
      ['assistant', 'two'],
      ['user', '[[reply: two]]'],
      ['assistant', 'one'],
      ['user', '[[reply: one]]'],
    ]);
    const ids = all.map((m) => m.id as string);
    expect([...ids].sort().reverse()).toEqual(ids);

    const base = `/conversations/${conversationId}/messages`;
    const first = await t.request('GET', `${base}?limit=3`, { token: key });
    expect(first.body).toMatchObject({ object: 'list', has_more: true, next_cursor: ids[2] });
    expect(first.body.data.map((m: any) => m.id)).toEqual(ids.slice(0, 3));
    const second = await t.request('GET', `${base}?limit=3&starting_after=${first.body.next_cursor}`, { token: key });
    expect(second.body).toMatchObject({ has_more: false, next_cursor: null });
    expect(second.body.data.map((m: any) => m.id)).toEqual(ids.slice(3));
    const back = await t.request('GET', `${base}?limit=2&ending_before=${ids[3]}`, { token: key });
    expect(back.body).toMatchObject({ has_more: true });
    expect(back.body.data.map((m: any) => m.id)).toEqual(ids.slice(1, 3));

    for (const query of ['limit=0', 'limit=101', `starting_after=${ids[0]}&ending_before=${ids[3]}`]) {
      const bad = await t.request('GET', `${base}?${query}`, { token: key });
      expect(bad.status).toBe(400);
      expect(problemSlug(bad)).toBe('validation-error');
    }
  });
});
