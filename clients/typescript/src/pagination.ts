/** The list envelope of every listing. */
export interface Page<T> {
  object: 'list';
  data: T[];
  has_more: boolean;
  next_cursor: string | null;
}

export interface Cursor {
  starting_after?: string;
  ending_before?: string;
}

export interface PaginateOptions<T> {
  /**
   * `older` (default) walks from the newest item (or from `from`, exclusive) towards older ones, in
   * the listing's own order; `newer` walks from `from` (exclusive, required) towards newer ones,
   * oldest first.
   */
  direction?: 'older' | 'newer';
  from?: string;
  /** An item's cursor: its id, or for listings keyed otherwise (secrets: `alias`) that key. */
  cursorOf?: (item: T) => string;
}

/**
 * Every item of a listing, fetching pages as the loop goes: `fetchPage` gets the cursor to send
 * (`starting_after` or `ending_before`) and returns that page.
 */
export async function* paginate<T>(fetchPage: (cursor: Cursor) => Promise<Page<T>>, options: PaginateOptions<T> = {}): AsyncGenerator<T> {
  const cursorOf = options.cursorOf ?? ((item: T) => (item as { id: string }).id);
  if (options.direction === 'newer') {
    if (!options.from) throw new Error('paginate: direction "newer" needs `from`, the item to start after');
    let cursor = options.from;
    for (;;) {
      const page = await fetchPage({ ending_before: cursor });
      // A page walking newer comes newest first: the items just after the cursor are at its end.
      yield* [...page.data].reverse();
      if (!page.has_more || page.data.length === 0) return;
      cursor = cursorOf(page.data[0]!);
    }
  }
  let cursor = options.from;
  for (;;) {
    const page = await fetchPage(cursor ? { starting_after: cursor } : {});
    yield* page.data;
    if (!page.has_more || page.data.length === 0) return;
    cursor = cursorOf(page.data.at(-1)!);
  }
}
