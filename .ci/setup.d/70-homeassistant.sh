#!/usr/bin/env bash
# Home Assistant tests (ha_list_entities, ha_get_state, ha_list_services,
# ha_call_service): a real Home Assistant core from PyPI with its frontend package, in
# a virtual environment of Python 3.13 (pyenv's) cached under
# ~/.cache/hermes-tools/homeassistant-<version>. The requirements of the integrations
# the tests' configuration loads are installed here too, so the tests start it with
# --skip-pip (no install at run time). The tests start it on a free loopback port with
# a configuration directory in their own temp dir and onboard it through its API.
# About 8 minutes and 800 MB the first time; nothing once cached.
# Idempotent: installs only what is missing. Runs as root without stdin.
set -euo pipefail

version="${HERMES_HA_VERSION:-2025.4.4}"
venv="${HOME:-/root}/.cache/hermes-tools/homeassistant-$version"

if [ -f "$venv/.complete" ]; then
    exit 0
fi

python=""
for candidate in "${HOME:-/root}"/.pyenv/versions/3.13*/bin/python3 "$(command -v python3.13 || true)"; do
    if [ -n "$candidate" ] && [ -x "$candidate" ]; then python="$candidate"; break; fi
done
if [ -z "$python" ]; then
    if [ -x "${HOME:-/root}/.pyenv/bin/pyenv" ]; then
        echo "installing Python 3.13 with pyenv"
        "${HOME:-/root}/.pyenv/bin/pyenv" install -s 3.13 </dev/null
        python=$(ls -d "${HOME:-/root}"/.pyenv/versions/3.13*/bin/python3 | head -n1)
    else
        echo "Home Assistant needs Python 3.13 (pyenv or python3.13); none found" >&2
        exit 1
    fi
fi

echo "installing homeassistant $version into $venv (a few minutes)"
rm -rf "$venv"
"$python" -m venv "$venv"
pip=("$venv/bin/python3" -m pip install --quiet --disable-pip-version-check)
"${pip[@]}" "homeassistant==$version" </dev/null

# The requirements of the integrations the tests load (and of what they depend on),
# pinned as this version's manifests pin them.
reqs=$("$venv/bin/python3" - <<'PY'
import json, pathlib
import homeassistant.components as c
root = pathlib.Path(c.__path__[0])
todo = ["frontend", "http", "api", "onboarding", "auth", "person", "config",
        "input_boolean", "input_number", "input_text", "input_select", "template",
        "light", "switch", "sensor", "homeassistant", "websocket_api", "backup",
        "logger", "network", "system_log", "recorder", "zone", "counter", "timer",
        "script", "automation", "scene"]
seen, reqs = set(), set()
while todo:
    name = todo.pop()
    if name in seen:
        continue
    seen.add(name)
    manifest = root / name / "manifest.json"
    if not manifest.exists():
        continue
    data = json.loads(manifest.read_text())
    reqs.update(data.get("requirements", []))
    todo.extend(data.get("dependencies", []))
    todo.extend(data.get("after_dependencies", []))
print("\n".join(sorted(reqs)))
PY
)
if [ -n "$reqs" ]; then
    # shellcheck disable=SC2086
    "${pip[@]}" $reqs </dev/null
fi
touch "$venv/.complete"
