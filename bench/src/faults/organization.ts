import { createDb } from '@ent/common/db/connect';
import { saveArrangement } from '@ent/common/metering/arrangement';
import { createOrganization } from '../../../admin/src/features/provisioning/create-organization.ts';
import { expectStatus } from './http.ts';

/** The feature every write and most evals are about. */
export const FEATURE = 'seats';
/** What the plan grants before any override: no write of the run ever uses this value. */
const PLAN_LIMIT = 5;
/** Metered rows (DESIGN.md §5): the feature consumed against a hard limit, and the one reports go to (unlimited). */
export const METERED_CONSUMED = 'api-calls';
export const METERED_REPORTED = 'events';
/** Low enough that the load reaches it during the scenario, so an over-consumption would show. */
export const METERED_LIMIT = 40;
/**
 * Credits rows (issue 35): what each subscriber holds on METERED_CONSUMED besides the allowance, as two credits (a
 * promotion spent first, a top-up that never expires), so the consumes past the allowance spend both in order.
 */
export const FAULT_CREDITS = [
  { name: 'promotion', amount: 12, priority: 5, expiresInMs: 86_400_000 },
  { name: 'top-up', amount: 8, priority: 10, expiresInMs: null },
] as const;
export const FAULT_CREDIT_TOTAL = FAULT_CREDITS.reduce((sum, credit) => sum + credit.amount, 0);
/**
 * A credits row's allowance: small, so that at 10 consumes a second a subscriber is past it and spending its credits
 * when the fault strikes (two seconds in), and a credit spent before the fault and spent again after it would show.
 */
export const CREDITS_ROW_ALLOWANCE = 10;
export const allowanceOf = (credits: boolean | undefined) => (credits ? CREDITS_ROW_ALLOWANCE : METERED_LIMIT);
/**
 * The rollover row (issue 35): a daily allowance anchored on the subscription, whose period boundary the row places
 * about three seconds into the load (rollover-boundary.ts). At 10 consumes a second a subscriber has used about 30
 * of it by then, so the period rolls over something (up to ROLLOVER_MAX), and the next period's allowance and
 * rollover are spent before the load ends, about seven seconds later.
 */
export const ROLLOVER_ROW_ALLOWANCE = 40;
export const ROLLOVER_MAX = 10;

export interface FaultOrganization {
  organizationId: string;
  serviceAccountId: string;
  /** Full access (admin role): writes, usage and the audit log. */
  apiKey: string;
  subscribers: string[];
  /** A check-only key the scenario revokes. */
  victim: { apiKey: string; keyId: string };
}

/**
 * A fresh organization per scenario, so its eval count starts at 0: made in the database like
 * `entctl org create`, a cap high enough never to warn or block (the eval headers still come, which tells
 * metered answers from fail-open ones), a burst limit above the load; its catalog through a gateway.
 */
export async function createFaultOrganization(
  appUrl: string,
  gatewayUrl: string,
  name: string,
  /** Adds the metered features and the plan's metered grants. */
  metered = false,
  /** Gives every subscriber FAULT_CREDITS on the consumed feature. */
  credits = false,
  /** The consumed feature's grant is daily, subscription-anchored, with a rollover of ROLLOVER_MAX (no credits). */
  rollover = false,
): Promise<FaultOrganization> {
  const db = createDb(appUrl, { max: 1 });
  let created;
  try {
    created = await createOrganization(db, name);
    await saveArrangement(db, created.organization_id, {
      plan: 'faults',
      evalLimit: 1_000_000_000,
      blocking: true,
      burstPerSecond: 1_000_000,
    });
  } finally {
    await db.destroy();
  }
  const apiKey = created.api_key;
  const call = (method: 'POST', path: string, body: unknown, status: number) =>
    expectStatus({ method, url: `${gatewayUrl}${path}`, apiKey, body }, status);
  await call('POST', '/org/features', { key: FEATURE, name: 'Seats', kind: 'limit' }, 201);
  const meteredGrants = [];
  if (metered) {
    await call('POST', '/org/features', { key: METERED_CONSUMED, name: 'API calls', kind: 'metered' }, 201);
    await call('POST', '/org/features', { key: METERED_REPORTED, name: 'Events', kind: 'metered' }, 201);
    meteredGrants.push(
      rollover
        ? {
            feature: METERED_CONSUMED,
            kind: 'metered',
            limit: ROLLOVER_ROW_ALLOWANCE,
            reset: 'day',
            reset_anchor: 'subscription',
            rollover: { max: ROLLOVER_MAX },
          }
        : { feature: METERED_CONSUMED, kind: 'metered', limit: allowanceOf(credits) },
      { feature: METERED_REPORTED, kind: 'metered', limit: null },
    );
  }
  await call(
    'POST',
    '/org/plans',
    {
      key: 'basic',
      name: 'Basic',
      kind: 'catalog',
      grants: [{ feature: FEATURE, kind: 'limit', limit: PLAN_LIMIT }, ...meteredGrants],
    },
    201,
  );
  // The writer uses the first four until the fault is over, then the last two (see Writer.redirect).
  const subscribers = ['ann', 'bob', 'cyd', 'dee', 'eve', 'fay'];
  for (const subscriber of subscribers) {
    await call('POST', '/org/subscribers', { subscriber_id: subscriber, name: subscriber }, 201);
    await call('POST', `/org/subscribers/${subscriber}/subscriptions`, { plan_id: 'basic' }, 201);
    for (const credit of credits ? FAULT_CREDITS : []) {
      const expires_at =
        credit.expiresInMs === null ? null : new Date(Date.now() + credit.expiresInMs).toISOString();
      await call(
        'POST',
        `/org/subscribers/${subscriber}/credits`,
        {
          feature: METERED_CONSUMED,
          amount: credit.amount,
          priority: credit.priority,
          name: credit.name,
          expires_at,
        },
        201,
      );
    }
  }
  const victim = (await call(
    'POST',
    `/org/service-accounts/${created.service_account_id}/api-keys`,
    { name: 'victim', scopes: ['check'] },
    201,
  )) as { api_key: string; key_id: string };
  return {
    organizationId: created.organization_id,
    serviceAccountId: created.service_account_id,
    apiKey,
    subscribers,
    victim: { apiKey: victim.api_key, keyId: victim.key_id },
  };
}
