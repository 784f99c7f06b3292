#!/usr/bin/env bash
# Cloud sandbox tests (tests/terminal_http_backends.rs): the providers' official SDKs run
# against the same local fakes (tests/fakes/) as the terminal backends, so a fake that
# drifts from the real API fails its SDK test.
#   - daytona (PyPI, Daytona's Python SDK with its generated API clients), into the test
#     venv of 10-python.sh.
#   - @vercel/sandbox (npm, Vercel's Sandbox SDK; PyPI's `vercel` has no sandbox client),
#     into tests/fakes/node/ (package.json + package-lock.json are committed).
# Idempotent: installs only what is missing. Runs as root without stdin.
set -euo pipefail
venv="${HERMES_TEST_VENV:-${HOME:-/root}/.cache/hermes-tools/test-venv}"
if [ ! -x "$venv/bin/python3" ]; then
    bash "$(dirname "$0")/10-python.sh"
fi
if ! "$venv/bin/python3" -c 'import daytona, daytona_api_client, daytona_toolbox_api_client' >/dev/null 2>&1; then
    echo "installing the Python daytona SDK into $venv"
    "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check 'daytona>=0.226,<1' </dev/null
fi

cd "$(dirname "$0")/../.."
if ! command -v npm >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq </dev/null
    apt-get install -y -qq --no-install-recommends nodejs npm </dev/null
fi
node_dir=tests/fakes/node
if [ ! -f "$node_dir/node_modules/@vercel/sandbox/package.json" ] \
    || [ "$node_dir/package-lock.json" -nt "$node_dir/node_modules/.package-lock.json" ]; then
    echo "installing npm packages into $node_dir"
    (cd "$node_dir" && npm install --no-audit --no-fund --loglevel=error </dev/null)
fi
