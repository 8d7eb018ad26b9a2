#!/usr/bin/env bash
# Measures the hedged first-token tail (issue 22, item 10; issue 35, item 3):
# two simulators with a heavy TTFT tail (p50 40 ms, p99 1.5 s) as the two
# routes of a model, and streamgate bench through the gateway without and
# with hedge {after: 400ms, budget: 0.1}, the runs interleaved; prints each
# run's TTFT p99, the hedged/unhedged p99 ratio of each pair, the extra
# upstream requests the hedges made, and the hedged p99 against the ideal
# hedge computed from the same pair's unhedged first tokens (bench
# --hedge-ideal-from: min(X1, 400 ms + X2) resampled, at most 0.1 backups
# per request), then the median of the pairs' ratios to the ideal. A fresh
# gateway per pair, so every hedged run starts with an empty hedge window,
# as after a restart.
# A p99 of 600 requests is the 6th slowest: pairs of 600 scatter by ±10 %
# around the ideal by chance alone (a Monte Carlo of lognormal draws:
# p10-p90 of the ratio 0.88-1.11), so judge medians over pairs of 2,000 or more.
# The simulators' seeds are fixed, so the first plain run of a fresh pair of
# simulators always draws the same first tokens (600: p99 1,019 ms; 2,000: 1,203 ms).
# Usage: scripts/hedge-tail.sh   Env: RUNS (2), REQUESTS (600), CONCURRENCY (30),
#   SIM_ARGS (the simulators' other flags; default "--itl 5ms --tokens 40", as
#   scripts/resilience.sh; SIM_ARGS=" " for the sim's defaults: 200 tokens at
#   20 ms, streams of 4 s, so a run's first wave holds its slots longest),
#   STREAMGATE (a binary to use instead of building one), OUT (a directory
#   that keeps the runs' JSON and request files)
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-2}; n=${REQUESTS:-600}; c=${CONCURRENCY:-30}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
if [ -n "${STREAMGATE:-}" ]; then
  sg=$STREAMGATE
else
  go build -o "$work/streamgate" ./cmd/streamgate
  sg="$work/streamgate"
fi
out=${OUT:-$work}; mkdir -p "$out"
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
p99() { # label model [bench flags]: runs the bench, prints the TTFT p99 in ms
  local label=$1 model=$2; shift 2
  "$sg" bench --base-url "http://127.0.0.1:$gw/v1" --model "$model" --api-key "$key" --requests "$n" \
    --concurrency "$c" --label "$label" --json "$out/$label.json" --no-progress "$@" >/dev/null 2>"$out/$label.err" || true
  jq -r '.runs[0].ttft_ms.p99' "$out/$label.json"
}
requests_of() { curl -fsS "http://127.0.0.1:$1/metrics" | awk '/^streamgate_sim_requests_total/{s += $2} END {print s + 0}'; }
echo "hedge tail: $n streams at concurrency $c, TTFT p50 40 ms / p99 1.5 s on both routes, $runs pairs"
ratios=()
for i in $(seq "$runs"); do
  start_gw
  plain=$(p99 "plain-$i" tail --requests-out "$out/plain-$i.jsonl")
  a0=$(requests_of $tailA); b0=$(requests_of $tailB)
  hedged=$(p99 "hedged-$i" hedged --hedge-ideal-from "$out/plain-$i.jsonl" --hedge-after 400ms --hedge-budget 0.1)
  a1=$(requests_of $tailA); b1=$(requests_of $tailB)
  stop_gw
  ideal=$(jq -r '.runs[0].hedge_ideal.ttft_p99_ms' "$out/hedged-$i.json")
  ratios+=("$(jq -r '.runs[0].hedge_ideal.ratio' "$out/hedged-$i.json")")
  awk -v i="$i" -v p="$plain" -v h="$hedged" -v id="$ideal" -v u="$((a1 - a0 + b1 - b0))" -v n="$n" 'BEGIN {
    printf "pair %d: TTFT p99 plain %.0f ms, hedged %.0f ms: %.2fx; ideal %.0f ms: hedged/ideal %.2fx; upstream requests %d for %d (+%.1f %%)\n", i, p, h, h / p, id, h / id, u, n, (u - n) * 100 / n }'
done
printf '%s\n' "${ratios[@]}" | sort -g | awk '{r[NR] = $1} END {
  m = NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2
  printf "hedged/ideal TTFT p99: median %.2fx over %d pairs (min %.2fx, max %.2fx)\n", m, NR, r[1], r[NR] }'
