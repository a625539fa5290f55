#!/bin/sh
# Postgres image init script (docker-entrypoint-initdb.d), run once on an empty data volume: the services'
# restricted role, with its own password. `entctl migrate`, as the owner, grants it exactly what it may do.
set -eu
: "${APP_DB_PASSWORD:?set APP_DB_PASSWORD}"
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v app_password="$APP_DB_PASSWORD" <<'SQL'
CREATE ROLE entitlements_app LOGIN PASSWORD :'app_password';
SQL
