//! Helpers shared by the terminal backend tests.

use std::path::Path;
use std::process::{Command, Stdio};

/// Where `program` is on PATH.
pub fn which(program: &str) -> Option<String> {
    let out = Command::new("sh").arg("-c").arg(format!("command -v {program}")).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// A minimal root file system made of the host's `binaries` and the libraries they
/// link, for container and sandbox images (no registry is reachable here).
pub fn build_rootfs(root: &Path, binaries: &[&str]) {
    let script = format!(
        r#"set -e
mkdir -p {r}/bin {r}/tmp {r}/root {r}/etc
chmod 1777 {r}/tmp
for b in {list}; do
  p=$(type -P $b)
  cp "$p" {r}/bin/
  for l in $(ldd "$p" | grep -o '/[^ ]*'); do mkdir -p {r}$(dirname $l); cp -n $l {r}$l; done
done
echo 'root:x:0:0:root:/root:/bin/bash' > {r}/etc/passwd
"#,
        r = root.display(),
        list = binaries.join(" "),
    );
    let out = Command::new("bash").arg("-c").arg(&script).stdin(Stdio::null()).output().unwrap();
    assert!(out.status.success(), "building the root file system failed: {}", String::from_utf8_lossy(&out.stderr));
}

/// The lines a child writes to `stdout`, read on a thread of their own.
#[allow(dead_code)] // not every test binary that includes this module serves lines
pub fn line_channel(stdout: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<String> {
    use std::io::BufRead;
    let (sender, lines) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    lines
}
