import { sql, type Kysely } from 'kysely';

// Frozen: never edit a migration that has shipped; add a new file instead.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE organizations (
      id text PRIMARY KEY,
      name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 255),
      slug text NOT NULL UNIQUE CHECK (slug ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
      eval_plan text DEFAULT 'free',
      eval_limit bigint DEFAULT 250000 CHECK (eval_limit IS NULL OR eval_limit >= 0),
      eval_blocking boolean NOT NULL DEFAULT true,
      eval_burst integer NOT NULL DEFAULT 100 CHECK (eval_burst > 0),
      catalog_version bigint NOT NULL DEFAULT 0,
      auth_version bigint NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    );

    CREATE TABLE members (
      id text PRIMARY KEY,
      organization_id text NOT NULL REFERENCES organizations (id),
      kind text NOT NULL CHECK (kind IN ('user', 'service_account')),
      email text,
      name text,
      role text NOT NULL CHECK (role IN ('admin', 'developer', 'viewer')),
      status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'suspended', 'removed')),
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (organization_id, id)
    );

    CREATE TABLE service_accounts (
      id text PRIMARY KEY,
      organization_id text NOT NULL REFERENCES organizations (id),
      member_id text NOT NULL UNIQUE,
      name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 255),
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      FOREIGN KEY (organization_id, member_id) REFERENCES members (organization_id, id),
      UNIQUE (organization_id, id)
    );

    CREATE TABLE api_keys (
      id text PRIMARY KEY,
      organization_id text NOT NULL REFERENCES organizations (id),
      service_account_id text NOT NULL,
      name text NOT NULL DEFAULT '' CHECK (char_length(name) <= 255),
      key_prefix text NOT NULL,
      key_hash text NOT NULL UNIQUE,
      scopes text[] NOT NULL DEFAULT '{check}',
      created_at timestamptz NOT NULL DEFAULT now(),
      revoked_at timestamptz,
      last_used_at timestamptz,
      FOREIGN KEY (organization_id, service_account_id) REFERENCES service_accounts (organization_id, id)
    );
    CREATE INDEX api_keys_service_account ON api_keys (service_account_id, id);

    CREATE TABLE features (
      id text PRIMARY KEY,
      organization_id text NOT NULL REFERENCES organizations (id),
      key text NOT NULL CHECK (key ~ '^[a-z0-9][a-z0-9_.:-]{0,63}$'),
      name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 255),
      description text NOT NULL DEFAULT '',
      kind text NOT NULL CHECK (kind IN ('flag', 'limit')),
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (organization_id, key),
      UNIQUE (id, kind)
    );

    CREATE TABLE plans (
      id text PRIMARY KEY,
      organization_id text NOT NULL REFERENCES organizations (id),
      key text NOT NULL CHECK (key ~ '^[a-z0-9_-]{1,64}$'),
      name text NOT NULL CHECK (char_length(name) BETWEEN 1 AND 255),
      kind text NOT NULL CHECK (kind IN ('catalog', 'custom')),
      archived_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (organization_id, key),
      UNIQUE (organization_id, id)
    );

    CREATE TABLE plan_grants (
      plan_id text NOT NULL REFERENCES plans (id) ON DELETE CASCADE,
      feature_id text NOT NULL,
      feature_kind text NOT NULL,
      limit_value bigint CHECK (limit_value IS NULL OR limit_value >= 0),
      PRIMARY KEY (plan_id, feature_id),
      FOREIGN KEY (feature_id, feature_kind) REFERENCES features (id, kind),
      CHECK (feature_kind = 'limit' OR limit_value IS NULL)
    );

    CREATE TABLE subscribers (
      organization_id text NOT NULL REFERENCES organizations (id),
      subscriber_id text NOT NULL CHECK (char_length(subscriber_id) BETWEEN 1 AND 255),
      name text CHECK (name IS NULL OR char_length(name) <= 255),
      version bigint NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (organization_id, subscriber_id)
    );

    CREATE TABLE subscriptions (
      id text PRIMARY KEY,
      organization_id text NOT NULL,
      subscriber_id text NOT NULL,
      plan_id text NOT NULL,
      status text NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'canceled')),
      created_at timestamptz NOT NULL DEFAULT now(),
      canceled_at timestamptz,
      updated_at timestamptz NOT NULL DEFAULT now(),
      FOREIGN KEY (organization_id, subscriber_id) REFERENCES subscribers (organization_id, subscriber_id),
      FOREIGN KEY (organization_id, plan_id) REFERENCES plans (organization_id, id) ON DELETE RESTRICT,
      CHECK ((status = 'canceled') = (canceled_at IS NOT NULL))
    );
    CREATE INDEX subscriptions_subscriber ON subscriptions (organization_id, subscriber_id, id);
    CREATE INDEX subscriptions_plan ON subscriptions (plan_id);

    CREATE TABLE overrides (
      id text PRIMARY KEY,
      organization_id text NOT NULL,
      subscriber_id text NOT NULL,
      feature_id text NOT NULL,
      feature_kind text NOT NULL,
      allowed boolean,
      limit_value bigint CHECK (limit_value IS NULL OR limit_value >= 0),
      expires_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (organization_id, subscriber_id, feature_id),
      FOREIGN KEY (organization_id, subscriber_id) REFERENCES subscribers (organization_id, subscriber_id),
      FOREIGN KEY (feature_id, feature_kind) REFERENCES features (id, kind),
      CHECK (
        (feature_kind = 'flag' AND allowed IS NOT NULL AND limit_value IS NULL)
        OR (feature_kind = 'limit' AND allowed IS NULL)
      )
    );
    CREATE INDEX overrides_expiry ON overrides (expires_at) WHERE expires_at IS NOT NULL;

    CREATE TABLE invites (
      id text PRIMARY KEY,
      organization_id text NOT NULL REFERENCES organizations (id),
      role text NOT NULL CHECK (role IN ('admin', 'developer', 'viewer')),
      email text,
      token_hash text NOT NULL UNIQUE,
      created_by_member_id text,
      expires_at timestamptz NOT NULL,
      accepted_at timestamptz,
      revoked_at timestamptz,
      created_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE INDEX invites_organization ON invites (organization_id, id);

    CREATE TABLE webhooks (
      organization_id text PRIMARY KEY REFERENCES organizations (id),
      url text NOT NULL,
      secret_ciphertext text NOT NULL,
      secret_prefix text NOT NULL,
      previous_secret_ciphertext text,
      previous_secret_expires_at timestamptz,
      disabled boolean NOT NULL DEFAULT false,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    );
  `.execute(db);
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TABLE webhooks, invites, overrides, subscriptions, subscribers, plan_grants, plans, features,
      api_keys, service_accounts, members, organizations;
  `.execute(db);
}
