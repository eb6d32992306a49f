import { describe, expect, it } from 'vitest';
import { EventMasker, GrowingMasker, maskedSessionStore } from '../../api-server/secrets/event-masking.js';
import { compileMasker, createMasker, createMaskingTransform } from '../../egress-proxy/secret-masking.js';
import { findSecretReferences } from '../../api-server/secrets/placeholders.js';

const masker = (entries: Record<string, string>) => createMasker(new Map(Object.entries(entries)));

describe('createMasker', () => {
  it('replaces every occurrence of every value with its placeholder', () => {
    const m = masker({ API_TOKEN: 'tok-123', DB_PASSWORD: 'hunter2' });
    expect(m.maskText('use tok-123 then tok-123 and hunter2.')).toBe(
      'use {{secret:API_TOKEN}} then {{secret:API_TOKEN}} and {{secret:DB_PASSWORD}}.',
    );
    expect(m.maskText('nothing here')).toBe('nothing here');
  });

  it('finds values in their JSON-escaped form too (inside JSON text)', () => {
    const value = 'p"a\\ss\nword';
    const m = masker({ PASS: value });
    const jsonText = JSON.stringify({ password: value });
    expect(jsonText).not.toContain(value);
    expect(m.maskText(jsonText)).toBe('{"password":"{{secret:PASS}}"}');
    expect(m.maskText(`raw: ${value}`)).toBe('raw: {{secret:PASS}}');
  });

  it('takes the longer value where one contains another', () => {
    const m = masker({ SHORT: 'abc', LONG: 'xxabcxx' });
    expect(m.maskText('xxabcxx and abc')).toBe('{{secret:LONG}} and {{secret:SHORT}}');
  });

  it('treats values as text, not as patterns', () => {
    const m = masker({ RE: 'a.b*c' });
    expect(m.maskText('aXbbc a.b*c')).toBe('aXbbc {{secret:RE}}');
  });

  it('masks every string of a JSON value, keys included, and keeps the value when nothing matched', () => {
    const m = masker({ K: 'sekrit' });
    const event = { type: 'user', message: { content: [{ type: 'tool_result', content: 'got sekrit', n: 3, ok: true }] }, sekrit: null };
    expect(m.maskValue(event)).toEqual({
      type: 'user',
      message: { content: [{ type: 'tool_result', content: 'got {{secret:K}}', n: 3, ok: true }] },
      '{{secret:K}}': null,
    });
    expect(event.message.content[0]!.content).toBe('got sekrit'); // the input is not changed
    const clean = { a: ['x', { b: 'y' }] };
    expect(m.maskValue(clean)).toBe(clean);
  });

  it('with no secrets changes nothing', () => {
    const m = masker({});
    expect(m.empty).toBe(true);
    const value = { a: 'b' };
    expect(m.maskValue(value)).toBe(value);
    expect(m.pendingLength('anything')).toBe(0);
  });

  it('measures the longest tail that may begin a value', () => {
    const m = masker({ A: 'secret-value', B: 'sun' });
    expect(m.pendingLength('here is secr')).toBe(4);
    expect(m.pendingLength('here is s')).toBe(1);
    expect(m.pendingLength('here is su')).toBe(2);
    expect(m.pendingLength('here is x')).toBe(0);
    // A whole value is not pending (it is masked, not held).
    expect(m.pendingLength('sun')).toBe(0);
  });
});

const delta = (text: string, index = 0, uuid = 'u-1') => ({
  type: 'stream_event',
  uuid,
  session_id: 's',
  event: { type: 'content_block_delta', index, delta: { type: 'text_delta', text } },
});
const textOf = (events: Record<string, any>[]) =>
  events
    .filter((e) => e.type === 'stream_event' && e.event.type === 'content_block_delta')
    .map((e) => e.event.delta.text ?? e.event.delta.partial_json)
    .join('');

describe('EventMasker', () => {
  it('masks a value that arrives split across deltas, keeping the text otherwise intact', () => {
    const m = new EventMasker(masker({ TOKEN: 'canary-42xyz' }));
    const out = [
      ...m.push(delta('The key is can')),
      ...m.push(delta('ary-4')),
      ...m.push(delta('2xyz, done.')),
      ...m.push({ type: 'stream_event', event: { type: 'content_block_stop', index: 0 } }),
    ];
    expect(textOf(out)).toBe('The key is {{secret:TOKEN}}, done.');
    expect(JSON.stringify(out)).not.toContain('canary-42xyz');
    expect(out.at(-1)).toEqual({ type: 'stream_event', event: { type: 'content_block_stop', index: 0 } });
  });

  it('passes deltas through as they are when no tail can begin a value', () => {
    const m = new EventMasker(masker({ TOKEN: 'canary-42xyz' }));
    const first = delta('Hello there');
    expect(m.push(first)).toEqual([first]);
  });

  it('sends a held tail that was not a value before the next other event, as a delta of its own', () => {
    const m = new EventMasker(masker({ TOKEN: 'canary-42xyz' }));
    expect(textOf(m.push(delta('a can')))).toBe('a ');
    const out = m.push({ type: 'assistant', message: { content: [{ type: 'text', text: 'a can' }] } });
    expect(out).toHaveLength(2);
    expect(out[0]).toMatchObject({
      type: 'stream_event',
      session_id: 's',
      event: { index: 0, delta: { type: 'text_delta', text: 'can' } },
    });
    expect(out[0]!.uuid).not.toBe('u-1');
    expect(out[1]!.type).toBe('assistant');
  });

  it('holds per content block and masks tool input JSON deltas', () => {
    const m = new EventMasker(masker({ PASS: 'pa"ss' }));
    const json = (partial: string) => ({
      type: 'stream_event',
      event: { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: partial } },
    });
    const out = [...m.push(json('{"command":"login pa\\"')), ...m.push(json('ss"}')), ...m.flush()];
    expect(textOf(out)).toBe('{"command":"login {{secret:PASS}}"}');
  });

  it('masks whole events (assistant, tool results, result)', () => {
    const m = new EventMasker(masker({ TOKEN: 'canary-42xyz' }));
    const [out] = m.push({ type: 'result', subtype: 'success', result: 'it is canary-42xyz' });
    expect(out).toEqual({ type: 'result', subtype: 'success', result: 'it is {{secret:TOKEN}}' });
  });
});

describe('maskedSessionStore', () => {
  it('masks appended transcript entries and reads through', async () => {
    const appended: unknown[] = [];
    const store = {
      load: async () => [{ stored: true }],
      append: async (_key: unknown, entries: unknown[]) => {
        appended.push(...entries);
      },
    };
    const masked = maskedSessionStore(store, masker({ K: 'sekrit' }));
    await masked.append({ projectKey: 'p', sessionId: 's' } as never, [{ text: 'sekrit here' }]);
    expect(appended).toEqual([{ text: '{{secret:K}} here' }]);
    expect(await masked.load({ projectKey: 'p', sessionId: 's' } as never)).toEqual([{ stored: true }]);
  });
});

describe('findSecretReferences', () => {
  it('finds placeholders in content, any string of parts, and env values, with pointers', () => {
    const refs = findSecretReferences(
      {
        content: 'use {{secret:A}} and {{secret:B_2}}',
        parts: [
          { type: 'text', text: 'x' },
          { type: 'x-call', args: { 'h/d~r': ['{{secret:C}}'] } },
        ],
        env: { TOKEN: 'Bearer {{secret:D}}', PLAIN: 'no' },
      },
      '/initial_message',
    );
    expect(refs).toEqual([
      { alias: 'A', pointer: '/initial_message/content' },
      { alias: 'B_2', pointer: '/initial_message/content' },
      { alias: 'C', pointer: '/initial_message/parts/1/args/h~1d~0r/0' },
      { alias: 'D', pointer: '/initial_message/env/TOKEN' },
    ]);
  });

  it('ignores what only looks like a placeholder', () => {
    expect(findSecretReferences({ content: '{{secret:lower}} {{secret:}} {secret:A} {{ secret:A }} {{secret:1A}}' })).toEqual([]);
  });
});

describe('GrowingMasker', () => {
  it('masks values added mid-run, and keeps masking a value its alias no longer resolves to', () => {
    const masker = new GrowingMasker(new Map());
    expect(masker.empty).toBe(true);
    expect(masker.maskText('token-one')).toBe('token-one');
    masker.add(new Map([['TOKEN', 'token-one']]));
    expect(masker.empty).toBe(false);
    expect(masker.maskText('use token-one')).toBe('use {{secret:TOKEN}}');
    masker.add(new Map([['TOKEN', 'token-two']]));
    expect(masker.maskText('token-one then token-two')).toBe('{{secret:TOKEN}} then {{secret:TOKEN}}');
    expect(masker.pendingLength('ends with token-t')).toBe('token-t'.length);
  });
});

describe('createMasker: one masker for the API server and the egress proxy', () => {
  const value = 'p@ss "w/rd" ✓';
  const forms = { raw: value, 'percent-encoded': encodeURIComponent(value), 'JSON-escaped': JSON.stringify(value).slice(1, -1) };
  const one = masker({ PASS: value });

  it.each(Object.entries(forms))('catches the %s form in text, header values, JSON values and streamed bytes', async (_name, form) => {
    expect(new Set(Object.values(forms)).size).toBe(3);
    expect(one.maskText(`a ${form} b`)).toBe('a {{secret:PASS}} b');
    expect(one.maskHeaderValue(Buffer.from(`x=${form}`).toString('latin1'))).toBe('x={{secret:PASS}}');
    expect(one.maskValue({ [form]: [form] })).toEqual({ '{{secret:PASS}}': ['{{secret:PASS}}'] });
    const bytes = Buffer.from(`<${form}>`);
    for (let cut = 0; cut <= bytes.length; cut++) {
      const transform = createMaskingTransform(one);
      const out: Buffer[] = [];
      transform.on('data', (chunk: Buffer) => out.push(chunk));
      const ended = new Promise((resolve) => transform.once('end', resolve));
      transform.write(bytes.subarray(0, cut));
      transform.end(bytes.subarray(cut));
      await ended;
      expect(Buffer.concat(out).toString()).toBe('<{{secret:PASS}}>');
    }
    expect(one.pendingLength(`x ${form.slice(0, -1)}`)).toBe(form.length - 1);
  });

  it('gives a value shared by two aliases the first in sort order, whatever order they came in', () => {
    expect(masker({ ZED: 'same-value', ALPHA: 'same-value' }).maskText('same-value')).toBe('{{secret:ALPHA}}');
    expect(
      compileMasker(
        new Map([
          ['ZED', 'same-value'],
          ['ALPHA', 'same-value'],
        ]),
      )!.maskText('same-value'),
    ).toBe('{{secret:ALPHA}}');
  });
});
