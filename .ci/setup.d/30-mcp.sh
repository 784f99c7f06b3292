#!/usr/bin/env bash
# MCP tests (hermes-mcp, tests/mcp_*.rs): third-party MCP servers and clients that no
# one here wrote.
#   - the Python `mcp` package comes from 10-python.sh (the test venv).
#   - npm, into mcp/tests/node/ (package.json + package-lock.json are committed):
#     @modelcontextprotocol/server-everything, @modelcontextprotocol/conformance and
#     node@22 (the conformance suite needs Node 22; the binary lands in
#     mcp/tests/node/node_modules/.bin/node).
# Idempotent: installs only what is missing or out of date.
set -euo pipefail
cd "$(dirname "$0")/../.."

if ! command -v npm >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq </dev/null
    apt-get install -y -qq --no-install-recommends nodejs npm </dev/null
fi
node_dir=mcp/tests/node
if [ ! -x "$node_dir/node_modules/.bin/conformance" ] \
    || [ ! -x "$node_dir/node_modules/.bin/mcp-server-everything" ] \
    || ! "$node_dir/node_modules/.bin/node" --version 2>/dev/null | grep -q '^v22\.' \
    || [ "$node_dir/package-lock.json" -nt "$node_dir/node_modules/.package-lock.json" ]; then
    echo "installing npm packages into $node_dir"
    (cd "$node_dir" && npm install --no-audit --no-fund --loglevel=error </dev/null)
fi
"$node_dir/node_modules/.bin/node" --version
