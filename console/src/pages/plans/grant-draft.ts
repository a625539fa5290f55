import type { Feature, Grant } from '../../api/types.ts';

/** A plan's grants as the editor holds them: one row per catalog feature. */
export interface GrantDraftRow {
  granted: boolean;
  unlimited: boolean;
  limit: string;
}
export type GrantDraft = Record<string, GrantDraftRow>;

export function draftOf(features: readonly Feature[], grants: readonly Grant[]): GrantDraft {
  const byFeature = new Map(grants.map((grant) => [grant.feature, grant]));
  const draft: GrantDraft = {};
  for (const feature of features) {
    const grant = byFeature.get(feature.key);
    const limit = grant?.kind === 'limit' ? grant.limit : undefined;
    draft[feature.key] = {
      granted: grant !== undefined,
      unlimited: limit === null,
      limit: typeof limit === 'number' ? String(limit) : '',
    };
  }
  return draft;
}

/** The problem with a limit row, checked before sending: the API wants an integer >= 0, or null. */
function limitProblem(row: GrantDraftRow): string | undefined {
  if (!row.granted || row.unlimited) return undefined;
  if (!/^\d+$/.test(row.limit.trim())) return 'A whole number of 0 or more, or unlimited.';
  return undefined;
}

export function grantsOf(features: readonly Feature[], draft: GrantDraft): Grant[] {
  const grants: Grant[] = [];
  for (const feature of features) {
    const row = draft[feature.key];
    if (!row?.granted) continue;
    grants.push(
      feature.kind === 'flag'
        ? { feature: feature.key, kind: 'flag' }
        : { feature: feature.key, kind: 'limit', limit: row.unlimited ? null : Number(row.limit.trim()) },
    );
  }
  return grants;
}

export const draftProblems = (features: readonly Feature[], draft: GrantDraft): Record<string, string> =>
  Object.fromEntries(
    features
      .filter((feature) => feature.kind === 'limit')
      .map(
        (feature) =>
          [feature.key, draft[feature.key] ? limitProblem(draft[feature.key]!) : undefined] as const,
      )
      .filter((entry): entry is readonly [string, string] => entry[1] !== undefined),
  );
