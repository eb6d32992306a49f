import { describe, expect, it } from 'vitest';
import { MAX_INPUT_DEPTH, textFault, unsafeInput } from '../../api-server/core/http/validation.js';

describe('textFault', () => {
  it('accepts well-formed text, surrogate pairs, controls and U+FFFD', () => {
    for (const text of ['', 'plain', 'caf\u00e9', '\ud83d\ude00', '\u0001\t\n', '\ufffd', '\uffff']) {
      expect(textFault(text), JSON.stringify(text)).toBeUndefined();
    }
  });

  it('refuses NUL and every kind of unpaired surrogate', () => {
    expect(textFault('a\u0000b')).toMatch(/NUL/);
    for (const text of ['\ud800', 'a\udbff', '\udc00', 'x\udfffy', '\ude00\ud83d', '\ud83d\ud83d']) {
      expect(textFault(text), JSON.stringify(text)).toMatch(/well-formed Unicode/);
    }
  });
});

describe('unsafeInput', () => {
  it('points at every faulty value and key, escaping the pointer', () => {
    const errors = unsafeInput({
      ok: 'fine',
      name: 'a\ud800',
      list: ['x', ['y', 'z\u0000']],
      'a/b~c': { 'k\u0000': 'v', deep: '\udfff' },
      count: 3,
      none: null,
    });
    expect(errors.map((error) => error.pointer)).toEqual(['/name', '/list/1/1', '/a~1b~0c/k\u0000', '/a~1b~0c/deep']);
    expect(errors[2]?.message).toMatch(/^key /);
  });

  it('finds nothing in clean input, nested up to the depth limit', () => {
    expect(unsafeInput({ a: ['b', { c: 'd' }], e: 1 })).toEqual([]);
    let nested: unknown = 'bottom';
    for (let i = 0; i < MAX_INPUT_DEPTH; i++) nested = i % 2 ? [nested] : { k: nested };
    expect(unsafeInput(nested)).toEqual([]);
  });

  it('refuses a deeper body at its first level too deep, in linear time and no recursion', () => {
    let deep: unknown = 'bottom';
    for (let i = 0; i < 200_000; i++) deep = [deep];
    expect(unsafeInput(deep)).toEqual([{ pointer: '/0'.repeat(MAX_INPUT_DEPTH + 1), message: expect.stringMatching(/deeper/) }]);
  });

  it('stops after a bounded number of errors', () => {
    expect(unsafeInput(Array.from({ length: 1000 }, () => '\u0000')).length).toBeLessThanOrEqual(20);
  });
});
