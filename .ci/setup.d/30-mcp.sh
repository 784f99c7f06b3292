#!/usr/bin/env bash
# MCP tests (hermes-mcp, tests/mcp_*.rs): third-party MCP servers and clients that no
# one here wrote.
#   - the Python `mcp` package comes from 10-python.sh (the test venv).
#   - npm, into mcp/tests/node/ (package.json + package-lock.json are committed):
#     @modelcontextprotocol/server-everything, @modelcontextprotocol/conformance, the
#     TypeScript SDK (@modelcontextprotocol/sdk, a client for tests/mcp_clients_today.rs) and
#     node@22 (the conformance suite needs Node 22; the binary lands in
#     mcp/tests/node/node_modules/.bin/node).
# Idempotent: installs only what is missing or out of date.
set -euo pipefail
cd "$(dirname "$0")/../.."

source .ci/lib/npm.sh
ensure_npm
node_dir=mcp/tests/node
missing=no
if [ ! -x "$node_dir/node_modules/.bin/conformance" ] \
    || [ ! -x "$node_dir/node_modules/.bin/mcp-server-everything" ] \
    || [ ! -f "$node_dir/node_modules/@modelcontextprotocol/sdk/package.json" ] \
    || ! "$node_dir/node_modules/.bin/node" --version 2>/dev/null | grep -q '^v22\.'; then
    missing=yes
fi
npm_install_if "$node_dir" "$missing"
"$node_dir/node_modules/.bin/node" --version
