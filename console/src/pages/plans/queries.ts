import { useQuery } from '@tanstack/react-query';
import { catalogApi } from '../../api/catalog.ts';
import { collectPages } from '../../api/pages.ts';
import { subscribersApi } from '../../api/subscribers.ts';

export const PLANS_KEY = ['plans'] as const;
export const PLAN_COUNTS_KEY = ['plan-subscriber-counts'] as const;

export const usePlans = () => useQuery({ queryKey: PLANS_KEY, queryFn: catalogApi.plans });

/** Beyond this many subscribers the browser stops counting (one request per subscriber). */
const MAX_COUNTED_SUBSCRIBERS = 500;
const PARALLEL_REQUESTS = 4;

export interface PlanSubscriberCounts {
  byPlan: Map<string, number>;
  /** False when the organization has more subscribers than were counted. */
  complete: boolean;
  subscribersCounted: number;
}

/**
 * Active subscribers per plan. The API has no per-plan count or subscriptions-by-plan list, so this walks the
 * subscriber list and asks each subscriber's active subscriptions (a subscriber counts once per plan).
 */
async function countSubscribersPerPlan(): Promise<PlanSubscriberCounts> {
  const subscribers = await collectPages(
    async (query) => {
      const page = await subscribersApi.list(query);
      return { items: page.subscribers, hasMore: page.has_more };
    },
    (subscriber) => subscriber.subscriber_id,
    MAX_COUNTED_SUBSCRIBERS,
  );
  const byPlan = new Map<string, number>();
  const queue = [...subscribers.items];
  const worker = async () => {
    for (let next = queue.shift(); next; next = queue.shift()) {
      const page = await subscribersApi.subscriptions(next.subscriber_id, { status: 'active' });
      for (const plan of new Set(page.subscriptions.map((s) => s.plan_id)))
        byPlan.set(plan, (byPlan.get(plan) ?? 0) + 1);
    }
  };
  await Promise.all(Array.from({ length: PARALLEL_REQUESTS }, worker));
  return { byPlan, complete: subscribers.complete, subscribersCounted: subscribers.items.length };
}

export const usePlanSubscriberCounts = () =>
  useQuery({ queryKey: PLAN_COUNTS_KEY, queryFn: countSubscribersPerPlan, staleTime: 30_000 });
