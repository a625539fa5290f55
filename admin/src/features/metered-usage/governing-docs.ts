import { sql, type Kysely } from 'kysely';
import { LRUCache } from 'lru-cache';
import type { Database } from '@ent/common/db/database';
import { buildCatalog, buildSubscribers } from '@ent/common/snapshots/build';
import {
  snapshotVersionOf,
  type CatalogDoc,
  type SubscriberDoc,
  type Versioned,
} from '@ent/common/snapshots/documents';

/** Subscriber documents kept across passes (a busy organization's active subscribers). */
const MAX_SUBSCRIBERS = 100_000;

export interface GoverningDocs {
  catalog: CatalogDoc | null;
  /** By subscriber id; a subscriber that does not exist is absent. */
  subscribers: Map<string, SubscriberDoc>;
}

/**
 * The documents that decide thresholds, built from Postgres as the snapshots are (build.ts) and kept by version: a
 * pass reads the catalog's version and the batch's subscribers' versions (two light queries) and builds again only
 * what moved. Every change of a document moves its version, and subscribers are never deleted, so a document kept
 * at the version Postgres answers is the one a build would give.
 */
export function createGoverningDocs(db: Kysely<Database>, max = MAX_SUBSCRIBERS) {
  const catalogs = new Map<string, Versioned<CatalogDoc>>();
  const subscribers = new LRUCache<string, Versioned<SubscriberDoc>>({ max });
  const keyOf = (organizationId: string, subscriberId: string) => `${organizationId}\n${subscriberId}`;

  async function catalogOf(organizationId: string): Promise<CatalogDoc | null> {
    const row = await db
      .selectFrom('organizations')
      .select('catalog_version')
      .where('id', '=', organizationId)
      .executeTakeFirst();
    if (!row) return null;
    const kept = catalogs.get(organizationId);
    if (kept && kept.version === snapshotVersionOf(row.catalog_version)) return kept.doc;
    const built = await buildCatalog(db, organizationId);
    if (built) catalogs.set(organizationId, built);
    else catalogs.delete(organizationId);
    return built?.doc ?? null;
  }

  async function subscribersOf(
    organizationId: string,
    ids: readonly string[],
  ): Promise<Map<string, SubscriberDoc>> {
    // One primary-key probe per id (a scalar subquery): `subscriber_id = ANY(...)` let the planner scan the whole
    // table when it is small enough to sit in memory, 12 µs of Postgres CPU per id at 50,000 subscribers against 3.
    const { rows } = await sql<{ subscriber_id: string; version: number | null }>`
      SELECT i.id AS subscriber_id,
        (SELECT s.version FROM subscribers s WHERE s.organization_id = ${organizationId} AND s.subscriber_id = i.id)
          AS version
      FROM unnest(${ids}::text[]) AS i (id)
    `.execute(db);
    const docs = new Map<string, SubscriberDoc>();
    const stale: string[] = [];
    for (const row of rows) {
      if (row.version === null) continue; // no such subscriber
      const kept = subscribers.get(keyOf(organizationId, row.subscriber_id));
      if (kept && kept.version === snapshotVersionOf(row.version)) docs.set(row.subscriber_id, kept.doc);
      else stale.push(row.subscriber_id);
    }
    if (stale.length > 0) {
      for (const [id, built] of await buildSubscribers(db, organizationId, stale)) {
        subscribers.set(keyOf(organizationId, id), built);
        docs.set(id, built.doc);
      }
    }
    return docs;
  }

  return async (organizationId: string, subscriberIds: readonly string[]): Promise<GoverningDocs> => {
    const [catalog, docs] = await Promise.all([
      catalogOf(organizationId),
      subscribersOf(organizationId, [...new Set(subscriberIds)]),
    ]);
    return { catalog, subscribers: docs };
  };
}
