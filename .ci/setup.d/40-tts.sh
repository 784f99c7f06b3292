#!/usr/bin/env bash
# text_to_speech tests: espeak-ng (the offline engine the tool uses by default) and
# sox (the tests measure the audio's duration with soxi; the tool converts formats
# with it when ffmpeg is absent). Idempotent: installs only what is missing. Runs as
# root without stdin.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

need=()
command -v espeak-ng >/dev/null 2>&1 || need+=(espeak-ng)
command -v sox >/dev/null 2>&1 || need+=(sox)
command -v soxi >/dev/null 2>&1 || need+=(sox)

if [ "${#need[@]}" -gt 0 ]; then
    echo "installing: ${need[*]}"
    apt-get update -qq </dev/null
    apt-get install -y -qq --no-install-recommends "${need[@]}" </dev/null
fi
