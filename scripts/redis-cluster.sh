#!/usr/bin/env bash
# A throwaway local Redis Cluster (3 masters, no replicas, no persistence) on free loopback ports, for tests.
#
#   scripts/redis-cluster.sh start        prints REDIS_CLUSTER_DIR=<dir> and REDIS_CLUSTER_NODES=<h:p,h:p,h:p>
#   scripts/redis-cluster.sh stop <dir>   stops exactly the servers that `start` wrote PID files for, removes <dir>
#
# Usage: eval "$(scripts/redis-cluster.sh start)"; ...; scripts/redis-cluster.sh stop "$REDIS_CLUSTER_DIR"
set -euo pipefail

MASTERS=3
HOST=127.0.0.1

log() { printf 'redis-cluster: %s\n' "$*" >&2; }
port_in_use() { (exec 3<>"/dev/tcp/$HOST/$1") 2>/dev/null; }

stop_cluster() {
  local dir=$1
  [ -d "$dir" ] || return 0
  for pidfile in "$dir"/redis-*.pid; do
    [ -f "$pidfile" ] || continue
    local pid
    pid=$(cat "$pidfile")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -9 "$pid" 2>/dev/null || true
  done
  rm -rf "$dir"
}

start_node() {
  local dir=$1 port=$2
  redis-server --port "$port" --bind "$HOST" --cluster-enabled yes \
    --cluster-config-file "$dir/nodes-$port.conf" --cluster-node-timeout 5000 \
    --dir "$dir" --save '' --appendonly no --daemonize yes \
    --pidfile "$dir/redis-$port.pid" --logfile "$dir/redis-$port.log" >/dev/null
  for _ in $(seq 1 50); do
    redis-cli -h "$HOST" -p "$port" ping 2>/dev/null | grep -q PONG && return 0
    sleep 0.1
  done
  return 1
}

start_cluster() {
  command -v redis-server >/dev/null && command -v redis-cli >/dev/null || {
    log 'redis-server and redis-cli are needed (Debian: apt-get install redis-server)'
    exit 1
  }
  local dir ports=()
  dir=$(mktemp -d "${TMPDIR:-/tmp}/redis-cluster.XXXXXX")
  trap 'stop_cluster "$dir"' ERR
  for _ in $(seq 1 "$MASTERS"); do
    local started=''
    for _ in $(seq 1 30); do
      # Node ports 20000-29999, cluster bus ports (+10000) 30000-39999: a bus port never collides with a node port.
      local port=$((20000 + RANDOM % 10000))
      if port_in_use "$port" || port_in_use $((port + 10000)); then continue; fi
      if start_node "$dir" "$port"; then
        ports+=("$port")
        started=1
        break
      fi
      rm -f "$dir/redis-$port.pid"
    done
    [ -n "$started" ] || { log 'no free port found'; false; }
  done
  local nodes=()
  for port in "${ports[@]}"; do nodes+=("$HOST:$port"); done
  redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes >"$dir/create.log" 2>&1 || {
    log "cluster create failed: $(tail -n 5 "$dir/create.log")"
    false
  }
  for port in "${ports[@]}"; do
    local ok=''
    for _ in $(seq 1 100); do
      if redis-cli -h "$HOST" -p "$port" cluster info | grep -q 'cluster_state:ok'; then ok=1; break; fi
      sleep 0.1
    done
    [ -n "$ok" ] || { log "node $port did not reach cluster_state:ok"; false; }
  done
  trap - ERR
  local joined
  joined=$(IFS=,; echo "${nodes[*]}")
  echo "REDIS_CLUSTER_DIR=$dir"
  echo "REDIS_CLUSTER_NODES=$joined"
}

case "${1:-}" in
  start) start_cluster ;;
  stop)
    [ -n "${2:-}" ] || { log 'usage: redis-cluster.sh stop <dir>'; exit 2; }
    stop_cluster "$2"
    ;;
  *)
    log 'usage: redis-cluster.sh start | stop <dir>'
    exit 2
    ;;
esac
