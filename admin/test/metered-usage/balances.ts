import { expect } from 'vitest';
import type { MeteredReset } from '@ent/common/db/database';
import type { RedisClient } from '@ent/common/redis/connect';
import { meteredMember, type RedisKeys } from '@ent/common/redis/keys';
import type { AdminTestContext, TestOrganization } from '../../../test-support/admin-context.ts';
import { caller } from '../../../test-support/identity-context.ts';

/**
 * What the gateway's usage scripts leave in Redis after a change (decisions.md, "Metered usage: how it is built"):
 * the balance hash with its figures, its member in the organization's dirty set, the organization in the global one.
 */
export async function changeBalance(
  redis: RedisClient,
  keys: RedisKeys,
  organizationId: string,
  balance: { subscriberId: string; feature: string; periodStartMs: number; periodEndMs: number | null },
  figures: { used: number; revision: number },
): Promise<string> {
  const member = meteredMember(balance.subscriberId, balance.feature, balance.periodStartMs);
  await redis.hset(keys.meteredBalance(organizationId, member), {
    u: figures.used,
    r: figures.revision,
    e: balance.periodEndMs === null ? '' : balance.periodEndMs,
  });
  await redis.sadd(keys.meteredDirty(organizationId), member);
  await redis.sadd(keys.meteredDirtyOrganizations, organizationId);
  return member;
}

/** A metered feature granted by a plan the subscriber is subscribed to, made through the API. */
export async function meteredSubscriber(
  ctx: AdminTestContext,
  org: TestOrganization,
  options: { subscriberId: string; feature: string; limit: number | null; reset?: MeteredReset },
): Promise<void> {
  const api = caller(ctx, org.api_key);
  const feature = await api.post('/org/features', {
    key: options.feature,
    name: options.feature,
    kind: 'metered',
  });
  expect(feature.statusCode, feature.body).toBe(201);
  const planKey = `plan-${options.feature}`;
  const plan = await api.post('/org/plans', {
    key: planKey,
    name: planKey,
    kind: 'catalog',
    grants: [
      { feature: options.feature, kind: 'metered', limit: options.limit, reset: options.reset ?? 'month' },
    ],
  });
  expect(plan.statusCode, plan.body).toBe(201);
  const subscriber = await api.post('/org/subscribers', { subscriber_id: options.subscriberId });
  expect([201, 409]).toContain(subscriber.statusCode);
  const subscription = await api.post(`/org/subscribers/${options.subscriberId}/subscriptions`, {
    plan_id: planKey,
  });
  expect(subscription.statusCode).toBe(201);
}

/** The row metered_usage holds for a balance, or undefined. */
export const persistedRow = (
  ctx: AdminTestContext,
  organizationId: string,
  subscriberId: string,
  feature: string,
  periodStartMs: number,
) =>
  ctx.db
    .selectFrom('metered_usage')
    .select(['used', 'revision', 'period_end'])
    .where('organization_id', '=', organizationId)
    .where('subscriber_id', '=', subscriberId)
    .where('feature_key', '=', feature)
    .where('period_start', '=', new Date(periodStartMs))
    .executeTakeFirst();
