import type { Query } from './client.ts';

/** Walks a cursor-paginated list (`starting_after` = the last item's cursor) up to `max` items. */
export async function collectPages<T>(
  fetchPage: (query: Query) => Promise<{ items: T[]; hasMore: boolean }>,
  cursorOf: (item: T) => string,
  max = 1000,
): Promise<{ items: T[]; complete: boolean }> {
  const items: T[] = [];
  let startingAfter: string | undefined;
  for (;;) {
    const page = await fetchPage({ limit: 100, starting_after: startingAfter });
    items.push(...page.items);
    const last = page.items.at(-1);
    if (!page.hasMore || !last) return { items, complete: true };
    if (items.length >= max) return { items, complete: false };
    startingAfter = cursorOf(last);
  }
}
