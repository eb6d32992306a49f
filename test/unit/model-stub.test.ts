import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ModelStub, startModelStub } from '../../hack/model-stub/model-stub.js';
import { FILLER_MARKER, FILLER_REPLY, planReply } from '../../hack/model-stub/script.js';

let stub: ModelStub;
beforeAll(async () => {
  stub = await startModelStub();
});
afterAll(() => stub.stop());

type Message = { role: string; content: unknown };
type SseEvent = { event: string; data: any };

/** Response bodies are read loosely; the assertions check their shape. */
const json = (res: Response): Promise<any> => res.json();

const user = (...texts: string[]): Message => ({ role: 'user', content: texts.map((text) => ({ type: 'text', text })) });

async function post(body: Record<string, unknown>, headers: Record<string, string> = {}) {
  return fetch(`${stub.url}/v1/messages?beta=true`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-api-key': 'sk-secret-value', ...headers },
    body: JSON.stringify({ model: 'claude-test', max_tokens: 32000, ...body }),
  });
}

async function stream(messages: Message[], extra: Record<string, unknown> = {}): Promise<SseEvent[]> {
  const res = await post({ messages, stream: true, ...extra });
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  return (await res.text())
    .split('\n\n')
    .filter((frame) => frame.trim() !== '')
    .map((frame) => {
      const [eventLine, dataLine] = frame.split('\n');
      const event = eventLine!.replace(/^event: /, '');
      const data = JSON.parse(dataLine!.replace(/^data: /, ''));
      expect(data.type).toBe(event);
      return { event, data };
    });
}

const textOf = (events: SseEvent[]) =>
  events
    .filter((e) => e.event === 'content_block_delta' && e.data.delta.type === 'text_delta')
    .map((e) => e.data.delta.text)
    .join('');

describe('streaming replies', () => {
  it('streams a scripted reply as the vendor event sequence, in several text deltas', async () => {
    const events = await stream([
      user('<system-reminder>\nnot a prompt\n</system-reminder>', 'Please [[reply: The quick brown fox jumps over the lazy dog]]'),
    ]);
    expect(events.map((e) => e.event)).toEqual([
      'message_start',
      'ping',
      'content_block_start',
      ...Array(3).fill('content_block_delta'),
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    expect(textOf(events)).toBe('The quick brown fox jumps over the lazy dog');
    const start = events[0]!.data.message;
    expect(start).toMatchObject({ type: 'message', role: 'assistant', model: 'claude-test', content: [], stop_reason: null });
    expect(start.id).toMatch(/^msg_stub_/);
    expect(start.usage.input_tokens).toBeGreaterThan(0);
    expect(events.at(-2)!.data).toMatchObject({ delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 11 } });
  });

  it('answers an undirected prompt with a short text derived from it', async () => {
    expect(textOf(await stream([user('hello   there\nstub')]))).toBe('You said: "hello there stub".');
  });

  it('emits a scripted tool call, then quotes the tool result in the next round', async () => {
    const prompt = user('run it [[tool:Bash {"command":"echo \\"[[x]]\\" }}"}]] [[reply: done]]');
    const first = await stream([prompt]);
    const start = first.find((e) => e.event === 'content_block_start')!.data.content_block;
    expect(start).toMatchObject({ type: 'tool_use', name: 'Bash', input: {} });
    const json = first.filter((e) => e.data.delta?.type === 'input_json_delta').map((e) => e.data.delta.partial_json);
    expect(json.length).toBeGreaterThan(1);
    expect(JSON.parse(json.join(''))).toEqual({ command: 'echo "[[x]]" }}' });
    expect(first.find((e) => e.event === 'message_delta')!.data.delta.stop_reason).toBe('tool_use');

    const second = await stream([
      prompt,
      { role: 'assistant', content: [{ type: 'tool_use', id: start.id, name: 'Bash', input: { command: 'echo' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: start.id, content: [{ type: 'text', text: '[[x]] }}\n' }] }] },
      { role: 'system', content: [{ type: 'text', text: 'environment details' }] },
    ]);
    expect(textOf(second)).toBe('Tool Bash returned: [[x]] }}\ndone');
    expect(second.find((e) => e.event === 'message_delta')!.data.delta.stop_reason).toBe('end_turn');
  });

  it('runs several scripted tools one round each, for any tool name, and reports failed results', async () => {
    const input = { reason: 'deploy', requested_items: [{ kind: 'action', description: 'push [[main]]' }] };
    const prompt = user(`[[tool:Read {"file_path":"/a"}]] then [[tool:mcp__platform__request_approval ${JSON.stringify(input)}]]`);
    const round = async (messages: Message[]) => json(await post({ messages }));

    const one = await round([prompt]);
    expect(one.content).toEqual([
      { type: 'tool_use', id: expect.stringMatching(/^toolu_stub_/), name: 'Read', input: { file_path: '/a' } },
    ]);
    const afterOne = [
      prompt,
      { role: 'assistant', content: one.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: one.content[0].id, content: 'file a' }] },
    ];
    const two = await round(afterOne);
    expect(two.content).toEqual([
      { type: 'tool_use', id: expect.stringMatching(/^toolu_stub_/), name: 'mcp__platform__request_approval', input },
    ]);
    expect(two.content[0].id).not.toBe(one.content[0].id);
    const three = await round([
      ...afterOne,
      { role: 'assistant', content: two.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: two.content[0].id, content: 'denied', is_error: true }] },
    ]);
    expect(three).toMatchObject({
      stop_reason: 'end_turn',
      content: [{ type: 'text', text: 'Tool mcp__platform__request_approval failed: denied' }],
    });
  });

  it('paces deltas with [[slow: N]]', async () => {
    const started = Date.now();
    const events = await stream([user('[[slow: 40]] [[reply: one two three four five six seven]]')]);
    const deltas = events.filter((e) => e.event === 'content_block_delta').length;
    expect(deltas).toBe(3);
    expect(Date.now() - started).toBeGreaterThanOrEqual(deltas * 40 - 5);
  });
});

describe('history', () => {
  it('[[echo-history]] lists the earlier user turns, one per prompt block, skipping reminders and tool results', async () => {
    const events = await stream([
      user('first question'),
      { role: 'assistant', content: [{ type: 'text', text: 'first answer' }] },
      user('<system-reminder>ignored</system-reminder>', 'second "question"', 'failed turn merged in'),
      { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'Bash', input: {} }] },
      {
        role: 'user',
        content: [
          { type: 'tool_result', tool_use_id: 't1', content: 'out' },
          { type: 'text', text: 'not a prompt' },
        ],
      },
      { role: 'assistant', content: [{ type: 'text', text: 'ok' }] },
      { role: 'user', content: 'what did I ask? [[echo-history]]' },
    ]);
    expect(textOf(events)).toBe('History: 3 earlier user turns: [1] "first question" [2] "second "question"" [3] "failed turn merged in"');
  });

  it('says so when there is no earlier turn', async () => {
    expect(textOf(await stream([user('[[echo-history]]')]))).toBe('History: no earlier user turns.');
  });
});

describe('skills', () => {
  const listing = (...lines: string[]) =>
    `Intro.\n\nThe following skills are available for use with the Skill tool:\n\n${lines.join('\n')}\n\nMore text.`;

  it('[[echo-skills]] names the skills listed in the system prompt, sorted', async () => {
    const system = [{ type: 'text', text: listing('- pdf: Reads PDFs.', '- csv: Reads: CSV files.') }];
    expect(textOf(await stream([user('which? [[echo-skills]]')], { system }))).toBe('Skills: csv, pdf');
  });

  it('finds a listing in a system-reminder of the messages', async () => {
    const events = await stream([
      user(`<system-reminder>${listing('- heron-facts: Herons.')}</system-reminder>`, '[[echo-skills]] [[reply: and more]]'),
    ]);
    expect(textOf(events)).toBe('Skills: heron-facts\nand more');
  });

  it('says so when nothing is offered', async () => {
    expect(textOf(await stream([user('[[echo-skills]]')], { system: 'no listing here' }))).toBe('Skills: none.');
  });
});

describe('non-streaming, token counting and errors', () => {
  it('answers stream:false with the same message as JSON', async () => {
    const res = await post({ messages: [user('[[reply: plain json]]')] });
    expect(res.status).toBe(200);
    const body = await json(res);
    expect(body).toMatchObject({
      type: 'message',
      role: 'assistant',
      content: [{ type: 'text', text: 'plain json' }],
      stop_reason: 'end_turn',
      usage: { output_tokens: 3 },
    });
    expect(body.usage.input_tokens).toBeGreaterThan(0);
  });

  it('counts tokens deterministically', async () => {
    const count = async () =>
      json(
        await fetch(`${stub.url}/v1/messages/count_tokens`, {
          method: 'POST',
          body: JSON.stringify({ model: 'm', messages: [user('abc')] }),
        }),
      );
    const first = await count();
    expect(first.input_tokens).toBeGreaterThan(0);
    expect(await count()).toEqual(first);
  });

  it('returns a scripted API error that tells the client not to retry', async () => {
    const res = await post({ messages: [user('[[slow: 10]] [[error: 529]]')], stream: true });
    expect(res.status).toBe(529);
    expect(res.headers.get('x-should-retry')).toBe('false');
    expect(await json(res)).toEqual({ type: 'error', error: { type: 'overloaded_error', message: 'stub: scripted 529 overloaded_error' } });
    expect((await post({ messages: [user('[[error: 429]]')] })).status).toBe(429);
  });

  it('rejects unknown or malformed directives loudly instead of guessing', async () => {
    const unknown = await post({ messages: [user('[[rply: typo]]')] });
    expect(unknown.status).toBe(400);
    expect((await json(unknown)).error.message).toContain('unknown directive [[rply]]');
    const badJson = await post({ messages: [user('[[tool:Bash {"command": nope}]]')] });
    expect(badJson.status).toBe(400);
    expect((await post({ messages: [user('[[slow: soon]]')] })).status).toBe(400);
    expect((await post({ messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'x', content: 'y' }] }] })).status).toBe(
      400,
    );
  });

  it('answers unknown paths with 404 and records them', async () => {
    const res = await fetch(`${stub.url}/v1/models`);
    expect(res.status).toBe(404);
    expect(stub.requests.at(-1)).toMatchObject({ method: 'GET', path: '/v1/models', kind: 'unknown', status: 404 });
  });
});

describe('filler calls', () => {
  it('gives the canned acknowledgement to a request marked in its system prompt, whatever the prompt says', async () => {
    const events = await stream([user('[[error: 500]] [[tool:Bash {}]]')], {
      system: [{ type: 'text', text: `You acknowledge. ${FILLER_MARKER}` }],
    });
    expect(textOf(events)).toBe(FILLER_REPLY);
    expect(stub.requests.at(-1)!.kind).toBe('filler');
  });

  it('paces a filler call with [[slow-filler: N]], which the agent calls ignore', async () => {
    const marked = { system: [{ type: 'text', text: FILLER_MARKER }] };
    const started = Date.now();
    const events = await stream([user('[[slow-filler: 60]] [[reply: quick]]')], marked);
    const deltas = events.filter((e) => e.event === 'content_block_delta').length;
    expect(textOf(events)).toBe(FILLER_REPLY);
    expect(Date.now() - started).toBeGreaterThanOrEqual(deltas * 60 - 5);
    expect(textOf(await stream([user('[[slow-filler: 500]] [[reply: quick]]')]))).toBe('quick');
    const prompt = (text: string) => [{ role: 'user', content: text }];
    expect(planReply({ max_tokens: 32_000, messages: prompt('[[slow-filler: 500]] [[reply: quick]]') })).toMatchObject({ delayMs: 0 });
    expect(planReply({ max_tokens: 100, messages: prompt('[[slow-filler: 500]]') })).toMatchObject({ delayMs: 500 });
  });

  it('treats a small max_tokens as a filler call too', async () => {
    const res = await post({ messages: [user('hello')], max_tokens: 100 });
    expect((await json(res)).content).toEqual([{ type: 'text', text: FILLER_REPLY }]);
    expect(stub.requests.at(-1)!.kind).toBe('filler');
  });
});

describe('recording', () => {
  it('records method, path, query, body and headers with credentials redacted', async () => {
    const before = stub.requests.length;
    await post(
      { messages: [user('[[reply: recorded]]')], system: 'the system prompt' },
      { authorization: 'Bearer tok', 'x-custom': 'kept' },
    );
    const record = stub.requests[before]!;
    expect(record).toMatchObject({
      seq: before + 1,
      method: 'POST',
      path: '/v1/messages',
      query: '?beta=true',
      kind: 'agent',
      status: 200,
    });
    expect(record.headers).toMatchObject({ 'x-api-key': '[redacted]', authorization: '[redacted]', 'x-custom': 'kept' });
    expect(JSON.stringify(record)).not.toContain('sk-secret-value');
    expect(record.body).toMatchObject({ system: 'the system prompt', messages: [user('[[reply: recorded]]')] });
    expect(stub.agentRequests().at(-1)).toEqual(record.body);
  });

  it('checks the API key when given one', async () => {
    const keyed = await startModelStub({ apiKey: 'sk-right' });
    try {
      const call = (key: string) =>
        fetch(`${keyed.url}/v1/messages`, {
          method: 'POST',
          headers: { 'x-api-key': key },
          body: JSON.stringify({ max_tokens: 1000, messages: [user('hi')] }),
        });
      const wrong = await call('sk-wrong');
      expect(wrong.status).toBe(401);
      expect((await json(wrong)).error.type).toBe('authentication_error');
      expect((await call('sk-right')).status).toBe(200);
    } finally {
      await keyed.stop();
    }
  });
});
