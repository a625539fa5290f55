import type { CatalogDoc, CreditDoc, MeteredGrant, SubscriberDoc } from '@ent/common/snapshots/documents';

const HOUR = 3_600_000;

/**
 * A catalog of one plan, `pro`, granting each of these metered features: reset monthly on the calendar, hard and
 * without rollover unless the grant says otherwise.
 */
export function proMeteredCatalog(
  grants: Record<string, Pick<MeteredGrant, 'limit'> & Partial<Omit<MeteredGrant, 'kind'>>>,
): CatalogDoc {
  const features = Object.keys(grants);
  return {
    features: Object.fromEntries(features.map((feature) => [feature, 'metered' as const])),
    plans: {
      pro: {
        archived: false,
        grants: Object.fromEntries(
          features.map((feature): [string, MeteredGrant] => [
            feature,
            {
              kind: 'metered',
              reset: 'month',
              anchor: 'calendar',
              soft: false,
              rollover: null,
              ...grants[feature]!,
            },
          ]),
        ),
      },
    },
  };
}

/** A subscriber of `pro` and nothing else. */
export const proSubscriber: SubscriberDoc = { exists: true, plans: ['pro'], overrides: {} };

/**
 * Two credits, in spending order: a promotion of 5 (priority 1) live from `startMs` + 1 h to `startMs` + 3 h, then a
 * top-up of 3 (priority 10) that never expires.
 */
export function promotionAndTopUp(startMs: number): { promo: CreditDoc; topUp: CreditDoc } {
  return {
    promo: {
      id: 'cr_promo',
      amount: 5,
      priority: 1,
      effectiveAt: startMs + HOUR,
      expiresAt: startMs + 3 * HOUR,
      createdAt: startMs - HOUR,
    },
    topUp: {
      id: 'cr_topup',
      amount: 3,
      priority: 10,
      effectiveAt: startMs - HOUR,
      expiresAt: null,
      createdAt: startMs - 2 * HOUR,
    },
  };
}

/**
 * The give-back tests' world: plan pro's calls (hard, 10) and soft (soft, 10) in March 2026, and alice holding the
 * promotion (spent first, live from start + 1 h to start + 3 h) and the top-up (never expires) on calls.
 */
export function aliceWithCredits(): {
  start: number;
  catalog: CatalogDoc;
  alice: SubscriberDoc;
  /** alice's balance members of calls and soft in March. */
  calls: string;
  soft: string;
} {
  const start = Date.parse('2026-03-10T00:00:00Z');
  const march = Date.parse('2026-03-01T00:00:00Z');
  const { promo, topUp } = promotionAndTopUp(start);
  return {
    start,
    catalog: proMeteredCatalog({ calls: { limit: 10 }, soft: { limit: 10, soft: true } }),
    alice: { exists: true, plans: ['pro'], overrides: {}, credits: { calls: [topUp, promo] } },
    calls: `alice|calls|${march}`,
    soft: `alice|soft|${march}`,
  };
}
