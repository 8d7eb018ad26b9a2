#!/usr/bin/env bash
# Replays a synthetic ten-minute trace (Azure CSV and Mooncake JSONL) through
# the gateway to the sim with "streamgate bench --trace", and prints what the
# trace check asks: the schedule lag (p50/p99/max of actual - intended send
# time), the peak rate, the requests whose output tokens differ from the trace,
# and the sim's cache reads (Mooncake's shared prefixes).
# The trace: Poisson arrivals at BASE rps with bursts at PEAK rps (2 s of every
# 15 s), prompt lengths of 512-token blocks with a few shared prefixes
# (Mooncake hash_ids), outputs of 10-200 tokens.
# Usage: scripts/trace-replay.sh
# Env: SPEED (bench --trace-speed, default 10: ten minutes in one; 1 is the
#      real schedule), WINDOW (bench --trace-window, default 10m), BASE (8),
#      PEAK (40), DIRECT=1 (bench straight to the sim, without the gateway),
#      FORMATS ("azure mooncake").
set -euo pipefail
cd "$(dirname "$0")/.."
speed=${SPEED:-10}; window=${WINDOW:-10m}; base=${BASE:-8}; peak=${PEAK:-40}
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

go build -o "$work/streamgate" ./cmd/streamgate
sg="$work/streamgate"

# gen FORMAT > FILE: the synthetic trace, the same arrivals in both formats.
gen() {
  awk -v fmt="$1" -v base="$base" -v peak="$peak" 'BEGIN {
    srand(42); t = 0; n = 0; nextid = 100000
    if (fmt == "azure") print "TIMESTAMP,ContextTokens,GeneratedTokens"
    while (t < 600) {
      rate = (t % 15 < 2) ? peak : base
      t += -log(1 - rand()) / rate
      if (t >= 600) break
      blocks = 1 + int(rand() * 8); in_len = (blocks - 1) * 512 + 1 + int(rand() * 512)
      out = 10 + int(rand() * 190)
      if (fmt == "azure") {
        s = 46 + t; m = int(s / 60); s -= m * 60
        printf "2023-11-16 18:%02d:%010.7f,%d,%d\n", 15 + m, s, in_len, out
      } else {
        # a third of the requests share their first two blocks with one of 8 "system prompts"
        ids = ""; shared = rand() < 0.33
        for (b = 0; b < blocks; b++) {
          id = (b < 2 && shared) ? (n % 8) * 2 + b : nextid++
          ids = ids (b ? ", " : "") id
        }
        printf "{\"timestamp\": %d, \"input_length\": %d, \"output_length\": %d, \"hash_ids\": [%s]}\n", t * 1000, in_len, out, ids
      }
      n++
    }
  }'
}

simport=$((20000 + RANDOM % 10000)); gwport=$((simport + 1))
"$sg" sim --addr "127.0.0.1:$simport" --ttft 50ms --ttft-p99 200ms --itl 10ms --itl-jitter 0.2 >"$work/sim.log" 2>&1 &
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
"$sg" serve --config "$work/gw.yaml" --log-level warn >"$work/gw.log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do
  curl -fsS -H "Authorization: Bearer sg-bench-0123456789abcdef" "http://127.0.0.1:$gwport/v1/models" >/dev/null 2>&1 &&
    curl -fsS "http://127.0.0.1:$simport/v1/models" >/dev/null 2>&1 && break
  sleep 0.1
done
url=http://127.0.0.1:$gwport/v1; key=(--api-key sg-bench-0123456789abcdef)
if [ "${DIRECT:-0}" = 1 ]; then url=http://127.0.0.1:$simport/v1; key=(); fi

printf '%-9s %6s %8s %7s %9s %9s %9s %8s %9s %8s\n' format speed requests peak/s lag_p50 lag_p99 lag_max out_diff cache_rd failed
for f in ${FORMATS:-azure mooncake}; do
  ext=jsonl; [ "$f" = azure ] && ext=csv
  gen "$f" >"$work/trace.$ext"
  "$sg" bench --base-url "$url" "${key[@]}" --model sim-model --trace "$work/trace.$ext" --trace-format "$f" \
    --trace-speed "$speed" --trace-window "$window" --no-progress --json "$work/$f.json" >"$work/$f.txt"
  python3 - "$work/$f.json" "$f" "$speed" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["runs"][0]
t, l = r["trace"], r["schedule_lag_ms"]
print("%-9s %6s %8d %7.0f %9.3f %9.3f %9.3f %8d %8.1f%% %8d" % (sys.argv[2], sys.argv[3], r["requests"], t["peak_rate"],
      l["p50"], l["p99"], l["max"], t["output_mismatch"], 100 * (r.get("cache_read_share") or 0), r["failed"]))
PY
  grep -E "client:|warning" "$work/$f.txt" | sed 's/^/  /' || true
done
echo "(lag in ms: actual send - scheduled send; peak/s: most arrivals in one second of the replayed schedule)"
