import type { Role, Scope } from '../auth/scopes.ts';
import type { FeatureKind, MeteredReset, MeteredResetAnchor } from '../db/database.ts';

/**
 * Snapshot documents: what Redis holds for the gateway, built from Postgres by `build.ts`.
 *
 * A snapshot's version is its Postgres version plus one, so that 0 always means "no document in Redis"
 * (the metering script returns 0 for a missing hash) while a never-changed catalog (catalog_version 0)
 * still has a real version, 1.
 */
export const snapshotVersionOf = (databaseVersion: number): number => databaseVersion + 1;

export type Grant = { kind: 'flag' } | { kind: 'limit'; limit: number | null } | MeteredGrant;

/** DESIGN.md §5: a limit per period; `limit` null = unlimited. */
export interface MeteredGrant {
  kind: 'metered';
  limit: number | null;
  reset: MeteredReset;
  anchor: MeteredResetAnchor;
  soft: boolean;
  /** The grant's rollover max (issue 35): the unused allowance, up to it, becomes a credit; null = none. */
  rollover: number | null;
}

export interface CatalogPlan {
  archived: boolean;
  /** By feature key. */
  grants: Record<string, Grant>;
}

/** The organization's features and plans, read in one consistent snapshot. */
export interface CatalogDoc {
  /** Feature key -> kind. */
  features: Record<string, FeatureKind>;
  /** Plan id -> plan. */
  plans: Record<string, CatalogPlan>;
}

export type OverrideValue =
  | { kind: 'flag'; allowed: boolean; expiresAt: number | null }
  | { kind: 'limit' | 'metered'; limit: number | null; expiresAt: number | null };

/** One subscriber: the plans of its active subscriptions and its overrides (expired ones included). */
export interface SubscriberDoc {
  exists: boolean;
  /** Plan ids of active subscriptions (a plan may appear once per subscription). */
  plans: string[];
  /** By feature key; `expiresAt` in epoch milliseconds, null = never. */
  overrides: Record<string, OverrideValue>;
  /**
   * Plan id -> start (epoch ms) of the earliest active subscription to it: where a `subscription`-anchored metered
   * period starts counting. Absent on documents that carry no subscriptions.
   */
  subscribedAt?: Record<string, number>;
  /**
   * By metered feature key: every credit not voided whose expiry was ahead when the document was built, scheduled
   * ones included; the gateway decides which are live with its clock. Absent when the subscriber has none.
   */
  credits?: Record<string, CreditDoc[]>;
}

/** A credit as the gateway spends it (issue 35); instants in epoch milliseconds. */
export interface CreditDoc {
  id: string;
  amount: number;
  priority: number;
  effectiveAt: number;
  expiresAt: number | null;
  createdAt: number;
}

export const MISSING_SUBSCRIBER: SubscriberDoc = Object.freeze({ exists: false, plans: [], overrides: {} }) as SubscriberDoc;

/** An API key's principal as cached by gateways; `null` doc = revoked or unknown key. */
export interface ApiKeyDoc {
  organizationId: string;
  memberId: string;
  serviceAccountId: string;
  keyId: string;
  keyPrefix: string;
  role: Role;
  keyScopes: Scope[];
  /** Snapshot version of the organization's auth state this principal was read at. */
  authVersion: number;
}

export interface Versioned<T> {
  version: number;
  doc: T;
}
