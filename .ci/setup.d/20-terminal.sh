#!/usr/bin/env bash
# terminal toolset tests: an sshd binary (the ssh test starts its own daemon on
# 127.0.0.1 with a key it generates) and podman + runc (the docker backend is tested
# through podman with an image imported from a local tarball; no registry is used).
# Idempotent: installs only what is missing. Runs as root without stdin.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

need=()
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
command -v podman >/dev/null 2>&1 || need+=(podman)
command -v runc >/dev/null 2>&1 || [ -x /usr/sbin/runc ] || need+=(runc)
command -v python3 >/dev/null 2>&1 || need+=(python3)
# The file tools search through rg where the environment has it (the ssh test's remote
# side, this machine) and through GNU grep and find where it does not (the container).
command -v rg >/dev/null 2>&1 || need+=(ripgrep)
# The execute_code container test copies Debian's Python (and its standard library) into its image.
[ -x /usr/bin/python3 ] || need+=(python3)

if [ "${#need[@]}" -gt 0 ]; then
    echo "installing: ${need[*]}"
    apt-get update -qq </dev/null
    apt-get install -y -qq --no-install-recommends "${need[@]}" </dev/null
fi
# sshd refuses to start without its privilege-separation directory (root only; a
# non-root user's tests start sshd without privilege separation).
if [ "$(id -u)" = 0 ]; then mkdir -p /run/sshd; fi
