# Sourced by prod-overhead.sh and prod-burst.sh: the production
# configuration's services for one run. Sets work (a temporary directory),
# pg and dsn (a schema of its own, prefix $1, dropped at exit), redis
# (REDIS, else a redis-server of its own on a free port, so that INFO
# commandstats counts this run's commands only; own_redis is its port) and
# pids (killed at exit: add the processes you start).
own_redis=""
if [ -z "${REDIS:-}" ]; then own_redis=$((30000 + RANDOM % 10000)); fi
redis=${REDIS:-redis://127.0.0.1:$own_redis/0}
pg=${PG:-postgres://postgres@127.0.0.1:5432/test?sslmode=disable}
work=$(mktemp -d)
schema="$1_$RANDOM$RANDOM"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true
  psql -q "$pg" -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
psql -q "$pg" -c "CREATE SCHEMA $schema" >/dev/null
if [ -n "$own_redis" ]; then
  redis-server --port "$own_redis" --bind 127.0.0.1 --save "" --appendonly no >"$work/redis.log" 2>&1 & pids+=($!)
  for _ in $(seq 50); do redis-cli -p "$own_redis" ping >/dev/null 2>&1 && break; sleep 0.1; done
fi
dsn="$pg&search_path=$schema"; [[ "$pg" == *\?* ]] || dsn="$pg?search_path=$schema"
