#!/usr/bin/env bash
# The official MCP conformance suite against the Go SDK's conformance server,
# directly and through the gateway's /mcp/{server}, for both MCP eras: the
# scenarios that fail through the gateway must be the ones that fail directly.
#
#   scripts/mcp-conformance.sh            # builds what it needs, prints a table, exits 1 on a difference
#
# Needs node >= 22 on PATH (NODE=/path/to/node to choose one) and the npm
# registry (the suites are installed once under $CACHE). The pinned suites:
# @modelcontextprotocol/conformance 0.1.16 (npm "latest": 2025-11-25) and
# 0.2.0-alpha.12 (the first with 2026-07-28's stateless scenarios). The server
# is github.com/modelcontextprotocol/go-sdk's conformance/everything-server at
# the version go.mod names, run stateful (-stateless=false, for 2025-11-25's
# server-to-client requests) and stateless (2026-07-28).
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/streamgate-mcp-conformance}"
NODE="${NODE:-node}"
OLD=0.1.16 NEW=0.2.0-alpha.12
work="$(mktemp -d)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

major="$("$NODE" -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)"
if (( major < 22 )); then
  echo "mcp-conformance: node >= 22 is needed (the suite uses fs.globSync); found ${major}. Set NODE=/path/to/node." >&2
  exit 2
fi
for v in "$OLD" "$NEW"; do
  if [[ ! -f "$CACHE/$v/node_modules/@modelcontextprotocol/conformance/dist/index.js" ]]; then
    mkdir -p "$CACHE/$v"
    npm install --silent --no-audit --no-fund --prefix "$CACHE/$v" "@modelcontextprotocol/conformance@$v" >/dev/null
  fi
done

go build -o "$work/streamgate" ./cmd/streamgate
go build -o "$work/authproxy" ./scripts/authproxy
go build -o "$work/everything" github.com/modelcontextprotocol/go-sdk/conformance/everything-server

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_up() { for _ in $(seq 1 100); do curl -s -o /dev/null "$1" && return 0; sleep 0.1; done; echo "mcp-conformance: $1 did not come up" >&2; exit 1; }

p_full="$(port)"; p_less="$(port)"; p_gw="$(port)"; p_px="$(port)"
"$work/everything" -http="127.0.0.1:$p_full" -stateless=false >"$work/full.log" 2>&1 & pids+=($!)
"$work/everything" -http="127.0.0.1:$p_less" -stateless=true >"$work/less.log" 2>&1 & pids+=($!)
key="sk-sg-conformance-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
cat >"$work/config.yaml" <<YAML
listen: 127.0.0.1:$p_gw
database: sqlite://$work/streamgate.db
providers: [{name: sim, kind: sim}]
models: [{name: sim-fast, routes: [{provider: sim, model: sim-fast}]}]
keys: [{name: conformance, key: $key}]
mcp:
  servers:
    - {name: stateful, url: "http://127.0.0.1:$p_full/"}
    - {name: stateless, url: "http://127.0.0.1:$p_less/"}
YAML
"$work/streamgate" serve --config "$work/config.yaml" --log-level warn >"$work/gateway.log" 2>&1 & pids+=($!)
KEY="$key" "$work/authproxy" -listen "127.0.0.1:$p_px" -upstream "http://127.0.0.1:$p_gw" >"$work/proxy.log" 2>&1 & pids+=($!)
wait_up "http://127.0.0.1:$p_full/"; wait_up "http://127.0.0.1:$p_less/"; wait_up "http://127.0.0.1:$p_gw/healthz"; wait_up "http://127.0.0.1:$p_px/healthz"

# run SUITE_VERSION SPEC URL NAME: the suite's per-scenario lines into $work/NAME.txt
run() {
  (cd "$work" && "$NODE" "$CACHE/$1/node_modules/@modelcontextprotocol/conformance/dist/index.js" \
    server --url "$3" --spec-version "$2" >"$work/$4.txt" 2>&1) || true
  grep -E '^[✓✗] ' "$work/$4.txt" | sort >"$work/$4.scen" || true
}
status=0
printf '%-12s %-10s %-34s %-34s %s\n' era server direct gateway 'none added'
for row in "$OLD 2025-11-25 full stateful" "$OLD 2025-11-25 less stateless" "$NEW 2026-07-28 less stateless" "$NEW 2026-07-28 full stateful"; do
  read -r ver spec srv name <<<"$row"
  p=$([[ $srv == full ]] && echo "$p_full" || echo "$p_less")
  run "$ver" "$spec" "http://127.0.0.1:$p/" "direct-$spec-$name"
  run "$ver" "$spec" "http://127.0.0.1:$p_px/mcp/$name" "gw-$spec-$name"
  d="$(grep -E '^Total' "$work/direct-$spec-$name.txt" || echo 'Total: ?')"
  g="$(grep -E '^Total' "$work/gw-$spec-$name.txt" || echo 'Total: ?')"
  # the verdict: no scenario fails through the gateway that passes (or is absent) directly
  added="$(comm -13 <(grep '^✗' "$work/direct-$spec-$name.scen" | cut -d: -f1 | sort) <(grep '^✗' "$work/gw-$spec-$name.scen" | cut -d: -f1 | sort))"
  fixed="$(comm -23 <(grep '^✗' "$work/direct-$spec-$name.scen" | cut -d: -f1 | sort) <(grep '^✗' "$work/gw-$spec-$name.scen" | cut -d: -f1 | sort))"
  same=yes
  if [[ -n "$added" ]]; then
    same=NO; status=1
    echo "--- $spec $name: failing through the gateway only:"; echo "$added"
  fi
  [[ -n "$fixed" ]] && { echo "--- $spec $name: failing directly only:"; echo "$fixed"; }
  printf '%-12s %-10s %-34s %-34s %s\n' "$spec" "$name" "${d#Total: }" "${g#Total: }" "$same"
done
[[ -n "${KEEP:-}" ]] && { cp -r "$work" "$KEEP"; echo "logs kept in $KEEP"; }
exit $status
