import { useInfiniteQuery, useQuery, useQueryClient } from '@tanstack/react-query';
import { subscribersApi } from '../../api/subscribers.ts';
import { PLAN_COUNTS_KEY } from '../plans/queries.ts';

export const SUBSCRIBERS_KEY = ['subscribers'] as const;
const subscriberKey = (id: string) => ['subscriber', id] as const;

export const useSubscriber = (id: string) =>
  useQuery({
    queryKey: [...subscriberKey(id), 'record'],
    queryFn: () => subscribersApi.get(id),
    retry: false,
  });

export const useSubscriptions = (id: string) =>
  useQuery({
    queryKey: [...subscriberKey(id), 'subscriptions'],
    queryFn: () => subscribersApi.subscriptions(id),
  });

export const useOverrides = (id: string, includeExpired: boolean) =>
  useQuery({
    queryKey: [...subscriberKey(id), 'overrides', includeExpired],
    queryFn: () => subscribersApi.overrides(id, includeExpired),
  });

export const useEntitlements = (id: string) =>
  useQuery({
    queryKey: [...subscriberKey(id), 'entitlements'],
    queryFn: () => subscribersApi.entitlements(id),
  });

export const useSubscriberUsage = (id: string) =>
  useQuery({
    queryKey: [...subscriberKey(id), 'usage'],
    queryFn: () => subscribersApi.usage(id),
  });

/** A metered feature's ended periods, newest first, a page at a time. */
export const useUsagePeriods = (id: string, featureKey: string) =>
  useInfiniteQuery({
    queryKey: [...subscriberKey(id), 'usage', featureKey, 'periods'],
    queryFn: ({ pageParam }) => subscribersApi.usagePeriods(id, featureKey, { starting_after: pageParam }),
    initialPageParam: undefined as string | undefined,
    getNextPageParam: (page) => (page.has_more ? page.periods.at(-1)?.period_start : undefined),
  });

/** A subscriber's credits, newest first, a page at a time (`starting_after` is a credit id). */
export const useCredits = (id: string) =>
  useInfiniteQuery({
    queryKey: [...subscriberKey(id), 'credits'],
    queryFn: ({ pageParam }) => subscribersApi.credits(id, { starting_after: pageParam }),
    initialPageParam: undefined as string | undefined,
    getNextPageParam: (page) => (page.has_more ? page.credits.at(-1)?.credit_id : undefined),
  });

/**
 * After any write to a subscriber: its subscriptions, overrides and "what it gets" are read again. The plan list
 * with subscriber counts is dropped rather than marked stale: a stale query still shows its data while it is read
 * again, so the plans page opened next would show the counts from before the subscription until the new ones came.
 */
export function useSubscriberChanged(id: string): () => Promise<void> {
  const queryClient = useQueryClient();
  return async () => {
    await Promise.all([
      queryClient.invalidateQueries({ queryKey: subscriberKey(id) }),
      queryClient.invalidateQueries({ queryKey: SUBSCRIBERS_KEY }),
      queryClient.resetQueries({ queryKey: PLAN_COUNTS_KEY }),
    ]);
  };
}
