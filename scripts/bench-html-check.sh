#!/usr/bin/env bash
# Renders a streamgate bench HTML report in headless Chromium (Debian package
# "chromium"): starts a stamping sim, runs a small sweep with --html, checks
# that the page renders its four SVG plots with no console error, and saves a
# screenshot (default docs/bench-report.png).
# Usage: scripts/bench-html-check.sh [SCREENSHOT.png]
set -euo pipefail
cd "$(dirname "$0")/.."
shot=${1:-docs/bench-report.png}
work=$(mktemp -d)
trap 'kill "${sim_pid:-}" 2>/dev/null || true; rm -rf "$work"' EXIT

browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
  echo "bench-html-check: chromium not found (apt-get install chromium)" >&2
  exit 1
fi

go build -o "$work/streamgate" ./cmd/streamgate
port=$((20000 + RANDOM % 20000))
"$work/streamgate" sim --addr "127.0.0.1:$port" --stamp --ttft 80ms --ttft-p99 300ms --itl 12ms --itl-jitter 0.3 --cut-rate 0.05 >"$work/sim.log" 2>&1 &
sim_pid=$!
for _ in $(seq 50); do
  curl -fsS "http://127.0.0.1:$port/v1/models" >/dev/null 2>&1 && break
  sleep 0.1
done

"$work/streamgate" bench --base-url "http://127.0.0.1:$port/v1" --model sim-a,sim-b \
  --concurrency 4,16 --requests 48 --max-tokens 60 --warmup 4 --goodput ttft:400,itl:30 \
  --html "$work/report.html" --json "$work/report.json" >"$work/table.txt"

# --enable-logging=stderr prints the page's console messages as CONSOLE lines.
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --enable-logging=stderr --v=0 \
  --window-size=1280,1900 --screenshot="$work/shot.png" "file://$work/report.html" 2>"$work/chrome.log" >/dev/null || true
"$browser" --headless --no-sandbox --disable-gpu --dump-dom "file://$work/report.html" 2>/dev/null >"$work/dom.html"

svgs=$(grep -o '<svg' "$work/dom.html" | wc -l)
if [ "$svgs" -ne 4 ]; then
  echo "bench-html-check: got $svgs rendered svg plots, want 4" >&2
  exit 1
fi
if grep -E 'CONSOLE|Uncaught|ERROR:.*(report|file://)' "$work/chrome.log" >&2; then
  echo "bench-html-check: console errors while rendering the report" >&2
  exit 1
fi
if [ ! -s "$work/shot.png" ]; then
  echo "bench-html-check: no screenshot produced" >&2
  exit 1
fi
mkdir -p "$(dirname "$shot")"
cp "$work/shot.png" "$shot"
cat "$work/table.txt"
echo "bench-html-check: report rendered (4 plots, no console errors); screenshot $shot"
