#!/usr/bin/env bash
# What the production configuration costs against the default one, same sim,
# same load, runs interleaved (default, production, default, production, ...):
#   default:    SQLite ledger, a static key, no limits;
#   production: PostgreSQL keys and ledger, Redis rpm + tpm limits and a
#               month budget on the (database) key.
# Reports per run: gateway CPU per relayed chunk (/proc over the run), added
# TTFT p99 (against the sim direct, measured once), the time from the
# `data: [DONE]` line to the end of the body (p99 of PROBES sequential
# streams sent during the load by a small client: bench does not report it),
# and Redis round trips per request from INFO commandstats deltas (script
# calls, the write-back included, over requests; the admissions take at
# most one per request, fewer when a key's admissions queue together and
# share one).
# Usage: scripts/prod-overhead.sh [CONCURRENCY]   (default 100)
# Env: TOKENS (100), ITL (20ms), REQ_WAVES (3), ROUNDS (2 pairs), PROBES (100),
#      RAMP (bench --ramp-up, e.g. 2s: streams start spread out, not in one burst),
#      REDIS (default: a redis-server of its own on a free port, so that INFO
#      commandstats counts this gateway's commands only), PG (postgres://postgres@127.0.0.1:5432/test?sslmode=disable)
set -euo pipefail
cd "$(dirname "$0")/.."
c=${1:-100}; tokens=${TOKENS:-100}; itl=${ITL:-20ms}; waves=${REQ_WAVES:-3}; rounds=${ROUNDS:-2}
probes=${PROBES:-100}
. scripts/prod-env.sh prodoh
rhost=$(sed -E 's#^rediss?://([^@/]*@)?([^:/]+):([0-9]+).*#\2#' <<<"$redis"); rport=$(sed -E 's#^rediss?://([^@/]*@)?([^:/]+):([0-9]+).*#\3#' <<<"$redis")

go build -o "$work/streamgate" ./cmd/streamgate
sg="$work/streamgate"
simport=$((20000 + RANDOM % 10000)); defport=$((simport + 1)); prodport=$((simport + 2))
"$sg" sim --addr "127.0.0.1:$simport" --ttft 50ms --ttft-p99 50ms --itl "$itl" --itl-jitter 0 --tokens "$tokens" >"$work/sim.log" 2>&1 &
simpid=$!; pids+=("$simpid")
configs "$simport" "$defport" "$prodport"
out=$("$sg" keys create --database "$dsn" --name "prod-$RANDOM" --rpm 1000000 --tpm 1000000000 --budget-usd 1000000 --budget-period month)
psecret=$(sed -n 's/^secret: //p' <<<"$out")
[ -n "$psecret" ] || { echo "keys create gave no secret: $out" >&2; exit 1; }
"$sg" serve --config "$work/default.yaml" --log-level warn >"$work/default.log" 2>&1 & defpid=$!; pids+=("$defpid")
"$sg" serve --config "$work/prod.yaml" --log-level warn >"$work/prod.log" 2>&1 & prodpid=$!; pids+=("$prodpid")
healthy "$defport" "$prodport" "$simport"

# probe URL KEY: PROBES sequential streams; prints the p99 (ms) from the
# [DONE] line to the end of the body.
cat >"$work/probe.py" <<'PY'
import http.client, json, sys, time
host, port, key, n = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
body = json.dumps({"model": "sim-model", "stream": True, "max_tokens": 20,
                   "messages": [{"role": "user", "content": "hi"}]})
gaps = []
for _ in range(n):
    conn = http.client.HTTPConnection(host, port, timeout=30)
    conn.request("POST", "/v1/chat/completions", body, {"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    r = conn.getresponse()
    done = None
    while True:
        line = r.readline()
        if not line:
            break
        if done is None and line.startswith(b"data: [DONE]"):
            done = time.perf_counter()
    end = time.perf_counter()
    conn.close()
    if done is not None:
        gaps.append((end - done) * 1000)
gaps.sort()
print("%.3f" % (gaps[min(len(gaps) - 1, int(len(gaps) * 0.99))] if gaps else float("nan")))
PY

rcalls() { redis-cli -h "$rhost" -p "$rport" info commandstats | tr -d '\r' | awk -F'[=,:]' '/^cmdstat_(evalsha|eval):/ { s += $3 } END { printf "%d", s }'; }
bench() { # label url key
  "$sg" bench --base-url "$2" ${3:+--api-key "$3"} --model sim-model --concurrency "$c" --requests $((c * waves)) \
    --warmup "$c" --max-tokens "$tokens" ${RAMP:+--ramp-up "$RAMP"} --no-progress --json "$work/$1.json" >/dev/null
}
bench direct "http://127.0.0.1:$simport/v1" ""
dttft=$(jq '.runs[0].ttft_ms.p99' "$work/direct.json")
printf '%-5s %-10s %12s %14s %14s %12s %8s\n' round config cpu_us/chunk ttft_p99_added done_to_end_p99 redis_rt/req errors
for r in $(seq "$rounds"); do
  for cfg in default prod; do
    if [ "$cfg" = default ]; then port=$defport; pid=$defpid; key=sg-bench-0123456789abcdef; else port=$prodport; pid=$prodpid; key=$psecret; fi
    n0=$(chunks "$simport"); g0=$(ticks "$pid"); r0=$(rcalls)
    python3 "$work/probe.py" 127.0.0.1 "$port" "$key" "$probes" >"$work/probe-$cfg-$r" &
    ppid=$!
    bench "$cfg-$r" "http://127.0.0.1:$port/v1" "$key"
    wait "$ppid"
    n1=$(chunks "$simport"); g1=$(ticks "$pid"); r1=$(rcalls)
    reqs=$(( $(jq '.runs[0].requests' "$work/$cfg-$r.json") + probes ))
    jq -r --arg r "$r" --arg cfg "$cfg" --arg d "$dttft" --arg done "$(cat "$work/probe-$cfg-$r")" \
      --arg cpu "$(awk -v g=$((g1 - g0)) -v n=$((n1 - n0)) -v hz="$hz" 'BEGIN { printf "%.2f", g/hz*1e6/n }')" \
      --arg rt "$(awk -v d=$((r1 - r0)) -v q="$reqs" -v cfg="$cfg" 'BEGIN { if (cfg == "default") printf "-"; else printf "%.2f", d/q }')" \
      '.runs[0] as $x | [$r, $cfg, $cpu, (($x.ttft_ms.p99 - ($d|tonumber))*1000|round/1000), $done, $rt, $x.failed] | @tsv' "$work/$cfg-$r.json" |
      awk -F'\t' '{printf "%-5s %-10s %12s %14s %14s %12s %8s\n", $1, $2, $3, $4, $5, $6, $7}'
  done
done
for cfg in default prod; do # what the gateways logged at WARN (a Redis outage, a slow ledger) explains a figure
  w=$(grep -c 'level=WARN' "$work/$cfg.log" || true)
  [ "$w" = 0 ] || { echo "$cfg gateway: $w WARN lines, first ones:"; grep 'level=WARN' "$work/$cfg.log" | cut -c1-240 | head -5; }
done
echo "C=$c; redis_rt/req: script calls (EVALSHA/EVAL: admissions, write-back batches, reconciliations; the commands inside a script are not round trips) over requests;"
[ -n "$own_redis" ] || echo "REDIS is shared with anything else using it during the run."
