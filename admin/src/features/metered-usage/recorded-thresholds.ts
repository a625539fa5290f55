/** How many recorded thresholds a worker remembers before it starts over (each entry is a short string). */
const REMEMBERED_THRESHOLDS = 200_000;

/**
 * The thresholds this worker has seen in `usage_thresholds_reached` (recorded by its own writes, or found there by
 * them), so a balance that stays past a threshold (every balance spending credits is past 100 %) is not offered to
 * Postgres again at each drain. A threshold is recorded once per subscriber, feature, period and threshold and never
 * removed, so a remembered one stays true; what is forgotten (another worker's, or after starting over) only costs one
 * more insert that records nothing. Bounded: full, it starts over rather than keep an order per entry.
 */
export function createRecordedThresholds(limit = REMEMBERED_THRESHOLDS) {
  let seen = new Set<string>();
  const keyOf = (organizationId: string, member: string, threshold: number) =>
    `${organizationId}\n${member}\n${threshold}`;
  return {
    has: (organizationId: string, member: string, threshold: number) =>
      seen.has(keyOf(organizationId, member, threshold)),
    add(organizationId: string, member: string, threshold: number): void {
      if (seen.size >= limit) seen = new Set();
      seen.add(keyOf(organizationId, member, threshold));
    },
  };
}
