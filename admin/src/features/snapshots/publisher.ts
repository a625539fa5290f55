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
import { getArrangement, publishArrangement, type Arrangement } from '@ent/common/metering/arrangement';

export interface SnapshotPublisherDeps {
  db: Kysely<Database>;
  redis: RedisClient;
  redisKeys: RedisKeys;
  /** Called once per document rebuilt from Postgres (metrics). */
  onRebuilt?: (kind: 'catalog' | 'subscriber' | 'auth' | 'api_key' | 'arrangement') => void;
}

const SUBSCRIBER_BATCH = 1000;

/**
 * Rebuilds snapshot documents from Postgres and writes them to Redis (never over a newer version), then
 * announces the change on the invalidation channel. Shared by the write-through after each commit, the
 * `snapshots` job, the on-demand rebuild routes gateways call, and `entctl snapshots rebuild`.
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
    await store.publishInvalidation({ kind: 'catalog', organizationId });
    return catalog;
  }

  async function publishSubscribers(
    organizationId: string,
    subscriberIds: readonly string[],
    { announce = true }: { announce?: boolean } = {},
  ): Promise<Map<string, Versioned<SubscriberDoc>>> {
    const built = await buildSubscribers(db, organizationId, subscriberIds);
    await Promise.all(
      [...built].map(([subscriberId, snapshot]) => {
        rebuilt('subscriber');
        return store.putSubscriber(organizationId, subscriberId, snapshot);
      }),
    );
    if (!announce) return built;
    await Promise.all(
      subscriberIds.map((subscriberId) => store.publishInvalidation({ kind: 'subscriber', organizationId, subscriberId })),
    );
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
    await store.publishInvalidation({ kind: 'auth', organizationId });
    return auth.authVersion;
  }

  async function publishApiKey(keyHash: string): Promise<ApiKeySnapshot | null> {
    const snapshot = await buildApiKey(db, keyHash);
    if (!snapshot) return null;
    await writeApiKey(snapshot);
    await store.putAuthVersion(snapshot.organizationId, snapshot.authVersion);
    return snapshot;
  }

  async function publishOrganizationArrangement(organizationId: string): Promise<Arrangement> {
    const arrangement = await getArrangement(db, organizationId);
    rebuilt('arrangement');
    await publishArrangement(redis, redisKeys, organizationId, arrangement);
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
    await store.publishInvalidation({ kind: 'organization', organizationId });
    return { catalog, authVersion: authVersion ?? 0, arrangement };
  }

  /** The organization's documents and all its subscribers, in batches. */
  async function rebuildOrganization(organizationId: string): Promise<{ subscribers: number }> {
    if (!(await publishOrganization(organizationId))) throw new Error(`No organization ${organizationId}.`);
    let after = '';
    let subscribers = 0;
    for (;;) {
      const page = await db
        .selectFrom('subscribers')
        .select('subscriber_id')
        .where('organization_id', '=', organizationId)
        .where('subscriber_id', '>', after)
        .orderBy('subscriber_id')
        .limit(SUBSCRIBER_BATCH)
        .execute();
      if (page.length === 0) break;
      const ids = page.map((row) => row.subscriber_id);
      const built = await buildSubscribers(db, organizationId, ids);
      await Promise.all([...built].map(([id, snapshot]) => store.putSubscriber(organizationId, id, snapshot)));
      subscribers += built.size;
      after = ids[ids.length - 1]!;
    }
    await store.publishInvalidation({ kind: 'organization', organizationId });
    return { subscribers };
  }

  return {
    publishCatalog,
    publishSubscribers,
    publishAuth,
    publishApiKey,
    publishOrganization,
    rebuildOrganization,
  };
}

export type SnapshotPublisher = ReturnType<typeof createSnapshotPublisher>;
