#!/usr/bin/env bash
# Makes sure PostgreSQL and Redis answer on the configured addresses: uses running servers, starts
# installed-but-stopped local ones, installs them from Debian's packages when run as root and absent,
# and otherwise says exactly what is missing. Idempotent; used by `npm start`, `npm test` and CI.
set -euo pipefail

PGHOST_CHECK=${PGHOST_CHECK:-127.0.0.1}
PGPORT_CHECK=${PGPORT_CHECK:-5432}
REDIS_HOST_CHECK=${REDIS_HOST_CHECK:-127.0.0.1}
REDIS_PORT_CHECK=${REDIS_PORT_CHECK:-6379}

log() { printf 'services: %s\n' "$*" >&2; }

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

ensure_postgres() {
  if port_open "$PGHOST_CHECK" "$PGPORT_CHECK"; then return 0; fi
  if ! command -v pg_ctlcluster >/dev/null 2>&1; then apt_install postgresql; fi
  local version
  version=$(ls /etc/postgresql | sort -V | tail -n 1)
  if [ -z "$version" ]; then log "no PostgreSQL cluster found in /etc/postgresql"; exit 1; fi
  local conf="/etc/postgresql/$version/main"
  # Local development and CI use trust authentication on loopback, as this machine's own cluster does.
  if [ -f "$conf/pg_hba.conf" ] && ! grep -qE '^host\s+all\s+all\s+127\.0\.0\.1/32\s+trust' "$conf/pg_hba.conf"; then
    if is_root; then
      sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust\nlocal all all trust' "$conf/pg_hba.conf"
    fi
  fi
  log "starting PostgreSQL $version"
  if is_root; then
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  else
    pg_ctlcluster "$version" main start || true
  fi
  wait_for PostgreSQL "$PGHOST_CHECK" "$PGPORT_CHECK"
}

ensure_redis() {
  if port_open "$REDIS_HOST_CHECK" "$REDIS_PORT_CHECK"; then return 0; fi
  if ! command -v redis-server >/dev/null 2>&1; then apt_install redis-server; fi
  log "starting Redis"
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port "$REDIS_PORT_CHECK" --save "" --appendonly no
  wait_for Redis "$REDIS_HOST_CHECK" "$REDIS_PORT_CHECK"
}

ensure_postgres
ensure_redis
log "PostgreSQL $PGHOST_CHECK:$PGPORT_CHECK and Redis $REDIS_HOST_CHECK:$REDIS_PORT_CHECK are up"
