#!/usr/bin/env bash
# Measures what the gateway adds to a stream, on this machine, with the sim,
# the gateway and the benchmark as three processes on loopback:
#   - streamgate bench direct to the sim and through the gateway, same load:
#     TTFT p50/p99 and ITL p99 of both and the differences;
#   - CPU per relayed chunk of the gateway and per chunk of the sim (from
#     /proc/PID/stat over the run; the bench reports its own);
#   - the gateway's GC pause max over the run (from its /metrics);
#   - the gateway's RSS with N streams held open, per stream.
# Usage: scripts/gateway-overhead.sh [CONCURRENCY...]   (default: 100 1000)
# Env: TOKENS (default 100), ITL (20ms: 50 chunks/s per stream), REQ_WAVES (3),
#      PER_CHUNK (tokens per chunk, default 1 in every dialect, so that figures per
#      chunk compare across dialects; 0 = the dialect's own: Anthropic 4, Gemini 16),
#      GW_ENV (environment of the gateway alone, e.g. GW_ENV="GOGC=400"),
#      RAMP (bench --ramp-up, e.g. 2s: streams start spread out instead of in one burst),
#      H2=1 (HTTP/2 cleartext, prior knowledge, on every hop: bench --http2 to the
#      gateway and to the sim, provider http2: true from the gateway to the sim),
#      FLOOR=tcp|http (scripts/relayfloor in place of the gateway: a bare byte copy,
#      or net/http's httputil.ReverseProxy; what relaying costs on this machine at all),
#      TLS=h2|h1 (the sim serves TLS with a self-signed certificate, offering h2 and
#      http/1.1 by ALPN, or http/1.1 only; the gateway's provider, or FLOOR=http's
#      ReverseProxy, reaches it over https:// with that CA, as production reaches a
#      provider; the direct run is over TLS too; prints the sim's TLS handshakes and
#      connections per request of the relayed run),
#      API=chat|messages|responses (bench --api: the API the client speaks to the gateway and,
#      in the direct run, to the sim; e.g. API=messages DIALECT=anthropic is an Anthropic
#      client passed through to an Anthropic upstream),
#      DIALECT=openai|anthropic|gemini|bedrock (the API the gateway speaks to the sim in:
#      the client and the direct run speak OpenAI's either way, so the figures include
#      the adapter's translation; bedrock is Claude on the sim's Bedrock InvokeModel
#      path, SigV4-signed, its events in AWS event-stream frames: against anthropic,
#      what the cloud's framing and signing cost),
#      PERF=1 (Linux perf, Debian's linux-perf: samples the relay's user time during
#      the measured run and splits it per relayed chunk by whose code ran: the
#      relay's own (streamgate's packages, or httputil for FLOOR=http), other
#      libraries, Go's net/http and I/O, the runtime; the sampling itself adds a
#      little CPU, so take the CPU figure from runs without it)
set -euo pipefail
cd "$(dirname "$0")/.."
levels=("$@"); [ ${#levels[@]} -gt 0 ] || levels=(100 1000)
tokens=${TOKENS:-100}; itl=${ITL:-20ms}; waves=${REQ_WAVES:-3}
h2=(); h2cfg=""
if [ "${H2:-0}" = 1 ]; then h2=(--http2); h2cfg=", http2: true"; fi
work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

go build -o "$work/streamgate" ./cmd/streamgate
sg="$work/streamgate"
simport=$((20000 + RANDOM % 10000)); gwport=$((simport + 1))
tlsflags=(); scheme=http; cafile=""; cacurl=()
case ${TLS:-} in
  "") ;;
  h2) tlsflags=(--tls --tls-alpn h2,http/1.1) ;;
  h1) tlsflags=(--tls --tls-alpn http/1.1) ;;
  *) echo "TLS: want h2 or h1, got $TLS" >&2; exit 2 ;;
esac
if [ -n "${TLS:-}" ]; then
  [ -z "$h2cfg" ] || { echo "TLS and H2: the upstream hop negotiates HTTP/2 by ALPN with TLS=h2; H2=1 is for cleartext" >&2; exit 2; }
  scheme=https; cafile="$work/ca.pem"; tlsflags+=(--tls-ca-out "$cafile"); cacurl=(--cacert "$cafile")
fi
"$sg" sim "${tlsflags[@]}" --addr "127.0.0.1:$simport" --stamp --ttft 50ms --ttft-p99 50ms --itl "$itl" --itl-jitter 0 \
  --tokens "$tokens" --tokens-per-chunk "${PER_CHUNK:-1}" >"$work/sim.log" 2>&1 &
simpid=$!; pids+=("$simpid")
kind=${DIALECT:-openai}
routemodel=sim-model extra=
case $kind in
  openai) path=/v1 ;; anthropic) path= ;; gemini) path=/v1beta ;;
  bedrock) path= routemodel=anthropic.sim-model
    extra=", region: us-east-1, aws: {access_key_id: AKIASIMULATOR0000000, secret_access_key: sim-secret-access-key}" ;;
  *) echo "DIALECT: want openai, anthropic, gemini or bedrock, got $kind" >&2; exit 2 ;;
esac
cat >"$work/gw.yaml" <<YAML
listen: 127.0.0.1:$gwport
database: sqlite://$work/usage.db
providers:
  - {name: sim, kind: $kind, base_url: "$scheme://127.0.0.1:$simport$path"$extra$h2cfg${cafile:+, ca_file: "$cafile"}}
keys:
  - {name: bench, key: sg-bench-0123456789abcdef}
models:
  - name: sim-model
    routes: [{provider: sim, model: $routemodel}]
YAML
floor=${FLOOR:-}
[ -z "$floor" ] || go build -o "$work/relayfloor" ./scripts/relayfloor
start_gw() { # the gateway, or the floor relay in its place
  if [ -n "$floor" ]; then
    [ -z "$cafile" ] || [ "$floor" = http ] || { echo "TLS needs FLOOR=http (the tcp floor copies bytes, it speaks no TLS)" >&2; exit 2; }
    env ${GW_ENV:-} "$work/relayfloor" --mode "$floor" --listen "127.0.0.1:$gwport" --upstream "127.0.0.1:$simport" ${cafile:+--upstream-ca "$cafile"} >"$work/gw.log" 2>&1 &
  else
    env ${GW_ENV:-} "$sg" serve --config "$work/gw.yaml" --log-level warn >"$work/gw.log" 2>&1 &
  fi
  gwpid=$!; pids+=("$gwpid")
  for _ in $(seq 100); do
    curl -fsS -H "Authorization: Bearer sg-bench-0123456789abcdef" "http://127.0.0.1:$gwport/v1/models" >/dev/null 2>&1 &&
      curl -fsS "${cacurl[@]}" "$scheme://127.0.0.1:$simport/v1/models" >/dev/null 2>&1 && break
    sleep 0.1
  done
}
start_gw

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }   # utime + stime, clock ticks
sysc() { awk '/^sysc[rw]:/{printf "%s ", $2}' "/proc/$1/io"; }   # read and write syscalls (read-like, write-like)
hz=$(getconf CLK_TCK)
simscrape() { curl -fsS "${cacurl[@]}" "$scheme://127.0.0.1:$simport/metrics"; }
metric() { awk -v m="$1" '$1 == m || index($1, m "{") == 1 { s += $2 } END { printf "%d", s }'; } # METRIC < scrape: summed over labels
simmetric() { simscrape | metric "$1"; }
delta() { echo $(( $(metric "$1" <"$work/sim1") - $(metric "$1" <"$work/sim0") )); } # METRIC over the measured run
# GC pause max: the smallest bucket bound of streamgate_gc_pause_seconds that
# holds every pause (an upper bound of the longest pause, in ms).
gcmax() { [ -z "$floor" ] || { printf 'n/a'; return; }; curl -fsS "http://127.0.0.1:$gwport/metrics" | awk '
  /^streamgate_gc_pause_seconds_count/ { total = $2 }
  /^streamgate_gc_pause_seconds_bucket/ { match($0, /le="[^"]+"/); le = substr($0, RSTART + 4, RLENGTH - 5); n[le] = $2; order[++k] = le }
  END { for (i = 1; i <= k; i++) if (n[order[i]] >= total) { printf "%s", (order[i] == "+Inf" ? "> 100" : order[i] * 1000); exit } }'; }

# perf_split FILE CHUNKS: user time per relayed chunk by whose code ran (self
# samples of each symbol, at perf's sampling frequency).
perf_split() {
  perf report -i "$1" --no-children --sort sym -g none -n --stdio --percent-limit 0 2>/dev/null | awk -v n="$2" -v hz=999 '
    /^#/ || NF < 4 || $3 != "[.]" { next }
    { sym = $4; g = "other std library (encoding/json, strconv, ...)" }
    sym ~ /^github\.com\/streamgate\// || sym ~ /^net\/http\/httputil\./ { g = "relay'"'"'s own code (streamgate, or httputil)" }
    sym !~ /^github\.com\/streamgate\// && sym ~ /^[a-z0-9.-]+\.[a-z]+\// { g = "other libraries (prometheus, sqlite, otel, ...)" }
    sym ~ /^(net|net\/http|net\/http\/internal|net\/textproto|internal\/poll|bufio|syscall|io|fmt)[.(]/ && sym !~ /^net\/http\/httputil\./ { g = "net/http, net and I/O" }
    sym ~ /^(runtime|internal\/runtime|sync|time|internal\/sync|internal\/bytealg)[.(\/]/ || sym ~ /^(__vdso|memeqbody|indexbytebody|aeshashbody|countbody|cmpbody)/ { g = "runtime (scheduler, memory, GC, timers)" }
    sym ~ /^internal\/runtime\/syscall\// { g = "net/http, net and I/O" }
    { t[g] += $2; all += $2 }
    END { for (g in t) printf "  %7.2f µs  %s\n", t[g] / hz * 1e6 / n, g; printf "  %7.2f µs  user time sampled, all\n", all / hz * 1e6 / n }' | sort -rn
}

run() { # label url key conc
  local label=$1 url=$2 key=$3 c=$4
  "$sg" bench --api "${API:-chat}" --base-url "$url" ${key:+--api-key "$key"} --model sim-model --concurrency "$c" \
    --requests $((c * waves)) --warmup "$c" --ramp-up "${RAMP:-0s}" --max-tokens "$tokens" --no-progress "${h2[@]}" \
    ${cafile:+--ca-file "$cafile"} --json "$work/$label-$c.json" >/dev/null
}

printf '%-6s %-8s %9s %9s %9s %9s %11s %10s\n' conc path ttft_p50 ttft_p99 itl_p99 delay_p99 bench_us/ch errors
for c in "${levels[@]}"; do
  run direct "$scheme://127.0.0.1:$simport/v1" "" "$c"
  if [ "${PERF:-0}" = 1 ]; then
    command -v perf >/dev/null || { echo "PERF=1: perf not found (apt-get install linux-perf)" >&2; exit 2; }
    perf record -q -e cpu-clock:u -F 999 -p "$gwpid" -o "$work/perf-$c.data" >/dev/null 2>&1 &
    perfpid=$!; sleep 0.5
  fi
  simscrape >"$work/sim0"; s0=$(ticks "$simpid"); g0=$(ticks "$gwpid"); read -r r0 w0 <<<"$(sysc "$gwpid")"
  run gateway "http://127.0.0.1:$gwport/v1" sg-bench-0123456789abcdef "$c"
  s1=$(ticks "$simpid"); g1=$(ticks "$gwpid"); read -r r1 w1 <<<"$(sysc "$gwpid")"; simscrape >"$work/sim1"
  if [ "${PERF:-0}" = 1 ]; then kill -INT "$perfpid"; wait "$perfpid" 2>/dev/null || true; fi
  for p in direct gateway; do
    jq -r --arg p "$p" --arg c "$c" '.runs[0] as $r | [$c, $p, $r.ttft_ms.p50, $r.ttft_ms.p99, $r.itl_ms.p99, (.client.measurement_delay_ms.p99 // 0), .client.cpu_us_per_chunk, ($r.failed)] | @tsv' \
      "$work/$p-$c.json" | awk -F'\t' '{printf "%-6s %-8s %9.2f %9.2f %9.2f %9.3f %11.1f %10d\n", $1, $2, $3, $4, $5, $6, $7, $8}'
  done
  jq -r -s --arg c "$c" '"added @\($c): TTFT p50 \((.[1].runs[0].ttft_ms.p50 - .[0].runs[0].ttft_ms.p50)*1000|round/1000) ms, TTFT p99 \((.[1].runs[0].ttft_ms.p99 - .[0].runs[0].ttft_ms.p99)*1000|round/1000) ms, ITL p99 \((.[1].runs[0].itl_ms.p99 - .[0].runs[0].itl_ms.p99)*1000|round/1000) ms"' \
    "$work/direct-$c.json" "$work/gateway-$c.json"
  n=$(delta streamgate_sim_chunks_total)
  awk -v g=$((g1 - g0)) -v s=$((s1 - s0)) -v n="$n" -v hz="$hz" -v c="$c" \
    'BEGIN { printf "cpu @%s: gateway %.2f µs per relayed chunk, sim %.2f µs per chunk (%d chunks)\n", c, g/hz*1e6/n, s/hz*1e6/n, n }'
  # The sim's counters over the relayed run; the second scrape's own connection (and handshake) is not the relay's.
  [ -z "$cafile" ] || awk -v h=$(($(delta streamgate_sim_tls_handshakes_total) - 1)) -v k=$(($(delta streamgate_sim_connections_total) - 1)) -v q="$(delta streamgate_sim_requests_total)" -v c="$c" \
    'BEGIN { printf "tls @%s: upstream %d handshakes and %d connections for %d requests (%.3f handshakes per request)\n", c, h, k, q, h/q }'
  awk -v r=$((r1 - r0)) -v w=$((w1 - w0)) -v n="$n" -v c="$c" \
    'BEGIN { printf "syscalls @%s: gateway %.2f reads and %.2f writes per relayed chunk\n", c, r/n, w/n }'
  if [ "${PERF:-0}" = 1 ]; then
    echo "user time @$c per relayed chunk, by whose code ran (perf, self samples; kernel time not included):"
    perf_split "$work/perf-$c.data" "$n"
  fi
done
echo "gateway GC pause max since start: $(gcmax) ms (upper bound, streamgate_gc_pause_seconds)"

# RSS with N open streams, on a fresh gateway (Go keeps the heap's high-water
# mark, so the process that ran the load above would hide the per-stream cost):
# long, slow streams held open, RSS read mid-run.
kill "$gwpid"; wait "$gwpid" 2>/dev/null || true
start_gw
n=${levels[-1]}
"$sg" bench --api "${API:-chat}" --base-url "http://127.0.0.1:$gwport/v1" --api-key sg-bench-0123456789abcdef --model sim-model \
  --concurrency 10 --requests 20 --max-tokens 10 --no-progress "${h2[@]}" >/dev/null   # warm the pools
base=$(awk '/VmRSS/{print $2}' "/proc/$gwpid/status")
"$sg" bench --api "${API:-chat}" --base-url "http://127.0.0.1:$gwport/v1" --api-key sg-bench-0123456789abcdef --model sim-model \
  --concurrency "$n" --requests "$n" --max-tokens 300 --header X-Sim-ITL=50ms --header X-Sim-Tokens=300 --no-progress "${h2[@]}" --json "$work/rss.json" >/dev/null &
bpid=$!
sleep 8
if [ -n "$floor" ]; then open=$(simmetric streamgate_sim_inflight_streams)
else open=$(curl -fsS "http://127.0.0.1:$gwport/metrics" | awk '/^streamgate_inflight_streams /{print $2}'); fi
peak=$(awk '/VmRSS/{print $2}' "/proc/$gwpid/status")
gcopen=$(gcmax)
wait "$bpid"
awk -v b="$base" -v p="$peak" -v o="$open" 'BEGIN { printf "gateway RSS: %d KiB warm and idle, %d KiB with %d open streams: %.1f KiB per stream\n", b, p, o, (p-b)/o }'
echo "gateway GC pause max with $open open streams (fresh process): $gcopen ms"
