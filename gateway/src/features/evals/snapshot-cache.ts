import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Redis } from 'ioredis';
import { LRUCache } from 'lru-cache';
import { Gauge } from 'prom-client';
import { serviceUnavailable } from '@ent/common/errors/app-error';
import type { SnapshotVersions } from '../../metering/contract.ts';
import type { CatalogDoc, SubscriberDoc, Versioned } from '@ent/common/snapshots/documents';
import { parseInvalidation } from '@ent/common/snapshots/store';
import { CatalogEntry, SubscriberEntry } from '../shared/entries.ts';
import { SubscriberLru } from './subscriber-lru.ts';
import { AdminUnavailableError } from '../../plugins/admin-client.ts';

export type { SubscriberEntry } from '../shared/entries.ts';

export interface SnapshotCache {
  /**
   * Entitlements that match `versions` at `nowMs`: `held` (what `cached` gave before the gate call: the warm path
   * looks the subscriber up once, with no promise), else the LRU, else Redis, else rebuilt through admin.
   */
  entitlements(
    organizationId: string,
    subscriberId: string,
    versions: SnapshotVersions,
    nowMs: number,
    held: SubscriberEntry | undefined,
  ): SubscriberEntry | Promise<SubscriberEntry>;
  /**
   * Whatever the LRU holds, re-resolved locally if an override expired: passed to the gate call as its verified
   * version, and answered from while Redis is down.
   */
  cached(organizationId: string, subscriberId: string, nowMs: number): SubscriberEntry | undefined;
}

declare module 'fastify' {
  interface FastifyInstance {
    snapshotCache: SnapshotCache;
  }
}

const UNKNOWN_SUBSCRIBER_MEMORY_MS = 1000;

export interface SnapshotCacheOptions {
  /** The bound on what subscriber entries hold, in estimated heap bytes (GATEWAY_CACHE_MB). */
  maxBytes?: number;
  subscribeInvalidations?: boolean;
}

export const snapshotCache = fp<SnapshotCacheOptions>(
  async function snapshotCache(app: FastifyInstance, options) {
    const { gatewayMetrics: metrics, snapshotStore: store, adminClient } = app;
    const maxBytes = options.maxBytes ?? 512 * 1024 * 1024;
    // Bounded by bytes, not entries: a subscriber with overrides costs more, and one large tenant cannot
    // hold more than the budget. Catalogs (and their shared plan sets) get an eighth of it on top.
    const entries = new SubscriberLru(maxBytes);
    const catalogs = new LRUCache<string, CatalogEntry>({
      maxSize: Math.max(16 * 1024 * 1024, Math.floor(maxBytes / 8)),
      sizeCalculation: (catalog) => catalog.bytes,
    });
    new Gauge({
      name: 'gateway_cache_subscribers',
      help: 'Subscribers whose entitlements this gateway holds in memory',
      registers: [metrics.registry],
      collect() {
        this.set(entries.size);
      },
    });
    new Gauge({
      name: 'gateway_cache_estimated_bytes',
      help: 'Estimated heap bytes held by the cached subscribers (bounded by GATEWAY_CACHE_MB) and catalogs',
      labelNames: ['cache'],
      registers: [metrics.registry],
      collect() {
        this.set({ cache: 'subscribers' }, entries.calculatedSize);
        this.set({ cache: 'catalogs' }, catalogs.calculatedSize);
      },
    });
    const loading = new Map<string, Promise<unknown>>();
    const entitlementsHit = metrics.cache.bind({ cache: 'entitlements', result: 'hit' });
    const catalogHit = metrics.cache.bind({ cache: 'catalog', result: 'hit' });

    const once = <T>(key: string, load: () => Promise<T>): Promise<T> => {
      const pending = loading.get(key) as Promise<T> | undefined;
      if (pending) return pending;
      const promise = load().finally(() => loading.delete(key));
      loading.set(key, promise);
      return promise;
    };

    const unavailable = (error: unknown): never => {
      if (error instanceof AdminUnavailableError) {
        throw serviceUnavailable(
          'Entitlements for this subscriber cannot be loaded right now; retry shortly.',
        );
      }
      throw error;
    };

    const redisRead = async <T>(op: string, read: () => Promise<T>): Promise<T> => {
      metrics.redisRoundTrips.inc({ op });
      try {
        return await read();
      } catch {
        metrics.redisErrors.inc({ op });
        throw serviceUnavailable('The entitlement store is unreachable; retry shortly.');
      }
    };

    function keepCatalog(organizationId: string, catalog: Versioned<CatalogDoc>): CatalogEntry {
      const cached = catalogs.get(organizationId);
      if (cached && cached.version >= catalog.version) return cached;
      const entry = new CatalogEntry(catalog.version, catalog.doc);
      catalogs.set(organizationId, entry);
      return entry;
    }

    /** Version 0 means Redis has no catalog (new or flushed): admin rebuilds and republishes it. */
    function loadCatalog(organizationId: string, wanted: number): Promise<CatalogEntry> {
      const cached = catalogs.get(organizationId);
      if (cached && wanted !== 0 && cached.version >= wanted) {
        catalogHit.inc();
        return Promise.resolve(cached);
      }
      metrics.cache.inc({ cache: 'catalog', result: 'miss' });
      return once(`catalog\n${organizationId}\n${wanted}`, async () => {
        if (wanted !== 0) {
          const stored = await redisRead('catalog', () => store.readCatalog(organizationId));
          if (stored && stored.version >= wanted) return keepCatalog(organizationId, stored);
        }
        metrics.snapshotRebuilds.inc({ kind: 'organization' });
        const rebuilt = await adminClient.organization(organizationId).catch(unavailable);
        return keepCatalog(organizationId, rebuilt.catalog);
      });
    }

    function loadSubscriber(
      organizationId: string,
      subscriberId: string,
      wanted: number,
    ): Promise<Versioned<SubscriberDoc>> {
      return once(`sub\n${organizationId}\n${subscriberId}\n${wanted}`, async () => {
        if (wanted !== 0) {
          const stored = await redisRead('subscriber', () =>
            store.readSubscriber(organizationId, subscriberId),
          );
          if (stored && stored.version >= wanted) return stored;
        }
        metrics.snapshotRebuilds.inc({ kind: 'subscriber' });
        return adminClient.subscriber(organizationId, subscriberId).catch(unavailable);
      });
    }

    const build = (
      catalog: CatalogEntry,
      subscriber: Versioned<SubscriberDoc>,
      nowMs: number,
    ): SubscriberEntry =>
      SubscriberEntry.of(
        catalog,
        subscriber.version,
        subscriber.doc,
        nowMs,
        subscriber.doc.exists ? null : nowMs + UNKNOWN_SUBSCRIBER_MEMORY_MS,
      );

    const matches = (entry: SubscriberEntry, versions: SnapshotVersions, nowMs: number): boolean =>
      entry.forgetAt === null
        ? entry.catalogVersion === versions.catalog && entry.subscriberVersion === versions.subscriber
        : versions.subscriber === 0 && nowMs < entry.forgetAt;

    const cache: SnapshotCache = {
      entitlements(organizationId, subscriberId, versions, nowMs, held) {
        // `held` answers if it matches the gate call, even if replaced since (it was right as of that call); else
        // what the LRU holds now (a load or an announced refresh may have landed meanwhile).
        let entry = held;
        if (entry === undefined || !matches(entry, versions, nowMs)) {
          entry = entries.get(organizationId, subscriberId, nowMs);
          if (entry === undefined || !matches(entry, versions, nowMs)) {
            return load(entry, organizationId, subscriberId, versions, nowMs);
          }
        }
        entitlementsHit.inc();
        if (entry.verifiedStamp !== versions.subscriberStamp) entry.verifiedStamp = versions.subscriberStamp;
        return entry.refreshAt(nowMs);
      },
      cached(organizationId, subscriberId, nowMs) {
        return entries.get(organizationId, subscriberId, nowMs)?.refreshAt(nowMs);
      },
    };
    app.decorate('snapshotCache', cache);

    async function load(
      entry: SubscriberEntry | undefined,
      organizationId: string,
      subscriberId: string,
      versions: SnapshotVersions,
      nowMs: number,
    ): Promise<SubscriberEntry> {
      metrics.cache.inc({ cache: 'entitlements', result: 'miss' });
      // Only the document whose version moved is read again.
      const sameSubscriber =
        entry &&
        entry.forgetAt === null &&
        versions.subscriber !== 0 &&
        entry.subscriberVersion === versions.subscriber;
      const [catalog, subscriber] = await Promise.all([
        loadCatalog(organizationId, versions.catalog),
        sameSubscriber
          ? { version: entry.subscriberVersion, doc: entry.subscriber }
          : loadSubscriber(organizationId, subscriberId, versions.subscriber),
      ]);
      const built = build(catalog, subscriber, nowMs);
      // Read after the gate call: only a document of the version that call gave is verified at its stamp.
      if (matches(built, versions, nowMs)) built.verifiedStamp = versions.subscriberStamp;
      const current = entries.peek(organizationId, subscriberId);
      // A concurrent load may have cached newer documents already; never replace newer with older.
      if (
        !current ||
        current.forgetAt !== null ||
        (current.catalogVersion <= built.catalogVersion &&
          current.subscriberVersion <= built.subscriberVersion)
      ) {
        entries.set(organizationId, subscriberId, built, nowMs);
      }
      return built;
    }

    /**
     * A newer subscriber document was announced: it is read now, while Redis is reachable (the announcement came
     * through it), and the old entry stays until the new one is in. Evicting instead would leave nothing to
     * answer from if Redis went away before the subscriber's next eval (a 503 where failing open was possible).
     */
    async function refresh(
      organizationId: string,
      subscriberId: string,
      entry: SubscriberEntry,
      version: number,
    ) {
      try {
        const subscriber = await loadSubscriber(organizationId, subscriberId, version);
        const nowMs = app.clock.now();
        const built = build(entry.catalog, subscriber, nowMs);
        const current = entries.peek(organizationId, subscriberId);
        if (
          current &&
          current.forgetAt === null &&
          current.subscriberVersion < built.subscriberVersion &&
          current.catalogVersion <= built.catalogVersion
        ) {
          entries.set(organizationId, subscriberId, built, nowMs);
        }
      } catch {
        // The next eval's version check reloads it; until then the old entry is what fail-open answers from.
      }
    }

    /** A subscriber's newer version was announced: an unknown-subscriber memory goes, an older entry is refreshed. */
    function announced(organizationId: string, subscriberId: string, version: number) {
      const entry = entries.peek(organizationId, subscriberId);
      if (!entry) return;
      if (entry.forgetAt !== null) entries.delete(organizationId, subscriberId);
      else if (entry.subscriberVersion < version) void refresh(organizationId, subscriberId, entry, version);
    }

    if (options.subscribeInvalidations === false) return;
    // Announcements (write-through and rebuild-job completions) evict at once; the version check in the
    // gate call is what guarantees freshness, so a lost message costs nothing but a round trip.
    const subscriber = (app.redis as Redis).duplicate({ enableOfflineQueue: true });
    subscriber.on('error', () => {});
    subscriber.on('message', (_channel: string, message: string) => {
      const invalidation = parseInvalidation(message);
      if (!invalidation) return;
      // Only what is older than the announced version goes: a late announcement (the relay or a rebuild
      // republishing what this gateway already holds) must not evict a fresh entry, which is what a gateway
      // answers from while Redis is unreachable.
      switch (invalidation.kind) {
        case 'subscriber':
          announced(invalidation.organizationId, invalidation.subscriberId, invalidation.version);
          break;
        case 'subscribers': {
          const { organizationId, subscriberIds, versions } = invalidation;
          for (let i = 0; i < subscriberIds.length; i++)
            announced(organizationId, subscriberIds[i]!, versions[i]!);
          break;
        }
        case 'catalog':
        case 'organization': {
          const version =
            invalidation.kind === 'catalog' ? invalidation.version : invalidation.catalogVersion;
          const cached = catalogs.peek(invalidation.organizationId);
          if (cached && cached.version < version) catalogs.delete(invalidation.organizationId);
          break;
        }
        case 'auth':
          app.principals.forgetOrganization(invalidation.organizationId, invalidation.version);
          break;
      }
    });
    void subscriber.subscribe(app.redisKeys.invalidationChannel).catch(() => {});
    app.addHook('onClose', async () => subscriber.disconnect());
  },
  {
    name: 'snapshot-cache',
    dependencies: ['infrastructure', 'admin-client', 'gateway-metrics', 'principals'],
  },
);
