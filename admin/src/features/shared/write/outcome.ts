/** A change is `{from, to}`; creates name what they created. See SPEC.md "Details by write". */
export type AuditDetails = Record<string, unknown>;

/** A domain event a committed write produced (webhook deliveries are made from these). */
export interface DomainEvent {
  type: string;
  data: Record<string, unknown>;
}

/** What a write that found nothing to change names: see `WriteOutcome.unchangedOn`. */
export interface PublishTargets {
  catalog?: boolean;
  subscriber?: string;
  auth?: boolean;
}

/**
 * Everything a write causes besides its rows, built by the service inside the write's transaction and acted on by
 * the write pipeline: the audit entry's details, the domain events (webhook deliveries, recorded in the same
 * commit) and the snapshots published before the 2xx (read-your-writes, DESIGN.md §2.1). The publish targets are
 * set by the version bumps themselves (features/shared/versions.ts), so a version never moves without its publish.
 */
export class WriteOutcome {
  /** For the audit entry: null when nothing changed (and for deletes). */
  details: AuditDetails | null = null;
  readonly events: DomainEvent[] = [];
  /** The catalog version moved (features, plans, grants): the catalog snapshot is published before the 2xx. */
  catalogChanged = false;
  /** Subscribers whose version moved (subscriptions, overrides): published before the 2xx, as for the catalog. */
  readonly subscribersChanged = new Set<string>();
  /** The auth version moved (keys, members, roles): the organization's keys are published, as for the catalog. */
  authChanged = false;
  /**
   * Some target was named by a write that found nothing to change: only what the outbox holds undone is published
   * (a target whose version this write moved always is: its entry committed with the write).
   */
  unchanged = false;

  /** Raises a domain event; its webhook deliveries are recorded in this write's transaction. */
  raise(type: string, data: Record<string, unknown>): void {
    this.events.push({ type, data });
  }

  /**
   * The write found nothing to change on `targets`, and still answers only once they are published: an identical
   * write just before it (a client retrying a revoke after a timeout) may have committed and not yet published.
   * The pipeline then publishes only what the outbox still holds undone (features/outbox/plugin.ts), so a
   * repeated write costs one query, not a republish.
   */
  unchangedOn(targets: PublishTargets): void {
    if (targets.catalog) this.catalogChanged = true;
    if (targets.subscriber !== undefined) this.subscribersChanged.add(targets.subscriber);
    if (targets.auth) this.authChanged = true;
    this.unchanged = true;
  }
}
