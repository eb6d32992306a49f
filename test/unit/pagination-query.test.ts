import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { DEFAULT_PAGE_SIZE, listQuery, MAX_PAGE_SIZE, pageJson } from '../../api-server/core/pagination.js';

const query = listQuery('tenant', { status: z.enum(['active', 'suspended']).optional() });

describe('listQuery', () => {
  it('defaults the page size and coerces query strings', () => {
    expect(query.parse({})).toEqual({ limit: DEFAULT_PAGE_SIZE });
    expect(DEFAULT_PAGE_SIZE).toBe(20);
    expect(query.parse({ limit: '7', starting_after: 'tnt_1', status: 'active' })).toEqual({
      limit: 7,
      starting_after: 'tnt_1',
      status: 'active',
    });
  });

  it('accepts limits 1 to 100 and refuses the rest', () => {
    expect(MAX_PAGE_SIZE).toBe(100);
    expect(query.safeParse({ limit: '1' }).success).toBe(true);
    expect(query.safeParse({ limit: '100' }).success).toBe(true);
    for (const limit of ['0', '101', '-1', '2.5', 'ten', '', '0x10', '1e1', ' 16', '16 ', '+16', '0b1', '1'.repeat(11)]) {
      expect(query.safeParse({ limit }).success, limit).toBe(false);
    }
  });

  it('refuses both cursors at once, pointing at ending_before', () => {
    const parsed = query.safeParse({ starting_after: 'tnt_a', ending_before: 'tnt_b' });
    expect(parsed.success).toBe(false);
    expect(parsed.error?.issues.map((issue) => issue.path)).toEqual([['ending_before']]);
    expect(query.safeParse({ ending_before: 'tnt_b' }).success).toBe(true);
  });

  it('takes as a cursor only an id of the listed kind', () => {
    for (const cursor of ['not-an-id', '../..', 'usr_01HZ', 'tnt_', 'tnt_a-b', 'tnt_a\u0000', `tnt_${'A'.repeat(65)}`]) {
      const parsed = query.safeParse({ starting_after: cursor });
      expect(parsed.success, cursor).toBe(false);
      expect(parsed.error?.issues.map((issue) => issue.path)).toEqual([['starting_after']]);
      expect(query.safeParse({ ending_before: cursor }).success, cursor).toBe(false);
    }
    expect(query.safeParse({ starting_after: 'tnt_01HZX3' }).success).toBe(true);
  });

  it('takes the given cursor schema for listings not keyed by id', () => {
    const byAlias = listQuery(z.string().regex(/^[A-Z]+$/), {});
    expect(byAlias.safeParse({ starting_after: 'ALIAS' }).success).toBe(true);
    expect(byAlias.safeParse({ starting_after: 'tnt_01HZX3' }).success).toBe(false);
  });

  it('validates the route filters with the page fields', () => {
    expect(query.safeParse({ status: 'deleted' }).success).toBe(false);
    expect(query.safeParse({ starting_after: '' }).success).toBe(false);
  });
});

describe('pageJson(page)', () => {
  it('is the JSON of the list envelope around items the database rendered', () => {
    const rows = [
      { id: 'tnt_2', json: '{"id": "tnt_2", "name": "a \\"b\\""}' },
      { id: 'tnt_1', json: '{"id": "tnt_1", "name": null}' },
    ];
    expect(JSON.parse(pageJson({ object: 'list', data: rows, has_more: true, next_cursor: 'tnt_1' }))).toEqual({
      object: 'list',
      data: [
        { id: 'tnt_2', name: 'a "b"' },
        { id: 'tnt_1', name: null },
      ],
      has_more: true,
      next_cursor: 'tnt_1',
    });
    expect(JSON.parse(pageJson({ object: 'list', data: [], has_more: false, next_cursor: null }))).toEqual({
      object: 'list',
      data: [],
      has_more: false,
      next_cursor: null,
    });
  });
});
