# Sourced by prod-overhead.sh and prod-burst.sh: the production
# configuration's services for one run. Sets work (a temporary directory),
# pg and dsn (a schema of its own, prefix $1, dropped at exit), redis
# (REDIS, else a redis-server of its own on a free port, so that INFO
# commandstats counts this run's commands only; own_redis is its port) and
# pids (killed at exit: add the processes you start); and the helpers
# both scripts use: configs, healthy, ticks, chunks.
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

# configs SIMPORT DEFPORT PRODPORT writes the two configurations compared,
# the sim on SIMPORT their one provider: $work/default.yaml (SQLite
# ledger, a static key, no limits; on DEFPORT) and $work/prod.yaml
# (PostgreSQL keys and ledger, Redis limits; on PRODPORT).
configs() {
  local common="providers: [{name: sim, kind: openai, base_url: \"http://127.0.0.1:$1/v1\"}]
models: [{name: sim-model, routes: [{provider: sim, model: sim-model}], price: {input: 1, output: 1, cached_input: 1, cache_write: 1}}]"
  cat >"$work/default.yaml" <<YAML
listen: 127.0.0.1:$2
database: sqlite://$work/usage.db
keys: [{name: bench, key: sg-bench-0123456789abcdef}]
$common
YAML
  cat >"$work/prod.yaml" <<YAML
listen: 127.0.0.1:$3
database: "$dsn"
redis: $redis
$common
YAML
}

# healthy PORT... waits (up to 10 s each) for each port's /healthz.
healthy() {
  for port in "$@"; do
    for _ in $(seq 100); do curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break; sleep 0.1; done
  done
}

# ticks PID is the process's CPU time so far, in clock ticks (hz a second);
# chunks SIMPORT is how many chunks the sim has sent.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
chunks() { curl -fsS "http://127.0.0.1:$1/metrics" | awk '$1 == "streamgate_sim_chunks_total" || index($1, "streamgate_sim_chunks_total{") == 1 { s += $2 } END { printf "%d", s }'; }
