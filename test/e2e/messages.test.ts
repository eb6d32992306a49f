/**
 * Messages end to end: the real Agent SDK in bubblewrap runners, driven through the API, against the
 * model stub. Asserts the stream lines and what lands in history.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ModelStub, startModelStub } from '../../hack/model-stub/model-stub.js';
import { deltaText, isTerminal, parseNdjson, withoutPings } from '../helpers/ndjson.js';
import { type ProvisionedUser, provisionUser } from '../helpers/provision.js';
import { problemSlug, startTestServer, type TestServer } from '../helpers/test-server.js';

let stub: ModelStub;
let t: TestServer;
let key: string;
let user: ProvisionedUser;

beforeAll(async () => {
  stub = await startModelStub();
  t = await startTestServer({ ANTHROPIC_BASE_URL: stub.url, ACIS_POOL_SIZE: '1', ACIS_MAX_SANDBOXES: '4', ACIS_PING_INTERVAL_MS: '200' });
  ({ serviceKey: key } = await t.createIntegration('messages e2e'));
  // The filler is on by default; these tests assert exact agent text, so it is off at the tenant.
  user = await provisionUser(t, key, { settings: { filler_enabled: false } });
});
afterAll(async () => {
  await t?.stop();
  await stub?.stop();
});

async function newConversation(body: object = {}): Promise<string> {
  const res = await t.request('POST', '/conversations', { token: key, body: { user_id: user.userId, ...body } });
  expect(res.status).toBe(201);
  return res.body.id;
}

describe('POST /conversations/{id}/messages (stream=true)', () => {
  it('streams the agent events verbatim, then message_end, then the terminal result, and stores both messages', async () => {
    const conversationId = await newConversation();
    const res = await t.request('POST', `/conversations/${conversationId}/messages`, {
      token: key,
      body: { content: 'Hello there [[reply: General Kenobi]]', env: { REGION: 'eu' } },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/x-ndjson/);
    expect(res.headers.get('x-service-stream-format')).toBe('vendor-sdk/1');
    const messageId = res.headers.get('x-service-message-id');
    expect(messageId).toMatch(/^msg_/);

    const lines = withoutPings(parseNdjson(res.text));
    expect(lines[0]).toMatchObject({ type: 'system', subtype: 'init' });
    expect(deltaText(lines)).toBe('General Kenobi');
    expect(lines.some((l) => l.type === 'assistant')).toBe(true);
    expect(lines.filter(isTerminal)).toHaveLength(1);
    const last = lines[lines.length - 1]!;
    expect(last).toMatchObject({ type: 'result', subtype: 'success' });
    const end = lines[lines.length - 2]!;
    expect(end).toMatchObject({ object: 'platform.event', type: 'message_end' });
    expect(end.message).toMatchObject({ id: messageId, role: 'assistant', status: 'completed', content: 'General Kenobi' });

    const history = await t.request('GET', `/conversations/${conversationId}/messages`, { token: key });
    expect(history.status).toBe(200);
    const [assistant, userMessage] = history.body.data;
    expect(userMessage).toMatchObject({
      role: 'user',
      content: 'Hello there [[reply: General Kenobi]]',
      env: { REGION: 'eu' },
      status: 'completed',
    });
    expect(assistant).toMatchObject({ id: messageId, role: 'assistant', status: 'completed', content: 'General Kenobi' });
    expect(assistant.usage).toEqual({ input_tokens: expect.any(Number), output_tokens: expect.any(Number) });
    expect(assistant.parts).toEqual([{ type: 'text', text: 'General Kenobi' }]);

    // env reaches the agent verbatim, beside the user's text.
    const agentCall = stub.requests.filter((r) => r.kind === 'agent').at(-1)!;
    expect(JSON.stringify(agentCall.body)).toContain(JSON.stringify('<run-env>\nREGION=eu\n</run-env>'));

    const conversation = await t.request('GET', `/conversations/${conversationId}`, { token: key });
    expect(conversation.body).toMatchObject({ message_count: 2, title: 'Hello there [[reply: General Kenobi]]' });
    expect(conversation.body.last_message_at).not.toBeNull();
  });
});

describe('POST /conversations/{id}/messages (stream=false)', () => {
  it('blocks and answers 201 with the completed assistant message', async () => {
    const conversationId = await newConversation();
    const res = await t.request('POST', `/conversations/${conversationId}/messages?stream=false`, {
      token: key,
      body: { content: '[[reply: blocking answer]]' },
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ object: 'message', role: 'assistant', status: 'completed', content: 'blocking answer' });
  });

  it('refuses writes to an archived conversation with 409', async () => {
    const conversationId = await newConversation();
    await t.request('PATCH', `/conversations/${conversationId}`, { token: key, body: { status: 'archived' } });
    const res = await t.request('POST', `/conversations/${conversationId}/messages`, { token: key, body: { content: 'hi' } });
    expect(res.status).toBe(409);
    expect(problemSlug(res)).toBe('conversation-archived');
  });
});

describe('filler', () => {
  it('streams a quick acknowledgement ahead of the agent text when the cascade enables it, and keeps it in the reply', async () => {
    const conversationId = await newConversation({ filler: { enabled: true } });
    const res = await t.request('POST', `/conversations/${conversationId}/messages`, {
      token: key,
      body: { content: '[[reply: the full answer]]' },
    });
    const lines = withoutPings(parseNdjson(res.text));
    expect(deltaText(lines)).toBe('One moment, I am looking into that.the full answer');
    const firstDelta = lines.findIndex((l) => l.type === 'stream_event');
    const firstAgentLine = lines.findIndex((l) => l.type === 'system');
    expect(firstDelta).toBeLessThan(firstAgentLine);
    const end = lines.find((l) => l.type === 'message_end')!;
    expect(end.message.content).toBe('One moment, I am looking into that.\n\nthe full answer');
    expect(stub.requests.some((r) => r.kind === 'filler')).toBe(true);
  });

  it('lets the message override the conversation, which overrides the tenant', async () => {
    const conversationId = await newConversation({ filler: { enabled: true } });
    const res = await t.request('POST', `/conversations/${conversationId}/messages?stream=false`, {
      token: key,
      body: { content: '[[reply: no filler here]]', filler: { enabled: false } },
    });
    expect(res.body.content).toBe('no filler here');
    const tenantDefault = await newConversation();
    const plain = await t.request('POST', `/conversations/${tenantDefault}/messages?stream=false`, {
      token: key,
      body: { content: '[[reply: tenant says no]]' },
    });
    expect(plain.body.content).toBe('tenant says no');
  });
});
