//! The `hermes_tools` module a script imports: one function per sandbox tool that is
//! enabled for the session, each sending its call to the parent over the RPC socket.
//! A tool without a function here cannot be imported.

/// Tools a script may call, in the order they are documented.
pub const SANDBOX_TOOLS: [&str; 7] = [
    "web_search",
    "web_extract",
    "read_file",
    "write_file",
    "search_files",
    "patch",
    "terminal",
];

/// (tool, Python signature, argument dict, line for the tool description).
const STUBS: [(&str, &str, &str, &str); 7] = [
    (
        "web_search",
        "query: str, limit: int = 5",
        r#"{"query": query, "limit": limit}"#,
        "  web_search(query: str, limit: int = 5) -> dict\n    Returns {\"data\": {\"web\": [{\"url\", \"title\", \"description\"}, ...]}}",
    ),
    (
        "web_extract",
        "urls: list, char_limit: int = None",
        r#"{"urls": urls, "char_limit": char_limit}"#,
        "  web_extract(urls: list[str], char_limit: int = None) -> dict\n    Returns {\"results\": [{\"url\", \"title\", \"content\", \"error\"}, ...]}, content as markdown.",
    ),
    (
        "read_file",
        "path: str, offset: int = 1, limit: int = 500",
        r#"{"path": path, "offset": offset, "limit": limit}"#,
        "  read_file(path: str, offset: int = 1, limit: int = 500) -> dict\n    Lines are 1-based. Returns {\"content\": \"N|line...\", \"total_lines\": N}",
    ),
    (
        "write_file",
        "path: str, content: str",
        r#"{"path": path, "content": content}"#,
        "  write_file(path: str, content: str) -> dict\n    Replaces the whole file.",
    ),
    (
        "search_files",
        r#"pattern: str, target: str = "content", path: str = ".", file_glob: str = None, limit: int = 50, offset: int = 0, output_mode: str = "content", context: int = 0"#,
        r#"{"pattern": pattern, "target": target, "path": path, "file_glob": file_glob, "limit": limit, "offset": offset, "output_mode": output_mode, "context": context}"#,
        "  search_files(pattern: str, target=\"content\", path=\".\", file_glob=None, limit=50) -> dict\n    target \"content\" searches inside files, \"files\" finds files by name. Returns {\"matches\": [...]}",
    ),
    (
        "patch",
        r#"path: str = None, old_string: str = None, new_string: str = None, replace_all: bool = False, mode: str = "replace", patch: str = None"#,
        r#"{"path": path, "old_string": old_string, "new_string": new_string, "replace_all": replace_all, "mode": mode, "patch": patch}"#,
        "  patch(path: str, old_string: str, new_string: str, replace_all: bool = False) -> dict\n    Replaces old_string with new_string in the file (mode=\"patch\" applies a V4A patch).",
    ),
    (
        "terminal",
        "command: str, timeout: int = None, workdir: str = None",
        r#"{"command": command, "timeout": timeout, "workdir": workdir}"#,
        "  terminal(command: str, timeout=None, workdir=None) -> dict\n    Foreground only (no background or pty). Returns {\"output\": \"...\", \"exit_code\": N}",
    ),
];

const HEADER: &str = r#""""Tools of the hermes-tools runtime, callable from this script (generated per run)."""
import json as _json, os as _os, shlex as _shlex, socket as _socket, threading as _threading, time as _time

_connection = None
_sequence = 0
# One request at a time: a script's threads share the one channel.
_lock = _threading.Lock()
# Remote environments: requests go out on this descriptor (the run's own output stream)
# and each answer comes back as a file in the run's folder.
_FRAME = b"\x1ehermes-rpc:"


def _exchange_local(line):
    global _connection
    if _connection is None:
        _connection = _socket.socket(fileno=int(_os.environ["HERMES_RPC_FD"]))
    _connection.sendall(line)
    reply = b""
    while not reply.endswith(b"\n"):
        chunk = _connection.recv(65536)
        if not chunk:
            raise RuntimeError("the hermes-tools runtime closed the connection")
        reply += chunk
    return reply


def _exchange_remote(line, sequence):
    import fcntl
    frame = _FRAME + line
    out = int(_os.environ["HERMES_RPC_OUT_FD"])
    # The script's stdout may share the stream (shown as it comes): one writer at a time.
    with open(_os.path.join(_os.environ["HERMES_RPC_DIR"], "stream.lock"), "ab") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        while frame:
            frame = frame[_os.write(out, frame):]
    answer = _os.path.join(_os.environ["HERMES_RPC_DIR"], "resp-%d" % sequence)
    pause = 0.001
    while not _os.path.exists(answer):
        _time.sleep(pause)
        pause = min(pause * 2, 0.02)
    with open(answer, "rb") as handle:
        reply = handle.read()
    _os.unlink(answer)
    return reply


def _call(tool, args):
    """Runs `tool` in the hermes-tools runtime and returns its result, parsed from JSON."""
    global _sequence
    with _lock:
        _sequence += 1
        request = {"tool": tool, "args": {k: v for k, v in args.items() if v is not None},
                   "token": _os.environ.get("HERMES_RPC_TOKEN", ""), "id": _sequence}
        line = (_json.dumps(request) + "\n").encode()
        if "HERMES_RPC_FD" in _os.environ:
            reply = _exchange_local(line)
        else:
            reply = _exchange_remote(line, _sequence)
    result = _json.loads(reply.decode())
    if isinstance(result, str):
        try:
            return _json.loads(result)
        except ValueError:
            return result
    return result


def json_parse(text: str):
    """json.loads that tolerates raw control characters (terminal output)."""
    return _json.loads(text, strict=False)


def shell_quote(s: str) -> str:
    """Quotes `s` for a shell command line: terminal(f"cat {shell_quote(name)}")."""
    return _shlex.quote(s)


def retry(fn, max_attempts=3, delay=2):
    """Calls fn() until it succeeds, at most max_attempts times, waiting longer each time."""
    for attempt in range(max_attempts):
        try:
            return fn()
        except Exception:
            if attempt == max_attempts - 1:
                raise
            _time.sleep(delay * (2 ** attempt))

"#;

/// The module's source with functions for `tools` (sandbox tools not among them, and
/// names that are not sandbox tools, get none).
pub fn module_source(tools: &[String]) -> String {
    let mut source = HEADER.to_string();
    for (name, signature, args, _) in STUBS {
        if tools.iter().any(|t| t == name) {
            source.push_str(&format!(
                "\ndef {name}({signature}):\n    return _call({name:?}, {args})\n\n"
            ));
        }
    }
    source
}

/// The tool description, naming only `tools` (the enabled sandbox tools).
pub fn description(tools: &[&str], max_calls: usize, timeout_seconds: u64) -> String {
    let lines: Vec<&str> = STUBS
        .iter()
        .filter(|(name, ..)| tools.contains(name))
        .map(|(.., doc)| *doc)
        .collect();
    let listed = if lines.is_empty() {
        "  (no tools are enabled for scripts in this session)".to_string()
    } else {
        lines.join("\n")
    };
    let minutes = if timeout_seconds >= 60 && timeout_seconds / 60 * 60 == timeout_seconds {
        format!("{}-minute", timeout_seconds / 60)
    } else {
        format!("{timeout_seconds}-second")
    };
    format!(
        "Run a Python script that calls tools programmatically. Use it when a job needs 3 or more tool calls with logic \
         between them, when large tool output should be filtered before you see it, or for loops and branches (process N \
         files, retry on failure). For a single call, or when you need to read the full result yourself, call the tool directly.\n\n\
         Available via `from hermes_tools import ...`:\n\n{listed}\n\n\
         Limits: {minutes} timeout, 50KB stdout cap, at most {max_calls} tool calls per script.\n\n\
         The script runs where the terminal runs, in the same working directory (on this machine inside the terminal's sandbox, or in the terminal backend's environment). Print the result you want to stdout. \
         The Python standard library is available for processing between calls.\n\n\
         Also in hermes_tools: json_parse(text) (json.loads with strict=False, for terminal output), shell_quote(s) \
         (shlex.quote, for building commands), retry(fn, max_attempts=3, delay=2) (retries with backoff)."
    )
}

/// `from hermes_tools import ...` examples for the `code` parameter's description.
pub fn import_example(tools: &[&str]) -> String {
    let mut picked: Vec<&str> = ["web_search", "terminal"]
        .into_iter()
        .filter(|t| tools.contains(t))
        .collect();
    if picked.is_empty() {
        picked = tools.iter().take(2).copied().collect();
    }
    if picked.is_empty() {
        "...".into()
    } else {
        format!("{}, ...", picked.join(", "))
    }
}

/// How a request line starts on a remote run's output stream (`_FRAME` in the module).
pub const FRAME_PREFIX: &[u8] = b"\x1ehermes-rpc:";
/// How a line carrying a piece of the script's stdout (base64) starts on that stream.
pub const STDOUT_FRAME_PREFIX: &[u8] = b"\x1ehermes-out:";
