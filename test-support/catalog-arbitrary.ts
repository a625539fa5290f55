import fc from 'fast-check';
import type { CatalogDoc, Grant } from '@ent/common/snapshots/documents';

/**
 * Random catalogs for property tests of resolution: some of `featureKeys` (each a flag or a limit) and up to
 * five plans `plan_0`..., each archived or not, granting a random subset with random limits (null = unlimited).
 */
export function catalogArbitrary(featureKeys: string[], maxLimit: number): fc.Arbitrary<CatalogDoc> {
  const kindArb = fc.constantFrom<'flag' | 'limit'>('flag', 'limit');
  const limitArb = fc.option(fc.nat({ max: maxLimit }), { nil: null });
  return fc
    .tuple(fc.dictionary(fc.constantFrom(...featureKeys), kindArb, { minKeys: 1 }), fc.integer({ min: 0, max: 5 }))
    .chain(([features, planCount]) => {
      const keys = Object.keys(features);
      const grantArb = (key: string): fc.Arbitrary<Grant> =>
        features[key] === 'flag'
          ? fc.constant({ kind: 'flag' as const })
          : limitArb.map((limit) => ({ kind: 'limit' as const, limit }));
      const planArb = fc.record({
        archived: fc.boolean(),
        grants: fc
          .subarray(keys)
          .chain((granted) =>
            fc.tuple(...granted.map(grantArb)).map((grants) => Object.fromEntries(granted.map((k, i) => [k, grants[i]!]))),
          ),
      });
      return fc
        .tuple(...Array.from({ length: planCount }, () => planArb))
        .map((plans) => ({ features, plans: Object.fromEntries(plans.map((p, i) => [`plan_${i}`, p])) }));
    });
}
