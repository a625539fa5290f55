import type { Kysely } from 'kysely';
import type { Database } from '@ent/common/db/database';
import type { SnapshotPublisher } from '../snapshots/publisher.ts';
import { markEntriesDone } from '@ent/common/outbox/record';
import { leaseDue, markFailed, pruneDone, type OutboxRow } from './store.ts';

export interface OutboxRelayDeps {
  db: Kysely<Database>;
  publisher: Pick<
    SnapshotPublisher,
    'publishCatalog' | 'publishSubscribers' | 'publishAuth' | 'publishArrangement'
  >;
}

export interface OutboxRelayOptions {
  batchSize: number;
  /** Batches per drain, so one drain never runs unbounded while writes keep arriving. */
  maxBatches: number;
  /** How long leased entries are left to this relay before another may retry them. */
  leaseMs: number;
  /** Backoff after the n-th failed attempt: min(maxRetryMs, baseRetryMs * 2^n), with jitter. */
  baseRetryMs: number;
  maxRetryMs: number;
  random: () => number;
}

const defaultRelayOptions: OutboxRelayOptions = {
  batchSize: 200,
  maxBatches: 50,
  leaseMs: 30_000,
  baseRetryMs: 500,
  maxRetryMs: 30_000,
  random: Math.random,
};

/** Done entries are kept this long (for inspection), then pruned. */
const KEEP_DONE_MS = 60 * 60_000;

export interface DrainResult {
  published: number;
  failed: number;
}

/**
 * One publish covers every entry of a group: the publisher always writes the current Postgres state. A `subscribers`
 * entry (an import batch's, up to a batch of subscribers) is a group of its own, so a publish never grows beyond one
 * batch.
 */
interface Group {
  organizationId: string;
  kind: OutboxRow['kind'];
  rows: OutboxRow[];
}

function groupsOf(rows: OutboxRow[]): Group[] {
  const groups = new Map<string, Group>();
  for (const row of rows) {
    const key = row.kind === 'subscribers' ? `#${row.id}` : `${row.kind}\n${row.organization_id}`;
    let group = groups.get(key);
    if (!group) {
      group = { organizationId: row.organization_id, kind: row.kind, rows: [] };
      groups.set(key, group);
    }
    group.rows.push(row);
  }
  return [...groups.values()];
}

/**
 * The outbox relay: publishes, in order, every committed change the inline write-through did not deliver, with
 * backoff per entry. Republishing is idempotent (snapshot writes are compare-and-set by version), so an entry
 * published twice (a relay and the write-through racing, a lease that ran out) costs nothing but the work.
 */
export function createOutboxRelay(deps: OutboxRelayDeps, overrides: Partial<OutboxRelayOptions> = {}) {
  const options = { ...defaultRelayOptions, ...overrides };
  const { db, publisher } = deps;

  const retryIn = (attempts: number) => {
    const delay = Math.min(options.maxRetryMs, options.baseRetryMs * 2 ** Math.min(attempts, 16));
    return Math.round(delay * (0.8 + 0.4 * options.random()));
  };

  async function publish(group: Group): Promise<void> {
    const { organizationId } = group;
    switch (group.kind) {
      case 'catalog':
        await publisher.publishCatalog(organizationId);
        return;
      case 'auth':
        await publisher.publishAuth(organizationId);
        return;
      case 'arrangement':
        await publisher.publishArrangement(organizationId);
        return;
      case 'subscriber':
        await publisher.publishSubscribers(organizationId, [
          ...new Set(group.rows.map((row) => row.subject!)),
        ]);
        return;
      case 'subscribers':
        await publisher.publishSubscribers(organizationId, group.rows.flatMap((row) => row.subjects ?? []));
        return;
    }
  }

  async function drainOnce(): Promise<DrainResult> {
    const result: DrainResult = { published: 0, failed: 0 };
    for (let batch = 0; batch < options.maxBatches; batch++) {
      const rows = await leaseDue(db, options.batchSize, options.leaseMs);
      if (rows.length === 0) break;
      for (const group of groupsOf(rows)) {
        const ids = group.rows.map((row) => row.id);
        try {
          await publish(group);
          await markEntriesDone(db, ids);
          result.published += ids.length;
        } catch (error) {
          const attempts = Math.max(...group.rows.map((row) => row.attempts));
          await markFailed(db, ids, (error as Error).message || String(error), retryIn(attempts));
          result.failed += ids.length;
        }
      }
      if (rows.length < options.batchSize) break;
    }
    return result;
  }

  return {
    drainOnce,
    prune: (limit = 10_000) => pruneDone(db, KEEP_DONE_MS, limit),
  };
}

export type OutboxRelay = ReturnType<typeof createOutboxRelay>;
