#!/usr/bin/env bash
# Measures continuation and hedging with streamgate bench, on loopback:
#   1. continuation: an upstream cutting 12 % of streams at a random chunk and
#      a healthy second one; bench direct to the cutting one, through the
#      gateway with fallback only, and with continue_on_cut; then
#      scripts/continuity compares every continued answer with the
#      uninterrupted text, byte for byte.
#   2. hedging: two upstreams with a heavy first-token tail (p50 40ms, p99
#      1.5s); bench through the gateway with plain fallback and with
#      hedge {after: 400ms, budget: 0.1}; TTFT p99 of both, and the extra
#      upstream requests the hedges made (from the simulators' counters).
# Usage: scripts/resilience.sh   Env: REQUESTS (1000), CONCURRENCY (50)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${REQUESTS:-1000}; c=${CONCURRENCY:-50}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
go build -o "$work/streamgate" ./cmd/streamgate
sg="$work/streamgate"
base=$((20000 + RANDOM % 10000))
cut=$base; ok=$((base + 1)); tailA=$((base + 2)); tailB=$((base + 3)); gw=$((base + 4))
common=(--ttft 20ms --ttft-p99 60ms --itl 5ms --tokens 60 --seed 7)
"$sg" sim --addr "127.0.0.1:$cut" "${common[@]}" --cut-rate 0.12 >"$work/cut.log" 2>&1 & pids+=($!)
"$sg" sim --addr "127.0.0.1:$ok" "${common[@]}" >"$work/ok.log" 2>&1 & pids+=($!)
tail=(--ttft 40ms --ttft-p99 1.5s --itl 5ms --tokens 40)
"$sg" sim --addr "127.0.0.1:$tailA" "${tail[@]}" --seed 11 >"$work/a.log" 2>&1 & pids+=($!)
"$sg" sim --addr "127.0.0.1:$tailB" "${tail[@]}" --seed 12 >"$work/b.log" 2>&1 & pids+=($!)
cat >"$work/gw.yaml" <<YAML
listen: 127.0.0.1:$gw
database: sqlite://$work/usage.db
providers:
  - {name: cut, kind: openai, base_url: "http://127.0.0.1:$cut/v1"}
  - {name: ok, kind: openai, base_url: "http://127.0.0.1:$ok/v1", continuation: prefill}
  - {name: a, kind: openai, base_url: "http://127.0.0.1:$tailA/v1"}
  - {name: b, kind: openai, base_url: "http://127.0.0.1:$tailB/v1"}
keys: [{name: bench, key: sg-bench-0123456789abcdef}]
models:
  - {name: plain, routes: [{provider: cut, model: sim-model}, {provider: ok, model: sim-model}]}
  - {name: cont, continue_on_cut: true, routes: [{provider: cut, model: sim-model}, {provider: ok, model: sim-model}]}
  - {name: tail, routes: [{provider: a, model: sim-model}, {provider: b, model: sim-model}]}
  - name: hedged
    hedge: {after: 400ms, budget: 0.1}
    routes: [{provider: a, model: sim-model}, {provider: b, model: sim-model}]
YAML
"$sg" serve --config "$work/gw.yaml" --log-level warn >"$work/gw.log" 2>&1 & pids+=($!)
key=sg-bench-0123456789abcdef
for _ in $(seq 100); do
  curl -fsS -H "Authorization: Bearer $key" "http://127.0.0.1:$gw/v1/models" >/dev/null 2>&1 && break
  sleep 0.1
done
bench() { # label url model [key]
  "$sg" bench --base-url "$2" --model "$3" ${4:+--api-key "$4"} --requests "$n" --concurrency "$c" \
    --label "$1" --json "$work/$1.json" >/dev/null 2>"$work/$1.err" || true
  jq -r --arg l "$1" '.runs[0] | "\($l): requests \(.requests), failed \(.failed - .interrupted), interrupted \(.interrupted) (\(((.failed) / .requests * 10000 | round) / 100)% not served in full), TTFT p50 \(.ttft_ms.p50 | round) ms, p95 \(.ttft_ms.p95 | round) ms, p99 \(.ttft_ms.p99 | round) ms"' "$work/$1.json"
}
requests_of() { curl -fsS "http://127.0.0.1:$1/metrics" | awk '/^streamgate_sim_requests_total/{s += $2} END {print s + 0}'; }

echo "== 1. continuation: $n streams, 12 % cut at a random chunk on the first route"
bench direct-cut "http://127.0.0.1:$cut/v1" sim-model
bench gw-fallback "http://127.0.0.1:$gw/v1" plain "$key"
bench gw-continue "http://127.0.0.1:$gw/v1" cont "$key"
go run ./scripts/continuity --gateway "http://127.0.0.1:$gw/v1" --key "$key" --model cont \
  --direct "http://127.0.0.1:$ok/v1" --requests "$n" --concurrency "$c" || true

echo "== 2. hedging: $n streams, first token p50 40 ms / p99 1.5 s on both routes"
a0=$(requests_of $tailA); b0=$(requests_of $tailB)
bench gw-plain-tail "http://127.0.0.1:$gw/v1" tail "$key"
a1=$(requests_of $tailA); b1=$(requests_of $tailB)
bench gw-hedged "http://127.0.0.1:$gw/v1" hedged "$key"
a2=$(requests_of $tailA); b2=$(requests_of $tailB)
echo "upstream requests: plain $((a1 - a0 + b1 - b0)) for $n, hedged $((a2 - a1 + b2 - b1)) for $n ($(( (a2 - a1 + b2 - b1 - n) * 1000 / n ))‰ extra)"
