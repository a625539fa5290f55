import { sql, type Kysely } from 'kysely';
import type { Database } from '@ent/common/db/database';
import type { RedisClient } from '@ent/common/redis/connect';
import type { RedisKeys } from '@ent/common/redis/keys';
import { snapshotVersionOf } from '@ent/common/snapshots/documents';
import { snapshotStore } from '@ent/common/snapshots/store';
import type { SnapshotPublisher } from '../snapshots/publisher.ts';

export interface ReconcilerDeps {
  db: Kysely<Database>;
  redis: RedisClient;
  redisKeys: RedisKeys;
  publisher: Pick<
    SnapshotPublisher,
    'publishCatalog' | 'publishAuth' | 'publishArrangement' | 'publishSubscribers' | 'rebuildOrganization'
  >;
}

export interface ReconcileReport {
  organizations: number;
  /** Organizations whose catalog was missing from Redis: everything republished. */
  rebuilt: number;
  /** Documents found behind Postgres and republished. */
  repaired: { catalog: number; auth: number; arrangement: number; subscriber: number };
  /** Organizations that could not be checked (Redis or Postgres failed); the next run tries again. */
  failed: number;
}

const ORGANIZATION_PAGE = 500;
const SUBSCRIBER_PAGE = 1000;
/** A routine run looks at subscribers changed this recently: what a lost write or a failover can have dropped. */
const RECENT_WINDOW_MS = 15 * 60_000;

const versionIn = (raw: string | null): number => (raw === null ? 0 : Number(raw) || 0);

/**
 * Compares, per organization, the versions Postgres has committed with those Redis holds (catalog, auth,
 * arrangement, subscribers) and republishes whatever Redis is missing or holds older: Redis restarted empty,
 * a failover replica that lost recent writes, a publish the outbox marked done on a Redis that then lost it.
 * A full run checks every subscriber; a routine one those changed within RECENT_WINDOW_MS.
 */
export function createReconciler(deps: ReconcilerDeps) {
  const { db, redis, redisKeys: keys, publisher } = deps;

  const hgetVersion = (key: string) => redis.hget(key, 'v').then(versionIn);
  const store = snapshotStore(redis, keys);

  async function reconcileSubscribers(organizationId: string, full: boolean): Promise<number> {
    let repaired = 0;
    let after = '';
    for (;;) {
      let query = db
        .selectFrom('subscribers')
        .select(['subscriber_id', 'version'])
        .where('organization_id', '=', organizationId)
        .where('subscriber_id', '>', after)
        .orderBy('subscriber_id')
        .limit(SUBSCRIBER_PAGE);
      if (!full)
        query = query.where(
          'updated_at',
          '>',
          sql<Date>`now() - make_interval(secs => ${RECENT_WINDOW_MS / 1000})`,
        );
      const page = await query.execute();
      if (page.length === 0) return repaired;
      // Both the document and the version index the gate reads (written together, so only a lost key parts them),
      // compared in Redis: one script call per 500 subscribers, not one command each. A routine pass reads every
      // subscriber changed in the window, so after an import of a million that was two million commands a pass.
      const behind = await store.subscribersBehind(
        organizationId,
        page.map((row) => ({ subscriberId: row.subscriber_id, version: snapshotVersionOf(row.version) })),
      );
      if (behind.length > 0) {
        await publisher.publishSubscribers(organizationId, behind);
        repaired += behind.length;
      }
      after = page[page.length - 1]!.subscriber_id;
    }
  }

  async function reconcileOnce({ full }: { full: boolean }): Promise<ReconcileReport> {
    const report: ReconcileReport = {
      organizations: 0,
      rebuilt: 0,
      repaired: { catalog: 0, auth: 0, arrangement: 0, subscriber: 0 },
      failed: 0,
    };
    let after = '';
    for (;;) {
      const organizations = await db
        .selectFrom('organizations')
        .select(['id', 'catalog_version', 'auth_version', 'arrangement_version'])
        .where('id', '>', after)
        .orderBy('id')
        .limit(ORGANIZATION_PAGE)
        .execute();
      if (organizations.length === 0) return report;
      for (const org of organizations) {
        report.organizations += 1;
        try {
          const [catalog, auth, arrangement] = await Promise.all([
            hgetVersion(keys.catalog(org.id)),
            hgetVersion(keys.auth(org.id)),
            hgetVersion(keys.arrangement(org.id)),
          ]);
          if (catalog === 0) {
            await publisher.rebuildOrganization(org.id);
            report.rebuilt += 1;
            continue;
          }
          if (catalog < snapshotVersionOf(org.catalog_version)) {
            await publisher.publishCatalog(org.id);
            report.repaired.catalog += 1;
          }
          if (auth < snapshotVersionOf(org.auth_version)) {
            await publisher.publishAuth(org.id);
            report.repaired.auth += 1;
          }
          if (arrangement < snapshotVersionOf(org.arrangement_version)) {
            await publisher.publishArrangement(org.id);
            report.repaired.arrangement += 1;
          }
          report.repaired.subscriber += await reconcileSubscribers(org.id, full);
        } catch {
          report.failed += 1;
        }
      }
      after = organizations[organizations.length - 1]!.id;
    }
  }

  return { reconcileOnce };
}
