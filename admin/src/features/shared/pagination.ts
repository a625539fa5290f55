import { validationError } from '@ent/common/errors/app-error';

export interface Page<T> {
  items: T[];
  hasMore: boolean;
}

const DEFAULT_PAGE_SIZE = 20;

/** Rows were fetched with `limit + 1`: the extra row only says whether there is a next page. */
function toPage<T>(rows: T[], limit: number): Page<T> {
  return { items: rows.slice(0, limit), hasMore: rows.length > limit };
}

/**
 * `starting_after` names an item of the list it pages (DESIGN.md: lists work as the audit route, whose cursor
 * must be one of its entries). A value that names nothing would otherwise silently restart or end the listing;
 * it is a 422 VALIDATION_ERROR naming the parameter instead. `find` looks the item up in the caller's
 * organization (and, for nested lists, under the same parent).
 */
async function checkCursor(
  startingAfter: string | undefined,
  find: (value: string) => Promise<unknown>,
  what: string,
): Promise<void> {
  if (startingAfter === undefined) return;
  if (await find(startingAfter)) return;
  throw validationError(`starting_after is not ${what}.`, { field: 'starting_after', value: startingAfter });
}

/** A list request as routes pass it: the page size (DEFAULT_PAGE_SIZE when absent), the cursor, any filters. */
export type PageRequest<Filter extends { limit: number }> = Omit<Filter, 'limit'> & {
  limit?: number | undefined;
};

/**
 * One page of a list, the one way every list is paged: the cursor checked (`checkCursor`), `limit + 1` rows
 * asked of `list`, the extra one telling whether another page follows.
 */
export async function paginate<Row, Filter extends { limit: number; startingAfter?: string | undefined }>(
  request: PageRequest<Filter>,
  cursor: { find: (value: string) => Promise<unknown>; what: string },
  list: (filter: Filter) => Promise<Row[]>,
): Promise<Page<Row>> {
  const limit = request.limit ?? DEFAULT_PAGE_SIZE;
  await checkCursor(request.startingAfter, cursor.find, cursor.what);
  return toPage(await list({ ...request, limit } as Filter), limit);
}
