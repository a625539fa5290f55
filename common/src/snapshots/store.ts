import { randomInt } from 'node:crypto';
import { withScripts } from '../redis/commands.ts';
import type { RedisClient } from '../redis/connect.ts';
import type { RedisKeys } from '../redis/keys.ts';
import type { ApiKeyDoc, CatalogDoc, SubscriberDoc, Versioned } from './documents.ts';

/**
 * What gateways learn on the invalidation channel; the version check in the gate call is the guarantee. Each
 * message names the snapshot version now in Redis, so a late message (a relay or rebuild announcing what a
 * gateway already holds) never evicts an entry as new as it.
 */
export type Invalidation =
  | { kind: 'catalog'; organizationId: string; version: number }
  | { kind: 'subscriber'; organizationId: string; subscriberId: string; version: number }
  /**
   * Many subscribers of one organization at once (an import batch, a relay pass): `versions[i]` is
   * `subscriberIds[i]`'s. Gateways before this kind ignore it (no `version`), which costs them only a round trip.
   */
  | { kind: 'subscribers'; organizationId: string; subscriberIds: string[]; versions: number[] }
  | { kind: 'auth'; organizationId: string; version: number }
  | { kind: 'organization'; organizationId: string; catalogVersion: number };

export const parseInvalidation = (message: string): Invalidation | null => {
  try {
    const value = JSON.parse(message) as Invalidation;
    if (typeof value?.organizationId !== 'string') return null;
    if (value.kind === 'subscribers')
      return Array.isArray(value.subscriberIds) &&
        Array.isArray(value.versions) &&
        value.subscriberIds.length === value.versions.length
        ? value
        : null;
    const version = value.kind === 'organization' ? value.catalogVersion : value.version;
    return typeof version === 'number' ? value : null;
  } catch {
    return null;
  }
};

const parseHash = <T>(fields: (string | null)[]): Versioned<T | null> | null => {
  const [v, doc] = fields;
  if (v === null || v === undefined) return null;
  return { version: Number(v), doc: doc ? (JSON.parse(doc) as T) : null };
};

/**
 * Where a missing subscriber-write stamp starts: random, so a flushed Redis never hands gateways a stamp they saw
 * before its flush (1 chance in 2^48 per value). Below 2^48, the stamp stays an exact number in Lua and in JS.
 */
const randomStampStart = () => randomInt(1, 2 ** 48);

/**
 * Subscribers per script call of `putSubscribers` and `subscribersBehind`: a call blocks Redis while it runs (about 2 µs per
 * subscriber), so gate calls queue behind it for at most about a millisecond.
 */
const SUBSCRIBERS_PER_CALL = 500;

/** Reads and version-guarded writes of snapshot documents in Redis. */
export function snapshotStore(redis: RedisClient, keys: RedisKeys) {
  const put = (key: string, version: number, doc: unknown): Promise<boolean> =>
    withScripts(redis)
      .entSnapshotPut(key, version, doc === null ? '' : JSON.stringify(doc))
      .then((written) => written === 1);

  return {
    putCatalog: (organizationId: string, snapshot: Versioned<CatalogDoc>) =>
      put(keys.catalog(organizationId), snapshot.version, snapshot.doc),
    /**
     * The document, its entry in the organization's subscriber-version index and the index's subscriber-write
     * stamp, in one script (the gate reads the index, or skips it while the stamp has not moved).
     */
    putSubscriber: (organizationId: string, subscriberId: string, snapshot: Versioned<SubscriberDoc>) =>
      withScripts(redis)
        .entSubscriberPut(
          keys.subscriber(organizationId, subscriberId),
          keys.subscriberVersions(organizationId),
          snapshot.version,
          snapshot.doc === null ? '' : JSON.stringify(snapshot.doc),
          subscriberId,
          randomStampStart(),
        )
        .then((written) => written === 1),
    /** `putSubscriber` for many subscribers, a few script calls in all; answers how many documents were written. */
    putSubscribers: async (
      organizationId: string,
      snapshots: ReadonlyMap<string, Versioned<SubscriberDoc>>,
    ): Promise<number> => {
      const all = [...snapshots];
      const calls: Promise<number | (number | string)[]>[] = [];
      for (let start = 0; start < all.length; start += SUBSCRIBERS_PER_CALL) {
        const chunk = all.slice(start, start + SUBSCRIBERS_PER_CALL);
        const args: (string | number)[] = [chunk.length + 1, keys.subscriberVersions(organizationId)];
        for (const [subscriberId] of chunk) args.push(keys.subscriber(organizationId, subscriberId));
        args.push(randomStampStart());
        for (const [subscriberId, snapshot] of chunk)
          args.push(
            snapshot.version,
            snapshot.doc === null ? '' : JSON.stringify(snapshot.doc),
            subscriberId,
          );
        calls.push(withScripts(redis).entSubscribersPut(...args));
      }
      return (await Promise.all(calls)).reduce<number>((sum, written) => sum + Number(written), 0);
    },
    /**
     * Which of `expected` (subscriber id and snapshot version) Redis holds behind, document or index entry: one script
     * call per SUBSCRIBERS_PER_CALL subscribers.
     */
    subscribersBehind: async (
      organizationId: string,
      expected: readonly { subscriberId: string; version: number }[],
    ): Promise<string[]> => {
      const calls: Promise<string[]>[] = [];
      for (let start = 0; start < expected.length; start += SUBSCRIBERS_PER_CALL) {
        const chunk = expected.slice(start, start + SUBSCRIBERS_PER_CALL);
        const args: (string | number)[] = [chunk.length + 1, keys.subscriberVersions(organizationId)];
        for (const { subscriberId } of chunk) args.push(keys.subscriber(organizationId, subscriberId));
        for (const { subscriberId, version } of chunk) args.push(subscriberId, version);
        calls.push(
          withScripts(redis)
            .entSubscribersBehind(...args)
            .then((positions) =>
              (positions as number[]).map((position) => chunk[position - 1]!.subscriberId),
            ),
        );
      }
      return (await Promise.all(calls)).flat();
    },
    putAuthVersion: (organizationId: string, version: number) =>
      put(keys.auth(organizationId), version, null),
    /**
     * A null doc is a tombstone: the key is refused (revoked, or its member not active), and an older live
     * copy can never be written back. The organization is kept beside it, so a gateway holding the refusal
     * can tell when that organization's auth state moves on (a member reactivated).
     */
    putApiKey: async (keyHash: string, organizationId: string, version: number, doc: ApiKeyDoc | null) => {
      const written = await put(keys.apiKey(keyHash), version, doc);
      if (written) await redis.hset(keys.apiKey(keyHash), 'org', organizationId);
      return written;
    },

    readCatalog: async (organizationId: string): Promise<Versioned<CatalogDoc> | null> => {
      const snapshot = parseHash<CatalogDoc>(await redis.hmget(keys.catalog(organizationId), 'v', 'doc'));
      return snapshot?.doc ? (snapshot as Versioned<CatalogDoc>) : null;
    },
    readSubscriber: async (
      organizationId: string,
      subscriberId: string,
    ): Promise<Versioned<SubscriberDoc> | null> => {
      const snapshot = parseHash<SubscriberDoc>(
        await redis.hmget(keys.subscriber(organizationId, subscriberId), 'v', 'doc'),
      );
      return snapshot?.doc ? (snapshot as Versioned<SubscriberDoc>) : null;
    },
    /** null: not in Redis; `{doc: null}`: a tombstone (refused), with the key's organization. */
    readApiKey: async (
      keyHash: string,
    ): Promise<(Versioned<ApiKeyDoc | null> & { organizationId: string | null }) | null> => {
      const [v, doc, org] = await redis.hmget(keys.apiKey(keyHash), 'v', 'doc', 'org');
      const snapshot = parseHash<ApiKeyDoc>([v ?? null, doc ?? null]);
      return snapshot && { ...snapshot, organizationId: snapshot.doc?.organizationId ?? org ?? null };
    },

    publishInvalidation: (invalidation: Invalidation) =>
      redis.publish(keys.invalidationChannel, JSON.stringify(invalidation)),
  };
}

export type SnapshotStore = ReturnType<typeof snapshotStore>;
