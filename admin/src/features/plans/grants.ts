import type { Feature, FeatureKind } from '@ent/common/db/database';
import { validationError } from '@ent/common/errors/app-error';
import type { GrantBody, GrantInput } from '@ent/contract/plans';

/** A requested grant checked against the catalog, ready to store. */
export interface ResolvedGrant {
  featureId: string;
  feature: string;
  kind: FeatureKind;
  /** Null for flags; for limits null = unlimited. */
  limit: number | null;
}

export type CatalogFeature = Pick<Feature, 'id' | 'key' | 'kind'>;

const grantField = (index: number, field: keyof GrantInput) => `grants.${index}.${field}`;

/**
 * Checks each grant in request order and names the first one that breaks a rule: a feature listed twice,
 * a feature not in the catalog, a grant kind other than the feature's, a flag with a `limit`, a limit
 * without one.
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
    if (input.kind === 'limit' && input.limit === undefined) {
      throw validationError(
        `A limit grant needs limit (an integer >= 0, or null for unlimited) for "${feature.key}".`,
        {
          field: grantField(index, 'limit'),
        },
      );
    }
    return { featureId: feature.id, feature: feature.key, kind: feature.kind, limit: input.limit ?? null };
  });
}

/** The response shape: flags carry no `limit`. */
export const toGrantBody = (grant: Pick<ResolvedGrant, 'feature' | 'kind' | 'limit'>): GrantBody =>
  grant.kind === 'flag'
    ? { feature: grant.feature, kind: 'flag' }
    : { feature: grant.feature, kind: 'limit', limit: grant.limit };

export const byFeatureKey = (a: { feature: string }, b: { feature: string }): number =>
  a.feature < b.feature ? -1 : a.feature > b.feature ? 1 : 0;
