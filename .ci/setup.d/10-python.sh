#!/usr/bin/env bash
# Python packages the tests talk to, in a virtual environment of their own: current
# Debian/Ubuntu system Pythons are "externally managed" and refuse a bare pip install.
# The venv is $HERMES_TEST_VENV, else ~/.cache/hermes-tools/test-venv (the tests look
# in the same place: test-peers/src/lib.rs).
#   - mcp 1.x (2.x renamed its API): a server for the MCP client tests, a client for
#     the server tests; 1.23 or later, whose sampling carries tools (ToolUseContent).
# Idempotent: creates the venv once, installs only what is missing.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive

venv="${HERMES_TEST_VENV:-${HOME:-/root}/.cache/hermes-tools/test-venv}"

if ! command -v python3 >/dev/null 2>&1 || ! python3 -c 'import venv, ensurepip' >/dev/null 2>&1; then
    echo "installing python3 and python3-venv"
    apt-get update -qq </dev/null
    apt-get install -y -qq --no-install-recommends python3 python3-venv </dev/null
fi

if [ ! -x "$venv/bin/python3" ]; then
    echo "creating the test venv at $venv"
    mkdir -p "$(dirname "$venv")"
    python3 -m venv "$venv"
fi

if ! "$venv/bin/python3" -c 'import mcp.client.stdio, mcp.server.fastmcp; from mcp.types import ToolUseContent' >/dev/null 2>&1; then
    echo "installing the Python mcp package into $venv"
    "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check --upgrade 'mcp>=1.23,<2' </dev/null
fi

# The newest MCP clients, in a venv of their own since mcp 2.x renamed the 1.x API the
# fixtures above are written in: mcp 2.x (its default `mcp.Client` speaks protocol
# 2026-07-28) and the OpenAI Agents SDK's MCP client. Tests look in
# $HERMES_TEST_VENV_NEWEST, else ~/.cache/hermes-tools/test-venv-newest.
newest="${HERMES_TEST_VENV_NEWEST:-${HOME:-/root}/.cache/hermes-tools/test-venv-newest}"
if [ ! -x "$newest/bin/python3" ]; then
    echo "creating the newest-clients venv at $newest"
    mkdir -p "$(dirname "$newest")"
    python3 -m venv "$newest"
fi
if ! "$newest/bin/python3" -c 'from mcp import Client; import agents.mcp' >/dev/null 2>&1; then
    echo "installing mcp 2.x and openai-agents into $newest"
    "$newest/bin/python3" -m pip install --quiet --disable-pip-version-check 'mcp>=2.3,<3' 'openai-agents>=0.24' </dev/null
fi
