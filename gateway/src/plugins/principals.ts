import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { LRUCache } from 'lru-cache';
import { hashApiKey, isWellFormedApiKey } from '@ent/common/auth/api-key';
import { AuthFailureLimiter, authRateLimited } from '@ent/common/auth/failure-limiter';
import { effectiveScopes, type ApiKeyPrincipal, type Principal } from '@ent/common/auth/scopes';
import { serviceUnavailable, unauthenticated } from '@ent/common/errors/app-error';
import type { ApiKeyDoc } from '@ent/common/snapshots/documents';
import { AdminUnavailableError } from './admin-client.ts';
import { failureLimitAddress } from '@ent/common/http/local-client';

/**
 * A key as the gateway knows it: its principal (null = revoked or unknown) and the auth version read at. A console
 * session takes the same shape for the one request it was checked for (`session`: never cached, never re-read).
 */
export interface KnownKey<P extends Principal = Principal> {
  keyHash: string;
  principal: P | null;
  /** The key's organization, kept when it was revoked (or its member suspended) so a reactivation is seen. */
  organizationId: string | null;
  version: number;
  /** Unknown keys, and refused keys of an unknown organization, are remembered briefly only (epoch ms). */
  forgetAt: number | null;
  /** When a gate call (its auth version) or admin last confirmed the key (epoch ms): bounds fail-open answers. */
  confirmedAt: number;
  /** A console session, confirmed by admin for this very request: the gate's auth version does not concern it. */
  session: boolean;
}

export interface Principals {
  /**
   * The key's principal from the LRU, else Redis, else admin; throws 401 for a bad, unknown or revoked key, and
   * 429 (before any lookup) for a key not in memory when `client` has used up its failed lookups. `client` names
   * the failed-lookup bucket: an address, or the request it is worked out from only when a lookup is needed.
   */
  authenticate(
    plaintext: string | undefined,
    client?: string | FastifyRequest,
  ): Promise<KnownKey<ApiKeyPrincipal>>;
  /**
   * The warm path of `authenticate`, without a promise: a valid key already in memory, else undefined (then
   * `authenticate` decides).
   */
  known(plaintext: string): KnownKey<ApiKeyPrincipal> | undefined;
  /**
   * After the gate call: the principal as of the organization's current auth version (re-read when it
   * differs from the cached one, hence a promise only then); throws 401 when the key has been revoked meanwhile.
   */
  confirm(known: KnownKey, authVersion: number, nowMs: number): KnownKey | Promise<KnownKey>;
  /**
   * For an answer while Redis is unreachable: the key if confirmed within KEY_CONFIRMATION_MS, else re-checked
   * with admin (from Postgres); throws 401 when revoked, 503 when admin cannot say.
   */
  confirmWithoutRedis(known: KnownKey, nowMs: number): Promise<KnownKey>;
  /**
   * Drops the organization's cached keys (a change was announced). With `atAuthVersion`, entries read at that
   * version or later are kept: a late announcement never evicts a newer entry.
   */
  forgetOrganization(organizationId: string, atAuthVersion?: number): void;
}

declare module 'fastify' {
  interface FastifyInstance {
    principals: Principals;
  }
}

/** What this plugin caches: API keys only. */
type ApiKey = KnownKey<ApiKeyPrincipal>;

const UNKNOWN_KEY_MEMORY_MS = 5000;
/** Unknown keys remembered at once (about 200 bytes each); random keys only ever evict each other. */
const UNKNOWN_KEYS_MAX = 10_000;
/**
 * How old a key's last confirmation may be for a fail-open answer while Redis is unreachable: a revocation
 * committed meanwhile wins within this time (plus one admin round trip), instead of never.
 */
export const KEY_CONFIRMATION_MS = 10_000;

const toPrincipal = (doc: ApiKeyDoc): ApiKeyPrincipal => ({
  organizationId: doc.organizationId,
  memberId: doc.memberId,
  serviceAccountId: doc.serviceAccountId,
  keyId: doc.keyId,
  keyPrefix: doc.keyPrefix,
  role: doc.role,
  keyScopes: doc.keyScopes,
  scopes: effectiveScopes(doc.keyScopes, doc.role),
  authType: 'member_apikey',
});

/** API keys by SHA-256 hash: an LRU over the Redis key documents, rebuilt through admin on a miss. */
export const principals = fp<{ max?: number; unknownMax?: number }>(
  async function principals(app: FastifyInstance, options) {
    const cache = new LRUCache<string, ApiKey>({ max: options.max ?? 10_000 });
    // Keys remembered briefly (unknown ones) live apart, so a flood of random keys cannot evict real ones.
    const unknownKeys = new LRUCache<string, ApiKey>({ max: options.unknownMax ?? UNKNOWN_KEYS_MAX });
    const failures = new AuthFailureLimiter(app.config, () => app.clock.now());
    // Keys already checked and hashed once skip the checksum and SHA-256 on later requests.
    const hashOfKnownPlaintext = new LRUCache<string, string>({ max: options.max ?? 10_000 });
    const loading = new Map<string, Promise<ApiKey>>();
    const rechecking = new Map<string, Promise<ApiKey>>();
    const { gatewayMetrics: metrics, snapshotStore: store, adminClient } = app;
    const principalHit = metrics.cache.bind({ cache: 'principal', result: 'hit' });
    const principalMiss = metrics.cache.bind({ cache: 'principal', result: 'miss' });

    const known = (
      keyHash: string,
      version: number,
      doc: ApiKeyDoc | null,
      unknown = false,
      formerOrganizationId: string | null = null,
    ): ApiKey => {
      const entry: ApiKey = {
        keyHash,
        principal: doc ? toPrincipal(doc) : null,
        organizationId: doc?.organizationId ?? formerOrganizationId,
        version,
        // A refusal whose organization is unknown cannot be re-checked cheaply, so it is only kept briefly.
        forgetAt: unknown || (!doc && !formerOrganizationId) ? app.clock.now() + UNKNOWN_KEY_MEMORY_MS : null,
        confirmedAt: app.clock.now(),
        session: false,
      };
      if (entry.forgetAt === null) {
        cache.set(keyHash, entry);
        unknownKeys.delete(keyHash);
      } else {
        unknownKeys.set(keyHash, entry);
        cache.delete(keyHash);
      }
      return entry;
    };

    async function fromAdmin(keyHash: string, organizationId: string | null): Promise<ApiKey> {
      metrics.snapshotRebuilds.inc({ kind: 'api_key' });
      try {
        const rebuilt = await adminClient.apiKey(keyHash);
        return rebuilt
          ? known(keyHash, rebuilt.version, rebuilt.doc, false, rebuilt.organizationId)
          : known(keyHash, 0, null, true, organizationId);
      } catch (error) {
        if (error instanceof AdminUnavailableError)
          throw serviceUnavailable('API keys cannot be checked right now; retry shortly.');
        throw error;
      }
    }

    /** Redis first (accepted when at least `minVersion`), then admin. One load per key at a time. */
    function load(
      keyHash: string,
      minVersion: number | null,
      organizationId: string | null = null,
    ): Promise<ApiKey> {
      const pending = loading.get(keyHash);
      if (pending) return pending;
      const promise = (async () => {
        metrics.redisRoundTrips.inc({ op: 'api_key' });
        const stored = await store.readApiKey(keyHash).catch(() => {
          metrics.redisErrors.inc({ op: 'api_key' });
          return undefined;
        });
        if (stored && (minVersion === null || stored.version === minVersion)) {
          return known(keyHash, stored.version, stored.doc, false, stored.organizationId ?? organizationId);
        }
        return fromAdmin(keyHash, organizationId);
      })().finally(() => loading.delete(keyHash));
      loading.set(keyHash, promise);
      return promise;
    }

    /**
     * A refused key of a known organization: one read of the organization's auth version says whether
     * anything changed since (a member reactivated); only then is the key read again.
     */
    async function recheckRefused(entry: ApiKey, organizationId: string): Promise<ApiKey> {
      metrics.redisRoundTrips.inc({ op: 'auth_version' });
      const raw = await app.redis.hget(app.redisKeys.auth(organizationId), 'v').catch(() => {
        metrics.redisErrors.inc({ op: 'auth_version' });
        return null;
      });
      const version = Number(raw ?? 0);
      if (raw === null || version === entry.version) return entry;
      return load(entry.keyHash, version, organizationId);
    }

    const service: Principals = {
      async authenticate(plaintext, client) {
        if (!plaintext) throw unauthenticated();
        let keyHash = hashOfKnownPlaintext.get(plaintext);
        const hashedNow = keyHash === undefined;
        if (keyHash === undefined) {
          if (!isWellFormedApiKey(plaintext)) throw unauthenticated();
          keyHash = hashApiKey(plaintext);
        }
        let entry = cache.get(keyHash) ?? unknownKeys.get(keyHash);
        if (entry && entry.forgetAt !== null && app.clock.now() >= entry.forgetAt) entry = undefined;
        (entry ? principalHit : principalMiss).inc();
        if (!entry) {
          // Only lookups cost anything: an address out of failures gets no more of them, keys in memory still work.
          const clientIp = typeof client === 'object' ? failureLimitAddress(client) : client;
          const retryAfter = clientIp === undefined ? 0 : failures.beforeLookup(clientIp);
          if (retryAfter > 0) throw authRateLimited(retryAfter);
          try {
            entry = await load(keyHash, null);
          } catch (error) {
            // Admin could not say (503): not the client's failure.
            if (clientIp !== undefined) failures.notAFailure(clientIp);
            throw error;
          }
          if (entry.principal && clientIp !== undefined) failures.notAFailure(clientIp);
        }
        // Only keys that were issued are remembered by plaintext: random ones would evict them.
        if (hashedNow && entry.forgetAt === null) hashOfKnownPlaintext.set(plaintext, keyHash);
        if (!entry.principal && entry.organizationId)
          entry = await recheckRefused(entry, entry.organizationId);
        if (!entry.principal) throw unauthenticated('The API key is invalid or has been revoked.');
        return entry;
      },
      known(plaintext) {
        const keyHash = hashOfKnownPlaintext.get(plaintext);
        if (keyHash === undefined) return undefined;
        const entry = cache.get(keyHash);
        if (!entry || !entry.principal || entry.forgetAt !== null) return undefined;
        principalHit.inc();
        return entry;
      },
      confirm(entry, authVersion, nowMs) {
        if (entry.version === authVersion) {
          entry.confirmedAt = nowMs;
          return entry;
        }
        if (entry.session) return entry;
        return load(entry.keyHash, authVersion, entry.organizationId).then((current) => {
          if (!current.principal) throw unauthenticated('The API key is invalid or has been revoked.');
          return current;
        });
      },
      async confirmWithoutRedis(entry, nowMs) {
        if (nowMs - entry.confirmedAt <= KEY_CONFIRMATION_MS || entry.session) return entry;
        let pending = rechecking.get(entry.keyHash);
        if (!pending) {
          pending = fromAdmin(entry.keyHash, entry.organizationId).finally(() =>
            rechecking.delete(entry.keyHash),
          );
          rechecking.set(entry.keyHash, pending);
        }
        const current = await pending;
        if (!current.principal) throw unauthenticated('The API key is invalid or has been revoked.');
        return current;
      },
      forgetOrganization(organizationId, atAuthVersion) {
        for (const [keyHash, entry] of cache.entries()) {
          // Refused keys stay: they re-check the auth version themselves (see recheckRefused).
          if (entry.principal?.organizationId !== organizationId) continue;
          if (atAuthVersion !== undefined && entry.version >= atAuthVersion) continue;
          cache.delete(keyHash);
        }
      },
    };
    app.decorate('principals', service);
  },
  { name: 'principals', dependencies: ['infrastructure', 'admin-client', 'gateway-metrics'] },
);
