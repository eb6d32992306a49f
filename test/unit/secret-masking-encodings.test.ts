/**
 * The one masker's encoded forms: base64 (standard and URL-safe, padded or not, at each of the three byte
 * offsets inside a longer encoded text), hex (both cases) and reversed text, in strings, in JSON values, in
 * the API server's event masking, and in a streamed body cut at every point.
 */
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createMasker, createMaskingTransform, MIN_ENCODED_VALUE_BYTES } from '../../egress-proxy/secret-masking.js';
import { EventMasker, GrowingMasker } from '../../api-server/secrets/event-masking.js';

const VALUE = 'sk-live-51Hx9Q/é+z';
const P = '{{secret:TOKEN}}';
const masker = createMasker([['TOKEN', VALUE]]);

/** The value inside a longer payload, so that it starts at byte offset 0, 1 or 2 of a base64 group. */
const payloads = ['', 'a', 'ab', 'abc'].map((before) => Buffer.from(`${before}${VALUE}~~tail`));

describe('encoded forms', () => {
  it.each(payloads.map((p, i) => [i, p] as const))('base64 with %i bytes before the value: every alphabet and padding', (_i, payload) => {
    const forms = [
      payload.toString('base64'),
      payload.toString('base64').replace(/=+$/, ''),
      payload.toString('base64url'),
      `${payload.toString('base64url')}==`,
    ];
    for (const form of forms) {
      const masked = masker.maskText(`data: ${form}\n`);
      expect(masked, form).toContain(P);
      // What is left around the placeholder cannot decode to the value any more.
      expect(Buffer.from(masked.replace(P, ''), 'base64').toString('latin1')).not.toContain('sk-live-51Hx9Q');
    }
  });

  it('hex in either case, and reversed text', () => {
    const hex = Buffer.from(VALUE).toString('hex');
    expect(masker.maskText(`x${hex}y`)).toBe(`x${P}y`);
    expect(masker.maskText(`x${hex.toUpperCase()}y`)).toBe(`x${P}y`);
    expect(masker.maskText(`<${[...VALUE].reverse().join('')}>`)).toBe(`<${P}>`);
  });

  it('inside JSON values, keys included', () => {
    const b64 = Buffer.from(VALUE).toString('base64');
    // The last base64 character holds bits of what follows (here the padding), so it stays beside the placeholder.
    expect(masker.maskValue({ [b64]: [Buffer.from(VALUE).toString('hex')] })).toEqual({ [`${P}${b64.slice(-3)}`]: [P] });
  });

  it(`a value under ${MIN_ENCODED_VALUE_BYTES} bytes is masked as it is only (its encodings are too short to tell from other text)`, () => {
    const short = createMasker([['PIN', '1234']]);
    expect(short.maskText('1234 MTIzNA== 31323334 4321')).toBe('{{secret:PIN}} MTIzNA== 31323334 4321');
  });
});

describe('streamed', () => {
  async function throughTransform(pieces: Buffer[]): Promise<string> {
    const chunks: Buffer[] = [];
    for await (const chunk of Readable.from(pieces).pipe(createMaskingTransform(masker))) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  }

  it('every encoding, cut at every point of the body, masks as the uncut body does', async () => {
    const body = Buffer.from(
      [
        payloads[1]!.toString('base64'),
        payloads[2]!.toString('base64url'),
        Buffer.from(VALUE).toString('hex').toUpperCase(),
        [...VALUE].reverse().join(''),
        VALUE,
      ].join(' | '),
    );
    const whole = await throughTransform([body]);
    expect(whole.split(P)).toHaveLength(6);
    for (let cut = 1; cut < body.length; cut++) {
      expect(await throughTransform([body.subarray(0, cut), body.subarray(cut)]), `cut at ${cut}`).toBe(whole);
    }
  });
});

describe("the API server's masking shares it", () => {
  it('an agent event and a streamed delta carrying the base64 of a value come out with its placeholder', () => {
    const events = new EventMasker(new GrowingMasker(new Map([['TOKEN', { value: VALUE, allowedHosts: ['api.example.com'] }]])));
    const b64 = Buffer.from(VALUE).toString('base64');
    const [tool] = events.push({ type: 'user', message: { content: [{ type: 'tool_result', content: `got ${b64}` }] } });
    expect(JSON.stringify(tool)).toContain(P);
    const delta = (text: string) => ({
      type: 'stream_event',
      event: { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } },
    });
    const out = [
      ...events.push(delta(`hex ${Buffer.from(VALUE).toString('hex').slice(0, 9)}`)),
      ...events.push(delta(`${Buffer.from(VALUE).toString('hex').slice(9)} end`)),
      ...events.flush(),
    ];
    const text = out.map((e) => (e.event as { delta: { text: string } }).delta.text).join('');
    expect(text).toBe(`hex ${P} end`);
  });
});
