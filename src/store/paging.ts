/**
 * Keyset pagination for the list endpoints' `limit` and `cursor`. A page
 * is read as "the first `limit` rows after this key" in the list's own order, where the key is
 * the row's sort key ending in a unique column, so rows inserted between two requests never
 * shift a page: an OFFSET would repeat or skip them.
 */
export type PageKey = readonly (string | number)[];

export interface PageQuery {
  limit: number;
  /** The key of the last row of the previous page; null for the first page. */
  after: PageKey | null;
}

export interface RowsPage<T> {
  rows: T[];
  /** The key of the page's last row when more rows follow; null on the last page. */
  next: PageKey | null;
}

/**
 * Cuts a page from rows read with `LIMIT limit + 1`: the extra row only says that another
 * page follows, so the last page carries no next key and costs no empty request.
 */
export function cutPage<R, T>(rows: R[], limit: number, keyOf: (row: R) => PageKey, toRow: (row: R) => T): RowsPage<T> {
  const more = rows.length > limit;
  const kept = more ? rows.slice(0, limit) : rows;
  return { rows: kept.map(toRow), next: more ? keyOf(kept[kept.length - 1]!) : null };
}

/**
 * The SQL condition "after this key" for a list ordered newest first by `createdAt`, ties
 * broken by `id` ascending (the order those lists always had); its arguments follow.
 */
export function newestFirstAfter(after: PageKey | null, createdAt: string, id: string): { sql: string; args: (string | number)[] } {
  if (!after) return { sql: '', args: [] };
  const [at, last] = after;
  return { sql: `AND (${createdAt} < ? OR (${createdAt} = ? AND ${id} > ?))`, args: [at!, at!, last!] };
}
