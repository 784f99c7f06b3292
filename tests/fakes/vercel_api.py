"""A local stand-in for Vercel's Sandbox REST API (base `/api`, as https://vercel.com/api).

Written from the API as Vercel's official SDK (npm `@vercel/sandbox` 3.x,
`dist/api-client/api-client.js` and its zod schemas in `validators.js`) defines it: the
v2 routes

  POST /v2/sandboxes                                 -> {sandbox, session, routes}
  GET  /v2/sandboxes/sessions/{sid}                  -> {session, routes}
  POST /v2/sandboxes/sessions/{sid}/cmd              -> {command} or, with wait, an
                                                        x-ndjson stream: {command},
                                                        log lines, {command+exitCode}
  GET  /v2/sandboxes/sessions/{sid}/cmd/{id}[?wait=true] -> {command}
  GET  /v2/sandboxes/sessions/{sid}/cmd/{id}/logs    -> x-ndjson {stream, data} lines
  POST /v2/sandboxes/sessions/{sid}/cmd/{id}/kill    -> {command}
  POST /v2/sandboxes/sessions/{sid}/fs/read          -> octet-stream, 404 when missing
  POST /v2/sandboxes/sessions/{sid}/stop             -> {session}

Strict: unknown fields and wrong types are refused with 400, vCPUs outside 1..8 too, a
wrong token with 403, an `Accept` that excludes what the route produces with 406, a
teamId other than the token's team with 403. Commands run in a private mount namespace
per sandbox (strict.Sandbox).

    python3 vercel_api.py TOKEN TEAM_ID ROOT_DIR      # prints "listening http://127.0.0.1:PORT"

Test-only introspection: GET /_fake/sandboxes, GET /_fake/requests.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import strict  # noqa: E402

RUNTIMES = ("node22", "node24", "python3.13")
CREATE = {
    "projectId": "str", "ports": ("list", "int"), "source": "any", "timeout": "int",
    "resources": {"vcpus": "int", "!required": ["vcpus"]}, "runtime": "str", "image": "str",
    "name": "str", "persistent": "bool", "networkPolicy": "any", "networkId": "str", "env": "str-map",
    "tags": "str-map", "snapshotExpiration": "int", "keepLastSnapshots": "any", "mounts": "any",
    "region": "str", "failoverRegions": "str-list", "!required": ["projectId"],
}
RUN = {"command": "str", "args": "str-list", "cwd": "str", "env": "str-map", "sudo": "bool",
       "wait": "bool", "logs": "bool", "timeout": "int", "!required": ["command"]}
KILL = {"signal": "int", "!required": ["signal"]}
READ = {"path": "str", "cwd": "str", "!required": ["path"]}
MAX_VCPUS = 8
SANDBOX_CWD = "/vercel/sandbox"


def ms():
    return int(time.time() * 1000)


def error(status, code, message):
    return status, {"error": {"code": code, "message": message}}


def accepts(headers, media):
    accept = headers.get("Accept")
    if not accept:
        return True
    kinds = [part.split(";")[0].strip() for part in accept.split(",")]
    return any(k in ("*/*", media, media.split("/")[0] + "/*") for k in kinds)


class Command:
    def __init__(self, session, body):
        self.id = "cmd_" + uuid.uuid4().hex[:24]
        self.session = session
        self.name, self.args = body["command"], body.get("args") or []
        self.cwd = body.get("cwd") or SANDBOX_CWD
        self.started = ms()
        self.logs = []
        self.cond = threading.Condition()
        self.exit_code = None
        argv = " ".join("'" + a.replace("'", "'\\''") + "'" for a in [self.name] + self.args)
        cwd = body.get("cwd") if body.get("cwd") not in (None, SANDBOX_CWD) else None
        self.proc = subprocess.Popen(session.box.argv(argv, cwd), env=session.box.env(body.get("env")),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True, cwd="/")
        readers = [threading.Thread(target=self._pump, args=(self.proc.stdout, "stdout"), daemon=True),
                   threading.Thread(target=self._pump, args=(self.proc.stderr, "stderr"), daemon=True)]
        for r in readers:
            r.start()
        threading.Thread(target=self._reap, args=(readers, body.get("timeout")), daemon=True).start()

    def _pump(self, pipe, stream):
        for chunk in iter(lambda: pipe.read1(65536), b""):
            with self.cond:
                self.logs.append({"stream": stream, "data": chunk.decode("utf-8", "replace")})
                self.cond.notify_all()

    def _reap(self, readers, timeout_ms):
        try:
            self.proc.wait(timeout=timeout_ms / 1000 if timeout_ms else None)
        except subprocess.TimeoutExpired:
            strict.kill_group(self.proc)
            self.proc.wait()
        for r in readers:
            r.join()
        with self.cond:
            code = self.proc.returncode
            self.exit_code = 128 - code if code < 0 else code
            self.cond.notify_all()

    def json(self, finished=False):
        out = {"id": self.id, "name": self.name, "args": self.args, "cwd": self.cwd,
               "sessionId": self.session.id, "exitCode": self.exit_code, "startedAt": self.started}
        if finished:
            out["durationMs"] = ms() - self.started
        return out

    def wait(self):
        with self.cond:
            while self.exit_code is None:
                self.cond.wait()

    def stream(self):
        """Log lines as they come, until the command ends."""
        sent = 0
        while True:
            with self.cond:
                while sent >= len(self.logs) and self.exit_code is None:
                    self.cond.wait()
                batch, sent = self.logs[sent:], len(self.logs)
                done = self.exit_code is not None and sent >= len(self.logs)
            for line in batch:
                yield line
            if done:
                return


class Session:
    def __init__(self, root, body, sandbox_name):
        self.id = "sbx_" + uuid.uuid4().hex[:24]
        self.box = strict.Sandbox(os.path.join(root, self.id))
        self.vcpus = (body.get("resources") or {}).get("vcpus") or 2
        self.body, self.sandbox_name = body, sandbox_name
        self.status = "pending"
        self.commands = {}
        self.created = ms()

    def json(self):
        return {"id": self.id, "memory": self.vcpus * 2048, "vcpus": self.vcpus, "region": "iad1",
                "runtime": self.body.get("runtime") or "node22", "timeout": self.body.get("timeout") or 300000,
                "status": self.status, "requestedAt": self.created, "createdAt": self.created,
                "cwd": SANDBOX_CWD, "updatedAt": ms()}


class VercelFake:
    def __init__(self, token, team, root):
        self.token, self.team, self.root = token, team, root
        self.sessions = {}
        self.lock = threading.Lock()

    def shutdown(self):
        for session in self.sessions.values():
            for cmd in session.commands.values():
                strict.kill_group(cmd.proc)

    def handle(self, method, path, query, headers, raw):
        if path == "/_fake/sandboxes":
            return 200, [{"id": s.id, "status": s.status, "create": s.body} for s in self.sessions.values()]
        if path == "/_fake/requests":
            with self.log_lock:
                return 200, list(self.log)
        if headers.get("Authorization") != f"Bearer {self.token}":
            return error(403, "forbidden", "Not authorized")
        if query.get("teamId") != self.team:
            return error(403, "forbidden", "You don't have permission to access this team")
        unknown = set(query) - {"teamId", "wait", "projectId"}
        if unknown:
            return error(400, "bad_request", f"unknown query parameter {sorted(unknown)[0]}")
        body = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                return error(400, "bad_request", "Invalid JSON body")
        parts = [p for p in path.split("/") if p]
        if parts[:3] != ["api", "v2", "sandboxes"]:
            return error(404, "not_found", f"{method} {path} not found")
        parts = parts[3:]
        if parts == [] and method == "POST":
            return self.create(body)
        if len(parts) >= 2 and parts[0] == "sessions":
            session = self.sessions.get(parts[1])
            if session is None:
                return error(404, "not_found", "Sandbox not found")
            return self.session_route(method, session, parts[2:], query, headers, body)
        return error(404, "not_found", f"{method} {path} not found")

    def create(self, body):
        if body is None:
            return error(400, "bad_request", "body is required")
        problems = strict.check(body, CREATE)
        if problems:
            return error(400, "bad_request", problems[0])
        if body.get("runtime") is not None and body["runtime"] not in RUNTIMES:
            return error(400, "bad_request", f"runtime must be one of {', '.join(RUNTIMES)}")
        if body.get("runtime") is not None and body.get("image") is not None:
            return error(400, "bad_request", "runtime and image cannot be used together")
        vcpus = (body.get("resources") or {}).get("vcpus")
        if vcpus is not None and not 1 <= vcpus <= MAX_VCPUS:
            return error(400, "bad_request", f"resources.vcpus must be between 1 and {MAX_VCPUS}")
        name = body.get("name") or "sandbox-" + uuid.uuid4().hex[:8]
        session = Session(self.root, body, name)
        with self.lock:
            self.sessions[session.id] = session
        sandbox = {"name": name, "persistent": bool(body.get("persistent")), "vcpus": session.vcpus,
                   "memory": session.vcpus * 2048, "runtime": body.get("runtime"), "timeout": session.json()["timeout"],
                   "createdAt": session.created, "updatedAt": ms(), "currentSessionId": session.id,
                   "status": session.status, "cwd": SANDBOX_CWD}
        return 200, {"sandbox": sandbox, "session": session.json(), "routes": []}

    def session_route(self, method, session, parts, query, headers, body):
        if session.status == "pending":
            session.status = "running"  # the fake's boot takes one request
        if parts == [] and method == "GET":
            return 200, {"session": session.json(), "routes": []}
        if session.status != "running":
            return error(410, "sandbox_stopped", f"Sandbox is {session.status}")
        if parts == ["stop"] and method == "POST":
            session.status = "stopped"
            for cmd in session.commands.values():
                strict.kill_group(cmd.proc)
            return 200, {"session": session.json()}
        if parts == ["cmd"] and method == "POST":
            return self.run(session, headers, body)
        if parts == ["fs", "read"] and method == "POST":
            if not accepts(headers, "application/octet-stream"):
                return error(406, "not_acceptable", "this route answers application/octet-stream")
            problems = strict.check(body or {}, READ)
            if body is None or problems:
                return error(400, "bad_request", (problems or ["body is required"])[0])
            out, code, _ = session.box.run('cat -- "$HERMES_FAKE_PATH"', cwd=body.get("cwd"),
                                           envs={"HERMES_FAKE_PATH": body["path"]}, timeout=30)
            if code != 0:
                return error(404, "file_not_found", f"File not found: {body['path']}")
            return 200, {"Content-Type": "application/octet-stream"}, out
        if len(parts) >= 2 and parts[0] == "cmd":
            cmd = session.commands.get(parts[1])
            if cmd is None:
                return error(404, "not_found", "Command not found")
            rest = parts[2:]
            if rest == [] and method == "GET":
                if query.get("wait") == "true":
                    cmd.wait()
                    return 200, {"command": cmd.json(finished=True)}
                return 200, {"command": cmd.json()}
            if rest == ["logs"] and method == "GET":
                if not accepts(headers, "application/x-ndjson"):
                    return error(406, "not_acceptable", "this route answers application/x-ndjson")
                lines = lambda: (json.dumps(line).encode() + b"\n" for line in cmd.stream())  # noqa: E731
                return 200, {"Content-Type": "application/x-ndjson"}, lines
            if rest == ["kill"] and method == "POST":
                problems = strict.check(body or {}, KILL)
                if body is None or problems:
                    return error(400, "bad_request", (problems or ["body is required"])[0])
                try:
                    os.killpg(cmd.proc.pid, body["signal"])
                except (ProcessLookupError, ValueError, OSError):
                    pass
                return 200, {"command": cmd.json()}
        return error(404, "not_found", f"{method} /{'/'.join(parts)} not found")

    def run(self, session, headers, body):
        if body is None:
            return error(400, "bad_request", "body is required")
        problems = strict.check(body, RUN)
        if problems:
            return error(400, "bad_request", problems[0])
        if body.get("timeout") is not None and body["timeout"] <= 0:
            return error(400, "bad_request", "timeout must be a positive number of milliseconds")
        cmd = Command(session, body)
        session.commands[cmd.id] = cmd
        if not body.get("wait"):
            return 200, {"command": cmd.json()}
        if not accepts(headers, "application/x-ndjson"):
            return error(406, "not_acceptable", "a waited command answers application/x-ndjson")

        def lines():
            yield json.dumps({"command": cmd.json()}).encode() + b"\n"
            for line in cmd.stream():
                if body.get("logs"):
                    yield json.dumps(line).encode() + b"\n"
            cmd.wait()
            yield json.dumps({"command": cmd.json(finished=True)}).encode() + b"\n"
        return 200, {"Content-Type": "application/x-ndjson"}, lines


if __name__ == "__main__":
    strict.serve(VercelFake(sys.argv[1], sys.argv[2], sys.argv[3]))
