#!/usr/bin/env bash
# The production configuration against the default one under synchronized
# bursts: a closed loop of C streams with equal-length answers (constant
# TTFT and ITL, no jitter) starts every stream of a wave at the same moment
# and keeps them in step, as batch jobs and retries after an outage do.
# Runs are interleaved (default, production with a limited key, production
# with an unlimited key, then again), each of WAVES waves of C requests:
#   default:      SQLite ledger, a static key, no limits;
#   prod-limited: PostgreSQL keys and ledger, a database key with Redis rpm,
#                 tpm and a month budget;
#   prod-free:    the same gateway, a database key with no limits.
# Reports per run: TTFT p99 added over the sim direct (measured once, same
# burst), [DONE] -> end of body p99 and max (bench's done_to_end_ms, over
# every stream of the run), gateway CPU per relayed chunk, and failures;
# then the medians per configuration.
# Usage: scripts/prod-burst.sh [C ...]   (default: 100 500)
# Env: TOKENS (50), ITL (20ms), TTFT (50ms), WAVES (10), ROUNDS (2),
#      REDIS (default: a redis-server of its own on a free port),
#      PG (postgres://postgres@127.0.0.1:5432/test?sslmode=disable),
#      BIN (a built streamgate; default: build ./cmd/streamgate),
#      GATEWAY_BIN (the streamgate that serves, e.g. an older build to compare;
#      default: BIN; the sim and the bench stay BIN's).
set -euo pipefail
cd "$(dirname "$0")/.."
cs=("$@"); [ ${#cs[@]} -gt 0 ] || cs=(100 500)
tokens=${TOKENS:-50}; itl=${ITL:-20ms}; ttft=${TTFT:-50ms}; waves=${WAVES:-10}; rounds=${ROUNDS:-2}
. scripts/prod-env.sh prodburst

sg=${BIN:-}
if [ -z "$sg" ]; then go build -o "$work/streamgate" ./cmd/streamgate; sg="$work/streamgate"; fi
gw=${GATEWAY_BIN:-$sg}
simport=$((20000 + RANDOM % 10000)); defport=$((simport + 1)); prodport=$((simport + 2))
"$sg" sim --addr "127.0.0.1:$simport" --ttft "$ttft" --ttft-p99 "$ttft" --itl "$itl" --itl-jitter 0 --tokens "$tokens" >"$work/sim.log" 2>&1 & pids+=($!)
configs "$simport" "$defport" "$prodport"
secret() { sed -n 's/^secret: //p' <<<"$1"; }
lim=$(secret "$("$sg" keys create --database "$dsn" --name "limited-$RANDOM" --rpm 10000000 --tpm 1000000000 --budget-usd 1000000 --budget-period month)")
free=$(secret "$("$sg" keys create --database "$dsn" --name "free-$RANDOM")")
[ -n "$lim" ] && [ -n "$free" ] || { echo "keys create gave no secret" >&2; exit 1; }
"$gw" serve --config "$work/default.yaml" --log-level warn >"$work/default.log" 2>&1 & defpid=$!; pids+=("$defpid")
"$gw" serve --config "$work/prod.yaml" --log-level warn >"$work/prod.log" 2>&1 & prodpid=$!; pids+=("$prodpid")
healthy "$defport" "$prodport" "$simport"

bench() { # label url key C
  "$sg" bench --base-url "$2" ${3:+--api-key "$3"} --model sim-model --concurrency "$4" --requests $(($4 * waves)) \
    --warmup "$4" --max-tokens "$tokens" --no-progress --json "$work/$1.json" >/dev/null
}
printf '%-5s %-5s %-13s %12s %12s %12s %12s %8s\n' C round config cpu_us/chunk ttft_p99_add done_end_p99 done_end_max failed
for c in "${cs[@]}"; do
  bench "direct-$c" "http://127.0.0.1:$simport/v1" "" "$c"
  dttft=$(jq '.runs[0].ttft_ms.p99' "$work/direct-$c.json")
  for r in $(seq "$rounds"); do
    for cfg in default prod-limited prod-free; do
      case $cfg in
        default) port=$defport; pid=$defpid; key=sg-bench-0123456789abcdef ;;
        prod-limited) port=$prodport; pid=$prodpid; key=$lim ;;
        prod-free) port=$prodport; pid=$prodpid; key=$free ;;
      esac
      n0=$(chunks "$simport"); g0=$(ticks "$pid")
      bench "$cfg-$c-$r" "http://127.0.0.1:$port/v1" "$key" "$c"
      n1=$(chunks "$simport"); g1=$(ticks "$pid")
      jq -r --arg c "$c" --arg r "$r" --arg cfg "$cfg" --arg d "$dttft" \
        --arg cpu "$(awk -v g=$((g1 - g0)) -v n=$((n1 - n0)) -v hz="$hz" 'BEGIN { printf "%.2f", g/hz*1e6/n }')" \
        '.runs[0] as $x | [$c, $r, $cfg, $cpu, (($x.ttft_ms.p99 - ($d|tonumber))*1000|round/1000),
          (($x.done_to_end_ms.p99 // 0)*100|round/100), (($x.done_to_end_ms.max // 0)*100|round/100), $x.failed] | @tsv' "$work/$cfg-$c-$r.json" |
        tee -a "$work/rows.tsv" | awk -F'\t' '{printf "%-5s %-5s %-13s %12s %12s %12s %12s %8s\n", $1, $2, $3, $4, $5, $6, $7, $8}'
    done
  done
done
echo "medians over rounds:"
awk -F'\t' '{ k = $1 " " $3; n[k]++; cpu[k, n[k]] = $4; add[k, n[k]] = $5; de[k, n[k]] = $6; keys[k] = 1 }
  function med(a, k, m,   i, j, t, v) { for (i = 1; i <= m; i++) v[i] = a[k, i]
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (v[j] + 0 < v[i] + 0) { t = v[i]; v[i] = v[j]; v[j] = t }
    return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2 }
  END { for (k in keys) printf "%-20s cpu_us/chunk %8.2f  ttft_p99_add %8.2f  done_end_p99 %8.2f\n", k, med(cpu, k, n[k]), med(add, k, n[k]), med(de, k, n[k]) }' "$work/rows.tsv" | sort -n
for cfg in default prod; do # what the gateways logged at WARN (a Redis outage, a slow ledger) explains a figure
  w=$(grep -c 'level=WARN' "$work/$cfg.log" || true)
  [ "$w" = 0 ] || { echo "$cfg gateway: $w WARN lines, first ones:"; grep 'level=WARN' "$work/$cfg.log" | cut -c1-240 | head -5; }
done
echo "TOKENS=$tokens ITL=$itl TTFT=$ttft WAVES=$waves ROUNDS=$rounds; load: $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min) at the end, $(nproc) cores"
[ -n "$own_redis" ] || echo "REDIS is shared with anything else using it during the run."
