"""A local stand-in for Daytona's REST API (`/api`) and toolbox proxy (`/toolbox`).

Written from Daytona's published API definition as the generated clients carry it
(PyPI `daytona_api_client` and `daytona_toolbox_api_client`: models CreateSandbox,
CreateBuildInfo, Sandbox, SandboxState, ToolboxProxyUrl, ExecuteRequest,
ExecuteResponse; routes /sandbox, /sandbox/{id}, /sandbox/{id}/stop,
/sandbox/{id}/toolbox-proxy-url, {toolboxProxyUrl}/{id}/process/execute,
{toolboxProxyUrl}/{id}/files/download), not from any client of it. Strict: unknown
fields, wrong types, resources next to a snapshot, resources above the default
per-sandbox limits and a missing or wrong bearer token are refused the way the API does.
Sandboxes go pending_build -> building_snapshot -> starting -> started (from buildInfo)
or creating -> starting -> started (from a snapshot), one step per read.

Commands run in a private mount namespace per sandbox (see strict.Sandbox).

    python3 daytona_api.py API_KEY ROOT_DIR     # prints "listening http://127.0.0.1:PORT"

Test-only introspection (no client calls it): GET /_fake/sandboxes, GET /_fake/requests.
"""

import datetime
import json
import os
import sys
import threading
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import strict  # noqa: E402

BUILD_INFO = {"dockerfileContent": "str", "contextHashes": "str-list", "!required": ["dockerfileContent"]}
VOLUME = {"volumeId": "str", "mountPath": "str", "subpath": "str", "!required": ["volumeId", "mountPath"]}
CREATE_SANDBOX = {
    "name": "str", "snapshot": "str", "user": "str", "env": "str-map", "labels": "str-map",
    "public": "bool", "networkBlockAll": "bool", "kvm": "bool", "networkAllowList": "str",
    "domainAllowList": "str", "outboundProxyUrl": "str", "otelEndpointOverride": "str",
    "target": "str", "cpu": "int", "gpu": "int", "gpuType": "str-list", "spot": "bool",
    "memory": "int", "disk": "int", "autoStopInterval": "int", "autoPauseInterval": "int",
    "autoArchiveInterval": "int", "autoDeleteInterval": "int", "ttlMinutes": "int",
    "queueTimeout": "int", "volumes": ("list", VOLUME), "buildInfo": BUILD_INFO,
    "linkedSandbox": "str", "secrets": ("list", "str-map"),
}
EXECUTE_REQUEST = {"command": "str", "cwd": "str", "envs": "str-map", "timeout": "int", "!required": ["command"]}
# The default organisation tier's per-sandbox limits (vCPU, GiB memory, GiB disk).
MAX_CPU, MAX_MEMORY, MAX_DISK = 4, 8, 10
DEFAULT_CPU, DEFAULT_MEMORY, DEFAULT_DISK = 1, 1, 3
NEXT_STATES = {
    "pending_build": "building_snapshot", "building_snapshot": "starting",
    "creating": "starting", "starting": "started",
}
ORG = "org-fake-0001"


def now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat().replace("+00:00", "Z")


def nest_error(status, message):
    names = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 408: "Request Timeout"}
    return status, {"statusCode": status, "message": message, "error": names.get(status, "Error"),
                    "path": "", "method": "", "timestamp": now()}


class DaytonaFake:
    def __init__(self, key, root):
        self.key, self.root = key, root
        self.base = None
        self.sandboxes = {}
        self.lock = threading.Lock()

    def shutdown(self):
        pass

    def handle(self, method, path, query, headers, raw):
        if path.startswith("/_fake/"):
            return self.introspect(path)
        if headers.get("Authorization") != f"Bearer {self.key}":
            return nest_error(401, "Unauthorized")
        self.base = f"http://{headers.get('Host')}"
        body = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                return nest_error(400, "Unexpected token in JSON at position 0")
        parts = [p for p in path.split("/") if p]
        if parts[:1] == ["api"]:
            return self.api(method, parts[1:], query, body)
        if parts[:1] == ["toolbox"] and len(parts) >= 3:
            return self.toolbox(method, parts[1], parts[2:], query, body)
        return nest_error(404, f"Cannot {method} {path}")

    def introspect(self, path):
        if path == "/_fake/sandboxes":
            with self.lock:
                return 200, [{"id": s["dto"]["id"], "state": s["dto"]["state"], "create": s["create"]}
                             for s in self.sandboxes.values()]
        if path == "/_fake/requests":
            with self.log_lock:
                return 200, list(self.log)
        return 404, {}

    # ------------------------------------------------------------------ /api

    def api(self, method, parts, query, body):
        if parts == ["sandbox"] and method == "POST":
            return self.create(body)
        if len(parts) >= 2 and parts[0] == "sandbox":
            with self.lock:
                sb = self.sandboxes.get(parts[1])
                if sb is None or sb["dto"]["state"] == "destroyed" and method != "GET":
                    return nest_error(404, f"Sandbox with ID or name {parts[1]} not found")
                dto = sb["dto"]
                if len(parts) == 2 and method == "GET":
                    if dto["state"] in NEXT_STATES:
                        dto["state"] = NEXT_STATES[dto["state"]]
                        dto["updatedAt"] = now()
                    return 200, dto
                if len(parts) == 2 and method == "DELETE":
                    dto["state"] = "destroyed"
                    self.stop_all(sb)
                    return 200, dto
                if parts[2:] == ["stop"] and method == "POST":
                    dto["state"] = "stopped"
                    self.stop_all(sb)
                    return 200, dto
                if parts[2:] == ["toolbox-proxy-url"] and method == "GET":
                    return 200, {"url": f"{self.base}/toolbox"}
        return nest_error(404, f"Cannot {method} /api/{'/'.join(parts)}")

    def create(self, body):
        if body is None:
            return nest_error(400, ["body must be an object"])
        problems = strict.check(body, CREATE_SANDBOX)
        if problems:
            return nest_error(400, problems)
        resources = [k for k in ("cpu", "gpu", "memory", "disk") if body.get(k) is not None]
        if body.get("snapshot") and body.get("buildInfo"):
            return nest_error(400, "Cannot specify both snapshot and buildInfo")
        if resources and not body.get("buildInfo"):
            return nest_error(400, "Cannot specify Sandbox resources when using a snapshot")
        cpu = body.get("cpu") or DEFAULT_CPU
        memory = body.get("memory") or DEFAULT_MEMORY
        disk = body.get("disk") or DEFAULT_DISK
        for name, value, limit in (("CPU", cpu, MAX_CPU), ("Memory", memory, MAX_MEMORY), ("Disk", disk, MAX_DISK)):
            if value > limit:
                return nest_error(403, f"{name} request {value} exceeds maximum allowed per sandbox ({limit})")
        sid = str(uuid.uuid4())
        dto = {
            "id": sid, "organizationId": ORG, "name": body.get("name") or sid,
            "snapshot": body.get("snapshot") or None, "user": body.get("user") or "daytona",
            "env": body.get("env") or {}, "labels": body.get("labels") or {},
            "public": bool(body.get("public")), "networkBlockAll": bool(body.get("networkBlockAll")),
            "kvm": bool(body.get("kvm")), "target": body.get("target") or "us",
            "cpu": cpu, "gpu": body.get("gpu") or 0, "memory": memory, "disk": disk,
            "state": "pending_build" if body.get("buildInfo") else "creating",
            "desiredState": "started", "autoStopInterval": body.get("autoStopInterval", 15),
            "autoArchiveInterval": body.get("autoArchiveInterval", 10080),
            "autoDeleteInterval": body.get("autoDeleteInterval", -1),
            "createdAt": now(), "updatedAt": now(), "toolboxProxyUrl": f"{self.base}/toolbox",
        }
        if body.get("buildInfo"):
            dto["buildInfo"] = {"dockerfileContent": body["buildInfo"]["dockerfileContent"],
                                "contextHashes": body["buildInfo"].get("contextHashes") or [],
                                "createdAt": now(), "updatedAt": now(), "snapshotRef": f"daytona-{sid[:8]}"}
        with self.lock:
            self.sandboxes[sid] = {"dto": dto, "create": body,
                                   "box": strict.Sandbox(os.path.join(self.root, sid)), "procs": set()}
        return 200, dto

    def stop_all(self, sb):
        for proc in list(sb["procs"]):
            strict.kill_group(proc)

    # ------------------------------------------------------------------ /toolbox/{id}

    def toolbox(self, method, sid, parts, query, body):
        with self.lock:
            sb = self.sandboxes.get(sid)
        if sb is None:
            return nest_error(404, f"Sandbox with ID {sid} not found")
        if sb["dto"]["state"] != "started":
            return nest_error(400, f"Sandbox {sid} is not started (state: {sb['dto']['state']})")
        if parts == ["process", "execute"] and method == "POST":
            return self.execute(sb, body)
        if parts == ["files", "download"] and method == "GET":
            path = query.get("path")
            if not path:
                return 400, {"error": "path is required"}
            out, code, _ = sb["box"].run('cat -- "$HERMES_FAKE_PATH"', envs={"HERMES_FAKE_PATH": path}, timeout=30)
            if code != 0:
                return 404, {"error": f"file not found: {path}"}
            return 200, {"Content-Type": "application/octet-stream"}, out
        return 404, {"error": f"{method} /{'/'.join(parts)} not found"}

    def execute(self, sb, body):
        if body is None:
            return 400, {"error": "invalid request body"}
        problems = strict.check(body, EXECUTE_REQUEST)
        if problems:
            return 400, {"error": "; ".join(problems)}
        # The daemon's default timeout is 10 s; 0 is taken literally by this fake as "at
        # once" so a client that sends it sees it fail rather than hang.
        timeout = body.get("timeout")
        timeout = 10 if timeout is None else timeout
        proc = sb["box"].start(body["command"], cwd=body.get("cwd"), envs=body.get("envs"))
        sb["procs"].add(proc)
        try:
            out, _ = proc.communicate(timeout=max(timeout, 0.01))
        except strict.subprocess.TimeoutExpired:
            strict.kill_group(proc)
            proc.communicate()
            return 408, {"error": "command execution timeout"}
        finally:
            sb["procs"].discard(proc)
        return 200, {"exitCode": proc.returncode, "result": out.decode("utf-8", "replace")}


if __name__ == "__main__":
    strict.serve(DaytonaFake(sys.argv[1], sys.argv[2]))
