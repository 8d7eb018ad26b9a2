#!/usr/bin/env bash
# Counts what one relayed chunk costs the gateway (or, with FLOOR=http,
# httputil.ReverseProxy) in instructions and last-level cache misses, with
# valgrind's callgrind cache simulator: the relay runs under callgrind, the
# sim and the bench beside it, 1,000 streams of 40 chunks at 1 chunk/s
# (slow enough for the simulated relay), and only a steady window in the
# middle of the run is counted. Unlike CPU time these counts hardly move
# between runs on a noisy machine, so two versions can be compared with them.
# Usage: scripts/relay-cachesim.sh            (FLOOR=http for the proxy)
# Env: WINDOW (counted seconds, default 40), LL (last-level cache bytes,
# default 1048576: about one core's L2 here), CONC (streams, default 1000).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "relay-cachesim: valgrind not found (apt-get install valgrind)" >&2; exit 2; }
command -v callgrind_control >/dev/null || { echo "relay-cachesim: callgrind_control not found (it ships with valgrind)" >&2; exit 2; }
window=${WINDOW:-40}; ll=${LL:-1048576}; conc=${CONC:-1000}; floor=${FLOOR:-}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
go build -o "$work/streamgate" ./cmd/streamgate
[ -z "$floor" ] || go build -o "$work/relayfloor" ./scripts/relayfloor
sg="$work/streamgate"
simport=$((20000 + RANDOM % 10000)); gwport=$((simport + 1))
"$sg" sim --addr "127.0.0.1:$simport" --stamp --ttft 50ms --ttft-p99 50ms --itl 1s --itl-jitter 0 --tokens 40 >"$work/sim.log" 2>&1 &
pids+=($!)
cat >"$work/gw.yaml" <<YAML
listen: 127.0.0.1:$gwport
database: sqlite://$work/usage.db
providers:
  - {name: sim, kind: openai, base_url: "http://127.0.0.1:$simport/v1"}
keys:
  - {name: bench, key: sg-bench-0123456789abcdef}
models:
  - name: sim-model
    routes: [{provider: sim, model: sim-model}]
YAML
# Go's asynchronous preemption signals confuse valgrind; the relay does not need them.
vg=(valgrind --tool=callgrind --cache-sim=yes --I1=32768,8,64 --D1=49152,12,64 "--LL=$ll,16,64"
  --instr-atstart=no "--callgrind-out-file=$work/cg.out")
if [ -n "$floor" ]; then
  GODEBUG=asyncpreemptoff=1 "${vg[@]}" "$work/relayfloor" --mode "$floor" --listen "127.0.0.1:$gwport" --upstream "127.0.0.1:$simport" >"$work/gw.log" 2>&1 &
else
  GODEBUG=asyncpreemptoff=1 "${vg[@]}" "$sg" serve --config "$work/gw.yaml" --log-level warn >"$work/gw.log" 2>&1 &
fi
gwpid=$!; pids+=("$gwpid")
for _ in $(seq 120); do
  curl -fsS -H "Authorization: Bearer sg-bench-0123456789abcdef" "http://127.0.0.1:$gwport/v1/models" >/dev/null 2>&1 && break
  sleep 0.5
done
chunks() { curl -fsS "http://127.0.0.1:$simport/metrics" | awk '/^streamgate_sim_chunks_total /{printf "%d", $2}'; }
"$sg" bench --base-url "http://127.0.0.1:$gwport/v1" --api-key sg-bench-0123456789abcdef --model sim-model \
  --concurrency "$conc" --requests $((conc * 3)) --warmup "$conc" --ramp-up 4s --max-tokens 40 --no-progress \
  --idle-timeout 5m >"$work/bench.log" 2>&1 &
pids+=($!)
sleep 25   # the warm-up wave is under way: every stream open, chunks flowing
k0=$(chunks); callgrind_control -i on "$gwpid" >/dev/null 2>&1
sleep "$window"
callgrind_control -i off "$gwpid" >/dev/null 2>&1; k1=$(chunks)
callgrind_control -d "$gwpid" >/dev/null 2>&1
sleep 1
out=$(ls -t "$work"/cg.out* | head -1)
callgrind_annotate "$out" 2>/dev/null | awk -v n=$((k1 - k0)) -v who="${floor:+relayfloor --mode $floor}" '/PROGRAM TOTALS/ {
  gsub(",", ""); # Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw, each followed by its share
  printf "%s: %d chunks counted; per chunk %.0f instructions, %.1f last-level misses (%.1f data reads, %.1f data writes, %.1f instruction)\n",
    (who == "" ? "gateway" : who), n, $1 / n, ($13 + $15 + $17) / n, $15 / n, $17 / n, $13 / n }'
