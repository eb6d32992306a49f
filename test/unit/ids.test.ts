import { describe, expect, it } from 'vitest';
import { createIdGenerator, ID_PREFIX, type IdKind, isId } from '../../api-server/core/ids.js';

// Crockford base32, as the id layout documents; decoding here checks the time part independently.
const CROCKFORD = '0123456789ABCDEFGHJKMNPQRSTVWXYZ';
const decodeTime = (id: string): number =>
  [...id.slice(id.indexOf('_') + 1, id.indexOf('_') + 11)].reduce((acc, ch) => acc * 32 + CROCKFORD.indexOf(ch), 0);

describe('createIdGenerator', () => {
  it('gives every kind its spec prefix and an id matching the spec pattern', () => {
    const newId = createIdGenerator();
    const specPatterns: Partial<Record<IdKind, RegExp>> = {
      tenant: /^tnt_[A-Za-z0-9]+$/,
      user: /^usr_[A-Za-z0-9]+$/,
      role: /^rol_[A-Za-z0-9]+$/,
      repository: /^rep_[A-Za-z0-9]+$/,
      skill: /^skl_[A-Za-z0-9]+$/,
      credential: /^crd_[A-Za-z0-9]+$/,
      conversation: /^con_[A-Za-z0-9]+$/,
      message: /^msg_[A-Za-z0-9]+$/,
      approval: /^apr_[A-Za-z0-9]+$/,
      approverKey: /^apk_/,
      request: /^req_/,
    };
    for (const [kind, pattern] of Object.entries(specPatterns)) {
      const id = newId(kind as IdKind);
      expect(id, kind).toMatch(pattern);
      expect(id).toHaveLength(ID_PREFIX[kind as IdKind].length + 1 + 26);
      expect(isId(kind as IdKind, id)).toBe(true);
    }
  });

  it('encodes the creation millisecond in the first ten characters', () => {
    const at = Date.UTC(2025, 0, 2, 3, 4, 5, 678);
    const id = createIdGenerator(() => at)('tenant');
    expect(decodeTime(id)).toBe(at);
    expect(createIdGenerator(() => 0)('user').slice(4, 14)).toBe('0000000000');
  });

  it('orders ids by time, byte-wise, across milliseconds', () => {
    let time = 1_700_000_000_000;
    const newId = createIdGenerator(() => time);
    const ids: string[] = [];
    for (let i = 0; i < 50; i++) {
      ids.push(newId('message'));
      time += 1 + (i % 3) * 997;
    }
    // Code-unit order is what the C collation of the id columns uses.
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('stays strictly increasing within one millisecond and when the clock steps back', () => {
    let time = 1_700_000_000_000;
    const newId = createIdGenerator(() => time);
    const ids = Array.from({ length: 5000 }, () => newId('conversation'));
    time -= 10_000; // a clock adjustment must not break ordering
    ids.push(newId('conversation'), newId('conversation'));
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!, `${ids[i - 1]} < ${ids[i]}`).toBe(true);
  });

  it('makes distinct ids in separate generators (random part)', () => {
    const at = () => 1_700_000_000_000;
    const a = createIdGenerator(at)('tenant');
    const b = createIdGenerator(at)('tenant');
    expect(a.slice(0, 14)).toBe(b.slice(0, 14));
    expect(a).not.toBe(b);
  });
});

describe('isId', () => {
  it('checks the prefix of the kind and the character set', () => {
    expect(isId('tenant', 'tnt_01ABCxyz')).toBe(true);
    expect(isId('tenant', 'usr_01ABCxyz')).toBe(false);
    expect(isId('tenant', 'tnt_')).toBe(false);
    expect(isId('tenant', 'tnt_abc-def')).toBe(false);
    expect(isId('tenant', `tnt_${'a'.repeat(65)}`)).toBe(false);
    expect(isId('tenant', ' tnt_abc')).toBe(false);
  });
});
