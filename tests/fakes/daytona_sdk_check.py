"""Daytona's official Python SDK (PyPI `daytona`) against the fake in daytona_api.py:
if the fake drifts from the API the SDK was generated from, this fails.

    python3 daytona_sdk_check.py API_URL API_KEY      # prints "sdk ok" at the end
"""

import sys

from daytona import CreateSandboxFromImageParams, CreateSandboxFromSnapshotParams, Daytona, DaytonaConfig, Resources
from daytona_api_client import CreateSandbox, SandboxApi
from daytona_api_client.exceptions import ApiException


def expect(condition, what):
    if not condition:
        sys.exit(f"SDK check failed: {what}")


def main(api_url, api_key):
    client = Daytona(DaytonaConfig(api_key=api_key, api_url=api_url))

    sandbox = client.create(CreateSandboxFromImageParams(image="debian:12-slim", resources=Resources(cpu=1, memory=1, disk=3)))
    expect(sandbox.state == "started", f"created sandbox is {sandbox.state}")
    result = sandbox.process.exec("echo from-sdk; echo to-stderr >&2; exit 3")
    expect(result.exit_code == 3, f"exit code {result.exit_code}")
    expect(result.result == "from-sdk\nto-stderr\n", f"output {result.result!r}")
    result = sandbox.process.exec("pwd", cwd="/tmp")
    expect(result.result.strip() == "/tmp", f"cwd {result.result!r}")
    result = sandbox.process.exec("echo $GREETING", env={"GREETING": "hi"})
    expect(result.result.strip() == "hi", f"env {result.result!r}")
    sandbox.process.exec("printf content > /tmp/sdk-file")
    toolbox_files = sandbox._fs._api_client  # the generated FileSystemApi behind sandbox.fs
    expect(bytes(toolbox_files.download_file(path="/tmp/sdk-file")) == b"content", "files/download")
    try:
        sandbox.process.exec("sleep 30", timeout=1)
        expect(False, "a command past its timeout returned normally")
    except Exception as exc:  # the SDK wraps the 408 in a DaytonaError
        expect("timeout" in str(exc).lower(), f"timeout error: {exc}")
    client.delete(sandbox)

    from_snapshot = client.create(CreateSandboxFromSnapshotParams(snapshot="daytona-small"))
    expect(from_snapshot.state == "started", f"snapshot sandbox is {from_snapshot.state}")
    client.delete(from_snapshot)

    # The generated client straight: resources with a snapshot are refused.
    api = SandboxApi(client._api_client)
    try:
        api.create_sandbox(CreateSandbox(snapshot="daytona-small", cpu=2))
        expect(False, "resources with a snapshot were accepted")
    except ApiException as exc:
        expect(exc.status == 400 and "Cannot specify Sandbox resources when using a snapshot" in exc.body, str(exc))
    print("sdk ok")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
