"""A STAND-IN for Modal's Python SDK (`modal`), for tests only: Modal's service cannot be
reached from the test machines. It implements the part of the SDK's public, synchronous
API that a sandbox client uses, with the signatures of the SDK's published stubs
(modal 1.x: `modal/app.pyi`, `image.pyi`, `sandbox/sandbox.pyi`,
`container_process.pyi`, `io_streams.pyi`), so a call the real SDK would refuse
(unknown keyword, missing app, non-string argv, no credentials) fails here too:

  App.lookup(name, *, client=None, environment_name=None, create_if_missing=False)
  Image.from_registry(tag, secret=None, *, setup_dockerfile_commands=[], force_build=False,
                      add_python=None, **kwargs)
  Sandbox.create(*args, app=None, name=None, tags=None, image=None, env=None, secrets=None,
                 network_file_systems={}, timeout=300, idle_timeout=None, workdir=None,
                 gpu=None, cloud=None, region=None, cpu=None, memory=None, runtime=None,
                 block_network=False, ...)
  Sandbox.exec(*args, stdout=PIPE, stderr=PIPE, timeout=None, workdir=None, env=None,
               secrets=None, text=True, bufsize=-1, pty=False) -> ContainerProcess
  Sandbox.terminate(), Sandbox.poll(), Sandbox.object_id
  ContainerProcess.stdin.write / write_eof / drain, .stdout.read(), .stderr.read(),
  .wait(), .poll(), .returncode

Commands run with the local shell in a private mount namespace per sandbox (the
fakes' strict.Sandbox). Every SDK call is appended as a JSON line to
$MODAL_STANDIN_STATE/calls.log.
"""

import json
import os
import subprocess
import sys
import tempfile
import threading
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
import strict  # noqa: E402

from . import exception  # noqa: E402

__version__ = "1.6.4+standin"
_log_lock = threading.Lock()


def _record(call, **fields):
    state = os.environ.get("MODAL_STANDIN_STATE")
    if not state:
        return
    with _log_lock, open(os.path.join(state, "calls.log"), "a") as log:
        log.write(json.dumps({"call": call, **fields}, default=repr) + "\n")


def _require_credentials():
    """As the SDK: tokens from the environment, else the config file. Which token the
    "server" accepts is set by MODAL_STANDIN_ACCEPTED_TOKEN_ID (any, when unset)."""
    token_id = os.environ.get("MODAL_TOKEN_ID")
    if token_id and os.environ.get("MODAL_TOKEN_SECRET"):
        accepted = os.environ.get("MODAL_STANDIN_ACCEPTED_TOKEN_ID")
        if accepted and token_id != accepted:
            raise exception.AuthError("Token ID is malformed or invalid")
        return
    config = os.environ.get("MODAL_CONFIG_PATH") or os.path.expanduser("~/.modal.toml")
    if os.path.isfile(config):
        return
    raise exception.AuthError("Token missing. Could not authenticate client. If you have token credentials, "
                              "see modal.com/docs/reference/modal.config for setup help.")


class _StreamType:
    PIPE = "pipe"
    DEVNULL = "devnull"
    STDOUT = "stdout"


class stream_type:  # noqa: N801 - the SDK's module name
    StreamType = _StreamType


class App:
    def __init__(self, name, app_id):
        self.name, self.app_id = name, app_id

    @staticmethod
    def lookup(name, *, client=None, environment_name=None, create_if_missing=False):
        _require_credentials()
        _record("App.lookup", name=name, create_if_missing=create_if_missing)
        if not create_if_missing:
            raise exception.NotFoundError(f"Lookup failed for App '{name}' from the 'main' environment")
        return App(name, "ap-" + uuid.uuid4().hex[:22])


class Image:
    def __init__(self, tag):
        self.tag = tag

    @staticmethod
    def from_registry(tag, secret=None, *, setup_dockerfile_commands=[], force_build=False, add_python=None, **kwargs):
        if not isinstance(tag, str) or not tag:
            raise exception.InvalidError("Image tag must be a non-empty string")
        _record("Image.from_registry", tag=tag)
        return Image(tag)


class _StreamReader:
    def __init__(self, data, text):
        self._data, self._text = data, text

    def read(self):
        return self._data.decode("utf-8", "replace") if self._text else self._data


class _StreamWriter:
    def __init__(self, process):
        self._process, self._buffer, self._eof = process, bytearray(), False

    def write(self, data):
        if self._eof:
            raise ValueError("Stdin is closed. Cannot write to it.")
        if isinstance(data, str):
            data = data.encode("utf-8")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError("data argument must be a bytes-like object")
        self._buffer.extend(data)

    def write_eof(self):
        self._eof = True

    def drain(self):
        if self._eof:
            self._process._feed(bytes(self._buffer))


class ContainerProcess:
    def __init__(self, popen, text, timeout):
        self._popen, self._text, self._timeout = popen, text, timeout
        self._done = threading.Event()
        self._stdout = b""
        self._returncode = None
        self._fed = False
        self.stdin = _StreamWriter(self)

    def _feed(self, data):
        if self._fed:
            return
        self._fed = True
        threading.Thread(target=self._run, args=(data,), daemon=True).start()

    def _run(self, data):
        try:
            out, _ = self._popen.communicate(data, timeout=self._timeout)
        except subprocess.TimeoutExpired:
            strict.kill_group(self._popen)
            out, _ = self._popen.communicate()
        self._stdout = out
        self._returncode = self._popen.returncode
        self._done.set()

    def _finish(self):
        self._feed(b"")
        self._done.wait()

    @property
    def stdout(self):
        self._finish()
        return _StreamReader(self._stdout, self._text)

    @property
    def stderr(self):
        self._finish()
        return _StreamReader(b"", self._text)

    @property
    def returncode(self):
        if self._returncode is None:
            raise exception.InvalidError("You must call wait() before accessing the returncode.")
        return self._returncode

    def poll(self):
        return self._returncode

    def wait(self):
        self._finish()
        return self._returncode


class Sandbox:
    def __init__(self, box, root):
        self.object_id = "sb-" + uuid.uuid4().hex[:22]
        self._box, self._root = box, root
        self._terminated = False

    @staticmethod
    def create(*args, app=None, name=None, tags=None, image=None, env=None, secrets=None,
               network_file_systems={}, timeout=300, idle_timeout=None, workdir=None, gpu=None,
               cloud=None, region=None, cpu=None, memory=None, runtime=None, block_network=False,
               outbound_cidr_allowlist=None, outbound_domain_allowlist=None, inbound_cidr_allowlist=None,
               volumes={}, pty=False, encrypted_ports=[], h2_ports=[], unencrypted_ports=[],
               custom_domain=None, proxy=None, verbose=False, experimental_options=None, client=None,
               environment_name=None):
        _require_credentials()
        if app is None:
            raise exception.InvalidError("App is required when creating a Sandbox outside a Modal container: "
                                         "pass app=modal.App.lookup(...)")
        if not isinstance(app, App):
            raise exception.InvalidError(f"app must be a modal.App, got {type(app).__name__}")
        if image is not None and not isinstance(image, Image):
            raise exception.InvalidError(f"image must be a modal.Image, got {type(image).__name__}")
        if cpu is not None and not isinstance(cpu, (int, float, tuple)):
            raise exception.InvalidError("cpu must be a float or a (request, limit) tuple")
        if memory is not None and not isinstance(memory, (int, tuple)):
            raise exception.InvalidError("memory must be an int (MiB) or a (request, limit) tuple")
        if timeout is not None and (not isinstance(timeout, int) or timeout <= 0 or timeout > 86400):
            raise exception.InvalidError("timeout must be a positive int of at most 24 hours")
        root = tempfile.mkdtemp(prefix="modal-standin-", dir=os.environ.get("MODAL_STANDIN_STATE"))
        sandbox = Sandbox(strict.Sandbox(root), root)
        _record("Sandbox.create", sandbox_id=sandbox.object_id, app=app.name, image=image.tag if image else None,
                timeout=timeout, cpu=cpu, memory=memory, workdir=workdir, args=list(args))
        return sandbox

    def exec(self, *args, stdout=_StreamType.PIPE, stderr=_StreamType.PIPE, timeout=None, workdir=None, env=None,
             secrets=None, text=True, bufsize=-1, pty=False):
        if self._terminated:
            raise exception.SandboxTerminatedError("Sandbox has been terminated")
        if not args or not all(isinstance(a, str) for a in args):
            raise exception.InvalidError("All arguments to exec must be strings")
        if timeout is not None and (not isinstance(timeout, int) or timeout <= 0):
            raise exception.InvalidError("timeout must be a positive integer")
        _record("Sandbox.exec", sandbox_id=self.object_id, argv=list(args), timeout=timeout)
        command = " ".join(_quote(a) for a in args)
        popen = self._box.start(command, cwd=workdir, envs={k: v for k, v in (env or {}).items() if v is not None},
                                stdin=b"")
        return ContainerProcess(popen, text, timeout)

    def terminate(self):
        _record("Sandbox.terminate", sandbox_id=self.object_id)
        self._terminated = True

    def poll(self):
        return 0 if self._terminated else None


def _quote(arg):
    return "'" + arg.replace("'", "'\\''") + "'"
