#!/usr/bin/env bash
# vision_analyze / image_generate tests: the official Python SDKs run against the same
# strict fakes the Rust tools talk to (openai: chat completions with image parts and
# the Images API; fal-client: FAL's queue API, over HTTPS with a test authority).
# Idempotent: installs only what is missing. Runs as root without stdin.
set -euo pipefail

venv="${HERMES_TEST_VENV:-${HOME:-/root}/.cache/hermes-tools/test-venv}"
if [ ! -x "$venv/bin/python3" ]; then
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv"
fi
if ! "$venv/bin/python3" -c 'import openai, fal_client' >/dev/null 2>&1; then
    echo "installing the openai and fal-client SDKs into $venv"
    "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check \
        'openai>=1.40' 'fal-client>=0.5,<1' </dev/null
fi
if ! command -v openssl >/dev/null 2>&1; then
    echo "installing openssl (the image tests make their own certificate authority)"
    apt-get -o DPkg::Lock::Timeout=900 update -qq </dev/null
    apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends openssl </dev/null
fi
