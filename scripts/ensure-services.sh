#!/usr/bin/env bash
# Makes sure PostgreSQL and Redis answer on the configured addresses: uses running servers, starts
# installed-but-stopped local ones, installs them from Debian's packages when run as root and absent,
# and otherwise says exactly what is missing. Idempotent; used by `npm start`, `npm test` and CI.
set -euo pipefail

# The host of scheme://[user[:password]@]host[:port][/...] (an IPv6 address without its brackets), and its port;
# each empty when the URL names none. The user part runs to the last @ before the path, as URL parsers read it. A
# socket directory (percent-encoded, or in ?host=) names no TCP host: the local defaults are checked then.
url_host() {
  local host
  host=$(sed -nE 's#^[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*@)?(\[[^]/]*\]|[^]:/?#[]*).*#\2#p' <<<"$1" | tr -d '[]')
  case "$host" in %2[Ff]* | /*) ;; *) printf '%s\n' "$host" ;; esac
}
url_port() { sed -nE 's#^[A-Za-z][A-Za-z0-9+.-]*://([^/?#]*@)?(\[[^]/]*\]|[^]:/?#[]*):([0-9]+).*#\3#p' <<<"$1"; }

# The servers the services will use: their URLs' hosts and ports, else the local defaults.
POSTGRES_URL_CHECK=${TEST_DATABASE_OWNER_URL:-${DATABASE_OWNER_URL:-${DATABASE_URL:-}}}
PGHOST_CHECK=${PGHOST_CHECK:-$(url_host "$POSTGRES_URL_CHECK")}
PGHOST_CHECK=${PGHOST_CHECK:-127.0.0.1}
PGPORT_CHECK=${PGPORT_CHECK:-$(url_port "$POSTGRES_URL_CHECK")}
PGPORT_CHECK=${PGPORT_CHECK:-5432}
REDIS_HOST_CHECK=${REDIS_HOST_CHECK:-$(url_host "${REDIS_URL:-}")}
REDIS_HOST_CHECK=${REDIS_HOST_CHECK:-127.0.0.1}
REDIS_PORT_CHECK=${REDIS_PORT_CHECK:-$(url_port "${REDIS_URL:-}")}
REDIS_PORT_CHECK=${REDIS_PORT_CHECK:-6379}

log() { printf 'services: %s\n' "$*" >&2; }

# Only a server on this machine is started (or installed) here; another host's is waited for, then reported.
is_local_host() { case "$1" in localhost | 127.* | ::1) return 0 ;; *) return 1 ;; esac; }

require_remote() {
  local name=$1 host=$2 port=$3
  if wait_for "$name" "$host" "$port"; then return 0; fi
  log "$name is configured on $host:$port, which is not this machine: start it there, or fix its URL"
  exit 1
}

port_open() { (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; }

wait_for() {
  local name=$1 host=$2 port=$3
  for _ in $(seq 1 60); do
    port_open "$host" "$port" && return 0
    sleep 0.5
  done
  log "$name did not come up on $host:$port"
  return 1
}

is_root() { [ "$(id -u)" = 0 ]; }

apt_install() {
  if ! is_root; then
    log "$1 is not installed and this is not root: install it (Debian: apt-get install $*) or point the URLs at a running server"
    exit 1
  fi
  log "installing $* from Debian's packages"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# Local development and CI connect over loopback without a password as `postgres` (creates test databases,
# runs migrations) and `entitlements_app` (the services). Only a cluster this script has just installed gets
# that, and only for those roles on loopback; an existing cluster's pg_hba.conf is never edited.
LOCAL_DEV_ROLES=postgres,entitlements_app
HBA_MARKER='# entitlements: local development, loopback only (added by scripts/ensure-services.sh)'

local_dev_hba_lines() {
  printf '%s\n' "$HBA_MARKER" \
    "host all $LOCAL_DEV_ROLES 127.0.0.1/32 trust" \
    "host all $LOCAL_DEV_ROLES ::1/128 trust"
}

# Puts the lines first (pg_hba.conf is first match) once; every other line stays as it was.
add_local_dev_rules() {
  local file=$1 tmp
  if grep -qxF "$HBA_MARKER" "$file"; then return 0; fi
  tmp=$(mktemp)
  { local_dev_hba_lines; cat "$file"; } >"$tmp"
  cat "$tmp" >"$file" # in place, so the file keeps its owner and mode
  rm -f "$tmp"
}

# Says what to add when the default owner URL is refused; changes nothing.
advise_local_auth() {
  if [ -n "${TEST_DATABASE_OWNER_URL:-}${DATABASE_OWNER_URL:-}" ] || ! command -v psql >/dev/null 2>&1; then return 0; fi
  if psql -w -q -At "postgresql://postgres@$PGHOST_CHECK:$PGPORT_CHECK/postgres" -c 'select 1' >/dev/null 2>&1; then
    return 0
  fi
  log "PostgreSQL refuses postgres@$PGHOST_CHECK without a password. For local development either set"
  log "DATABASE_OWNER_URL/TEST_DATABASE_OWNER_URL (and DATABASE_URL) with passwords, or put these lines first in"
  log "pg_hba.conf (SHOW hba_file;) and reload PostgreSQL (loopback and the project's roles only):"
  local_dev_hba_lines | sed 's/^/    /' >&2
}

ensure_postgres() {
  if port_open "$PGHOST_CHECK" "$PGPORT_CHECK"; then
    advise_local_auth
    return 0
  fi
  if ! is_local_host "$PGHOST_CHECK"; then require_remote PostgreSQL "$PGHOST_CHECK" "$PGPORT_CHECK"; return 0; fi
  local installed=false
  if ! command -v pg_ctlcluster >/dev/null 2>&1; then
    apt_install postgresql
    installed=true
  fi
  local version
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  if [ -z "$version" ]; then log "no PostgreSQL cluster found in /etc/postgresql"; exit 1; fi
  local conf="/etc/postgresql/$version/main"
  if $installed && [ -f "$conf/pg_hba.conf" ]; then
    log "allowing $LOCAL_DEV_ROLES on loopback without a password in the new cluster ($conf/pg_hba.conf)"
    add_local_dev_rules "$conf/pg_hba.conf"
  fi
  log "starting PostgreSQL $version"
  local ctl=(pg_ctlcluster)
  if is_root; then ctl+=(--skip-systemctl-redirect); fi
  "${ctl[@]}" "$version" main start || true
  # The package may have started the cluster before the edit: make it read pg_hba.conf again.
  if $installed; then "${ctl[@]}" "$version" main reload || true; fi
  wait_for PostgreSQL "$PGHOST_CHECK" "$PGPORT_CHECK"
  advise_local_auth
}

ensure_redis() {
  if port_open "$REDIS_HOST_CHECK" "$REDIS_PORT_CHECK"; then return 0; fi
  if ! is_local_host "$REDIS_HOST_CHECK"; then require_remote Redis "$REDIS_HOST_CHECK" "$REDIS_PORT_CHECK"; return 0; fi
  if ! command -v redis-server >/dev/null 2>&1; then apt_install redis-server; fi
  log "starting Redis"
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT_CHECK" --save "" --appendonly no
  wait_for Redis "$REDIS_HOST_CHECK" "$REDIS_PORT_CHECK"
}

main() {
  ensure_postgres
  ensure_redis
  log "PostgreSQL $PGHOST_CHECK:$PGPORT_CHECK and Redis $REDIS_HOST_CHECK:$REDIS_PORT_CHECK are up"
}

# Sourced (by its test), it only defines the functions.
if [ "${BASH_SOURCE[0]}" = "$0" ]; then main; fi
