import { useQuery } from '@tanstack/react-query';
import { catalogApi } from '../../api/catalog.ts';

export const PLANS_KEY = ['plans'] as const;
/** Under PLANS_KEY, so a plan write (which invalidates PLANS_KEY) refreshes the counted list too. */
export const PLAN_COUNTS_KEY = [...PLANS_KEY, 'with-subscriber-counts'] as const;

export const usePlans = () => useQuery({ queryKey: PLANS_KEY, queryFn: () => catalogApi.plans() });

/** Every plan with its active subscription count (`include=subscriber_count`: one grouped count per page). */
export const usePlansWithCounts = () =>
  useQuery({ queryKey: PLAN_COUNTS_KEY, queryFn: () => catalogApi.plans({ subscriberCounts: true }) });
