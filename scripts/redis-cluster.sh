#!/usr/bin/env bash
# Starts a local 3-node Redis Cluster (no replicas) for the tests: nodes on
# 127.0.0.1 ports BASE..BASE+2 (BASE=7000), data in a temporary directory,
# then `redis-cli --cluster create`. Idempotent: a cluster already up on
# those ports is left as it is. Prints the URL the tests read:
#   export STREAMGATE_TEST_REDIS_CLUSTER=$(scripts/redis-cluster.sh)
# `scripts/redis-cluster.sh stop` shuts the nodes down.
set -euo pipefail
BASE="${BASE:-7000}"
PORTS=("$BASE" "$((BASE + 1))" "$((BASE + 2))")
URL="redis+cluster://127.0.0.1:${PORTS[0]},127.0.0.1:${PORTS[1]},127.0.0.1:${PORTS[2]}"

if [[ "${1:-}" == stop ]]; then
  for p in "${PORTS[@]}"; do redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true; done
  exit 0
fi
command -v redis-server >/dev/null || { echo "redis-cluster.sh: redis-server not found" >&2; exit 1; }

if [[ "$(redis-cli -p "${PORTS[0]}" cluster info 2>/dev/null | tr -d '\r' | grep '^cluster_state:')" == "cluster_state:ok" ]]; then
  echo "$URL"
  exit 0
fi

dir="$(mktemp -d "${TMPDIR:-/tmp}/sg-redis-cluster.XXXXXX")"
for p in "${PORTS[@]}"; do
  if ! redis-cli -p "$p" ping >/dev/null 2>&1; then
    mkdir -p "$dir/$p"
    redis-server --port "$p" --bind 127.0.0.1 --dir "$dir/$p" --cluster-enabled yes \
      --cluster-config-file nodes.conf --cluster-node-timeout 5000 --save "" --appendonly no \
      --daemonize yes --logfile "$dir/$p/redis.log" >/dev/null
  fi
done
for _ in $(seq 1 50); do
  up=0
  for p in "${PORTS[@]}"; do redis-cli -p "$p" ping >/dev/null 2>&1 && up=$((up + 1)); done
  [[ $up == 3 ]] && break
  sleep 0.1
done
# Nodes that ran before but lost their cluster (a half-made one): start over.
for p in "${PORTS[@]}"; do
  if [[ "$(redis-cli -p "$p" cluster info | tr -d '\r' | grep '^cluster_known_nodes:')" != "cluster_known_nodes:1" ]]; then
    redis-cli -p "$p" flushall >/dev/null 2>&1 || true
    redis-cli -p "$p" cluster reset hard >/dev/null
  fi
done
redis-cli --cluster create "127.0.0.1:${PORTS[0]}" "127.0.0.1:${PORTS[1]}" "127.0.0.1:${PORTS[2]}" \
  --cluster-replicas 0 --cluster-yes >"$dir/create.log" 2>&1 \
  || { cat "$dir/create.log" >&2; exit 1; }
for _ in $(seq 1 100); do
  ok=0
  for p in "${PORTS[@]}"; do
    [[ "$(redis-cli -p "$p" cluster info | tr -d '\r' | grep '^cluster_state:')" == "cluster_state:ok" ]] && ok=$((ok + 1))
  done
  [[ $ok == 3 ]] && { echo "$URL"; exit 0; }
  sleep 0.1
done
echo "redis-cluster.sh: cluster not ok after 10 s (logs in $dir)" >&2
exit 1
