"""The modal terminal backend's bridge to Modal's official Python SDK (`modal`).

Modal has no REST API for sandboxes: its SDK speaks gRPC. hermes-tools runs this script
with an interpreter that has the `modal` package and talks to it in JSON lines over
stdio, one request per line, answered by id (requests run concurrently, so a command
can be stopped while another request waits for it):

  {"id": 1, "op": "create", "app": "hermes-agent", "image": "python:3.11", "timeout": 3600,
   "cpu": 1.0, "memory": 5120}                  -> {"id": 1, "sandbox_id": "sb-..."}
  {"id": 2, "op": "exec", "argv": ["bash", "-c", "..."], "stdin": "..." | null,
   "timeout": 660}                              -> {"id": 2, "output": "...", "exit_code": 0}
  {"id": 3, "op": "terminate"}                  -> {"id": 3}

A failure answers {"id": N, "error": "...", "kind": "<exception class>"}. End of input
terminates the sandbox and exits.
"""

import json
import sys
import threading

_write_lock = threading.Lock()
_sandbox = None


def _answer(message):
    with _write_lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def _create(request):
    global _sandbox
    import modal

    app = modal.App.lookup(request.get("app") or "hermes-agent", create_if_missing=True)
    image = modal.Image.from_registry(request["image"])
    _sandbox = modal.Sandbox.create(
        app=app,
        image=image,
        timeout=int(request.get("timeout") or 3600),
        cpu=request.get("cpu"),
        memory=request.get("memory"),
    )
    return {"sandbox_id": _sandbox.object_id}


def _exec(request):
    if _sandbox is None:
        raise RuntimeError("no sandbox: send create first")
    process = _sandbox.exec(*request["argv"], timeout=request.get("timeout"))
    data = request.get("stdin")
    if data is not None:
        process.stdin.write(data.encode("utf-8"))
        process.stdin.write_eof()
        process.stdin.drain()
    output = process.stdout.read() + process.stderr.read()
    exit_code = process.wait()
    return {"output": output, "exit_code": exit_code}


def _terminate(_request):
    global _sandbox
    if _sandbox is not None:
        _sandbox.terminate()
        _sandbox = None
    return {}


OPS = {"create": _create, "exec": _exec, "terminate": _terminate}


def _handle(request):
    reply = {"id": request.get("id")}
    try:
        op = OPS.get(request.get("op"))
        if op is None:
            raise ValueError(f"unknown op {request.get('op')!r}")
        reply.update(op(request))
    except BaseException as exc:  # every failure goes back to the caller, none is lost
        reply.update({"error": str(exc) or exc.__class__.__name__, "kind": exc.__class__.__name__})
    _answer(reply)


def main():
    try:
        import modal  # noqa: F401
    except ImportError as exc:
        _answer({"id": 0, "error": f"the modal package cannot be imported: {exc}", "kind": "ImportError"})
        return 1
    _answer({"id": 0, "ready": True})
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        try:
            request = json.loads(line)
        except ValueError as exc:
            _answer({"id": None, "error": f"not JSON: {exc}", "kind": "ValueError"})
            continue
        threading.Thread(target=_handle, args=(request,), daemon=True).start()
    try:
        _terminate({})
    except Exception:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
