import { expect } from 'vitest';
import { newId } from '@ent/common/ids';
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

/**
 * A metered feature granted by a plan the subscriber is subscribed to. The feature and its grant go straight into
 * Postgres (what the catalog routes write for a metered feature); the subscriber and its subscription through the API.
 */
export async function meteredSubscriber(
  ctx: AdminTestContext,
  org: TestOrganization,
  options: { subscriberId: string; feature: string; limit: number | null; reset?: MeteredReset },
): Promise<void> {
  const featureId = newId('feat');
  await ctx.db
    .insertInto('features')
    .values({
      id: featureId,
      organization_id: org.organization_id,
      key: options.feature,
      name: options.feature,
      kind: 'metered',
    })
    .execute();
  const api = caller(ctx, org.api_key);
  const planKey = `plan-${options.feature}`;
  expect((await api.post('/org/plans', { key: planKey, name: planKey, kind: 'catalog' })).statusCode).toBe(
    201,
  );
  const plan = await ctx.db
    .selectFrom('plans')
    .select('id')
    .where('organization_id', '=', org.organization_id)
    .where('key', '=', planKey)
    .executeTakeFirstOrThrow();
  await ctx.db
    .insertInto('plan_grants')
    .values({
      plan_id: plan.id,
      feature_id: featureId,
      feature_kind: 'metered',
      limit_value: options.limit,
      reset: options.reset ?? 'month',
      reset_anchor: 'calendar',
      soft: false,
    })
    .execute();
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
