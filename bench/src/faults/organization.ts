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
      { feature: METERED_CONSUMED, kind: 'metered', limit: METERED_LIMIT },
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
