import { api, request, segment, type Query } from './client.ts';
import type { CreateCreditBody } from '@ent/contract/credits';
import type { PutOverrideBody } from '@ent/contract/overrides';
import type { ChangeSubscriptionBody } from '@ent/contract/subscriptions';
import type {
  ChangedSubscription,
  Credit,
  EntitlementList,
  MeteredUsage,
  Override,
  Page,
  Subscriber,
  SubscriberUsage,
  Subscription,
  UsagePeriod,
} from './types.ts';

const subscriberPath = (id: string) => `/org/subscribers/${segment(id)}`;

export type PutOverrideInput = PutOverrideBody;

export const subscribersApi = {
  /** One page in id order; `search` keeps those whose id starts with it or whose name contains it. */
  list: (query: Query) => api.get<Page & { subscribers: Subscriber[] }>('/org/subscribers', query),
  get: (id: string) => api.get<Subscriber>(subscriberPath(id)),
  create: (input: { subscriber_id: string; name?: string | null }) =>
    api.post<Subscriber>('/org/subscribers', input),
  update: (id: string, input: { name: string | null }) => api.patch<Subscriber>(subscriberPath(id), input),

  subscriptions: (id: string, query: Query = {}) =>
    api.get<Page & { subscriptions: Subscription[] }>(`${subscriberPath(id)}/subscriptions`, {
      limit: 100,
      ...query,
    }),
  subscribe: (id: string, planKey: string) =>
    api.post<Subscription>(`${subscriberPath(id)}/subscriptions`, { plan_id: planKey }),
  changeSubscription: (id: string, input: ChangeSubscriptionBody) =>
    api.post<ChangedSubscription>(`${subscriberPath(id)}/subscriptions/change`, input),
  cancelSubscription: (id: string, subscriptionId: string) =>
    api.post<Subscription>(`${subscriberPath(id)}/subscriptions/${segment(subscriptionId)}/cancel`),

  overrides: (id: string, includeExpired: boolean, startingAfter?: string) =>
    api.get<Page & { overrides: Override[] }>(`${subscriberPath(id)}/overrides`, {
      limit: 100,
      include_expired: includeExpired,
      starting_after: startingAfter,
    }),
  putOverride: (id: string, featureKey: string, input: PutOverrideInput) =>
    api.put<Override>(`${subscriberPath(id)}/overrides/${segment(featureKey)}`, input),
  deleteOverride: (id: string, featureKey: string) =>
    api.delete(`${subscriberPath(id)}/overrides/${segment(featureKey)}`),

  /** An eval, answered by the gateway and metered like any other (docs/console-api.md). */
  entitlements: (id: string) => api.get<EntitlementList>(`${subscriberPath(id)}/entitlements`, { all: true }),

  /** Every metered feature's current period (DESIGN.md §5); a read, not an eval. */
  usage: (id: string) => api.get<SubscriberUsage>(`${subscriberPath(id)}/usage`),
  /** A metered feature's ended periods, newest first (`starting_after` is a period_start). */
  usagePeriods: (id: string, featureKey: string, query: Query = {}) =>
    api.get<Page & { periods: UsagePeriod[] }>(`${subscriberPath(id)}/usage/${segment(featureKey)}/periods`, {
      limit: 10,
      ...query,
    }),
  /** Credits on metered features, newest first (DESIGN.md §5 "Credits"). */
  credits: (id: string, query: Query = {}) =>
    api.get<Page & { credits: Credit[] }>(`${subscriberPath(id)}/credits`, { limit: 20, ...query }),
  createCredit: (id: string, input: CreateCreditBody) =>
    api.post<Credit>(`${subscriberPath(id)}/credits`, input),
  /** What the credit gave stays spent; voiding it again answers it unchanged. */
  voidCredit: (id: string, creditId: string) =>
    request<Credit>('DELETE', `${subscriberPath(id)}/credits/${segment(creditId)}`),

  /** A correction: the current period's `used` becomes this (audited from -> to). */
  correctUsage: (id: string, featureKey: string, used: number) =>
    api.put<MeteredUsage>(`${subscriberPath(id)}/usage/${segment(featureKey)}`, { used }),
};
