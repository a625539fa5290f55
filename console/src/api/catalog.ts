import { api, segment, type Query } from './client.ts';
import { collectPages } from './pages.ts';
import type { CreateFeatureBody, UpdateFeatureBody } from '@ent/contract/features';
import type { Feature, Grant, Page, Plan, PlanKind } from './types.ts';

export type CreateFeatureInput = CreateFeatureBody;

export interface CreatePlanInput {
  key: string;
  name: string;
  kind: PlanKind;
  grants: Grant[];
}

const featurePage = (query: Query) => api.get<Page & { features: Feature[] }>('/org/features', query);
const planPage = (query: Query) => api.get<Page & { plans: Plan[] }>('/org/plans', query);

export const catalogApi = {
  /** Every feature (the catalog is small: a few hundred at most), in key order. */
  features: async () =>
    collectPages(
      async (query) => {
        const page = await featurePage(query);
        return { items: page.features, hasMore: page.has_more };
      },
      (feature) => feature.key,
    ),
  createFeature: (input: CreateFeatureInput) => api.post<Feature>('/org/features', input),
  updateFeature: (key: string, input: UpdateFeatureBody) =>
    api.patch<Feature>(`/org/features/${segment(key)}`, input),

  /** Every plan in key order; with `subscriberCounts`, each carries `subscriber_count` (one count per page). */
  plans: async (options: { subscriberCounts?: boolean } = {}) =>
    collectPages(
      async (query) => {
        const include = options.subscriberCounts ? 'subscriber_count' : undefined;
        const page = await planPage({ ...query, include });
        return { items: page.plans, hasMore: page.has_more };
      },
      (plan) => plan.key,
    ),
  plan: (key: string) => api.get<Plan>(`/org/plans/${segment(key)}`),
  createPlan: (input: CreatePlanInput) => api.post<Plan>('/org/plans', input),
  /** SPEC: PATCH with `grants` replaces the plan's whole grant list. */
  updatePlan: (key: string, input: { name?: string; grants?: Grant[] }) =>
    api.patch<Plan>(`/org/plans/${segment(key)}`, input),
  archivePlan: (key: string) => api.post<Plan>(`/org/plans/${segment(key)}/archive`),
  unarchivePlan: (key: string) => api.post<Plan>(`/org/plans/${segment(key)}/unarchive`),
  deletePlan: (key: string) => api.delete(`/org/plans/${segment(key)}`),
};
