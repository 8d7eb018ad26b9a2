#!/usr/bin/env bash
# Measures the hedged first-token tail (issue 22, item 10): two simulators with
# a heavy TTFT tail (p50 40 ms, p99 1.5 s) as the two routes of a model, and
# streamgate bench through the gateway without and with
# hedge {after: 400ms, budget: 0.1}, the runs interleaved; prints each run's
# TTFT p99, the hedged/unhedged p99 ratio of each pair, and the extra upstream
# requests the hedges made. A fresh gateway per pair, so every hedged run
# starts with an empty hedge budget, as after a restart.
# The simulators' seeds are fixed, so the first plain run of a fresh pair of
# simulators always draws the same 600 first tokens (its p99 is 1,019 ms).
# Usage: scripts/hedge-tail.sh   Env: RUNS (2), REQUESTS (600), CONCURRENCY (30),
#   SIM_ARGS (the simulators' other flags; default "--itl 5ms --tokens 40", as
#   scripts/resilience.sh; SIM_ARGS=" " for the sim's defaults: 200 tokens at
#   20 ms, streams of 4 s, so a run's first wave holds its slots longest)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-2}; n=${REQUESTS:-600}; c=${CONCURRENCY:-30}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
go build -o "$work/streamgate" ./cmd/streamgate
sg="$work/streamgate"
base=$((20000 + RANDOM % 10000))
tailA=$base; tailB=$((base + 1)); gw=$((base + 2))
tail=(--ttft 40ms --ttft-p99 1.5s ${SIM_ARGS:---itl 5ms --tokens 40})
"$sg" sim --addr "127.0.0.1:$tailA" "${tail[@]}" --seed 11 >"$work/a.log" 2>&1 & pids+=($!)
"$sg" sim --addr "127.0.0.1:$tailB" "${tail[@]}" --seed 12 >"$work/b.log" 2>&1 & pids+=($!)
cat >"$work/gw.yaml" <<YAML
listen: 127.0.0.1:$gw
providers:
  - {name: a, kind: openai, base_url: "http://127.0.0.1:$tailA/v1"}
  - {name: b, kind: openai, base_url: "http://127.0.0.1:$tailB/v1"}
keys: [{name: bench, key: sg-bench-0123456789abcdef}]
models:
  - {name: tail, routes: [{provider: a, model: sim-model}, {provider: b, model: sim-model}]}
  - name: hedged
    hedge: {after: 400ms, budget: 0.1}
    routes: [{provider: a, model: sim-model}, {provider: b, model: sim-model}]
YAML
key=sg-bench-0123456789abcdef
start_gw() {
  "$sg" serve --config "$work/gw.yaml" --log-level warn >"$work/gw.log" 2>&1 &
  gwpid=$!; pids+=("$gwpid")
  for _ in $(seq 100); do
    curl -fsS -H "Authorization: Bearer $key" "http://127.0.0.1:$gw/v1/models" >/dev/null 2>&1 && return
    sleep 0.1
  done
}
stop_gw() { kill "$gwpid"; wait "$gwpid" 2>/dev/null || true; }
p99() { # label model: runs the bench, prints the TTFT p99 in ms
  "$sg" bench --base-url "http://127.0.0.1:$gw/v1" --model "$2" --api-key "$key" --requests "$n" \
    --concurrency "$c" --label "$1" --json "$work/$1.json" --no-progress >/dev/null 2>"$work/$1.err" || true
  jq -r '.runs[0].ttft_ms.p99' "$work/$1.json"
}
requests_of() { curl -fsS "http://127.0.0.1:$1/metrics" | awk '/^streamgate_sim_requests_total/{s += $2} END {print s + 0}'; }
echo "hedge tail: $n streams at concurrency $c, TTFT p50 40 ms / p99 1.5 s on both routes, $runs pairs"
for i in $(seq "$runs"); do
  start_gw
  plain=$(p99 "plain-$i" tail)
  a0=$(requests_of $tailA); b0=$(requests_of $tailB)
  hedged=$(p99 "hedged-$i" hedged)
  a1=$(requests_of $tailA); b1=$(requests_of $tailB)
  stop_gw
  awk -v i="$i" -v p="$plain" -v h="$hedged" -v u="$((a1 - a0 + b1 - b0))" -v n="$n" 'BEGIN {
    printf "pair %d: TTFT p99 plain %.0f ms, hedged %.0f ms: %.2fx; upstream requests %d for %d (+%.1f %%)\n", i, p, h, h / p, u, n, (u - n) * 100 / n }'
done
