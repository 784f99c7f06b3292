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
source .ci/lib/npm.sh
ensure_npm
node_dir=tests/fakes/node
missing=no
[ -f "$node_dir/node_modules/@vercel/sandbox/package.json" ] || missing=yes
npm_install_if "$node_dir" "$missing"
