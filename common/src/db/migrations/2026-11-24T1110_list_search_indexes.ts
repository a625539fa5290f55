import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new file instead.
//
// GET /org/subscribers?search= matches `lower(subscriber_id) LIKE '<term>%' OR lower(name) LIKE '%<term>%'`.
// The primary key cannot serve the prefix: LIKE uses a btree only under the C collation or a *_pattern_ops
// class (EXPLAIN on a C.UTF-8 database still chose a sequential scan), and the match is case-insensitive.
// With both sides indexed Postgres ORs two bitmaps (about 1 ms on 200,000 subscribers); with either side
// unindexed it scans all of the organization's subscribers (about 350 ms).
//
// The name side needs pg_trgm. It ships with PostgreSQL (contrib) and is a trusted extension, so the
// database's owner may create it; where it is missing or refused, the index is skipped with a notice: search
// answers the same, only slower, and the migration never fails a deployment over an optimisation.
//
// GET /org/plans?include=subscriber_count counts active subscriptions per plan: the partial index lets that
// count read the index alone (canceled subscriptions, which only grow, are not in it).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE INDEX subscribers_id_search ON subscribers (organization_id, lower(subscriber_id) text_pattern_ops);
    CREATE INDEX subscriptions_plan_active ON subscriptions (plan_id) WHERE status = 'active';

    DO $$
    BEGIN
      CREATE EXTENSION IF NOT EXISTS pg_trgm;
      CREATE INDEX subscribers_name_search ON subscribers USING gin (lower(name) gin_trgm_ops);
    EXCEPTION WHEN undefined_file OR insufficient_privilege OR feature_not_supported THEN
      RAISE NOTICE 'pg_trgm unavailable (%): subscriber name search runs without an index', SQLERRM;
    END $$;
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX IF EXISTS subscribers_name_search;
    DROP INDEX subscriptions_plan_active;
    DROP INDEX subscribers_id_search;
  `.execute(db);
}
