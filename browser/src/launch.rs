//! Finding and starting the machine's Chromium, or reaching a browser the operator
//! already runs.

use crate::cdp::{Connection, PipeIn, PipeOut};
use crate::guard::RequestPolicy;
use crate::settings::Settings;
use std::ffi::OsString;
use std::io::BufReader;
use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

/// Names looked up on PATH when `browser.executable` is not set.
pub const EXECUTABLE_NAMES: &[&str] = &[
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
];

/// The browser program: `browser.executable` (a path, or a name on PATH), else the
/// first of [`EXECUTABLE_NAMES`] on PATH.
pub fn find_executable(configured: Option<&str>) -> Option<PathBuf> {
    if let Some(chosen) = configured.map(str::trim).filter(|s| !s.is_empty()) {
        let path = Path::new(chosen);
        if path.components().count() > 1 {
            return Some(path.to_path_buf()).filter(|p| p.is_file());
        }
        return which::which(chosen).ok();
    }
    EXECUTABLE_NAMES.iter().find_map(|n| which::which(n).ok())
}

/// The flags every launched browser gets.
pub fn flags(data_dir: &Path) -> Vec<String> {
    [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--no-first-run",
        "--disable-component-update",
        "--disable-sync",
        "--no-default-browser-check",
        "--disable-dev-shm-usage",
        "--disable-extensions",
        "--disable-default-apps",
        "--mute-audio",
        "--disable-features=BackForwardCache",
        "--window-size=1280,800",
        "--remote-debugging-pipe",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([format!("--user-data-dir={}", data_dir.display())])
    .chain(["about:blank".to_string()])
    .collect()
}

/// A browser this process started. It is killed when this value is dropped, and by
/// the kernel when the thread that started it ends (the process exiting included).
pub struct LocalBrowser {
    pub pid: u32,
    pub data_dir: PathBuf,
}

impl Drop for LocalBrowser {
    fn drop(&mut self) {
        // SAFETY: kill(2) of our own child's process group (it made one of its own
        // before exec) and of the child; no memory is touched.
        unsafe {
            libc::kill(-(self.pid as libc::pid_t), libc::SIGKILL);
            libc::kill(self.pid as libc::pid_t, libc::SIGKILL);
        }
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: pipe2 writes two descriptors into the array it is given.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A copy of `fd` numbered 10 or above (so that placing descriptors 3 and 4 in the
/// child cannot overwrite one still to be placed).
fn high(fd: OwnedFd) -> Result<OwnedFd, String> {
    // SAFETY: fcntl duplicates a descriptor we own.
    let copy = unsafe {
        libc::fcntl(
            std::os::fd::AsRawFd::as_raw_fd(&fd),
            libc::F_DUPFD_CLOEXEC,
            10,
        )
    };
    if copy < 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    // SAFETY: `copy` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(copy) })
}

/// Starts Chromium headless with its DevTools pipe, in a fresh profile directory
/// inside the server's private run directory. Chromium's stderr goes to a file there
/// and is quoted when it does not answer.
///
/// With `settings.sandbox` Chromium runs inside the OS sandbox the task's commands run
/// in: the disk read-only but for its profile, the hidden secrets hidden, the same
/// limits, and a network namespace whose one way out is the runtime's proxy, judged by
/// `requests`' network policy. So every connection the browser makes — popups,
/// WebSockets and service workers included, which `Fetch` does not pause — is judged,
/// and by the address the proxy resolved and dials, so a second lookup by Chromium
/// cannot be steered elsewhere (Chromium hands host names to the proxy unresolved).
pub fn launch(
    settings: &Settings,
    requests: &RequestPolicy,
) -> Result<(Arc<Connection>, LocalBrowser), String> {
    let executable = find_executable(settings.executable.as_deref()).ok_or_else(|| {
        match settings.executable.as_deref() {
            Some(chosen) => format!("browser.executable {chosen} was not found"),
            None => format!(
                "no browser found: install Chromium ({} on PATH) or set browser.executable or browser.cdp_url",
                EXECUTABLE_NAMES.join(", ")
            ),
        }
    })?;
    let data_dir = hermes_sandbox_private_dir()?;
    let log_path = data_dir.join("chromium.log");
    let log = std::fs::File::create(&log_path).map_err(|e| e.to_string())?;
    // Our end writes to fd 3 of the child (its commands), reads from fd 4 (answers).
    let (to_child_read, to_child_write) = pipe()?;
    let (from_child_read, from_child_write) = pipe()?;
    let child_in = high(to_child_read)?;
    let child_out = high(from_child_write)?;
    let (child_in_fd, child_out_fd) = (
        std::os::fd::AsRawFd::as_raw_fd(&child_in),
        std::os::fd::AsRawFd::as_raw_fd(&child_out),
    );
    let mut argv: Vec<OsString> = vec![executable.clone().into_os_string()];
    argv.extend(flags(&data_dir).into_iter().map(OsString::from));
    let mut command = match &settings.sandbox {
        Some(policy) => sandboxed(policy, argv, &data_dir, requests)?,
        None => {
            let mut command = Command::new(&argv[0]);
            command.args(&argv[1..]);
            command
        }
    };
    command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(log));
    // SAFETY: only async-signal-safe calls (dup2, prctl, setpgid) between fork and exec.
    unsafe {
        command.pre_exec(move || {
            if libc::dup2(child_in_fd, 3) < 0 || libc::dup2(child_out_fd, 4) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            libc::setpgid(0, 0);
            Ok(())
        });
    }
    let sandboxed = settings.sandbox.is_some();
    // The child must outlive the call that started it: it is spawned by a thread that
    // lives as long as the browser (the death signal follows the spawning thread).
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("chromium".into())
        .spawn(move || match spawn(command, sandboxed) {
            Ok(mut child) => {
                let _ = tx.send(Ok(child.id()));
                let _ = child.wait();
            }
            Err(e) => {
                let _ = tx.send(Err(e.to_string()));
            }
        })
        .map_err(|e| e.to_string())?;
    let pid = rx
        .recv()
        .map_err(|_| "the browser could not be started".to_string())?
        .map_err(|e| format!("{} could not be started: {e}", executable.display()))?;
    drop(child_in);
    drop(child_out);
    let browser = LocalBrowser {
        pid,
        data_dir: data_dir.clone(),
    };
    // SAFETY: the descriptors are ours alone; File takes ownership of each.
    let (writer, reader) = unsafe {
        (
            std::fs::File::from_raw_fd(to_child_write.into_raw_fd()),
            std::fs::File::from_raw_fd(from_child_read.into_raw_fd()),
        )
    };
    let connection = Connection::start(
        Box::new(PipeOut(writer)),
        Box::new(PipeIn(BufReader::with_capacity(1 << 20, reader))),
    );
    match connection.call(
        "Browser.getVersion",
        serde_json::json!({}),
        None,
        Duration::from_secs(30),
    ) {
        Ok(_) => Ok((connection, browser)),
        Err(e) => {
            let said = std::fs::read_to_string(&log_path).unwrap_or_default();
            let tail: String = said
                .lines()
                .rev()
                .take(5)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n");
            Err(format!(
                "{} did not answer ({e}){}",
                executable.display(),
                if tail.is_empty() {
                    String::new()
                } else {
                    format!(": {tail}")
                }
            ))
        }
    }
}

/// Chromium's command inside `policy`: its profile and the sandbox's own `/dev/shm` the
/// only writable places (the latter its temporary directory: the profile's path is too
/// long for Chromium's socket names), its environment the allow-listed one with a home
/// inside the profile, and every connection through the proxy `requests` judges (loopback too:
/// the sandbox's own loopback serves nothing, the host's is reached only if allowed).
fn sandboxed(
    policy: &hermes_sandbox::Policy,
    mut argv: Vec<OsString>,
    data_dir: &Path,
    requests: &RequestPolicy,
) -> Result<Command, String> {
    use hermes_sandbox::network::PROXY_PORT;
    let mut policy = policy.clone();
    policy.state_dirs.push(data_dir.to_path_buf());
    argv.insert(
        1,
        format!("--proxy-server=http://127.0.0.1:{PROXY_PORT}").into(),
    );
    argv.insert(2, "--proxy-bypass-list=<-loopback>".into());
    let wrapped = policy
        .wrap(
            &argv,
            data_dir,
            hermes_sandbox::WrapOptions {
                new_session: false,
                tty: None,
                proxied: true,
            },
        )
        .map_err(|e| e.to_string())?;
    let mut command = Command::new(&wrapped[0]);
    command
        .args(&wrapped[1..])
        .env_clear()
        .envs(hermes_sandbox::child_env(std::env::vars_os(), &[]))
        .env("HOME", data_dir)
        .env("TMPDIR", "/dev/shm")
        .env("XDG_CONFIG_HOME", data_dir.join("config"))
        .env("XDG_CACHE_HOME", data_dir.join("cache"))
        .current_dir(data_dir);
    hermes_sandbox::network::attach_judged(&mut command, requests.reach());
    Ok(command)
}

/// A sandboxed browser is started where the task's commands are, so it gets the same
/// Landlock scopes when a system bubblewrap sets up its sandbox.
fn spawn(mut command: Command, sandboxed: bool) -> std::io::Result<std::process::Child> {
    if sandboxed {
        hermes_sandbox::spawn_scoped(move || command.spawn())
    } else {
        command.spawn()
    }
}

fn hermes_sandbox_private_dir() -> Result<PathBuf, String> {
    hermes_sandbox::run_dir::private_dir("browser")
}

/// Whether a configured endpoint answers: `/json/version` for `http(s)://`, a TCP
/// connection for `ws(s)://`.
pub fn endpoint_answers(configured: &str, timeout: Duration) -> Result<(), String> {
    let configured = configured.trim();
    if configured.starts_with("ws://") || configured.starts_with("wss://") {
        let parsed = url::Url::parse(configured).map_err(|e| e.to_string())?;
        let port = parsed.port_or_known_default().unwrap_or(80);
        let host = parsed.host_str().unwrap_or_default();
        let address = std::net::ToSocketAddrs::to_socket_addrs(&(host, port))
            .map_err(|e| e.to_string())?
            .next()
            .ok_or_else(|| format!("{host} has no address"))?;
        return std::net::TcpStream::connect_timeout(&address, timeout)
            .map(drop)
            .map_err(|e| e.to_string());
    }
    resolve_cdp_url(configured, timeout).map(drop)
}

/// The WebSocket address of a configured endpoint: `ws://...` as given,
/// `http(s)://host:port` through its `/json/version`.
pub fn resolve_cdp_url(configured: &str, timeout: Duration) -> Result<String, String> {
    let configured = configured.trim();
    if configured.starts_with("ws://") || configured.starts_with("wss://") {
        return Ok(configured.to_string());
    }
    if !(configured.starts_with("http://") || configured.starts_with("https://")) {
        return Err(format!(
            "browser.cdp_url must be ws://, http:// or https://, not {configured}"
        ));
    }
    let version = format!("{}/json/version", configured.trim_end_matches('/'));
    let agent = hermes_net::operator_agent(timeout);
    let mut response = agent
        .get(&version)
        .call()
        .map_err(|e| format!("{version}: {e}"))?;
    let body: serde_json::Value = response
        .body_mut()
        .read_json()
        .map_err(|e| format!("{version} did not answer JSON: {e}"))?;
    body["webSocketDebuggerUrl"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("{version} names no webSocketDebuggerUrl"))
}
