import type { Feature, FeatureKind, MeteredReset, MeteredResetAnchor } from '@ent/common/db/database';
import { validationError } from '@ent/common/errors/app-error';
import type { GrantBody, GrantInput } from '@ent/contract/plans';

/** A requested grant checked against the catalog, ready to store. */
export interface ResolvedGrant {
  featureId: string;
  feature: string;
  kind: FeatureKind;
  /** Null for flags; for limit and metered grants null = unlimited. */
  limit: number | null;
  /** Metered grants only: how periods run and whether the limit is soft (null for the other kinds). */
  reset: MeteredReset | null;
  resetAnchor: MeteredResetAnchor | null;
  soft: boolean | null;
  /** Metered grants only: the rollover max (issue 35); null = none. */
  rolloverMax: number | null;
}

export type CatalogFeature = Pick<Feature, 'id' | 'key' | 'kind'>;

/** DESIGN.md §5: what a metered grant that leaves them out gets. */
const METERED_DEFAULTS = { reset: 'month', resetAnchor: 'calendar', soft: false } as const;

/** The fields only a metered grant may carry. */
const METERED_ONLY_FIELDS = ['reset', 'reset_anchor', 'soft', 'rollover'] as const;

const grantField = (index: number, field: keyof GrantInput) => `grants.${index}.${field}`;

/**
 * Checks each grant in request order and names the first one that breaks a rule: a feature listed twice,
 * a feature not in the catalog, a grant kind other than the feature's, a flag with a `limit`, a limit or metered
 * grant without one, `reset`, `reset_anchor`, `soft` or `rollover` on a grant that is not metered.
 */
export function resolveGrants(
  inputs: readonly GrantInput[],
  catalog: readonly CatalogFeature[],
): ResolvedGrant[] {
  const byKey = new Map(catalog.map((feature) => [feature.key, feature]));
  const seen = new Set<string>();
  return inputs.map((input, index) => {
    if (seen.has(input.feature)) {
      throw validationError(`grants lists feature "${input.feature}" more than once.`, {
        field: grantField(index, 'feature'),
        value: input.feature,
      });
    }
    seen.add(input.feature);
    const feature = byKey.get(input.feature);
    if (!feature) {
      throw validationError(`No feature with key "${input.feature}" in the catalog.`, {
        field: grantField(index, 'feature'),
        value: input.feature,
      });
    }
    if (input.kind !== feature.kind) {
      throw validationError(
        `Feature "${feature.key}" is a ${feature.kind}; its grant must have kind "${feature.kind}".`,
        {
          field: grantField(index, 'kind'),
          value: input.kind,
        },
      );
    }
    if (input.kind === 'flag' && input.limit !== undefined) {
      throw validationError(`A flag grant has no limit; remove limit from the grant of "${feature.key}".`, {
        field: grantField(index, 'limit'),
        value: input.limit,
      });
    }
    if (input.kind !== 'flag' && input.limit === undefined) {
      throw validationError(
        `A ${input.kind} grant needs limit (an integer >= 0, or null for unlimited) for "${feature.key}".`,
        {
          field: grantField(index, 'limit'),
        },
      );
    }
    if (input.kind !== 'metered') {
      const misplaced = METERED_ONLY_FIELDS.find((field) => input[field] !== undefined);
      if (misplaced) {
        throw validationError(
          `${misplaced} is for metered grants only; remove it from the ${input.kind} grant of "${feature.key}".`,
          { field: grantField(index, misplaced), value: input[misplaced] },
        );
      }
      return {
        featureId: feature.id,
        feature: feature.key,
        kind: input.kind,
        limit: input.limit ?? null,
        reset: null,
        resetAnchor: null,
        soft: null,
        rolloverMax: null,
      };
    }
    return {
      featureId: feature.id,
      feature: feature.key,
      kind: 'metered',
      limit: input.limit ?? null,
      reset: input.reset ?? METERED_DEFAULTS.reset,
      resetAnchor: input.reset_anchor ?? METERED_DEFAULTS.resetAnchor,
      soft: input.soft ?? METERED_DEFAULTS.soft,
      rolloverMax: input.rollover?.max ?? null,
    };
  });
}

/** A grant as stored or resolved; the metered fields are null for the other kinds. */
export type GrantRow = Pick<
  ResolvedGrant,
  'feature' | 'kind' | 'limit' | 'reset' | 'resetAnchor' | 'soft' | 'rolloverMax'
>;

/** The response shape: flags carry no `limit`; metered grants carry every field, defaults filled when stored. */
export function toGrantBody(grant: GrantRow): GrantBody {
  if (grant.kind === 'flag') return { feature: grant.feature, kind: 'flag' };
  if (grant.kind === 'limit') return { feature: grant.feature, kind: 'limit', limit: grant.limit };
  return {
    feature: grant.feature,
    kind: 'metered',
    limit: grant.limit,
    reset: grant.reset ?? METERED_DEFAULTS.reset,
    reset_anchor: grant.resetAnchor ?? METERED_DEFAULTS.resetAnchor,
    soft: grant.soft ?? METERED_DEFAULTS.soft,
    rollover: grant.rolloverMax === null ? null : { max: grant.rolloverMax },
  };
}

export const byFeatureKey = (a: { feature: string }, b: { feature: string }): number =>
  a.feature < b.feature ? -1 : a.feature > b.feature ? 1 : 0;
