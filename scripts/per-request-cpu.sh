#!/usr/bin/env bash
# CPU per request of the gateway against httputil.ReverseProxy (scripts/relayfloor
# --mode http): one-token streams, so the figure is what a request costs besides
# its chunks. Interleaved, REPS times each (default 2).
# Usage: scripts/per-request-cpu.sh   Env: REQUESTS (4000), CONC (100), REPS (2)
set -euo pipefail
cd "$(dirname "$0")/.."
requests=${REQUESTS:-4000}; conc=${CONC:-100}; reps=${REPS:-2}
work=$(mktemp -d); pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
go build -o "$work/streamgate" ./cmd/streamgate
go build -o "$work/relayfloor" ./scripts/relayfloor
sg=$work/streamgate; hz=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
simport=$((20000 + RANDOM % 10000)); gwport=$((simport + 1))
"$sg" sim --addr "127.0.0.1:$simport" --ttft 1ms --ttft-p99 1ms --itl 1ms --itl-jitter 0 --tokens 1 >/dev/null 2>&1 &
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
bench() { "$sg" bench --base-url "http://127.0.0.1:$gwport/v1" --api-key sg-bench-0123456789abcdef --model sim-model \
  --concurrency "$conc" --requests "$1" --max-tokens 1 --no-progress >/dev/null; }
for _ in $(seq "$reps"); do
  for mode in gateway reverseproxy; do
    if [ $mode = gateway ]; then "$sg" serve --config "$work/gw.yaml" --log-level warn >/dev/null 2>&1 &
    else "$work/relayfloor" --mode http --listen "127.0.0.1:$gwport" --upstream "127.0.0.1:$simport" >/dev/null 2>&1 & fi
    pid=$!
    for _ in $(seq 50); do curl -sS -o /dev/null "http://127.0.0.1:$gwport/v1/models" 2>/dev/null && break; sleep 0.1; done
    bench 500 # warm the connection pools
    t0=$(ticks "$pid"); bench "$requests"; t1=$(ticks "$pid")
    awk -v t=$((t1 - t0)) -v hz="$hz" -v n="$requests" -v m=$mode 'BEGIN { printf "%-13s %.1f µs CPU per request\n", m, t/hz*1e6/n }'
    kill "$pid"; wait "$pid" 2>/dev/null || true
    rm -f "$work"/usage.db*
  done
done
