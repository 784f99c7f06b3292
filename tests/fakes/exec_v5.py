"""A strict fake of the Kubernetes API's pods/exec over WebSocket with the
`v5.channel.k8s.io` subprotocol (Kubernetes >= 1.30; KEP-3396 and the
k8s.io/apimachinery/pkg/util/remotecommand constants), written from the protocol's
definition:

- the client upgrades `GET /api/v1/namespaces/NS/pods/NAME/exec?command=..&stdin=..
  &stdout=..&stderr=..&tty=..&container=..` and offers subprotocols in
  Sec-WebSocket-Protocol; this fake accepts only `v5.channel.k8s.io` (a client that
  does not offer it gets 400, as a server without the protocol would refuse);
- every binary message starts with a channel byte: 0 stdin, 1 stdout, 2 stderr,
  3 error (a metav1.Status as JSON when the command ends), 4 resize; v5 adds 255 CLOSE,
  whose second byte names the stream that ended (the client's stdin: 0);
- the command runs here with the host's programs, in a fresh temp directory.

Also `GET /api/v1/namespaces/NS/pods/NAME` (a Running pod, which kubectl reads first).
Usage: exec_v5.py PORTFILE. It writes the port it listens on (127.0.0.1) to PORTFILE
and a line per exec to PORTFILE.log: the protocol chosen, the command, whether stdin
was closed with the v5 signal.
"""
import base64
import hashlib
import json
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
V5 = "v5.channel.k8s.io"
LOG_LOCK = threading.Lock()


def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def read_frame(sock):
    """One WebSocket frame from a client (which must mask): (opcode, payload)."""
    b1, b2 = recv_exact(sock, 2)
    opcode = b1 & 0x0F
    if not b2 & 0x80:
        raise ValueError("client frames must be masked (RFC 6455 5.1)")
    length = b2 & 0x7F
    if length == 126:
        (length,) = struct.unpack(">H", recv_exact(sock, 2))
    elif length == 127:
        (length,) = struct.unpack(">Q", recv_exact(sock, 8))
    mask = recv_exact(sock, 4)
    payload = bytearray(recv_exact(sock, length))
    for i in range(length):
        payload[i] ^= mask[i % 4]
    return opcode, bytes(payload)


def send_frame(sock, opcode, payload, lock):
    header = bytes([0x80 | opcode])
    n = len(payload)
    if n < 126:
        header += bytes([n])
    elif n < 65536:
        header += bytes([126]) + struct.pack(">H", n)
    else:
        header += bytes([127]) + struct.pack(">Q", n)
    with lock:
        sock.sendall(header + payload)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def json(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        url = urllib.parse.urlsplit(self.path)
        parts = url.path.strip("/").split("/")
        # Discovery, which kubectl reads before it resolves `pods`.
        if url.path == "/api":
            return self.json(200, {"kind": "APIVersions", "versions": ["v1"],
                                   "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]})
        if url.path == "/apis":
            return self.json(200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": []})
        if url.path == "/api/v1":
            return self.json(200, {"kind": "APIResourceList", "groupVersion": "v1", "resources": [
                {"name": "pods", "singularName": "pod", "namespaced": True, "kind": "Pod", "verbs": ["get"]},
                {"name": "pods/exec", "singularName": "", "namespaced": True, "kind": "PodExecOptions", "verbs": ["create", "get"]}]})
        # api v1 namespaces NS pods NAME [exec]
        if len(parts) >= 6 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "pods":
            ns, name = parts[3], parts[5]
            if len(parts) == 6:
                return self.json(200, pod(ns, name))
            if len(parts) == 7 and parts[6] == "exec":
                return self.exec(urllib.parse.parse_qs(url.query))
        self.json(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
                        "message": f"the fake serves pods and pods/exec only, not {url.path}"})

    def do_POST(self):
        # SPDY (the pre-WebSocket transport) is not what this fake is for.
        self.json(400, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 400,
                        "message": "this fake speaks only WebSocket v5.channel.k8s.io"})

    def exec(self, query):
        offered = [p.strip() for p in self.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()]
        key = self.headers.get("Sec-WebSocket-Key")
        if self.headers.get("Upgrade", "").lower() != "websocket" or not key or V5 not in offered:
            return self.json(400, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 400,
                                   "message": f"v5.channel.k8s.io not offered (offered: {offered})"})
        command = query.get("command", [])
        flag = lambda k: query.get(k, ["false"])[0] in ("1", "true")
        want_stdin, want_out, want_err = flag("stdin"), flag("stdout"), flag("stderr")
        if not command or not (want_out or want_err or want_stdin):
            return self.json(400, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 400,
                                   "message": "you must specify at least 1 of stdin, stdout, stderr"})
        accept = base64.b64encode(hashlib.sha1((key + GUID).encode()).digest()).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.send_header("Sec-WebSocket-Protocol", V5)
        self.end_headers()
        self.wfile.flush()
        sock = self.connection
        lock = threading.Lock()
        workdir = tempfile.mkdtemp(prefix="exec-v5-")
        proc = subprocess.Popen(command, cwd=workdir, stdin=subprocess.PIPE if want_stdin else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        closed_by_signal = []

        def pump(stream, channel, wanted):
            while True:
                data = stream.read1(32768) if hasattr(stream, "read1") else stream.read(32768)
                if not data:
                    break
                if wanted:
                    send_frame(sock, 2, bytes([channel]) + data, lock)

        def reader():
            try:
                while True:
                    opcode, payload = read_frame(sock)
                    if opcode == 8:
                        break
                    if opcode == 9:
                        send_frame(sock, 10, payload, lock)
                        continue
                    if opcode not in (1, 2) or not payload:
                        continue
                    channel, data = payload[0], payload[1:]
                    if channel == 0 and want_stdin and proc.stdin:
                        try:
                            proc.stdin.write(data)
                            proc.stdin.flush()
                        except BrokenPipeError:
                            pass
                    elif channel == 255 and data[:1] == b"\x00" and proc.stdin:
                        closed_by_signal.append(True)
                        proc.stdin.close()
            except (EOFError, OSError, ValueError):
                pass
            if proc.poll() is None and proc.stdin and not proc.stdin.closed:
                proc.stdin.close()

        threads = [threading.Thread(target=pump, args=(proc.stdout, 1, want_out), daemon=True),
                   threading.Thread(target=pump, args=(proc.stderr, 2, want_err), daemon=True)]
        for t in threads:
            t.start()
        threading.Thread(target=reader, daemon=True).start()
        for t in threads:
            t.join()
        code = proc.wait()
        if code == 0:
            status = {"metadata": {}, "status": "Success"}
        else:
            status = {"metadata": {}, "status": "Failure", "message": f"command terminated with non-zero exit code: {code}",
                      "reason": "NonZeroExitCode",
                      "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}
        # Logged before the status goes out: a client may look at the log as soon as it has it.
        with LOG_LOCK, open(LOG_PATH, "a") as log:
            log.write(json.dumps({"protocol": V5, "command": command, "stdin": want_stdin,
                                  "stdin_closed_by_v5_signal": bool(closed_by_signal), "exit": code}) + "\n")
        send_frame(sock, 2, bytes([3]) + json.dumps(status).encode(), lock)
        send_frame(sock, 8, struct.pack(">H", 1000), lock)
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.close_connection = True


def pod(ns, name):
    return {"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": ns, "uid": "00000000-0000-0000-0000-000000000001", "resourceVersion": "1"},
            "spec": {"containers": [{"name": "sandbox", "image": "fake"}]},
            "status": {"phase": "Running", "containerStatuses": [
                {"name": "sandbox", "ready": True, "restartCount": 0, "image": "fake", "imageID": "",
                 "state": {"running": {"startedAt": "2024-01-01T00:00:00Z"}}}]}}


if __name__ == "__main__":
    portfile = sys.argv[1]
    LOG_PATH = portfile + ".log"
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(portfile + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.rename(portfile + ".tmp", portfile)
    server.serve_forever()
