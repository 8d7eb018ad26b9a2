#!/usr/bin/env bash
# Soak test of the gateway: long streaming load through upstream faults,
# watching for leaks (goroutines, open files, heap) and for requests missing
# from the usage ledger. Opt-in, run by hand; not part of CI, never run by
# `go test`. Needs go, curl, jq; sqlite3 if installed (else it builds
# scripts/soak/ledgerrows). Linux only (/proc). Everything listens on 127.0.0.1.
#
#   scripts/soak/soak.sh                                # 30 min, 300 streams
#   DURATION=3m STREAMS=100 scripts/soak/soak.sh        # a short check
#
# What it does, four processes on loopback, one line per phase on stdout
# ("soak: [mm:ss] ..." with the time since the script started):
#   1. builds the binary once into $OUT (go build ./cmd/streamgate);
#   2. starts two simulated upstreams: "faulty" (connection cuts at a random
#      chunk, 503s before the stream, a heavy TTFT tail) and "steady" (none);
#   3. writes $OUT/gateway.yaml: one model, soak-model, whose first route is
#      faulty and second steady (ordered fallback), timeouts.first_token inside
#      the faulty TTFT tail so some attempts fall back on it, the ledger in
#      $OUT/usage.db, one static key; starts `streamgate serve` with --pprof
#      and waits for /readyz (a config the gateway rejects stops here, its log
#      printed);
#   4. runs `streamgate bench` closed loop: STREAMS streams for DURATION;
#   5. every SAMPLE seconds appends a line to $OUT/samples.tsv; saves heap
#      profiles (after a forced GC, /debug/pprof/heap?gc=1) at 1/6 of DURATION
#      (at most minute 5) and at the end of the load, prints the command that
#      compares them and the top of its output;
#   6. after the load: waits for the bench (its --grace lets open streams
#      finish) and for the gateway's streams to drain, waits IDLE_WAIT for idle
#      upstream connections to expire, reads the gateway's request count from
#      /metrics, stops the gateway with SIGTERM (it flushes the ledger and
#      closes the store), counts the ledger rows and prints the verdict;
#   7. on any exit, error or Ctrl-C stops every process it started (SIGTERM,
#      then SIGKILL after 5 s), and only those.
#
# Environment (defaults in brackets; durations as 90s, 5m, 1h30m, or seconds):
#   DURATION [30m]        load time (bench --duration)
#   STREAMS [300]         concurrent streams (bench --concurrency)
#   SAMPLE [30; DURATION/36 for runs under 18m, at least 5]  seconds between samples
#   OUT [/tmp/streamgate-soak-YYYYmmdd-HHMMSS]  output directory, created
#   SIM_PORT STEADY_PORT GW_PORT PPROF_PORT  [4 free consecutive ports, random
#                         in 20000-29999]  the faulty sim, the steady sim, the
#                         gateway and its pprof listener, all on 127.0.0.1
#   ITL [20ms] TOKENS [200]   both sims: gap between chunks, tokens per stream
#                         (streams last ~4 s)
#   TTFT [200ms] TTFT_P99 [8s]  faulty sim: TTFT median and p99 (lognormal)
#   CUT_RATE [0.02]       faulty sim: fraction of streams cut at a random chunk
#   FAIL_RATE [0.05]      faulty sim: fraction answered 503 before the stream
#   FIRST_TOKEN [4s]      gateway timeouts.first_token; with the defaults ~3%
#                         of faulty TTFTs exceed it and fall back to steady
#   RAMP [DURATION/30, at most 10s]   bench --ramp-up
#   WARMUP [DURATION/15, at most 2m]  start of the baseline window
#   BASELINE_END [DURATION/6, at most 5m]  end of the baseline window
#   TOL_PCT [10] TOL_GOROUTINES [50] TOL_FDS [50] TOL_HEAP_MIB [4]
#                         flat = (mean of the last 3 samples) - (baseline mean)
#                         <= the larger of TOL_PCT % of the baseline and the
#                         absolute tolerance of that figure
#   DRAIN_TIMEOUT [60]    seconds the gateway's streams may take to drain
#   IDLE_WAIT [100]       seconds to wait, load over, before the idle check
#                         (the upstream transport's IdleConnTimeout is 90 s);
#                         0 skips the idle check
#   TOL_IDLE [10]         idle: goroutines and open files may exceed their
#                         pre-load figures by this much
#   LOG_LEVEL [warn]      gateway --log-level
#   GW_ENV                environment of the gateway alone, e.g. GW_ENV="GOGC=100"
#
# Files in $OUT:
#   samples.tsv   one line per SAMPLE: elapsed_s (since the bench started),
#                 goroutines (/debug/pprof/goroutine "total N"), open_fds
#                 (/proc/PID/fd), rss_kib (VmRSS), heap_inuse_bytes
#                 (go_memstats_heap_inuse_bytes), inflight_streams
#                 (streamgate_inflight_streams), heap_live_bytes
#                 (go_gc_heap_live_bytes: marked live by the last GC, NA before
#                 the first), requests (streamgate_requests_total so far),
#                 late_ms (how late this script woke for the sample: the
#                 machine stalled), scrape_ms (the /metrics round trip: the
#                 gateway answered slowly), cpu_pressure (/proc/pressure/cpu
#                 "some avg10": % of time tasks waited for a CPU; a shared,
#                 loaded machine skews latencies and timeouts)
#   heap-<t>.pb.gz, heap-end.pb.gz, pprof-diff.txt   the profiles and their diff
#   heap-warmup.pb.gz   taken at WARMUP, for its forced GC (the live heap is
#                 only known after a GC) and as a third profile to compare
#   goroutines-end.txt (under load), goroutines-idle.txt (after IDLE_WAIT)
#   metrics-end.txt (the last /metrics), bench.json, bench.log, gateway.yaml,
#   gateway.log, sim-faulty.log, sim-steady.log, usage.db, streamgate
#
# Reading the result: the verdict compares the mean of the last 3 samples
# (still under load) with the mean of the samples in [WARMUP, BASELINE_END]
# for goroutines, open files and the live heap: "ok" (flat) or "GROWING". Heap
# in use is shown beside them but not judged: with GOGC=400 it saw-tooths
# between the live heap and 5x it, so two samples differ by the GC's phase, not
# by a leak; the live heap is the same figure without the saw-tooth. The slopes
# per minute of RSS, heap in use and live heap (least squares from WARMUP on)
# tell a steady leak (a steady positive slope over a long run) from a one-off
# step (the heap finding its size; RSS grows until the heap's peak is reached
# and is not returned at once). "drain": no stream left in flight after the
# bench ended. "idle": IDLE_WAIT after the load, goroutines and open files are
# back to their pre-load figures. "ledger": exactly one ledger row per request,
# as counted by the gateway (streamgate_requests_total of soak-model, read just
# before SIGTERM) and by the bench (bench.json). Exit status 0 when every check
# holds, 1 when one fails, 2 on bad usage. For a GROWING heap read
# pprof-diff.txt; for goroutines, compare goroutines-end.txt and
# goroutines-idle.txt (stacks still there when idle). Latency figures of the
# bench are not the point here (a loaded machine skews them; see bench.log's
# client self-check).
set -euo pipefail
cd "$(dirname "$0")/../.."

say() { printf 'soak: [%02d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }   # time since the script started
die() { printf 'soak: %s\n' "$*" >&2; exit 1; }

secs() { # Go-style duration of whole h/m/s (or bare seconds) -> seconds
  local d=$1 n=0
  [[ $d =~ ^[0-9]+$ ]] && { echo "$d"; return; }
  [[ $d =~ ^([0-9]+h)?([0-9]+m)?([0-9]+s)?$ && -n $d ]] || { echo "soak: bad duration $d (want e.g. 90s, 5m, 1h30m)" >&2; exit 2; }
  [[ $d =~ ([0-9]+)h ]] && n=$((n + BASH_REMATCH[1] * 3600))
  [[ $d =~ ([0-9]+)m ]] && n=$((n + BASH_REMATCH[1] * 60))
  [[ $d =~ ([0-9]+)s ]] && n=$((n + BASH_REMATCH[1]))
  echo "$n"
}
label() { (($1 % 60 == 0)) && echo "$(($1 / 60))m" || echo "${1}s"; }   # 300 -> 5m, 30 -> 30s

DURATION=${DURATION:-30m}; dur=$(secs "$DURATION")
STREAMS=${STREAMS:-300}
SAMPLE=${SAMPLE:-$((dur / 36 < 30 ? (dur / 36 > 5 ? dur / 36 : 5) : 30))}
OUT=${OUT:-/tmp/streamgate-soak-$(date +%Y%m%d-%H%M%S)}
ITL=${ITL:-20ms}; TOKENS=${TOKENS:-200}
TTFT=${TTFT:-200ms}; TTFT_P99=${TTFT_P99:-8s}
CUT_RATE=${CUT_RATE:-0.02}; FAIL_RATE=${FAIL_RATE:-0.05}
FIRST_TOKEN=${FIRST_TOKEN:-4s}
RAMP=${RAMP:-$((dur / 30 < 10 ? dur / 30 : 10))s}
warm=$(secs "${WARMUP:-$((dur / 15 < 120 ? dur / 15 : 120))}"); base_end=$(secs "${BASELINE_END:-$((dur / 6 < 300 ? dur / 6 : 300))}")
TOL_PCT=${TOL_PCT:-10}; TOL_GOROUTINES=${TOL_GOROUTINES:-50}; TOL_FDS=${TOL_FDS:-50}; TOL_HEAP_MIB=${TOL_HEAP_MIB:-4}
IDLE_WAIT=${IDLE_WAIT:-100}; TOL_IDLE=${TOL_IDLE:-10}
DRAIN_TIMEOUT=${DRAIN_TIMEOUT:-60}
LOG_LEVEL=${LOG_LEVEL:-warn}
[[ $STREAMS =~ ^[1-9][0-9]*$ && $SAMPLE =~ ^[1-9][0-9]*$ && $IDLE_WAIT =~ ^[0-9]+$ ]] ||
  { echo "soak: STREAMS and SAMPLE must be positive integers, IDLE_WAIT an integer" >&2; exit 2; }
# The verdict needs baseline samples and, after them, 3 more of its own.
(( warm <= base_end && base_end + 3 * SAMPLE < dur )) ||
  { echo "soak: DURATION=$DURATION too short for SAMPLE=${SAMPLE}s, WARMUP=${warm}s, BASELINE_END=${base_end}s (want BASELINE_END + 3 SAMPLE < DURATION)" >&2; exit 2; }

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }   # nothing accepts on 127.0.0.1:$1
if [ -z "${SIM_PORT:-}${STEADY_PORT:-}${GW_PORT:-}${PPROF_PORT:-}" ]; then
  for _ in $(seq 20); do
    b=$((20000 + RANDOM % 9996))
    port_free "$b" && port_free $((b + 1)) && port_free $((b + 2)) && port_free $((b + 3)) && break
  done
fi
SIM_PORT=${SIM_PORT:-$b}; STEADY_PORT=${STEADY_PORT:-$((SIM_PORT + 1))}
GW_PORT=${GW_PORT:-$((SIM_PORT + 2))}; PPROF_PORT=${PPROF_PORT:-$((SIM_PORT + 3))}
for p in "$SIM_PORT" "$STEADY_PORT" "$GW_PORT" "$PPROF_PORT"; do port_free "$p" || die "port 127.0.0.1:$p is in use"; done

mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
gw=http://127.0.0.1:$GW_PORT; pprof=http://127.0.0.1:$PPROF_PORT
key=sg-soak-0123456789abcdef; model=soak-model

# --- processes: every one started is in pids, stopped on any exit ----------
pids=()
cleanup() {
  local p alive=()
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive+=("$p"); done
  [ ${#alive[@]} -eq 0 ] && return
  kill -TERM "${alive[@]}" 2>/dev/null || true
  for _ in $(seq 50); do   # 5 s, then no more asking
    local left=0
    for p in "${alive[@]}"; do kill -0 "$p" 2>/dev/null && left=1; done
    [ $left = 0 ] && break
    sleep 0.1
  done
  kill -KILL "${alive[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'echo; say "interrupted"; exit 130' INT TERM

wait_up() { # name pid url: until url answers 200, or the process died
  for _ in $(seq 100); do
    kill -0 "$2" 2>/dev/null || { cat "$OUT/$1.log" >&2; die "$1 exited at start (log above, $OUT/$1.log)"; }
    curl -fsS -o /dev/null --max-time 1 "$3" 2>/dev/null && return
    sleep 0.1
  done
  die "$1 did not answer $3 within 10 s (log: $OUT/$1.log)"
}

# --- 1. build ---------------------------------------------------------------
say "build: go build -o $OUT/streamgate ./cmd/streamgate"
go build -o "$OUT/streamgate" ./cmd/streamgate
sg=$OUT/streamgate
if command -v sqlite3 >/dev/null; then
  ledger_rows() { sqlite3 -readonly "$1" 'SELECT count(*) FROM usage_entries'
    sqlite3 -readonly -separator $'\t' "$1" 'SELECT outcome, status, count(*) FROM usage_entries GROUP BY 1, 2 ORDER BY 3 DESC'; }
else
  go build -o "$OUT/ledgerrows" ./scripts/soak/ledgerrows
  ledger_rows() { "$OUT/ledgerrows" -by "$1"; }
fi

# --- 2. upstreams -----------------------------------------------------------
say "sims: faulty on :$SIM_PORT (cut $CUT_RATE, 503 $FAIL_RATE, TTFT $TTFT p99 $TTFT_P99), steady on :$STEADY_PORT; ITL $ITL, $TOKENS tokens"
"$sg" sim --addr "127.0.0.1:$SIM_PORT" --seed 1 --ttft "$TTFT" --ttft-p99 "$TTFT_P99" --itl "$ITL" --tokens "$TOKENS" \
  --cut-rate "$CUT_RATE" --fail-status 503 --fail-rate "$FAIL_RATE" >"$OUT/sim-faulty.log" 2>&1 &
pids+=($!); wait_up sim-faulty $! "http://127.0.0.1:$SIM_PORT/v1/models"
"$sg" sim --addr "127.0.0.1:$STEADY_PORT" --seed 2 --ttft 100ms --ttft-p99 300ms --itl "$ITL" --tokens "$TOKENS" \
  >"$OUT/sim-steady.log" 2>&1 &
pids+=($!); wait_up sim-steady $! "http://127.0.0.1:$STEADY_PORT/v1/models"

# --- 3. gateway -------------------------------------------------------------
cat >"$OUT/gateway.yaml" <<YAML
# written by scripts/soak/soak.sh
listen: 127.0.0.1:$GW_PORT
database: sqlite://$OUT/usage.db
timeouts:
  connect: 2s
  first_token: $FIRST_TOKEN        # inside the faulty sim's TTFT tail: some attempts fall back on it
  idle: 15s
providers:
  - {name: faulty, kind: openai, base_url: "http://127.0.0.1:$SIM_PORT/v1"}
  - {name: steady, kind: openai, base_url: "http://127.0.0.1:$STEADY_PORT/v1"}
keys:
  - {name: soak, key: $key}
models:
  - name: $model
    routes:
      - {provider: faulty, model: sim-default}
      - {provider: steady, model: sim-default}
    price: {input: 1.00, output: 2.00}
YAML
say "gateway: serve --config $OUT/gateway.yaml on :$GW_PORT, pprof on :$PPROF_PORT, ledger $OUT/usage.db"
rm -f "$OUT/usage.db" "$OUT/usage.db-wal" "$OUT/usage.db-shm"
# shellcheck disable=SC2086 # GW_ENV is a list of VAR=value words
env ${GW_ENV:-} "$sg" serve --config "$OUT/gateway.yaml" --pprof "127.0.0.1:$PPROF_PORT" --log-level "$LOG_LEVEL" \
  >"$OUT/gateway.log" 2>&1 &
gwpid=$!; pids+=("$gwpid")
wait_up gateway "$gwpid" "$gw/readyz"
wait_up gateway "$gwpid" "$pprof/debug/pprof/"

# --- sampling ---------------------------------------------------------------
metric() { # name [label regex]: sum of the samples of one metric in $m
  awk -v n="$1" -v l="${2:-}" '$1 == n || index($1, n "{") == 1 { if (l == "" || $1 ~ l) { s += $2; f = 1 } }
    END { if (f) printf "%.0f\n", s; else print "NA" }' <<<"$m"
}
fds() { local f=(/proc/"$gwpid"/fd/*); echo ${#f[@]}; }   # open files of the gateway
sample() { # scheduled elapsed seconds: one line of samples.tsv
  local gp g fds rss psi=NA t1 t2
  t1=${EPOCHREALTIME/./}
  m=$(curl -fsS --max-time 10 "$gw/metrics" 2>/dev/null) || m=""
  t2=${EPOCHREALTIME/./}
  gp=$(curl -fsS --max-time 10 "$pprof/debug/pprof/goroutine?debug=1" 2>/dev/null) || gp=""
  g=${gp%%$'\n'*}; g=${g##*total }
  [[ $g =~ ^[0-9]+$ ]] || g=$(metric go_goroutines)
  fds=$(fds)
  rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$gwpid/status" 2>/dev/null || echo NA)
  [ -r /proc/pressure/cpu ] && psi=$(awk '/^some/ { sub("avg10=", "", $2); print $2 }' /proc/pressure/cpu)
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\n' "$1" "$g" "$fds" "$rss" "$(metric go_memstats_heap_inuse_bytes)" \
    "$(metric streamgate_inflight_streams)" "$(metric go_gc_heap_live_bytes | sed 's/^0$/NA/')" \
    "$(metric streamgate_requests_total "model=\"$model\"")" $(((t1 - t0) / 1000 - $1 * 1000)) $(((t2 - t1) / 1000)) "$psi" \
    >>"$OUT/samples.tsv"
}
heap() { curl -fsS --max-time 60 -o "$OUT/$1" "$pprof/debug/pprof/heap?gc=1" || say "warning: heap profile $1 failed"; }
printf 'elapsed_s\tgoroutines\topen_fds\trss_kib\theap_inuse_bytes\tinflight_streams\theap_live_bytes\trequests\tlate_ms\tscrape_ms\tcpu_pressure\n' >"$OUT/samples.tsv"
m=$(curl -fsS "$gw/metrics")
idle_g=$(metric go_goroutines); idle_fds=$(fds)

# --- 4. load ----------------------------------------------------------------
early=$((dur / 6 < 300 ? dur / 6 : 300)); early_name=heap-$(label "$early").pb.gz
machine() { printf '%s CPUs, load average %s' "$(nproc)" "$(cut -d' ' -f1-3 /proc/loadavg)"; [ -r /proc/pressure/cpu ] && awk '/^some/ { sub("avg60=", "", $3); printf ", CPU pressure %s%% (avg60)", $3 }' /proc/pressure/cpu; true; }
say "machine: $(machine)"
say "bench: $STREAMS streams for $DURATION (ramp-up $RAMP) -> $OUT/bench.json; sampling every ${SAMPLE}s -> $OUT/samples.tsv; heap profiles at $(label "$early") and at the end"
"$sg" bench --base-url "$gw/v1" --api-key "$key" --model "$model" --concurrency "$STREAMS" --duration "$DURATION" \
  --requests 0 --ramp-up "$RAMP" --no-progress --json "$OUT/bench.json" >"$OUT/bench.log" 2>&1 &
benchpid=$!; pids+=("$benchpid")
t0=${EPOCHREALTIME/./}
took_warm=0; took_early=0; k=0
while :; do
  t=$((k * SAMPLE)); ((t < dur)) || break
  now=${EPOCHREALTIME/./}; wait_us=$((t0 + t * 1000000 - now))
  ((wait_us <= 0)) || sleep "$((wait_us / 1000000)).$(printf '%06d' $((wait_us % 1000000)))"
  kill -0 "$benchpid" 2>/dev/null || { cat "$OUT/bench.log" >&2; die "bench exited early, at ${t}s (log above)"; }
  kill -0 "$gwpid" 2>/dev/null || { tail -20 "$OUT/gateway.log" >&2; die "gateway exited during the load, at ${t}s"; }
  sample "$t"
  # One forced GC at WARMUP (a heap profile with gc=1): the live heap is
  # only known after a GC, and a light load may not reach the first one
  # (GOGC=400: at 16 MiB) before the baseline window.
  if [ $took_warm = 0 ] && ((t >= warm)); then heap heap-warmup.pb.gz; took_warm=1; fi
  if [ $took_early = 0 ] && ((t >= early)); then heap "$early_name"; took_early=1; fi
  if ((k % 10 == 0)); then
    say "  $(awk -F'\t' 'END { printf "%ss: %s goroutines, %s open files, RSS %.0f MiB, heap in use %.1f MiB, %s streams, %s requests", $1, $2, $3, $4 / 1024, $5 / 1048576, $6, $8 }' "$OUT/samples.tsv")"
  fi
  k=$((k + 1))
done
heap heap-end.pb.gz
curl -fsS --max-time 10 -o "$OUT/goroutines-end.txt" "$pprof/debug/pprof/goroutine?debug=1" || true
say "heap: go tool pprof -base $OUT/$early_name -top $OUT/heap-end.pb.gz   (top lines in $OUT/pprof-diff.txt)"
go tool pprof -base "$OUT/$early_name" -top -nodecount=15 "$OUT/heap-end.pb.gz" >"$OUT/pprof-diff.txt" 2>&1 || true
sed -n '1,22p' "$OUT/pprof-diff.txt" | sed 's/^/soak:   /'

# --- 6. end -----------------------------------------------------------------
say "stop: waiting for the bench to finish its last streams (bench --grace 30s)"
for _ in $(seq $((90 * 10))); do kill -0 "$benchpid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$benchpid" 2>/dev/null; then say "warning: bench still running 90 s after the load, sending SIGINT"; kill -INT "$benchpid"; fi
bench_rc=0; wait "$benchpid" || bench_rc=$?
[ $bench_rc = 0 ] || { cat "$OUT/bench.log" >&2; die "bench failed (exit $bench_rc)"; }
sed 's/^/soak:   /' "$OUT/bench.log"

drained=0
for _ in $(seq $((DRAIN_TIMEOUT * 10))); do
  m=$(curl -fsS --max-time 5 "$gw/metrics" 2>/dev/null) || m=""
  [ "$(metric streamgate_inflight_streams)" = 0 ] && { drained=1; break; }
  sleep 0.1
done
inflight_left=$(metric streamgate_inflight_streams)
say "machine: $(machine)"
say "drain: $inflight_left streams in flight, $(metric go_goroutines) goroutines, $(fds) open files (before the load: $idle_g, $idle_fds)"
if ((IDLE_WAIT > 0)); then
  # Idle keep-alive connections to the sims (2 goroutines and 1 fd each) close
  # after the transport's IdleConnTimeout (90 s); what is left then leaked.
  say "idle: waiting ${IDLE_WAIT}s for idle upstream connections to expire"
  sleep "$IDLE_WAIT"
fi
m=$(curl -fsS --max-time 10 "$gw/metrics" 2>/dev/null) || m=""
printf '%s\n' "$m" >"$OUT/metrics-end.txt"
gw_requests=$(metric streamgate_requests_total "model=\"$model\"")
end_g=$(metric go_goroutines); end_fds=$(fds)
curl -fsS --max-time 10 -o "$OUT/goroutines-idle.txt" "$pprof/debug/pprof/goroutine?debug=1" || true
say "idle: $end_g goroutines, $end_fds open files (before the load: $idle_g, $idle_fds); gateway counted $gw_requests requests"

say "stop: SIGTERM to the gateway (pid $gwpid), waiting for it to flush the ledger and exit"
kill -TERM "$gwpid"
gw_rc=0
for _ in $(seq 600); do kill -0 "$gwpid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$gwpid" 2>/dev/null && die "gateway still running 60 s after SIGTERM"
wait "$gwpid" || gw_rc=$?
wal=absent; [ -e "$OUT/usage.db-wal" ] && wal="$(stat -c %s "$OUT/usage.db-wal") bytes"
ledger=$(ledger_rows "$OUT/usage.db")
rows=${ledger%%$'\n'*}
bench_requests=$(jq '[.runs[].requests] | add' "$OUT/bench.json")
say "ledger: $rows rows; gateway exit status $gw_rc, WAL file after its exit: $wal; rows by outcome and status:"
tail -n +2 <<<"$ledger" | sed 's/^/soak:   /'
logpat='level=(error|warn)|panic|fatal|data race'
problems=$(grep -ciE "$logpat" "$OUT/gateway.log" || true)
((problems == 0)) || { say "gateway log: $problems warning/error lines, the first 5:"; grep -m 5 -iE "$logpat" "$OUT/gateway.log" | sed 's/^/soak:   /'; }

# --- verdict ----------------------------------------------------------------
say "verdict (baseline = mean of the samples at ${warm}s..${base_end}s, last = mean of the last 3 samples):"
fail=0
flat() { # column name abs_tolerance unit_divisor unit [info]: last vs baseline
  local v
  v=$(awk -F'\t' -v c="$1" -v w="$warm" -v e="$base_end" -v pct="$TOL_PCT" -v abs="$3" -v div="$4" -v u="$5" -v name="$2" -v info="${6:-}" '
    NR == 1 || $c == "NA" { next }
    { n++; y[n] = $c }
    $1 >= w && $1 <= e { bs += $c; bn++ }
    END {
      if (bn == 0 || n < 3) { printf "FAIL    %-12s not enough samples\n", name; exit }
      b = bs / bn; l = (y[n] + y[n-1] + y[n-2]) / 3; tol = b * pct / 100; if (tol < abs) tol = abs
      if (info != "") { printf "info    %-12s baseline %.1f%s, last %.1f%s: %+.1f%s (%s)\n", name, b/div, u, l/div, u, (l-b)/div, u, info; exit }
      printf "%s %-12s baseline %.1f%s, last %.1f%s: %+.1f%s (tolerance +%.1f%s: %d%% or %g%s)\n",
        (l - b <= tol ? "ok     " : "GROWING"), name, b/div, u, l/div, u, (l-b)/div, u, tol/div, u, pct, abs/div, u
    }' "$OUT/samples.tsv")
  say "  $v"
  [[ $v == ok* || $v == info* ]] || fail=1
}
flat 2 goroutines "$TOL_GOROUTINES" 1 ""
flat 3 "open files" "$TOL_FDS" 1 ""
flat 7 "live heap" $((TOL_HEAP_MIB * 1048576)) 1048576 " MiB"
flat 5 "heap in use" 0 1048576 " MiB" "not judged: saw-tooth between the live heap and its GOGC goal"
slope() { # column divisor unit name: least squares over the samples from WARMUP on, per minute
  awk -F'\t' -v c="$1" -v w="$warm" -v div="$2" -v u="$3" -v name="$4" '
    NR == 1 || $1 < w || $c == "NA" { next }
    { x = $1 / 60; y = $c / div; n++; sx += x; sy += y; sxx += x * x; sxy += x * y }
    END { d = n * sxx - sx * sx; printf "%s %+.3f %s/min", name, (d > 0 ? (n * sxy - sx * sy) / d : 0), u }' "$OUT/samples.tsv"
}
say "  info    slopes       $(slope 4 1024 MiB RSS), $(slope 5 1048576 MiB 'heap in use'), $(slope 7 1048576 MiB 'live heap') (least squares, samples from ${warm}s on)"
say "  info    stalls       $(awk -F'\t' 'NR > 1 { if ($9 > l) l = $9; if ($10 > s) s = $10; if ($11 != "NA") { p += $11; n++ } }
  END { printf "samples up to %d ms late, /metrics answered in up to %d ms, CPU pressure mean %s", l, s, (n ? sprintf("%.0f%%", p / n) : "n/a") }' "$OUT/samples.tsv") (a stall of seconds explains first-token timeouts on the steady route)"
if ((drained)); then say "  ok      drain        no stream in flight after the bench ended"
else say "  FAIL    drain        $inflight_left streams still in flight ${DRAIN_TIMEOUT}s after the bench ended"; fail=1; fi
if ((IDLE_WAIT > 0)); then
  if ((end_g <= idle_g + TOL_IDLE && end_fds <= idle_fds + TOL_IDLE)); then
    say "  ok      idle         $end_g goroutines, $end_fds open files ${IDLE_WAIT}s after the load (before it: $idle_g, $idle_fds; tolerance +$TOL_IDLE)"
  else
    say "  FAIL    idle         $end_g goroutines, $end_fds open files ${IDLE_WAIT}s after the load (before it: $idle_g, $idle_fds; tolerance +$TOL_IDLE): see goroutines-idle.txt"; fail=1
  fi
fi
if [ "$rows" = "$gw_requests" ] && [ "$rows" = "$bench_requests" ]; then
  say "  ok      ledger       $rows rows == $gw_requests requests (gateway /metrics) == $bench_requests requests (bench)"
else
  say "  FAIL    ledger       $rows rows, $gw_requests requests (gateway /metrics), $bench_requests requests (bench): want all equal"; fail=1
fi
say "files in $OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
if ((fail)); then say "FAIL"; exit 1; fi
say "PASS"
