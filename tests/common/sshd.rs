//! A real sshd for the ssh backend tests: the test starts its own daemon on 127.0.0.1 on
//! a free port, with a host key, a user key and an sshd_config generated into a temp dir
//! (`UsePAM no`, `StrictModes no`, running as the current user). `.ci/setup.d/20-terminal.sh`
//! installs openssh-server; without `sshd` the tests FAIL instead of passing silently.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// A running sshd of the test's own on 127.0.0.1, killed on drop.
pub struct Sshd {
    child: Child,
    pub port: u16,
    /// Holds `user_key`, `known_hosts` and the daemon's files.
    pub dir: TempDir,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn find_sshd() -> PathBuf {
    for candidate in ["/usr/sbin/sshd", "/usr/local/sbin/sshd", "/sbin/sshd"] {
        if Path::new(candidate).is_file() {
            return PathBuf::from(candidate);
        }
    }
    panic!(
        "sshd was not found (looked in /usr/sbin, /usr/local/sbin, /sbin): run .ci/setup.d/20-terminal.sh \
         (installs openssh-server) before this test"
    );
}

fn keygen(path: &Path) {
    let status = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .stdin(Stdio::null())
        .status()
        .expect("ssh-keygen runs (openssh-client; see .ci/setup.d/20-terminal.sh)");
    assert!(status.success());
}

pub fn current_user() -> String {
    let out = Command::new("id").arg("-un").output().unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

pub fn start_sshd() -> Sshd {
    start_sshd_with("")
}

/// An sshd with `extra` lines appended to its configuration.
pub fn start_sshd_with(extra: &str) -> Sshd {
    let sshd = find_sshd();
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    keygen(&d.join("host_key"));
    keygen(&d.join("user_key"));
    std::fs::copy(d.join("user_key.pub"), d.join("authorized_keys")).unwrap();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let config = format!(
        "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nAuthorizedKeysFile {d}/authorized_keys\n\
         PidFile {d}/sshd.pid\nUsePAM no\nStrictModes no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n\
         PubkeyAuthentication yes\nPermitRootLogin prohibit-password\nMaxSessions 50\nMaxStartups 50\n{extra}",
        d = d.display()
    );
    std::fs::write(d.join("sshd_config"), config).unwrap();
    // Privilege separation directory (created by the setup script in CI).
    let _ = std::fs::create_dir_all("/run/sshd");
    let host_pub = std::fs::read_to_string(d.join("host_key.pub")).unwrap();
    let mut parts = host_pub.split_whitespace();
    let known = format!(
        "[127.0.0.1]:{port} {} {}\n",
        parts.next().unwrap(),
        parts.next().unwrap()
    );
    std::fs::write(d.join("known_hosts"), known).unwrap();
    let child = Command::new(&sshd)
        .args(["-D", "-e", "-f"])
        .arg(d.join("sshd_config"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(d.join("sshd.log")).unwrap())
        .spawn()
        .expect("sshd starts");
    let mut sshd = Sshd { child, port, dir };
    let start = Instant::now();
    loop {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            break;
        }
        if let Ok(Some(status)) = sshd.child.try_wait() {
            panic!(
                "sshd exited ({status}): {}",
                std::fs::read_to_string(sshd.dir.path().join("sshd.log")).unwrap_or_default()
            );
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "sshd did not listen on port {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    sshd
}
