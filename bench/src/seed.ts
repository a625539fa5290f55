import { sql, type Kysely } from 'kysely';
import type { Database } from '@ent/common/db/database';

export interface SeedShape {
  features: number;
  plans: number;
  subscribers: number;
  /** Metered features (DESIGN.md §5) besides the `features` flags and limits; none unless given. */
  metered?: MeteredSeed[];
}

/** A metered feature every plan grants (reset month, calendar, hard), with plan p's limit `limits[p % length]`. */
export interface MeteredSeed {
  key: string;
  limits: (number | null)[];
  /** Live credits (DESIGN.md §5, "Credits") every subscriber holds on this feature; none unless given. */
  credits?: number;
}

/** The metered feature the load's `consume` and `metered-check` requests use. */
export const METERED_FEATURE = 'metered-calls';
/** The metered feature the load's `usage-events` batches report to (apart, so each feature's total is checkable). */
export const METERED_EVENTS_FEATURE = 'metered-events';
/** Metered features on which every subscriber holds credits (`npm run bench -- credits`): allowance left, and none. */
export const CREDITS_HELD_FEATURE = 'metered-credits-held';
export const CREDITS_SPENT_FEATURE = 'metered-credits-spent';
/** Large enough that no bench consume is ever refused, yet a limit: the consume compares against it. */
export const LARGE_LIMIT = 1_000_000_000_000;

export const DEFAULT_SHAPE: SeedShape = { features: 20, plans: 5, subscribers: 100_000 };

/** Credits every subscriber holds on each credited feature of CREDITED_METERED. */
export const CREDITS_PER_SUBSCRIBER = 5;
/**
 * The metered features of the credits modes (issue 35): the consume's feature without credits, and five live credits
 * per subscriber on a feature whose allowance is left (the credits are read, none spent) and one with an allowance of
 * 0 (each consume spends one).
 */
export const CREDITED_METERED: MeteredSeed[] = [
  { key: METERED_FEATURE, limits: [LARGE_LIMIT] },
  { key: CREDITS_HELD_FEATURE, limits: [LARGE_LIMIT], credits: CREDITS_PER_SUBSCRIBER },
  { key: CREDITS_SPENT_FEATURE, limits: [0], credits: CREDITS_PER_SUBSCRIBER },
];

/** Zero-padded to the catalog's widest index (at least two digits), so keys sort like their numbers. */
const keyWidth = (features: number) => Math.max(2, String(features - 1).length);
export const featureKey = (i: number, features: number) =>
  `feature-${String(i).padStart(keyWidth(features), '0')}`;

/**
 * `features` features (even: limit, odd: flag), `plans` plans granting overlapping prefixes of the catalog
 * (with 20 features and 5 plans: 7, 10, 13, 16 and 19 features), `subscribers` subscribers with one subscription
 * each (every seventh has a second), and an override on every tenth. Bulk SQL.
 */
export async function seed(
  db: Kysely<Database>,
  organizationId: string,
  shape: SeedShape,
  /** Makes the rows' ids unique when several organizations are seeded in one database. */
  idTag = 'bench',
): Promise<void> {
  const { features, plans, subscribers } = shape;
  const feat = `feat_${idTag}_`;
  const plan = `plan_${idTag}_`;
  const subscription = `sub_${idTag}_`;
  const override = `ovr_${idTag}_`;
  await sql`
    INSERT INTO features (id, organization_id, key, name, kind)
    SELECT ${feat}::text || i, ${organizationId}, 'feature-' || lpad(i::text, ${keyWidth(features)}, '0'), 'Feature ' || i,
           CASE WHEN i % 2 = 0 THEN 'limit' ELSE 'flag' END
    FROM generate_series(0, ${features - 1}) AS i`.execute(db);
  await sql`
    INSERT INTO plans (id, organization_id, key, name, kind)
    SELECT ${plan}::text || p, ${organizationId}, 'plan-' || p, 'Plan ' || p, 'catalog'
    FROM generate_series(0, ${plans - 1}) AS p`.execute(db);
  await sql`
    INSERT INTO plan_grants (plan_id, feature_id, feature_kind, limit_value)
    SELECT ${plan}::text || p, ${feat}::text || i, CASE WHEN i % 2 = 0 THEN 'limit' ELSE 'flag' END,
           CASE WHEN i % 2 = 0 THEN CASE WHEN p = 4 AND i < 6 THEN NULL ELSE (p + 1) * 10 + i END END
    FROM generate_series(0, ${plans - 1}) AS p, generate_series(0, ${features - 1}) AS i
    WHERE i * 20 < ${features} * (7 + 3 * (p % 5))`.execute(db);
  await sql`
    INSERT INTO subscribers (organization_id, subscriber_id, name)
    SELECT ${organizationId}, 'sub-' || s, 'Subscriber ' || s FROM generate_series(0, ${subscribers - 1}) AS s`.execute(
    db,
  );
  await sql`
    INSERT INTO subscriptions (id, organization_id, subscriber_id, plan_id)
    SELECT ${subscription}::text || 'a' || s, ${organizationId}, 'sub-' || s, ${plan}::text || (s % ${plans})
    FROM generate_series(0, ${subscribers - 1}) AS s`.execute(db);
  await sql`
    INSERT INTO subscriptions (id, organization_id, subscriber_id, plan_id)
    SELECT ${subscription}::text || 'b' || s, ${organizationId}, 'sub-' || s, ${plan}::text || ((s + 2) % ${plans})
    FROM generate_series(0, ${subscribers - 1}) AS s WHERE s % 7 = 0`.execute(db);
  await sql`
    INSERT INTO overrides (id, organization_id, subscriber_id, feature_id, feature_kind, allowed, limit_value)
    SELECT ${override}::text || s, ${organizationId}, 'sub-' || s, ${feat}::text || (s % ${features}),
           CASE WHEN (s % ${features}) % 2 = 0 THEN 'limit' ELSE 'flag' END,
           CASE WHEN (s % ${features}) % 2 = 1 THEN true END,
           CASE WHEN (s % ${features}) % 2 = 0 THEN 1000 + s END
    FROM generate_series(0, ${subscribers - 1}) AS s WHERE s % 10 = 0`.execute(db);
  for (const [m, { key, limits, credits }] of (shape.metered ?? []).entries()) {
    await sql`
      INSERT INTO features (id, organization_id, key, name, kind)
      VALUES (${`${feat}m${m}`}, ${organizationId}, ${key}, ${key}, 'metered')`.execute(db);
    await sql`
      INSERT INTO plan_grants (plan_id, feature_id, feature_kind, limit_value, reset, reset_anchor, soft)
      SELECT ${plan}::text || p, ${`${feat}m${m}`}, 'metered', (${JSON.stringify(limits)}::jsonb ->> (p % ${limits.length}))::bigint,
             'month', 'calendar', false
      FROM generate_series(0, ${plans - 1}) AS p`.execute(db);
    if (credits)
      await seedCredits(db, organizationId, `${feat}m${m}`, subscribers, credits, `${idTag}_m${m}`);
  }
}

/**
 * `perSubscriber` live credits of 10^11 for every subscriber on one feature, with the priorities and expiries mixed
 * (some never expire, the others in 30 to 30 * perSubscriber days) so the spending order has ties to break.
 */
async function seedCredits(
  db: Kysely<Database>,
  organizationId: string,
  featureId: string,
  subscribers: number,
  perSubscriber: number,
  idTag: string,
) {
  await sql`
    INSERT INTO credits (id, organization_id, subscriber_id, feature_id, name, amount, priority, effective_at, expires_at,
                         source)
    SELECT 'cr_' || ${idTag}::text || '_' || s || '_' || c, ${organizationId}, 'sub-' || s, ${featureId},
           'Bench credit ' || c, 100000000000, 5 + 5 * (c % 3), now() - interval '1 day',
           CASE WHEN c % 2 = 0 THEN NULL ELSE now() + (30 * (c + 1)) * interval '1 day' END, 'manual'
    FROM generate_series(0, ${subscribers - 1}) AS s, generate_series(0, ${perSubscriber - 1}) AS c`.execute(
    db,
  );
}
