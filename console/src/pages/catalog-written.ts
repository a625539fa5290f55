import { useQueryClient, type QueryKey } from '@tanstack/react-query';

/** Every read of one subscriber's page sits under `[...SUBSCRIBER_READS_KEY, id]` (subscribers/queries.ts). */
export const SUBSCRIBER_READS_KEY = ['subscriber'] as const;

/**
 * After a catalog write (a feature created or renamed, a plan's grants edited, a plan archived): the catalog list
 * `catalogKey` is read again, and every subscriber page's reads are dropped, not marked stale. What a subscriber gets
 * and its usage figures follow from the catalog; a stale query still shows its data while it is read again, so the
 * subscriber page opened next would show the entitlements from before the write until the new ones came.
 */
export function useCatalogWritten(catalogKey: QueryKey): () => Promise<void> {
  const queryClient = useQueryClient();
  return async () => {
    await Promise.all([
      queryClient.invalidateQueries({ queryKey: catalogKey }),
      queryClient.resetQueries({ queryKey: SUBSCRIBER_READS_KEY }),
    ]);
  };
}
