#!/usr/bin/env bash
# Three gateway replicas sharing PostgreSQL (ledger and API keys) and Redis
# (rate limits), under load from three streamgate bench processes, one per
# replica, on loopback:
#   - one database key with rpm RPM: its combined served requests over the
#     run against the sliding-minute bound (at most RPM per calendar minute);
#   - the ledger holds exactly one record per request that reached a replica,
#     with replica 3 sent SIGTERM halfway through the run (it drains and stops);
#   - one database key with a budget (budget_usd BUDGET, period total) spent by
#     three more bench processes at once: its ledger spend against the budget
#     plus what the requests in flight when it ran out can cost;
#   - a revoked key: how long until every replica answers 401 (PostgreSQL
#     LISTEN/NOTIFY purges each replica's key cache);
#   - SIGKILL: a fourth replica killed under load; the records lost against the
#     bound (the ledger writer's 200 ms flush window plus the requests open).
# Needs PostgreSQL on 127.0.0.1:5432 (trust auth, database test) and Redis on
# 127.0.0.1:6379, as .ci/run starts them.
# Usage: scripts/replicas.sh   Env: RPM (120), RATE (2 req/s per replica), DURATION (60s), BUDGET (1 USD)
set -euo pipefail
cd "$(dirname "$0")/.."
rpm=${RPM:-120}; rate=${RATE:-2}; duration=${DURATION:-60s}; budget=${BUDGET:-1}
work=$(mktemp -d)
schema="sg_replicas_$RANDOM$RANDOM"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true
  psql -q -h 127.0.0.1 -U postgres -d test -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
psql -q -h 127.0.0.1 -U postgres -d test -c "CREATE SCHEMA $schema" >/dev/null
dsn="postgres://postgres@127.0.0.1:5432/test?sslmode=disable&search_path=$schema"
go build -o "$work/streamgate" ./cmd/streamgate
sg="$work/streamgate"
base=$((20000 + RANDOM % 10000))
"$sg" sim --addr "127.0.0.1:$base" --ttft 20ms --ttft-p99 60ms --itl 5ms --tokens 20 >"$work/sim.log" 2>&1 & pids+=($!)
cat >"$work/gw.yaml" <<YAML
database: "$dsn"
redis: redis://127.0.0.1:6379/0
providers: [{name: sim, kind: openai, base_url: "http://127.0.0.1:$base/v1"}]
keys: [{name: probe, key: sg-probe-0123456789abcdef}]
models: [{name: m, routes: [{provider: sim, model: sim-model}], price: {input: 1000, output: 1000}}]
YAML
out=$("$sg" keys create --database "$dsn" --name "load-$RANDOM" --rpm "$rpm")
secret=$(sed -n 's/^secret: //p' <<<"$out")
bname="budget-$RANDOM"
out=$("$sg" keys create --database "$dsn" --name "$bname" --budget-usd "$budget" --budget-period total)
bsecret=$(sed -n 's/^secret: //p' <<<"$out")
ports=(); gws=()
for i in 1 2 3; do
  port=$((base + i)); ports+=("$port")
  "$sg" serve --config "$work/gw.yaml" --addr "127.0.0.1:$port" --log-level warn >"$work/gw$i.log" 2>&1 & pids+=($!); gws+=($!)
done
for port in "${ports[@]}"; do
  for _ in $(seq 100); do curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
done
bpids=()
echo "3 replicas, key rpm $rpm, ${rate} req/s offered per replica for $duration"
start=$(date +%s)
for i in 1 2 3; do
  "$sg" bench --base-url "http://127.0.0.1:${ports[$((i-1))]}/v1" --api-key "$secret" --model m --rate "$rate" \
    --duration "$duration" --max-tokens 20 --json "$work/b$i.json" --requests-out "$work/r$i.jsonl" >/dev/null 2>"$work/b$i.err" &
  bpids+=($!)
  # The budget key, spent from the three replicas at once (3 req/s each, 20 s).
  "$sg" bench --base-url "http://127.0.0.1:${ports[$((i-1))]}/v1" --api-key "$bsecret" --model m --rate 3 \
    --duration 20s --max-tokens 20 --json "$work/k$i.json" --requests-out "$work/q$i.jsonl" >/dev/null 2>"$work/k$i.err" &
  bpids+=($!)
done
secs=${duration%s}
sleep $((secs / 2))
kill -TERM "${gws[2]}" # replica 3 drains and stops mid-run
wait "${bpids[@]}" || true
end=$(date +%s)
served=0; sent=0; limited=0
for i in 1 2 3; do
  s=$(jq '.runs[0].succeeded' "$work/b$i.json"); n=$(jq '.runs[0].requests' "$work/b$i.json")
  l=$(jq '[.runs[0].errors // {} | to_entries[] | select(.key | test("429")) | .value] | add // 0' "$work/b$i.json")
  served=$((served + s)); sent=$((sent + n)); limited=$((limited + l))
done
minutes=$(( (end - start + 59) / 60 + 1 ))
echo "sent $sent, served $served, refused with 429: $limited; bound: at most $rpm per calendar minute, $((rpm * minutes)) over the $minutes calendar minutes the run touched"
sleep 2 # the ledger writers flush
rows=$(psql -qtA -h 127.0.0.1 -U postgres -d test -c "SELECT count(*) FROM $schema.usage_entries WHERE key_id LIKE 'load-%'")
spent=$(psql -qtA -h 127.0.0.1 -U postgres -d test -c "SELECT round(coalesce(sum(cost_usd), 0)::numeric, 4) FROM $schema.usage_entries WHERE key_id = '$bname'")
bserved=$(cat "$work"/q*.jsonl | jq -s '[.[] | select(.status == 200 and (.error // "") == "")] | length')
bquota=$(cat "$work"/q*.jsonl | jq -s '[.[] | select(.status == 429)] | length')
bsent=$(cat "$work"/q*.jsonl | jq -s 'length')
bmax=$(psql -qtA -h 127.0.0.1 -U postgres -d test -c "SELECT round(coalesce(max(cost_usd), 0)::numeric, 4) FROM $schema.usage_entries WHERE key_id = '$bname'")
echo "budget key: \$$budget total; sent $bsent, served $bserved, refused 429 insufficient_quota $bquota; ledger spend \$$spent (the most one request cost: \$$bmax; overspend bound: the requests in flight when it ran out, at most 3 replicas x 1 open each)"
reached=$(cat "$work"/r*.jsonl | jq -s '[.[] | select(.status > 0)] | length')
echo "ledger rows for the key: $rows; requests that reached a replica (an HTTP status): $reached; sent: $sent (replica 3 stopped by SIGTERM halfway)"
# Revocation is checked on the two replicas still running.
ports=("${ports[0]}" "${ports[1]}")
# Revocation: revoke, then poll every replica until each answers 401.
"$sg" keys revoke --database "$dsn" "$(jq -r '.keys[0].name' <("$sg" keys list --database "$dsn" --json))" >/dev/null
t0=$(date +%s%N)
served_after=0 # requests still served after the revoke returned
for port in "${ports[@]}"; do
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/v1/models" -H "Authorization: Bearer $secret")" = 401 ]; do
    served_after=$((served_after + 1)); sleep 0.02
  done
done
echo "revoked key refused by both running replicas after $(( ($(date +%s%N) - t0) / 1000000 )) ms (curl's own start included); requests still served after the revoke: $served_after"

# SIGKILL: a fourth replica under 20 req/s from a key of its own, killed
# halfway; records lost = requests that reached it (an HTTP status) minus
# ledger rows.
kname="kill-$RANDOM"
out=$("$sg" keys create --database "$dsn" --name "$kname")
ksecret=$(sed -n 's/^secret: //p' <<<"$out")
port=$((base + 4))
"$sg" serve --config "$work/gw.yaml" --addr "127.0.0.1:$port" --log-level warn >"$work/gw4.log" 2>&1 & kpid=$!; pids+=($kpid)
for _ in $(seq 100); do curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
"$sg" bench --base-url "http://127.0.0.1:$port/v1" --api-key "$ksecret" --model m --rate 20 --duration 10s --max-tokens 20 \
  --json "$work/kill.json" --requests-out "$work/kill.jsonl" >/dev/null 2>"$work/kill.err" & kb=$!
sleep 5
kill -KILL "$kpid"
wait "$kb" || true
krows=$(psql -qtA -h 127.0.0.1 -U postgres -d test -c "SELECT count(*) FROM $schema.usage_entries WHERE key_id = '$kname'")
kreached=$(jq -s '[.[] | select(.status > 0)] | length' "$work/kill.jsonl")
kdone=$(jq -s '[.[] | select(.status == 200 and (.error // "") == "")] | length' "$work/kill.jsonl")
kopen=$((kreached - kdone))
echo "SIGKILL: $kreached requests reached replica 4, $kdone completed before the kill, $kopen open at the kill; ledger rows $krows; lost $((kreached - krows)) (bound: the open ones plus what completed in the last flush window, 200 ms x 20 req/s = 4)"
