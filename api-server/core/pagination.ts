import type { SelectQueryBuilder } from 'kysely';
import { z } from 'zod';
import { ID_PREFIX, type IdKind, idPattern } from './ids.js';
import { QueryInteger } from './schemas.js';

export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;

/**
 * Query schema of a list route: the pagination parameters plus the route's own filters. A cursor is
 * an id of the listed kind (or, for listings not keyed by id, a value of the given schema); anything
 * else cannot come from a previous page and is refused rather than answered with an empty one.
 */
export function listQuery<Extra extends z.ZodRawShape>(cursor: IdKind | z.ZodType<string>, extra: Extra) {
  const cursorSchema =
    typeof cursor === 'string' ? z.string().regex(idPattern(cursor), `must be an id of this listing (${ID_PREFIX[cursor]}_...)`) : cursor;
  return z
    .object({
      limit: QueryInteger(z.coerce.number().int().min(1).max(MAX_PAGE_SIZE).default(DEFAULT_PAGE_SIZE)),
      starting_after: cursorSchema.optional(),
      ending_before: cursorSchema.optional(),
      ...extra,
    })
    .refine((q) => !((q as PageRequest).starting_after && (q as PageRequest).ending_before), {
      message: 'starting_after and ending_before are mutually exclusive',
      path: ['ending_before'],
    });
}

export interface PageRequest {
  limit: number;
  starting_after?: string | undefined;
  ending_before?: string | undefined;
}

export interface Page<T> {
  object: 'list';
  data: T[];
  has_more: boolean;
  next_cursor: string | null;
}

/**
 * Keyset pagination over a time-ordered id column, newest first. `starting_after` walks towards
 * older items, `ending_before` towards newer ones; one extra row tells whether more exist in the
 * direction of travel (as `has_more`). `next_cursor` is the last item's id when `has_more`.
 * Cost is one index range scan whatever the table size.
 */
export async function paginate<DB, TB extends keyof DB, Row extends { id: string }>(
  query: SelectQueryBuilder<DB, TB, Row>,
  idColumn: string,
  page: PageRequest,
): Promise<Page<Row>> {
  return paginateWith(page, (direction, cursor, fetchCount) => pageQuery(query, idColumn, direction, cursor, fetchCount).execute());
}

/**
 * `query` narrowed to the rows of a page read in `direction`: up to `fetchCount` rows, newest first
 * except for `newer` (oldest first); `cursor` is unused for `newest`.
 */
export function pageQuery<DB, TB extends keyof DB, Row>(
  query: SelectQueryBuilder<DB, TB, Row>,
  idColumn: string,
  direction: PageDirection,
  cursor: string | undefined,
  fetchCount: number,
): SelectQueryBuilder<DB, TB, Row> {
  // The column name is ours (a literal at each call site); kysely cannot type a dynamic reference.
  // biome-ignore lint/suspicious/noExplicitAny: erases the table generics so a dynamic column reference type-checks (see above)
  const q = query as unknown as SelectQueryBuilder<any, any, Row>;
  const paged =
    direction === 'newer'
      ? q.where(idColumn, '>', cursor).orderBy(idColumn, 'asc')
      : (direction === 'older' ? q.where(idColumn, '<', cursor) : q).orderBy(idColumn, 'desc');
  return paged.limit(fetchCount) as unknown as SelectQueryBuilder<DB, TB, Row>;
}

/** Which rows a page reads: the newest, those older than a cursor, or those newer than it. */
export type PageDirection = 'newest' | 'older' | 'newer';

/**
 * `paginate` for a listing that runs its own query per direction (a hot one compiled once):
 * `fetchRows` returns up to `fetchCount` rows, newest first except for `newer` (oldest first).
 */
export async function paginateWith<Row extends { id: string }>(
  page: PageRequest,
  fetchRows: (direction: PageDirection, cursor: string | undefined, fetchCount: number) => Promise<Row[]>,
): Promise<Page<Row>> {
  const fetchCount = page.limit + 1;
  if (page.ending_before) {
    const rows = await fetchRows('newer', page.ending_before, fetchCount);
    return envelope(rows.slice(0, page.limit).reverse(), rows.length > page.limit);
  }
  const rows = await fetchRows(page.starting_after ? 'older' : 'newest', page.starting_after, fetchCount);
  return envelope(rows.slice(0, page.limit), rows.length > page.limit);
}

function envelope<Row extends { id: string }>(rows: Row[], hasMore: boolean): Page<Row> {
  return {
    object: 'list',
    data: rows,
    has_more: hasMore,
    next_cursor: hasMore ? (rows[rows.length - 1]?.id ?? null) : null,
  };
}

export function mapPage<Row, Out>(page: Page<Row>, present: (row: Row) => Out): Page<Out> {
  return { ...page, data: page.data.map(present) };
}

/**
 * The JSON text of a page whose items the database has already rendered as JSON (`json` column),
 * for hot listings: parsing each row into objects and serialising them again was most of a page's
 * cost. Ids are time-ordered base32, so the cursor needs no escaping beyond JSON.stringify.
 */
export function pageJson(page: Page<{ id: string; json: string }>): string {
  const items = page.data.map((row) => row.json).join(',');
  return `{"object":"list","data":[${items}],"has_more":${page.has_more},"next_cursor":${JSON.stringify(page.next_cursor)}}`;
}
