import type { GrantBody } from '@ent/contract/plans';
import type { AuditDetails } from '../shared/write/outcome.ts';
import type { Change } from '../shared/changes.ts';

/** A grant as the audit log writes it: without `feature`, which is the key it is filed under. */
export type GrantValue =
  | { kind: 'flag' }
  | { kind: 'limit'; limit: number | null }
  | Omit<Extract<GrantBody, { kind: 'metered' }>, 'feature'>;

export type GrantChanges = Record<string, Change<GrantValue | null>>;

/** Fields in one fixed order, so that equal grants serialize equally. */
function grantValue(grant: GrantBody): GrantValue {
  if (grant.kind === 'flag') return { kind: 'flag' };
  if (grant.kind === 'limit') return { kind: 'limit', limit: grant.limit };
  return {
    kind: 'metered',
    limit: grant.limit,
    reset: grant.reset,
    reset_anchor: grant.reset_anchor,
    soft: grant.soft,
    rollover: grant.rollover,
  };
}

const sortedByFeature = (grants: readonly GrantBody[]) =>
  [...grants].sort((a, b) => (a.feature < b.feature ? -1 : a.feature > b.feature ? 1 : 0));

const sameGrant = (a: GrantValue | null, b: GrantValue | null): boolean =>
  JSON.stringify(a) === JSON.stringify(b);

/** `{<feature key>: {kind, limit?, reset?, reset_anchor?, soft?, rollover?}}`, in feature key order: how a create names the grants it made. */
export function grantsByFeature(grants: readonly GrantBody[]): Record<string, GrantValue> {
  const result: Record<string, GrantValue> = {};
  for (const grant of sortedByFeature(grants)) result[grant.feature] = grantValue(grant);
  return result;
}

/**
 * `{<feature key>: {from, to}}` for each feature whose grant differs; `from: null` = added, `to: null` =
 * removed. Null when the two lists grant the same (order does not matter).
 */
export function grantChanges(before: readonly GrantBody[], after: readonly GrantBody[]): GrantChanges | null {
  const from = new Map(before.map((grant) => [grant.feature, grantValue(grant)]));
  const to = new Map(after.map((grant) => [grant.feature, grantValue(grant)]));
  const features = [...new Set([...from.keys(), ...to.keys()])].sort();
  const changes: GrantChanges = {};
  for (const feature of features) {
    const a = from.get(feature) ?? null;
    const b = to.get(feature) ?? null;
    if (!sameGrant(a, b)) changes[feature] = { from: a, to: b };
  }
  return Object.keys(changes).length ? changes : null;
}

export interface PlanState {
  key: string;
  name: string;
  kind: string;
  archived: boolean;
  grants: readonly GrantBody[];
}

/** POST /org/plans: key, name, kind, grants (each grant by feature key). */
export const planCreatedDetails = (plan: PlanState): AuditDetails => ({
  key: plan.key,
  name: plan.name,
  kind: plan.kind,
  grants: grantsByFeature(plan.grants),
});

/** PATCH /org/plans/{key}: name as a change, grants as a change per feature; null when nothing changed. */
export function planUpdatedDetails(before: PlanState, after: PlanState): AuditDetails | null {
  const details: AuditDetails = {};
  if (before.name !== after.name) details.name = { from: before.name, to: after.name };
  const grants = grantChanges(before.grants, after.grants);
  if (grants) details.grants = grants;
  return Object.keys(details).length ? details : null;
}

/** Archive and unarchive: archived as a change; null when the plan already was in that state. */
export const archivedDetails = (before: boolean, after: boolean): AuditDetails | null =>
  before === after ? null : { archived: { from: before, to: after } };
