import { useInfiniteQuery, useQuery, useQueryClient } from '@tanstack/react-query';
import { subscribersApi } from '../../api/subscribers.ts';
import { SUBSCRIBER_READS_KEY } from '../catalog-written.ts';
import { PLAN_COUNTS_KEY } from '../plans/queries.ts';

export const SUBSCRIBERS_KEY = ['subscribers'] as const;
const subscriberKey = (id: string) => [...SUBSCRIBER_READS_KEY, id] as const;

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

/** A subscriber's overrides, by feature key, 100 a page (`starting_after`: an override's id). */
export const useOverrides = (id: string, includeExpired: boolean) =>
  useInfiniteQuery({
    queryKey: [...subscriberKey(id), 'overrides', includeExpired],
    queryFn: ({ pageParam }) => subscribersApi.overrides(id, includeExpired, pageParam),
    initialPageParam: undefined as string | undefined,
    getNextPageParam: (page) => (page.has_more ? page.overrides.at(-1)?.id : undefined),
  });

export const useEntitlements = (id: string) =>
  useQuery({
    queryKey: [...subscriberKey(id), 'entitlements'],
    queryFn: () => subscribersApi.entitlements(id),
  });

/**
 * How often the open subscriber page reads its metered usage again. The figures live on the gateways: the
 * customer's backend moves them at any time, and a write answered before its snapshot reached Redis (a write-through
 * that failed, which the outbox relay delivers within seconds: docs/decisions.md) is read stale right after its
 * answer. Reading the usage is not an eval, so it costs the organization nothing.
 */
const USAGE_REFRESH_MS = 5_000;

export const useSubscriberUsage = (id: string) =>
  useQuery({
    queryKey: [...subscriberKey(id), 'usage'],
    queryFn: () => subscribersApi.usage(id),
    refetchInterval: USAGE_REFRESH_MS,
  });

/** A metered feature's ended periods, newest first, a page at a time. */
export const useUsagePeriods = (id: string, featureKey: string) =>
  useInfiniteQuery({
    queryKey: [...subscriberKey(id), 'usage', featureKey, 'periods'],
    queryFn: ({ pageParam }) => subscribersApi.usagePeriods(id, featureKey, { starting_after: pageParam }),
    initialPageParam: undefined as string | undefined,
    getNextPageParam: (page) => (page.has_more ? page.periods.at(-1)?.period_start : undefined),
  });

/** The key of a subscriber's credits: read again with the usage, whose spending moves what they have left. */
export const creditsKey = (id: string) => [...subscriberKey(id), 'credits'] as const;

/** A subscriber's credits, newest first, a page at a time (`starting_after` is a credit id). */
export const useCredits = (id: string) =>
  useInfiniteQuery({
    queryKey: creditsKey(id),
    queryFn: ({ pageParam }) => subscribersApi.credits(id, { starting_after: pageParam }),
    initialPageParam: undefined as string | undefined,
    getNextPageParam: (page) => (page.has_more ? page.credits.at(-1)?.credit_id : undefined),
  });

/**
 * The reads the gateways answer, from the snapshots admin publishes to Redis (the others are admin's, Postgres's), that
 * a write may leave stale for a moment; the usage is read again every USAGE_REFRESH_MS anyway.
 */
const GATEWAY_READS = ['entitlements'] as const;
type GatewayRead = (typeof GATEWAY_READS)[number];

/**
 * When a gateway-served read that came back unchanged after a write is read once more. A write is published to
 * the gateways before its 2xx while Redis answers in time; when that write-through fails the write still answers
 * 2xx and the outbox relay publishes it (admin's own pass 0.5 s later, the worker's every 0.5 s, backing off to
 * 5 s), so the read made right after the answer can be the one from before the write.
 */
const FOLLOW_UP_READS_MS = [1_000, 4_000] as const;

/**
 * After any write to a subscriber: its subscriptions, overrides and "what it gets" are read again, by reads sent
 * after the write's answer (never an earlier read still on its way). A gateway-served
 * read whose answer is the same as before the write (React Query keeps the same object for an equal answer) may
 * have come before the write reached the gateways: it is read again at each FOLLOW_UP_READS_MS until it changes.
 * The plan list with subscriber counts is dropped rather than marked stale: a stale query still shows its data
 * while it is read again, so the plans page opened next would show the counts from before the subscription until
 * the new ones came. `followUps`: the gateway reads the write can change (none for a rename).
 */
export function useSubscriberChanged(
  id: string,
  followUps: readonly GatewayRead[] = GATEWAY_READS,
): () => Promise<void> {
  const queryClient = useQueryClient();
  return async () => {
    const keyOf = (read: GatewayRead) => [...subscriberKey(id), read];
    const before = followUps.map((read) => queryClient.getQueryData(keyOf(read)));
    // A read still on its way was sent before this write's answer and may answer what was there before it. React
    // Query's invalidation only cancels an in-flight read of a query that has data: one without (the page opened
    // just before the write) would be joined, its old answer kept, and nothing read again. Cancelled first, every
    // read below is sent after the write's answer.
    await Promise.all([
      queryClient.cancelQueries({ queryKey: subscriberKey(id) }),
      queryClient.cancelQueries({ queryKey: SUBSCRIBERS_KEY }),
    ]);
    await Promise.all([
      queryClient.invalidateQueries({ queryKey: subscriberKey(id) }),
      queryClient.invalidateQueries({ queryKey: SUBSCRIBERS_KEY }),
      queryClient.resetQueries({ queryKey: PLAN_COUNTS_KEY }),
    ]);
    followUps.forEach((read, i) => {
      const unchanged = () => before[i] !== undefined && queryClient.getQueryData(keyOf(read)) === before[i];
      for (const ms of FOLLOW_UP_READS_MS) {
        setTimeout(() => {
          if (unchanged()) void queryClient.invalidateQueries({ queryKey: keyOf(read), exact: true });
        }, ms);
      }
    });
  };
}
