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
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
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
