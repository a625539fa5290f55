/** What LoadMore reads of an infinite query. */
interface NextPage {
  hasNextPage: boolean;
  isFetchingNextPage: boolean;
  fetchNextPage: () => Promise<unknown>;
}

/** A paged list's footer: fetches the next page while there is one; `loadingLabel` stands in meanwhile. */
export function LoadMore({
  query,
  label,
  loadingLabel,
}: {
  query: NextPage;
  label: string;
  loadingLabel?: string;
}) {
  if (!query.hasNextPage) return null;
  return (
    <button
      type="button"
      className="button"
      disabled={query.isFetchingNextPage}
      onClick={() => void query.fetchNextPage()}
    >
      {query.isFetchingNextPage && loadingLabel ? loadingLabel : label}
    </button>
  );
}
