#!/usr/bin/env bash
# web_search / web_extract tests:
#   - Debian's searx package (SearXNG 1.x): the tests start their own instance on a free
#     loopback port, with a settings file whose only engine is a JSON engine pointed at
#     a loopback server of the test, and call its /search?format=json API for real.
#   - the providers' official Python SDKs (tavily-python, exa-py, firecrawl-py,
#     parallel-web) in the shared test venv: the tests run them against the same strict
#     fakes the Rust backends talk to, so the fakes are checked from the SDK side too.
#   - openssl: one test makes a certificate authority of its own for an HTTPS page.
#   - iproute2's `ip`: one test runs itself inside a new user and network namespace
#     (util-linux `unshare`) and puts a public address on that namespace's loopback.
# Idempotent: installs only what is missing. Runs as root without stdin.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

if [ ! -f /usr/lib/python3/dist-packages/searx/webapp.py ]; then
    echo "installing searx"
    apt-get -o DPkg::Lock::Timeout=900 update -qq </dev/null
    apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends searx </dev/null
fi

if ! command -v openssl >/dev/null 2>&1; then
    echo "installing openssl (a test makes its own certificate authority)"
    apt-get -o DPkg::Lock::Timeout=900 update -qq </dev/null
    apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends openssl </dev/null
fi

if ! command -v ip >/dev/null 2>&1; then
    echo "installing iproute2"
    apt-get -o DPkg::Lock::Timeout=900 update -qq </dev/null
    apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends iproute2 </dev/null
fi

venv="${HERMES_TEST_VENV:-${HOME:-/root}/.cache/hermes-tools/test-venv}"
if [ ! -x "$venv/bin/python3" ]; then
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv"
fi
if ! "$venv/bin/python3" -c 'import tavily, exa_py, firecrawl, parallel' >/dev/null 2>&1; then
    echo "installing the web provider SDKs into $venv"
    "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check \
        'tavily-python>=0.7,<1' 'exa-py>=1.14,<3' 'firecrawl-py>=4,<5' 'parallel-web>=0.3,<1' </dev/null
fi
