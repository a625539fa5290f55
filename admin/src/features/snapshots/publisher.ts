import { systemClock, type Clock } from '@ent/common/clock';
import type { Kysely } from 'kysely';
import type { Database } from '@ent/common/db/database';
import type { RedisClient } from '@ent/common/redis/connect';
import type { RedisKeys } from '@ent/common/redis/keys';
import {
  buildApiKey,
  buildCatalog,
  buildOrganizationApiKeys,
  buildSubscribers,
  type ApiKeySnapshot,
} from '@ent/common/snapshots/build';
import type { CatalogDoc, SubscriberDoc, Versioned } from '@ent/common/snapshots/documents';
import { snapshotStore } from '@ent/common/snapshots/store';
import {
  getArrangement,
  publishArrangement,
  type VersionedArrangement,
} from '@ent/common/metering/arrangement';
import { markEntriesDone, markOutboxDone, markSubscribersDone } from '@ent/common/outbox/record';
import type { Invalidation } from '@ent/common/snapshots/store';

export interface SnapshotPublisherDeps {
  db: Kysely<Database>;
  redis: RedisClient;
  redisKeys: RedisKeys;
  /** Called once per document rebuilt from Postgres (metrics). */
  onRebuilt?: (kind: 'catalog' | 'subscriber' | 'auth' | 'api_key' | 'arrangement') => void;
  /** Which UTC month an arrangement's publish settles first_over_at in (default: the system clock). */
  clock?: Clock;
}

const SUBSCRIBER_BATCH = 1000;

/** A snapshot version is the Postgres version + 1 (documents.ts): what an outbox entry's version is compared with. */
const databaseVersionOf = (snapshotVersion: number) => snapshotVersion - 1;

/** One subscriber: its own message (what every gateway version reads); several: one message naming them all. */
function announcementOf(
  organizationId: string,
  built: ReadonlyMap<string, Versioned<SubscriberDoc>>,
): Invalidation {
  const subscriberIds: string[] = [];
  const versions: number[] = [];
  for (const [subscriberId, { version }] of built) {
    subscriberIds.push(subscriberId);
    versions.push(version);
  }
  return subscriberIds.length === 1
    ? { kind: 'subscriber', organizationId, subscriberId: subscriberIds[0]!, version: versions[0]! }
    : { kind: 'subscribers', organizationId, subscriberIds, versions };
}

/**
 * Rebuilds snapshot documents from Postgres and writes them to Redis (never over a newer version), announces the
 * change on the invalidation channel, and marks done the outbox entries the published version covers. Shared by
 * the write-through after each commit, the outbox relay, the reconciler, the on-demand rebuild routes gateways
 * call, and `entctl snapshots rebuild`.
 */
export function createSnapshotPublisher(deps: SnapshotPublisherDeps) {
  const { db, redis, redisKeys } = deps;
  const store = snapshotStore(redis, redisKeys);
  const rebuilt = deps.onRebuilt ?? (() => {});

  async function publishCatalog(organizationId: string): Promise<Versioned<CatalogDoc> | null> {
    const catalog = await buildCatalog(db, organizationId);
    rebuilt('catalog');
    if (!catalog) return null;
    await store.putCatalog(organizationId, catalog);
    await store.publishInvalidation({ kind: 'catalog', organizationId, version: catalog.version });
    await markOutboxDone(db, {
      organizationId,
      kind: 'catalog',
      version: databaseVersionOf(catalog.version),
    });
    return catalog;
  }

  /**
   * The subscribers' documents (a few script calls, however many), one announcement (per subscriber for one, one
   * `subscribers` message for several), then the outbox entries this publish covers marked done: each subscriber's
   * `subscriber` entries up to its version, and `entries` (the `subscribers` entries naming them, by id).
   */
  async function publishSubscribers(
    organizationId: string,
    subscriberIds: readonly string[],
    { announce = true, entries = [] }: { announce?: boolean; entries?: readonly number[] } = {},
  ): Promise<Map<string, Versioned<SubscriberDoc>>> {
    const built = await buildSubscribers(db, organizationId, subscriberIds);
    for (let i = 0; i < built.size; i++) rebuilt('subscriber');
    await store.putSubscribers(organizationId, built);
    if (announce && built.size > 0) await store.publishInvalidation(announcementOf(organizationId, built));
    await markSubscribersDone(
      db,
      organizationId,
      [...built].map(([subscriberId, { version }]) => ({
        subscriberId,
        version: databaseVersionOf(version),
      })),
    );
    await markEntriesDone(db, entries);
    return built;
  }

  async function writeApiKey(snapshot: ApiKeySnapshot): Promise<void> {
    rebuilt('api_key');
    await store.putApiKey(snapshot.keyHash, snapshot.organizationId, snapshot.authVersion, snapshot.doc);
  }

  /** Every key of the organization rewritten (revoked ones as tombstones) before the new auth version. */
  async function publishAuth(organizationId: string): Promise<number | null> {
    const auth = await buildOrganizationApiKeys(db, organizationId);
    rebuilt('auth');
    if (!auth) return null;
    await Promise.all(auth.keys.map(writeApiKey));
    await store.putAuthVersion(organizationId, auth.authVersion);
    await store.publishInvalidation({ kind: 'auth', organizationId, version: auth.authVersion });
    await markOutboxDone(db, { organizationId, kind: 'auth', version: databaseVersionOf(auth.authVersion) });
    return auth.authVersion;
  }

  async function publishApiKey(keyHash: string): Promise<ApiKeySnapshot | null> {
    const snapshot = await buildApiKey(db, keyHash);
    if (!snapshot) return null;
    await writeApiKey(snapshot);
    await store.putAuthVersion(snapshot.organizationId, snapshot.authVersion);
    return snapshot;
  }

  async function publishOrganizationArrangement(organizationId: string): Promise<VersionedArrangement> {
    const arrangement = await getArrangement(db, organizationId);
    rebuilt('arrangement');
    await publishArrangement(
      redis,
      redisKeys,
      organizationId,
      arrangement,
      (deps.clock ?? systemClock).now(),
    );
    await markOutboxDone(db, {
      organizationId,
      kind: 'arrangement',
      version: databaseVersionOf(arrangement.version),
    });
    return arrangement;
  }

  /** Catalog, auth version and arrangement: what a gateway needs before it can answer for the organization. */
  async function publishOrganization(organizationId: string) {
    const catalog = await publishCatalog(organizationId);
    if (!catalog) return null;
    const [authVersion, arrangement] = await Promise.all([
      publishAuth(organizationId),
      publishOrganizationArrangement(organizationId),
    ]);
    await store.publishInvalidation({
      kind: 'organization',
      organizationId,
      catalogVersion: catalog.version,
    });
    return { catalog, authVersion: authVersion ?? 0, arrangement };
  }

  /** Every subscriber of the organization, in batches of ids, each batch handed to `visit`. */
  async function forEachSubscriberBatch(
    organizationId: string,
    visit: (subscriberIds: string[]) => Promise<void>,
  ): Promise<void> {
    let after = '';
    for (;;) {
      const page = await db
        .selectFrom('subscribers')
        .select('subscriber_id')
        .where('organization_id', '=', organizationId)
        .where('subscriber_id', '>', after)
        .orderBy('subscriber_id')
        .limit(SUBSCRIBER_BATCH)
        .execute();
      if (page.length === 0) return;
      const ids = page.map((row) => row.subscriber_id);
      await visit(ids);
      after = ids[ids.length - 1]!;
    }
  }

  /** The organization's documents and all its subscribers, in batches. */
  async function rebuildOrganization(organizationId: string): Promise<{ subscribers: number }> {
    const published = await publishOrganization(organizationId);
    if (!published) throw new Error(`No organization ${organizationId}.`);
    let subscribers = 0;
    await forEachSubscriberBatch(organizationId, async (ids) => {
      subscribers += (await publishSubscribers(organizationId, ids, { announce: false })).size;
    });
    await store.publishInvalidation({
      kind: 'organization',
      organizationId,
      catalogVersion: published.catalog.version,
    });
    return { subscribers };
  }

  return {
    publishCatalog,
    publishSubscribers,
    publishAuth,
    publishApiKey,
    publishArrangement: publishOrganizationArrangement,
    publishOrganization,
    rebuildOrganization,
    forEachSubscriberBatch,
  };
}

export type SnapshotPublisher = ReturnType<typeof createSnapshotPublisher>;
