#!/usr/bin/env bash
# The OS sandbox of the local terminal backend: bubblewrap (`bwrap`) sets up its user,
# mount, PID, UTS and IPC namespaces. Idempotent; runs as root without stdin.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

if ! command -v bwrap >/dev/null 2>&1; then
    echo "installing bubblewrap"
    apt-get update -qq </dev/null
    apt-get install -y -qq --no-install-recommends bubblewrap </dev/null
fi
