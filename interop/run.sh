#!/usr/bin/env bash
# Cross-SDK interop tests: drives the agentmesh binary with the official
# TypeScript MCP SDK (stdio and Streamable HTTP) and the A2A JS SDK.
# Needs Go, node >= 20 and npm (the npm registry, or an npm cache holding
# the locked packages). Run from anywhere; .ci/run runs it after the Go tests.
set -euo pipefail
cd "$(dirname "$0")"
root=$(cd .. && pwd)

command -v node >/dev/null || { echo "interop: node not found (need node >= 20 and npm)" >&2; exit 1; }
command -v npm >/dev/null || { echo "interop: npm not found" >&2; exit 1; }
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
  echo "interop: node $(node --version) is too old (need >= 20)" >&2; exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

start=$(date +%s)
echo "-- build agentmesh"
(cd "$root" && GOFLAGS="${GOFLAGS:--buildvcs=false}" go build -o "$tmp/agentmesh" ./cmd/agentmesh)

echo "-- npm ci (node $(node --version), npm $(npm --version))"
# --prefer-offline: use the npm cache when it holds the locked versions.
npm ci --no-audit --no-fund --prefer-offline --loglevel=error

export AGENTMESH_BIN="$tmp/agentmesh"
for script in mcp-stdio.mjs mcp-http.mjs mcp-local.mjs a2a.mjs; do
  echo "-- node $script"
  node "$script"
done
echo "-- interop OK in $(($(date +%s) - start)) s"
