export interface Page<T> {
  items: T[];
  hasMore: boolean;
}

export const DEFAULT_PAGE_SIZE = 20;

/** Rows were fetched with `limit + 1`: the extra row only says whether there is a next page. */
export function toPage<T>(rows: T[], limit: number): Page<T> {
  return { items: rows.slice(0, limit), hasMore: rows.length > limit };
}
