/**
 * The one place Redis key names are built. Every key that belongs to an organization carries the hash tag
 * `{<org id>}`, so any Lua script over one organization's keys runs on a single Redis Cluster slot.
 */
export function redisKeys(prefix: string) {
  const org = (organizationId: string) => `${prefix}:{${organizationId}}`;
  const creditSpentPrefix = (organizationId: string) => `${org(organizationId)}:credit-spent:`;
  return {
    /** Hash: `v` (catalog_version) and `doc` (JSON catalog document). */
    catalog: (organizationId: string) => `${org(organizationId)}:catalog`,
    /** Hash: `v` (subscriber version) and `doc` (JSON subscriber document). */
    subscriber: (organizationId: string, subscriberId: string) =>
      `${org(organizationId)}:sub:${subscriberId}`,
    /**
     * Hash: subscriber id → the `v` of that subscriber's hash, written with it by subscriber-put-2.lua, so the
     * gate reads every subscriber version of a batch with one HMGET; and `#w`, the subscriber-write stamp, moved
     * with every change of the index, so the gate skips the versions a gateway verified at the current stamp.
     */
    subscriberVersions: (organizationId: string) => `${org(organizationId)}:subv`,
    /** Hash: `v` (auth_version): bumped when keys, members or roles change. */
    auth: (organizationId: string) => `${org(organizationId)}:auth`,
    /** Hash: the organization's eval arrangement (limit, blocking, burst, plan). */
    arrangement: (organizationId: string) => `${org(organizationId)}:arrangement`,
    /** Hash per UTC month (`YYYY-MM`): eval count and first_over_at. */
    evalUsage: (organizationId: string, period: string) => `${org(organizationId)}:usage:${period}`,
    /** String per gate batch, kept briefly: evals it counted, or `settled` (gateway/src/metering/settlements.ts). */
    gateBatch: (organizationId: string, batchId: string) => `${org(organizationId)}:gate:${batchId}`,
    /**
     * Metered usage (DESIGN.md §5), the hot copy. One hash per subscriber, metered feature and period:
     * `{u: used, r: revision (+1 per change, so the worker's writes to Postgres never go back), e: period end ms or
     * '' for "never"}`. Named by `meteredMember`, so a dirty-set member is the key's own tail.
     */
    meteredBalance: (organizationId: string, member: string) => `${org(organizationId)}:m:${member}`,
    /**
     * Hash per subscriber and metered feature: credit id -> spent so far (issue 35). A changed one is named in the
     * dirty set by `creditDirtyMember`, for the worker to persist `spent` to Postgres.
     */
    creditSpent: (organizationId: string, subscriberId: string, feature: string) =>
      `${creditSpentPrefix(organizationId)}${creditOwner(subscriberId, feature)}`,
    /** What every `creditSpent` key of the organization starts with (a script adds the owner). */
    creditSpentPrefix,
    /** Set of `meteredMember`s changed since the worker last persisted them to Postgres. */
    meteredDirty: (organizationId: string) => `${org(organizationId)}:mdirty`,
    /**
     * String present once Redis holds the organization's balances (refilled from Postgres and the gateways' last
     * figures after Redis came back empty): metered answers wait for it.
     */
    meteredReady: (organizationId: string) => `${org(organizationId)}:mready`,
    /**
     * String, briefly: when the first gateway merged its figures into a Redis that came back without the
     * organization's balances; every gateway that meets "not ready" until then plus the gathering time merges its own
     * before any marks the organization ready (gateway/src/metering/metered-balances.ts).
     */
    meteredRefillStarted: (organizationId: string) => `${org(organizationId)}:mrefill`,
    /** String per usage idempotency key, 24 h: the request's fingerprint and its first answer. */
    usageIdempotency: (organizationId: string, idempotencyKey: string) =>
      `${org(organizationId)}:idem:${idempotencyKey}`,
    /** Hash `{count, since}`: usage events (reports, batch events) taken in the current one-second window. */
    usageEventsWindow: (organizationId: string) => `${org(organizationId)}:urate`,
    /** Set of organization ids with dirty balances: where the worker looks (not org-tagged: a command of its own). */
    meteredDirtyOrganizations: `${prefix}:mdirty-orgs`,
    /** Counter per one-second window for the burst limit. */
    burst: (organizationId: string) => `${org(organizationId)}:burst`,
    /** String: JSON of the key's principal, by SHA-256 of the plaintext. Not org-tagged: the org is unknown yet. */
    apiKey: (keyHash: string) => `${prefix}:apikey:${keyHash}`,
    /**
     * Hash `{count, since}`: failed console sign-ins for one account (email) from every address, by a digest of
     * the email (no email reaches Redis). Its own hash tag: one key per script call.
     */
    signInFailures: (accountDigest: string) => `${prefix}:{signin:${accountDigest}}`,
    /** Hash `{count, since}`: failed console sign-ins for one account from one client address, by a digest of both. */
    signInAccountAddressFailures: (accountAddressDigest: string) =>
      `${prefix}:{signin-from:${accountAddressDigest}}`,
    /** Hash `{count, since}`: failed console sign-ins from one client address (IPv6: its /64). */
    signInAddressFailures: (clientAddress: string) => `${prefix}:{signin-ip:${clientAddress}}`,
    /** Hash `{count, since}`: console sign-ups from one client address (IPv6: its /64) in the current window. */
    signUpsFromAddress: (clientAddress: string) => `${prefix}:{signup-ip:${clientAddress}}`,
    /** BullMQ prefix: one hash tag so each queue's keys share a slot. */
    queuePrefix: `${prefix}:{queues}`,
    /** Pub/sub channel on which snapshot changes are announced to gateways. */
    invalidationChannel: `${prefix}:invalidations`,
  };
}

export type RedisKeys = ReturnType<typeof redisKeys>;

/**
 * A balance's name within its organization: subscriber, feature and period start, joined by `|`, which neither a
 * subscriber id (SUBSCRIBER_ID_PATTERN) nor a feature key (FEATURE_KEY_PATTERN) may hold, so it parses back.
 */
export const meteredMember = (subscriberId: string, feature: string, periodStartMs: number): string =>
  `${subscriberId}|${feature}|${periodStartMs}`;

export function parseMeteredMember(member: string): {
  subscriberId: string;
  feature: string;
  periodStartMs: number;
} {
  const [subscriberId, feature, start] = member.split('|');
  return { subscriberId: subscriberId!, feature: feature!, periodStartMs: Number(start) };
}

/**
 * Whose credits on which feature: the tail of a credit-spent hash's key (`creditSpent`) and of its dirty member, and
 * what the gateway's credits spec names (metered-credits.fragment.lua makes both from it).
 */
export const creditOwner = (subscriberId: string, feature: string): string => `${subscriberId}|${feature}`;

/** The dirty-set member naming a subscriber's credit-spent hash for one feature (`creditSpent`). */
export const creditDirtyMember = (subscriberId: string, feature: string): string =>
  `credit|${creditOwner(subscriberId, feature)}`;

/**
 * The dirty-set member naming a balance together with its owner's credit-spent hash: what a change that met credits
 * marks (metered-balance.fragment.lua), so the worker reads the balance and the hash in one step and one member, not
 * two, stands for both. The worker's drain (metered-drain-1.lua) tells the three kinds of member apart.
 */
export const creditBalanceDirtyMember = (balanceMember: string): string => `credit|${balanceMember}`;
