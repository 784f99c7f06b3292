"""Strict request checking and the sandbox-in-a-temp-dir runner the provider fakes share.

A schema is a dict of field name -> type; a type is one of "str", "int", "number",
"bool", "str-map" (an object of strings), "str-list", a nested schema (dict), or
("list", schema). Required fields are listed under the key "!required".
"""

import json
import os
import signal
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def check(value, schema, where="body"):
    """Returns a list of problems (empty when the value matches the schema)."""
    if not isinstance(value, dict):
        return [f"{where} must be an object"]
    problems = []
    required = schema.get("!required", ())
    for name in required:
        if name not in value:
            problems.append(f"{where}.{name} is required")
    for name, item in value.items():
        if name not in schema or name == "!required":
            problems.append(f"property {name} should not exist")
            continue
        problems.extend(check_type(item, schema[name], f"{where}.{name}"))
    return problems


def check_type(item, kind, where):
    if item is None:
        return []
    if isinstance(kind, dict):
        return check(item, kind, where)
    if isinstance(kind, tuple) and kind[0] == "list":
        if not isinstance(item, list):
            return [f"{where} must be an array"]
        return [p for i, x in enumerate(item) for p in check_type(x, kind[1], f"{where}[{i}]")]
    ok = {
        "str": lambda v: isinstance(v, str),
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "bool": lambda v: isinstance(v, bool),
        "str-map": lambda v: isinstance(v, dict) and all(isinstance(x, str) for x in v.values()),
        "str-list": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
        "any": lambda v: True,
    }[kind](item)
    return [] if ok else [f"{where} must be {kind}"]


class Sandbox:
    """A sandbox made of a temp dir: each command runs in a private mount namespace with
    sandbox's own directories bound over /tmp and /root (its HOME), so commands the
    clients send ("cd /tmp", pid files, snapshots) never touch the host's /tmp."""

    def __init__(self, root):
        self.root = root
        self.tmp = os.path.join(root, "tmp")
        self.home = os.path.join(root, "home")
        os.makedirs(self.tmp, exist_ok=True)
        os.makedirs(self.home, exist_ok=True)
        self.lock = threading.Lock()
        self.running = {}

    def argv(self, command, cwd=None):
        script = ('mount --bind "$1" /root && mount --bind "$2" /tmp || exit 97; cd "$3" || exit 98; '
                  'shift 3; exec sh -c "$1"')
        return ["unshare", "--mount", "sh", "-c", script, "sandbox", self.home, self.tmp, cwd or "/root", command]

    def env(self, extra=None):
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/root", "LANG": "C.UTF-8"}
        env.update(extra or {})
        return env

    def start(self, command, cwd=None, envs=None, stdin=None):
        return subprocess.Popen(self.argv(command, cwd), env=self.env(envs),
                                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True, cwd="/")

    def run(self, command, cwd=None, envs=None, timeout=None):
        """(combined output, exit code, timed out)."""
        proc = self.start(command, cwd, envs)
        try:
            out, _ = proc.communicate(timeout=timeout)
            return out, proc.returncode, False
        except subprocess.TimeoutExpired:
            kill_group(proc)
            out, _ = proc.communicate()
            return out, proc.returncode, True


def kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def unshare_works():
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True)
    return probe.returncode == 0


class Handler(BaseHTTPRequestHandler):
    """Dispatches to `self.server.app.handle(method, path, query, headers, body)`, which
    returns (status, headers, body bytes) or (status, json value)."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _serve(self, method):
        from urllib.parse import urlsplit, parse_qs
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        app = self.server.app
        with app.log_lock:
            app.log.append({"method": method, "path": url.path, "query": query,
                            "headers": {k.lower(): v for k, v in self.headers.items()},
                            "body": raw.decode("utf-8", "replace")})
        try:
            answer = app.handle(method, url.path, query, self.headers, raw)
        except Exception as exc:  # a bug in the fake shows up as a 500 with its text
            answer = (500, {"message": f"fake failed: {exc!r}"})
        if len(answer) == 2:
            status, value = answer
            headers, data = {"Content-Type": "application/json"}, json.dumps(value).encode()
        else:
            status, headers, data = answer
        if callable(data):  # a streamed (chunked) body
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for chunk in data():
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            return
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._serve("GET")

    def do_POST(self):
        self._serve("POST")

    def do_DELETE(self):
        self._serve("DELETE")

    def do_PATCH(self):
        self._serve("PATCH")

    def do_PUT(self):
        self._serve("PUT")


def serve(app):
    """Serves `app` on 127.0.0.1 (port 0), prints `listening http://127.0.0.1:PORT` and
    runs until stdin closes (the test that started it went away)."""
    if not unshare_works():
        sys.exit("the fake needs `unshare --mount` (root or user namespaces) to keep commands off the host's /tmp")
    app.log, app.log_lock = [], threading.Lock()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.app = app
    print(f"listening http://127.0.0.1:{server.server_address[1]}", flush=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    sys.stdin.read()
    app.shutdown()
