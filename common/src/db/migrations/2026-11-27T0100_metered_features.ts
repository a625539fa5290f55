import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new file instead.
//
// Metered features (DESIGN.md §5): a third feature kind whose grants carry a limit, a reset period, a reset anchor
// and a soft flag, and whose overrides replace the limit only. Existing rows keep their meaning: the new grant
// columns are NULL for flag and limit grants (a CHECK says so) and carry their defaults for metered ones.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE features DROP CONSTRAINT features_kind_check,
      ADD CONSTRAINT features_kind_check CHECK (kind IN ('flag', 'limit', 'metered'));

    ALTER TABLE plan_grants
      ADD COLUMN reset text CHECK (reset IN ('day', 'week', 'month', 'year', 'never')),
      ADD COLUMN reset_anchor text CHECK (reset_anchor IN ('calendar', 'subscription')),
      ADD COLUMN soft boolean,
      DROP CONSTRAINT plan_grants_check,
      ADD CONSTRAINT plan_grants_kind_fields CHECK (
        (feature_kind = 'flag' AND limit_value IS NULL AND reset IS NULL AND reset_anchor IS NULL AND soft IS NULL)
        OR (feature_kind = 'limit' AND reset IS NULL AND reset_anchor IS NULL AND soft IS NULL)
        OR (feature_kind = 'metered' AND reset IS NOT NULL AND reset_anchor IS NOT NULL AND soft IS NOT NULL)
      );

    ALTER TABLE overrides DROP CONSTRAINT overrides_check,
      ADD CONSTRAINT overrides_kind_fields CHECK (
        (feature_kind = 'flag' AND allowed IS NOT NULL AND limit_value IS NULL)
        OR (feature_kind IN ('limit', 'metered') AND allowed IS NULL)
      );

    -- Where a subscription-anchored metered period starts: its creation, or, for a subscription made by changing
    -- plans, the anchor of the one it replaced (decisions.md, "Metered usage: how it is built").
    ALTER TABLE subscriptions ADD COLUMN anchored_at timestamptz;
    UPDATE subscriptions SET anchored_at = created_at;
    ALTER TABLE subscriptions ALTER COLUMN anchored_at SET NOT NULL, ALTER COLUMN anchored_at SET DEFAULT now();

    -- The durable copy of metered usage: one row per subscriber, feature and period, written by the worker from
    -- Redis (the hot copy). A row is replaced only by a newer revision. Past periods stay.
    CREATE TABLE metered_usage (
      organization_id text NOT NULL REFERENCES organizations (id),
      subscriber_id text NOT NULL,
      feature_key text NOT NULL,
      period_start timestamptz NOT NULL,
      period_end timestamptz,
      used bigint NOT NULL CHECK (used >= 0),
      revision bigint NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (organization_id, subscriber_id, feature_key, period_start)
    );
    -- Refill after Redis came back empty: the balances whose period has not ended.
    CREATE INDEX metered_usage_open ON metered_usage (organization_id, period_end);
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TABLE metered_usage;
    ALTER TABLE subscriptions DROP COLUMN anchored_at;
    DELETE FROM overrides WHERE feature_kind = 'metered';
    DELETE FROM plan_grants WHERE feature_kind = 'metered';
    DELETE FROM features WHERE kind = 'metered';
    ALTER TABLE overrides DROP CONSTRAINT overrides_kind_fields,
      ADD CONSTRAINT overrides_check CHECK (
        (feature_kind = 'flag' AND allowed IS NOT NULL AND limit_value IS NULL)
        OR (feature_kind = 'limit' AND allowed IS NULL)
      );
    ALTER TABLE plan_grants DROP CONSTRAINT plan_grants_kind_fields,
      DROP COLUMN soft, DROP COLUMN reset_anchor, DROP COLUMN reset,
      ADD CONSTRAINT plan_grants_check CHECK (feature_kind = 'limit' OR limit_value IS NULL);
    ALTER TABLE features DROP CONSTRAINT features_kind_check,
      ADD CONSTRAINT features_kind_check CHECK (kind IN ('flag', 'limit'));
  `.execute(db);
}
