import type { Feature, Grant, MeteredReset, MeteredResetAnchor } from '../../api/types.ts';

/**
 * A plan's grants as the editor holds them: one row per catalog feature. `limit` and `unlimited` are read for limit
 * and metered features; `reset`, `resetAnchor` and `soft` for metered ones only (DESIGN.md §5's defaults until
 * changed). `rollover` is carried as the plan has it (the editor does not change it, and must not drop it on save).
 */
export interface GrantDraftRow {
  granted: boolean;
  unlimited: boolean;
  limit: string;
  reset: MeteredReset;
  resetAnchor: MeteredResetAnchor;
  soft: boolean;
  rollover: { max: number } | null;
}
export type GrantDraft = Record<string, GrantDraftRow>;

export const EMPTY_ROW: GrantDraftRow = {
  granted: false,
  unlimited: false,
  limit: '',
  reset: 'month',
  resetAnchor: 'calendar',
  soft: false,
  rollover: null,
};

function rowOf(grant: Grant | undefined): GrantDraftRow {
  if (grant === undefined) return EMPTY_ROW;
  if (grant.kind === 'flag') return { ...EMPTY_ROW, granted: true };
  const limits = {
    granted: true,
    unlimited: grant.limit === null,
    limit: grant.limit === null ? '' : String(grant.limit),
  };
  if (grant.kind === 'limit') return { ...EMPTY_ROW, ...limits };
  return {
    ...limits,
    reset: grant.reset,
    resetAnchor: grant.reset_anchor,
    soft: grant.soft,
    rollover: grant.rollover,
  };
}

export function draftOf(features: readonly Feature[], grants: readonly Grant[]): GrantDraft {
  const byFeature = new Map(grants.map((grant) => [grant.feature, grant]));
  const draft: GrantDraft = {};
  for (const feature of features) draft[feature.key] = rowOf(byFeature.get(feature.key));
  return draft;
}

/** The problem with a limit row, checked before sending: the API wants an integer >= 0, or null. */
function limitProblem(row: GrantDraftRow): string | undefined {
  if (!row.granted || row.unlimited) return undefined;
  if (!/^\d+$/.test(row.limit.trim())) return 'A whole number of 0 or more, or unlimited.';
  return undefined;
}

function grantOf(feature: Feature, row: GrantDraftRow): Grant {
  const limit = row.unlimited ? null : Number(row.limit.trim());
  switch (feature.kind) {
    case 'flag':
      return { feature: feature.key, kind: 'flag' };
    case 'limit':
      return { feature: feature.key, kind: 'limit', limit };
    case 'metered':
      return {
        feature: feature.key,
        kind: 'metered',
        limit,
        reset: row.reset,
        reset_anchor: row.resetAnchor,
        soft: row.soft,
        rollover: row.rollover,
      };
  }
}

export function grantsOf(features: readonly Feature[], draft: GrantDraft): Grant[] {
  const grants: Grant[] = [];
  for (const feature of features) {
    const row = draft[feature.key];
    if (row?.granted) grants.push(grantOf(feature, row));
  }
  return grants;
}

export const draftProblems = (features: readonly Feature[], draft: GrantDraft): Record<string, string> =>
  Object.fromEntries(
    features
      .filter((feature) => feature.kind !== 'flag')
      .map(
        (feature) =>
          [feature.key, draft[feature.key] ? limitProblem(draft[feature.key]!) : undefined] as const,
      )
      .filter((entry): entry is readonly [string, string] => entry[1] !== undefined),
  );
