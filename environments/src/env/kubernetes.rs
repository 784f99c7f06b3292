//! The `kubernetes` backend: one Pod per task (or one claimed from a warm pool), each
//! command through the `pods/exec` subresource as `bash -c '<script>'`, like the ssh and
//! docker backends: the same wrapper runs the script as a process group whose pid is
//! written to a file, so a timeout or a cancellation kills the whole group with a second
//! exec (closing the connection alone would leave it running). The Kubernetes client is
//! the `hermes-kubernetes` crate.

use super::{remote_kill_script, remote_wrap, sh_quote, EnvError, Environment, ReadEvent, Running};
use crate::config::TerminalConfig;
use crate::output::{random_hex, run_id};
use base64::Engine;
use hermes_kubernetes::{Cluster, ExecError, ExecEvent, Failure, Settings};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A command line travels in the exec request's URL, which the HTTP stack bounds at
/// 64 KiB: stdin whose encoding fits this many bytes rides in it, larger input is
/// written to a file in the pod first, in pieces of `UPLOAD_PIECE` bytes.
const INLINE_STDIN: usize = 52 * 1024;
const UPLOAD_PIECE: usize = 24 * 1024;
/// Longest wait for a helper exec (upload, kill, fetch).
const HELPER_TIMEOUT: Duration = Duration::from_secs(60);

pub struct KubernetesEnv {
    cluster: Cluster,
    settings: Settings,
    task_id: String,
    owner: String,
    pod: Mutex<String>,
    counter: AtomicU64,
    recreated: AtomicBool,
}

fn failure(f: Failure) -> EnvError {
    let mut e = EnvError::new(f.reason);
    e.retry_hint = f.hint;
    e
}

/// This server's owner id: the host and `HERMES_HOME` it runs with, hashed into a
/// label value, so a restarted server finds the pods its predecessor left behind.
pub fn owner_id(config: &TerminalConfig) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let text = format!("{}|{}", host.trim(), config.hermes_home.display());
    // FNV-1a: stable across builds, unlike the standard library's hasher.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("h{hash:016x}")
}

/// Clients by connection settings, and whether the API was found usable (cached for a
/// minute, so the availability check of every call does not ask the API each time).
struct Known {
    cluster: Cluster,
    checked: Option<Instant>,
}

fn known() -> &'static Mutex<HashMap<String, Known>> {
    static KNOWN: OnceLock<Mutex<HashMap<String, Known>>> = OnceLock::new();
    KNOWN.get_or_init(Default::default)
}

fn connection_key(s: &Settings) -> String {
    format!(
        "{:?}|{:?}|{:?}|{:?}",
        s.kubeconfig,
        s.context,
        s.namespace,
        std::env::var_os("KUBECONFIG")
    )
}

fn cluster_for(settings: &Settings) -> Result<Cluster, Failure> {
    let key = connection_key(settings);
    if let Some(k) = known().lock().unwrap_or_else(|p| p.into_inner()).get(&key) {
        return Ok(k.cluster.clone());
    }
    let cluster = Cluster::connect(settings)?;
    known().lock().unwrap_or_else(|p| p.into_inner()).insert(
        key,
        Known {
            cluster: cluster.clone(),
            checked: None,
        },
    );
    Ok(cluster)
}

/// What is missing: no configuration, an unreachable API, or a forbidden identity.
pub fn availability(config: &TerminalConfig) -> Option<String> {
    let settings = &config.kubernetes;
    if let Err(e) = &config.kubernetes_error {
        return Some(e.clone());
    }
    let cluster = match cluster_for(settings) {
        Ok(c) => c,
        Err(f) => {
            return Some(match f.hint {
                Some(h) => format!("{} ({h})", f.reason),
                None => f.reason,
            })
        }
    };
    let key = connection_key(settings);
    let fresh = known()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&key)
        .and_then(|k| k.checked)
        .is_some_and(|t| t.elapsed() < Duration::from_secs(60));
    if fresh {
        return None;
    }
    let problem = cluster.probe();
    if problem.is_none() {
        if let Some(k) = known()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(&key)
        {
            k.checked = Some(Instant::now());
        }
    }
    problem
}

/// Sweeps this owner's orphaned pods once per process, in the background.
fn sweep_once(cluster: &Cluster, owner: &str) {
    static SWEPT: OnceLock<()> = OnceLock::new();
    SWEPT.get_or_init(|| {
        let cluster = cluster.clone();
        let owner = owner.to_string();
        std::thread::Builder::new()
            .name("kubernetes-sweep".into())
            .spawn(move || {
                cluster.sweep_orphans(&owner);
            })
            .ok();
    });
}

impl KubernetesEnv {
    pub fn start(config: &TerminalConfig, task_id: &str) -> Result<KubernetesEnv, EnvError> {
        if let Err(e) = &config.kubernetes_error {
            return Err(EnvError::new(e.clone()));
        }
        let cluster = cluster_for(&config.kubernetes).map_err(failure)?;
        let owner = owner_id(config);
        sweep_once(&cluster, &owner);
        let env = KubernetesEnv {
            cluster,
            settings: config.kubernetes.clone(),
            task_id: task_id.to_string(),
            owner,
            pod: Mutex::new(String::new()),
            counter: AtomicU64::new(0),
            recreated: AtomicBool::new(false),
        };
        env.new_pod()?;
        Ok(env)
    }

    /// A pod for the task: claimed from the warm pool when one is configured and has
    /// an idle pod, else created.
    fn new_pod(&self) -> Result<(), EnvError> {
        if let Some(pool) = &self.settings.warm_pool {
            if let Some(name) = self
                .cluster
                .claim_warm(pool, &self.task_id, &self.owner)
                .map_err(failure)?
            {
                *self.pod.lock().unwrap_or_else(|p| p.into_inner()) = name;
                return Ok(());
            }
        }
        let name = format!("hermes-{}", random_hex(10));
        self.cluster
            .create_pod(&self.settings, &name, &self.task_id, &self.owner)
            .map_err(failure)?;
        *self.pod.lock().unwrap_or_else(|p| p.into_inner()) = name;
        Ok(())
    }

    /// The task's pod name.
    pub fn pod_name(&self) -> String {
        self.pod.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Starts `bash -c command`; a pod found gone is replaced once.
    fn exec(&self, command: &str) -> Result<hermes_kubernetes::Exec, EnvError> {
        let argv = vec!["bash".to_string(), "-c".to_string(), command.to_string()];
        match self.cluster.exec(&self.pod_name(), argv.clone()) {
            Ok(exec) => Ok(exec),
            Err(ExecError::Other(f)) => Err(failure(f)),
            Err(ExecError::PodGone(_)) => {
                self.cluster.delete_pod(&self.pod_name());
                self.new_pod()?;
                self.recreated.store(true, Ordering::SeqCst);
                self.cluster
                    .exec(&self.pod_name(), argv)
                    .map_err(|e| match e {
                        ExecError::Other(f) => failure(f),
                        ExecError::PodGone(reason) => EnvError::new(reason),
                    })
            }
        }
    }

    /// Runs a helper command to the end.
    fn helper(&self, command: &str) -> Result<(Vec<u8>, i32), EnvError> {
        let argv = vec!["bash".to_string(), "-c".to_string(), command.to_string()];
        self.cluster
            .exec_output(&self.pod_name(), argv, HELPER_TIMEOUT)
            .map_err(|e| match e {
                ExecError::Other(f) => failure(f),
                ExecError::PodGone(reason) => EnvError::new(reason),
            })
    }

    /// The shell text that gives the script `stdin`: small input is written out from
    /// the command line, larger input is written to a file in pieces first. Either way
    /// the command needs no stdin stream (whose end the v4 exec protocol cannot signal).
    fn stdin_prefix(&self, rid: &str, stdin: &[u8]) -> Result<String, EnvError> {
        let inline = stdin_source(stdin);
        if inline.len() <= INLINE_STDIN {
            return Ok(format!("exec < <({inline}); "));
        }
        let file = format!("/tmp/hermes-stdin-{rid}");
        for piece in stdin.chunks(UPLOAD_PIECE) {
            let (out, code) = self.helper(&format!(
                "umask 077; {} >> {}",
                stdin_source(piece),
                sh_quote(&file)
            ))?;
            if code != 0 {
                return Err(EnvError::new(format!(
                    "cannot write the command's input into the pod: {}",
                    String::from_utf8_lossy(&out).trim()
                )));
            }
        }
        Ok(format!("exec < {f} && rm -f {f}; ", f = sh_quote(&file)))
    }
}

/// A shell command printing `data`: text as it is (quoted), anything else through base64.
fn stdin_source(data: &[u8]) -> String {
    match std::str::from_utf8(data) {
        Ok(text) if !text.contains('\0') => format!("printf %s {}", sh_quote(text)),
        _ => format!(
            "printf %s {} | base64 -d",
            base64::engine::general_purpose::STANDARD.encode(data)
        ),
    }
}

/// A command running in the pod.
struct KubeRun {
    exec: hermes_kubernetes::Exec,
    exit: Option<i32>,
    eof: bool,
    kill: Option<Box<dyn FnOnce(Duration) + Send>>,
}

impl Running for KubeRun {
    fn pid(&self) -> Option<u32> {
        None
    }

    fn read(&mut self, wait: Duration) -> ReadEvent {
        if self.eof {
            return ReadEvent::Eof;
        }
        match self.exec.events.recv_timeout(wait) {
            Ok(ExecEvent::Data(d)) => ReadEvent::Data(d),
            Ok(ExecEvent::Exit(code)) => {
                self.exit = Some(code);
                self.eof = true;
                ReadEvent::Eof
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => ReadEvent::Idle,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                self.eof = true;
                self.exit.get_or_insert(-1);
                ReadEvent::Eof
            }
        }
    }

    fn try_wait(&mut self) -> Option<i32> {
        self.exit
    }

    fn wait_exit(&mut self, wait: Duration) -> Option<i32> {
        let deadline = Instant::now() + wait;
        while self.exit.is_none() && !self.eof {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            // Output still queued before the exit is dropped here: the caller saw the end
            // of the output already.
            let _ = self.read(left);
        }
        self.exit
    }

    fn kill(&mut self, grace: Duration) -> Vec<u32> {
        if let Some(kill) = self.kill.take() {
            kill(grace);
        }
        // The group is gone: the wrapper exits and the status arrives; give it a moment.
        let deadline = Instant::now() + Duration::from_secs(2);
        while self.exit.is_none() && !self.eof && Instant::now() < deadline {
            if let ReadEvent::Idle = self.read(Duration::from_millis(100)) {
                continue;
            }
        }
        self.exec.abort();
        if self.exit.is_none() {
            self.exit = Some(-15);
        }
        self.eof = true;
        Vec::new()
    }
}

impl Environment for KubernetesEnv {
    fn backend(&self) -> &'static str {
        "kubernetes"
    }

    fn run_bash(
        &self,
        script: &str,
        login: bool,
        stdin: Option<Vec<u8>>,
    ) -> Result<Box<dyn Running>, EnvError> {
        let rid = run_id(&self.counter);
        let prefix = match &stdin {
            Some(data) => self.stdin_prefix(&rid, data)?,
            None => String::new(),
        };
        let wrapped = format!("{prefix}{}", remote_wrap(script, login, "/tmp", &rid));
        let exec = self.exec(&wrapped)?;
        let cluster = self.cluster.clone();
        let pod = self.pod_name();
        let kill: Box<dyn FnOnce(Duration) + Send> = Box::new(move |grace: Duration| {
            let argv = vec![
                "bash".to_string(),
                "-c".to_string(),
                remote_kill_script("/tmp", &rid, grace),
            ];
            let _ = cluster.exec_output(&pod, argv, grace + HELPER_TIMEOUT);
        });
        Ok(Box::new(KubeRun {
            exec,
            exit: None,
            eof: false,
            kill: Some(kill),
        }))
    }

    fn temp_dir(&self) -> String {
        "/tmp".into()
    }

    fn default_cwd(&self) -> String {
        "~".into()
    }

    fn fetch_file(&self, path: &str, max_bytes: usize) -> Result<Vec<u8>, EnvError> {
        let (out, code) = self.helper(&format!(
            "head -c {max_bytes} -- {} | base64 -w0",
            sh_quote(path)
        ))?;
        if code != 0 {
            return Err(EnvError::new(format!("{path}: cannot read it in the pod")));
        }
        base64::engine::general_purpose::STANDARD
            .decode(String::from_utf8_lossy(&out).trim())
            .map_err(|e| EnvError::new(format!("{path}: {e}")))
    }

    fn cleanup(&self) {
        self.cluster.delete_pod(&self.pod_name());
    }

    fn stdin_in_command_line(&self) -> bool {
        true
    }

    fn has_host_access(&self) -> bool {
        false
    }

    fn take_recreated(&self) -> bool {
        self.recreated.swap(false, Ordering::SeqCst)
    }
}
