/**
 * ReplyBuilder: the usage a runner's `result` reports is the sandbox's word, shown as is only when it
 * is two whole token counts within reason; anything else (negative, fractional, huge, not numbers)
 * is dropped rather than stored on the message.
 */
import { describe, expect, it } from 'vitest';
import { ReplyBuilder } from '../../api-server/runs/reply.js';

const usageOf = (usage: unknown) => {
  const reply = new ReplyBuilder();
  reply.add({ type: 'result', subtype: 'success', usage });
  return reply.build().usage;
};

describe('ReplyBuilder: reported usage', () => {
  it('keeps two whole counts and nothing else of the report', () => {
    expect(usageOf({ input_tokens: 12, output_tokens: 0, cache_read_input_tokens: 5 })).toEqual({ input_tokens: 12, output_tokens: 0 });
  });

  it.each([
    [{ input_tokens: -1, output_tokens: 3 }],
    [{ input_tokens: 1.5, output_tokens: 3 }],
    [{ input_tokens: 1e20, output_tokens: 3 }],
    [{ input_tokens: 2, output_tokens: Number.MAX_SAFE_INTEGER }],
    [{ input_tokens: '2', output_tokens: 3 }],
    [{ input_tokens: 2 }],
    [null],
    ['lots'],
  ])('drops %j', (usage) => {
    expect(usageOf(usage)).toBeNull();
  });
});
