import { USAGE_THRESHOLDS, type UsageThreshold } from './thresholds.ts';

/** How many balances' recorded thresholds a worker remembers before it starts over. */
const REMEMBERED_BALANCES = 200_000;

/** Each threshold's own bit: its place in USAGE_THRESHOLDS. */
const bitOf = (threshold: UsageThreshold) => 1 << USAGE_THRESHOLDS.indexOf(threshold);

/**
 * The thresholds this worker has seen in `usage_thresholds_reached` (recorded by its own writes, or found there by
 * them), so a balance that stays past a threshold (every balance spending credits is past 100 %) is not offered to
 * Postgres again at each drain. A threshold is recorded once per subscriber, feature, period and threshold and never
 * removed, so a remembered one stays true; what is forgotten (another worker's, or after starting over) only costs one
 * more insert that records nothing. Per organization, a balance member's thresholds as bits: asked twice per balance
 * at every drain, a lookup builds no key string. Bounded: full, it starts over rather than keep an order per entry.
 */
export function createRecordedThresholds(limit = REMEMBERED_BALANCES) {
  let byOrganization = new Map<string, Map<string, number>>();
  let size = 0;
  return {
    has: (organizationId: string, member: string, threshold: UsageThreshold) =>
      ((byOrganization.get(organizationId)?.get(member) ?? 0) & bitOf(threshold)) !== 0,
    add(organizationId: string, member: string, threshold: UsageThreshold): void {
      const bits = byOrganization.get(organizationId)?.get(member);
      if (bits === undefined && size >= limit) [byOrganization, size] = [new Map(), 0];
      let members = byOrganization.get(organizationId);
      if (!members) byOrganization.set(organizationId, (members = new Map()));
      if (bits === undefined) size += 1;
      members.set(member, (bits ?? 0) | bitOf(threshold));
    },
  };
}
