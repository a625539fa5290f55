import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { resolveAll } from '@ent/common/resolve/resolve';
import type { CatalogDoc, OverrideValue, SubscriberDoc } from '@ent/common/snapshots/documents';
import { catalogArbitrary } from '../../../test-support/catalog-arbitrary.ts';
import { Value } from '@sinclair/typebox/value';
import { CheckResultSchema, EntitlementListSchema } from '@ent/contract/evals';
import { OfrepBulkSuccess, OfrepSuccess } from '@ent/contract/ofrep';
import { CatalogEntry, EVERY_FEATURE, SubscriberEntry } from '../../src/features/shared/entries.ts';
import { toOfrep } from '../../src/features/ofrep/routes.ts';
import { proMeteredCatalog, proSubscriber } from '../../../test-support/metered-documents.ts';

/**
 * Subscribers of one catalog version share plan sets and their serialized answers: whatever order they are
 * built and asked in, each must answer exactly what `resolveAll` (the definition) answers for its own
 * documents: no override, expiry or plan of one subscriber may show in another's answer.
 */
const NOW = Date.UTC(2026, 10, 23, 12);
const featureKeys = ['a', 'b', 'c', 'd', 'e'];
const limitArb = fc.option(fc.nat({ max: 100 }), { nil: null });
const catalogArb = catalogArbitrary(featureKeys, 100);

/** Any override, including a kind the feature no longer has and features the catalog does not hold. */
const overrideArb: fc.Arbitrary<OverrideValue> = fc.oneof(
  fc.record({
    kind: fc.constant('flag' as const),
    allowed: fc.boolean(),
    expiresAt: fc.option(fc.integer({ min: NOW - 3000, max: NOW + 3000 }), { nil: null }),
  }),
  fc.record({
    kind: fc.constant('limit' as const),
    limit: limitArb,
    expiresAt: fc.option(fc.integer({ min: NOW - 3000, max: NOW + 3000 }), { nil: null }),
  }),
);

const subscriberArb = (planIds: string[]): fc.Arbitrary<SubscriberDoc> =>
  fc.record({
    exists: fc.constant(true),
    plans: planIds.length ? fc.array(fc.constantFrom(...planIds), { maxLength: 3 }) : fc.constant([]),
    overrides: fc.oneof(
      { weight: 2, arbitrary: fc.constant({}) },
      {
        weight: 3,
        arbitrary: fc.dictionary(fc.constantFrom(...featureKeys, 'gone'), overrideArb, { maxKeys: 3 }),
      },
    ),
  });

const worldArb = catalogArb.chain((catalog) =>
  fc.record({
    catalog: fc.constant(catalog),
    subscribers: fc.array(subscriberArb(Object.keys(catalog.plans)), { minLength: 2, maxLength: 12 }),
    /** Which subscriber asks what, in which order, and when. */
    asks: fc.array(
      fc.record({
        who: fc.nat(),
        what: fc.oneof(fc.constantFrom(...featureKeys, 'gone'), fc.constant(EVERY_FEATURE)),
        at: fc.integer({ min: NOW, max: NOW + 4000 }),
      }),
      { minLength: 1, maxLength: 40 },
    ),
  }),
);

const expected = (catalog: CatalogDoc, doc: SubscriberDoc, nowMs: number) => resolveAll(catalog, doc, nowMs);

describe('shared subscriber entries', () => {
  it("answer exactly what resolveAll answers for each subscriber's own documents, in any order", () => {
    fc.assert(
      fc.property(worldArb, ({ catalog, subscribers, asks }) => {
        const catalogEntry = new CatalogEntry(7, catalog);
        const entries = subscribers.map((doc, i) => SubscriberEntry.of(catalogEntry, i + 1, doc, NOW, null));
        // Time only moves forward for an entry, as it does in the gateway.
        const clock = entries.map(() => NOW);
        for (const { who, what, at } of asks) {
          const i = who % entries.length;
          clock[i] = Math.max(clock[i]!, at);
          const now = clock[i]!;
          const entry = entries[i]!.refreshAt(now);
          const truth = expected(catalog, subscribers[i]!, now);
          if (what === EVERY_FEATURE) {
            expect(entry.results()).toEqual(truth.results);
            expect(entry.serialized('\u0000all', EVERY_FEATURE, () => JSON.stringify(entry.results()))).toBe(
              JSON.stringify(truth.results),
            );
          } else {
            const result = entry.result(what);
            expect(result).toEqual(truth.byFeature.get(what));
            // The check route's path (`serializedResult`), under a key of its own so both caches are exercised.
            const expectedJson = truth.byFeature.has(what)
              ? JSON.stringify(truth.byFeature.get(what))
              : undefined;
            expect(entry.serializedResult(`check:${what}`, what, (r) => JSON.stringify(r))).toBe(
              expectedJson,
            );
            if (result) {
              expect(entry.serialized(what, what, () => JSON.stringify(result))).toBe(
                JSON.stringify(truth.byFeature.get(what)),
              );
            }
          }
        }
      }),
      { numRuns: 300 },
    );
  });

  it('subscribers without overrides share one plan set and one serialized answer; others keep only their overrides', () => {
    const catalog: CatalogDoc = {
      features: { seats: 'limit', sso: 'flag' },
      plans: { basic: { archived: false, grants: { seats: { kind: 'limit', limit: 3 } } } },
    };
    const catalogEntry = new CatalogEntry(1, catalog);
    const plain = (plans: string[]): SubscriberDoc => ({ exists: true, plans, overrides: {} });
    const a = SubscriberEntry.of(catalogEntry, 1, plain(['basic']), NOW, null);
    const b = SubscriberEntry.of(catalogEntry, 1, plain(['basic', 'basic']), NOW, null);
    const withOverride = SubscriberEntry.of(
      catalogEntry,
      1,
      {
        exists: true,
        plans: ['basic'],
        overrides: { seats: { kind: 'limit', limit: 40, expiresAt: NOW + 1000 } },
      },
      NOW,
      null,
    );
    expect(a.planSet).toBe(b.planSet);
    expect(a.subscriber).toBe(b.subscriber);
    expect(withOverride.planSet).toBe(a.planSet);
    expect(a.serialized('seats', 'seats', () => 'first')).toBe('first');
    expect(b.serialized('seats', 'seats', () => 'second')).toBe('first');
    // The override subscriber's own answer is never taken from, nor written to, the shared cache.
    expect(withOverride.serialized('seats', 'seats', () => 'own')).toBe('own');
    expect(a.serialized('seats', 'seats', () => 'third')).toBe('first');
    expect(withOverride.result('seats')).toMatchObject({ limit: 40, source: 'override' });
    // Once the override expires, its answers are the plan set's again.
    expect(withOverride.refreshAt(NOW + 1000).result('seats')).toMatchObject({ limit: 3, source: 'plan' });
    expect(withOverride.serialized('seats', 'seats', () => 'own')).toBe('first');
    expect(withOverride.bytes(30)).toBeGreaterThan(a.bytes(30));
  });

  it("counts a subscriber's credits in the cache's bound, with what its metered answers build from them", () => {
    const catalogEntry = new CatalogEntry(
      1,
      proMeteredCatalog({ 'api-calls': { limit: 100 }, exports: { limit: 5 } }),
    );
    const credit = (feature: string, i: number) => ({
      id: `cr_${feature}_${i}`,
      amount: 100_000_000_000,
      priority: 10,
      effectiveAt: NOW - 1000,
      expiresAt: NOW + 86_400_000 + i,
      createdAt: NOW - 2000,
    });
    const holding = (perFeature: number, features: string[]) =>
      SubscriberEntry.of(
        catalogEntry,
        1,
        {
          ...proSubscriber,
          credits: Object.fromEntries(
            features.map((feature) => [
              feature,
              Array.from({ length: perFeature }, (_, i) => credit(feature, i)),
            ]),
          ),
        },
        NOW,
        null,
      ).bytes(30);
    const none = holding(0, ['api-calls']);
    const five = holding(5, ['api-calls']);
    // What `npm run bench -- memory-credits` measured for a feature of five credits, held and answered: about 3.7 KB
    // (its document's credits with them). Counted before any consume, and again for a second credited feature.
    expect(five - none).toBeGreaterThanOrEqual(3500);
    // A second credited feature counts its credits too (its terms, counted apart while it held none, now with them).
    expect(holding(5, ['api-calls', 'exports']) - five).toBeGreaterThanOrEqual(3500 - 400);
    expect(holding(10, ['api-calls']) - five).toBeGreaterThan(0);
  });

  it('counts the rollover credit a rolling-over grant lists, before the worker has stored it', () => {
    const catalogEntry = new CatalogEntry(
      1,
      proMeteredCatalog({ 'api-calls': { limit: 100, rollover: 50 }, exports: { limit: 5 } }),
    );
    const subscribedAt = { pro: NOW - 86_400_000 * 40 };
    const bytes = (doc: SubscriberDoc) => SubscriberEntry.of(catalogEntry, 1, doc, NOW, null).bytes(30);
    const rollingOver = bytes({ ...proSubscriber, subscribedAt });
    const stored = {
      id: 'cr_ro_1',
      amount: 20,
      priority: 10,
      effectiveAt: NOW - 1000,
      expiresAt: NOW + 1000,
      createdAt: NOW - 1000,
    };
    const withStored = bytes({ ...proSubscriber, subscribedAt, credits: { 'api-calls': [stored] } });
    const noRollover = SubscriberEntry.of(
      new CatalogEntry(1, proMeteredCatalog({ 'api-calls': { limit: 100 }, exports: { limit: 5 } })),
      1,
      { ...proSubscriber, subscribedAt },
      NOW,
      null,
    ).bytes(30);
    // The placeholder costs what a stored credit's answers cost; once stored, it is counted as a credit (its document
    // too), not twice.
    expect(rollingOver - noRollover).toBeGreaterThanOrEqual(1000);
    expect(withStored - rollingOver).toBeGreaterThan(0);
    expect(withStored - rollingOver).toBeLessThan(rollingOver - noRollover);
  });

  it('counts the metered terms a subscriber with its own document keeps, once per feature its plans grant', () => {
    const grants = (features: string[], anchor: 'calendar' | 'subscription') =>
      Object.fromEntries(features.map((feature) => [feature, { limit: 100, anchor }]));
    const catalogOf = (features: string[], anchor: 'calendar' | 'subscription' = 'subscription') => {
      const doc = proMeteredCatalog(grants(features, anchor));
      // A second plan granting the same features: a subscriber of both keeps one set of terms per feature.
      return new CatalogEntry(1, { ...doc, plans: { ...doc.plans, team: doc.plans.pro! } });
    };
    const bytes = (entry: CatalogEntry, doc: SubscriberDoc) =>
      SubscriberEntry.of(entry, 1, doc, NOW, null).bytes(30);
    const own: SubscriberDoc = { ...proSubscriber, subscribedAt: { pro: NOW - 86_400_000 } };
    const one = bytes(catalogOf(['api-calls']), own);
    const three = bytes(catalogOf(['api-calls', 'exports', 'seats']), own);
    // Measured per further metered feature such a subscriber consumes: about 144 B (entries.ts, KEPT_TERMS_BYTES).
    expect(three - one).toBeGreaterThanOrEqual(2 * 140);
    const bothPlans: SubscriberDoc = {
      ...own,
      plans: ['pro', 'team'],
      subscribedAt: { pro: NOW, team: NOW },
    };
    expect(bytes(catalogOf(['api-calls', 'exports', 'seats']), bothPlans) - three).toBeLessThan(three - one);
    // A feature whose terms count with its credits, or that an override decides (never kept), adds no terms: granted
    // or not, the subscriber costs the same.
    const credit = {
      id: 'cr_1',
      amount: 5,
      priority: 1,
      effectiveAt: NOW - 1000,
      expiresAt: null,
      createdAt: NOW,
    };
    const overridden: SubscriberDoc = {
      ...own,
      overrides: { seats: { kind: 'metered', limit: 9, expiresAt: null } },
    };
    for (const doc of [{ ...own, credits: { seats: [credit] } }, overridden])
      expect(bytes(catalogOf(['api-calls', 'exports', 'seats']), doc)).toBe(
        bytes(catalogOf(['api-calls', 'exports']), doc),
      );
    // A plan set's subscriber shares its document's terms with every other: nothing is counted per subscriber.
    expect(bytes(catalogOf(['api-calls', 'exports', 'seats'], 'calendar'), proSubscriber)).toBe(
      bytes(catalogOf(['api-calls'], 'calendar'), proSubscriber),
    );
  });

  it('serialize to what the response schemas of the routes and the OpenAPI document say', () => {
    fc.assert(
      fc.property(worldArb, ({ catalog, subscribers }) => {
        const catalogEntry = new CatalogEntry(1, catalog);
        subscribers.forEach((doc, i) => {
          const entry = SubscriberEntry.of(catalogEntry, 1, doc, NOW, null);
          const results = entry.results();
          for (const result of results) {
            expect(Value.Check(CheckResultSchema, JSON.parse(JSON.stringify(result)))).toBe(true);
            expect(Value.Check(OfrepSuccess, JSON.parse(JSON.stringify(toOfrep(result))))).toBe(true);
          }
          const list = { subscriber_id: `s${i}`, entitlements: results };
          expect(Value.Check(EntitlementListSchema, JSON.parse(JSON.stringify(list)))).toBe(true);
          expect(Value.Check(OfrepBulkSuccess, { flags: results.map(toOfrep) })).toBe(true);
        });
      }),
      { numRuns: 100 },
    );
  });
});
