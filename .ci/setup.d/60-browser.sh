#!/usr/bin/env bash
# browser_* tests: Debian's Chromium, driven headless over its DevTools pipe by the
# tests (tests/browser.rs) and the benchmark (benches/browser.rs).
# Idempotent: installs only what is missing. Runs as root without stdin.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

if ! command -v chromium >/dev/null 2>&1; then
    echo "installing chromium"
    apt-get -o DPkg::Lock::Timeout=900 update -qq </dev/null
    apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends chromium </dev/null
fi
