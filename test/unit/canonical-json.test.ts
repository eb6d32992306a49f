import { describe, expect, it } from 'vitest';
import { canonicalJson } from '../../api-server/core/canonical-json.js';

describe('canonicalJson', () => {
  it('renders the approval signing payload as the spec describes: sorted keys, no whitespace', () => {
    const payload = { exp: 1_760_000_000, decision: 'approve', approval_id: 'apr_01ABC' };
    expect(canonicalJson(payload)).toBe('{"approval_id":"apr_01ABC","decision":"approve","exp":1760000000}');
  });

  it('sorts keys at every depth and keeps array order', () => {
    const value = { b: [{ z: 1, a: { d: null, c: true } }, 3, 'x'], a: { y: [], x: {} } };
    expect(canonicalJson(value)).toBe('{"a":{"x":{},"y":[]},"b":[{"a":{"c":true,"d":null},"z":1},3,"x"]}');
  });

  it('gives the same bytes for the same value whatever the insertion order', () => {
    const one = { name: 'n', settings: { filler_enabled: true, max: 3 }, metadata: { k1: 'a', k2: 'b' } };
    const two = { metadata: { k2: 'b', k1: 'a' }, settings: { max: 3, filler_enabled: true }, name: 'n' };
    expect(canonicalJson(one)).toBe(canonicalJson(two));
    expect(canonicalJson({ ...one, name: 'm' })).not.toBe(canonicalJson(two));
  });

  it('sorts by UTF-16 code units (upper case before lower case) and escapes strings as JSON does', () => {
    expect(canonicalJson({ b: 1, B: 2, a: 3, é: 4, _: 5 })).toBe('{"B":2,"_":5,"a":3,"b":1,"é":4}');
    expect(canonicalJson({ s: 'line\n"quoted"' })).toBe('{"s":"line\\n\\"quoted\\""}');
  });

  it('passes primitives through and drops undefined members like JSON.stringify', () => {
    expect(canonicalJson('x')).toBe('"x"');
    expect(canonicalJson(42)).toBe('42');
    expect(canonicalJson(null)).toBe('null');
    expect(canonicalJson({ a: undefined, b: 1 })).toBe('{"b":1}');
  });
});
