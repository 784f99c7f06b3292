#!/usr/bin/env bash
# The OS sandbox of the local terminal backend needs no package: the binary sets up its
# namespaces itself. The network policy tests drive curl inside it against servers they
# run on 127.0.0.1. Idempotent; runs as root without stdin.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

need=()
command -v curl >/dev/null 2>&1 || need+=(curl)

if [ "${#need[@]}" -gt 0 ]; then
    echo "installing: ${need[*]}"
    apt-get update -qq </dev/null
    apt-get install -y -qq --no-install-recommends "${need[@]}" </dev/null
fi
