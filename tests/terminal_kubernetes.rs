//! The `kubernetes` backend against a real one-node cluster: Kubernetes 1.20 built from
//! Debian's source by `.ci/setup.d/80-kubernetes.sh`, started here by
//! `test-peers/kubernetes/cluster.sh` (its own network namespace, certificates and
//! kubeconfig in a temp dir; stopped at exit). Every call goes through the binary
//! (`hermes-tools serve` or `hermes-tools call`); what the backend made is checked with
//! kubectl. Needs root (the cluster's namespaces and cgroups); without the cluster's
//! binaries this test FAILS, naming the setup script.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use tempfile::TempDir;

mod file_tools_env;
use file_tools_env::{Session, ToolCalls};

const SETUP: &str = ".ci/setup.d/80-kubernetes.sh";

struct Cluster {
    dir: PathBuf,
    kubeconfig: PathBuf,
    image: String,
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("test-peers/kubernetes/cluster.sh")
}

extern "C" fn stop_cluster() {
    if let Some(c) = CLUSTER.get() {
        let _ = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(&c.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&c.dir);
    }
}

static CLUSTER: OnceLock<Cluster> = OnceLock::new();

/// The cluster, started once per test binary and stopped at its exit.
fn cluster() -> &'static Cluster {
    CLUSTER.get_or_init(|| {
        // SAFETY: geteuid has no preconditions.
        let uid = unsafe { libc::geteuid() };
        assert_eq!(uid, 0, "the Kubernetes test cluster needs root");
        let dir = TempDir::with_prefix("hk8s-").unwrap().keep();
        // SAFETY: registering a plain extern "C" fn.
        unsafe {
            libc::atexit(stop_cluster);
        }
        let out = Command::new("bash")
            .arg(script())
            .arg("start")
            .arg(&dir)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "the test cluster did not start (run `bash {SETUP}` first):\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let image = std::fs::read_to_string(dir.join("image"))
            .unwrap()
            .trim()
            .to_string();
        Cluster {
            kubeconfig: dir.join("kubeconfig"),
            dir,
            image,
        }
    })
}

fn kubectl(args: &[&str]) -> String {
    let c = cluster();
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&c.kubeconfig)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn pods(selector: &str) -> Vec<Value> {
    let list: Value =
        serde_json::from_str(&kubectl(&["get", "pods", "-l", selector, "-o", "json"])).unwrap();
    list["items"].as_array().cloned().unwrap_or_default()
}

/// Waits (at most `limit`, a guard against hangs) until no pod has `selector`.
fn no_pods_left(selector: &str, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if pods(selector).is_empty() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    false
}

/// A Hermes home whose config.yaml runs the terminal on the cluster.
fn home(extra: &str) -> TempDir {
    let c = cluster();
    let home = TempDir::new().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        format!(
            "terminal:\n  backend: kubernetes\n  kubernetes_kubeconfig: {}\n  kubernetes_image: {}\n  \
             container_cpu: 0.05\n  container_memory: 128\n  container_disk: 256\n  kubernetes_pod_lifetime: 900\n{extra}",
            c.kubeconfig.display(),
            c.image
        ),
    )
    .unwrap();
    home
}

fn owner_of(home: &Path) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let config = hermes_environments::config::TerminalConfig::load(home).unwrap();
    assert_eq!(config.backend, "kubernetes");
    let _ = host;
    hermes_environments::env::kubernetes::owner_id(&config)
}

fn processes_in_pod(pod: &str) -> String {
    kubectl(&[
        "exec",
        pod,
        "--",
        "bash",
        "-c",
        "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done",
    ])
}

#[test]
fn commands_state_timeouts_and_background_processes_through_serve() {
    let home = home("");
    let cwd = TempDir::new().unwrap();
    let task = format!("k8s-main-{}", std::process::id());
    let owner = owner_of(home.path());
    let mut s = Session::start(home.path(), cwd.path(), &task);

    let r = s.call(
        "terminal",
        json!({"command": "echo in-pod; cat /etc/hostname"}),
    );
    assert!(
        r["output"].as_str().unwrap().starts_with("in-pod\nhermes-"),
        "{r}"
    );
    assert_eq!(r["cwd"], "/root", "{r}");
    let r = s.call("terminal", json!({"command": "echo before; exit 4"}));
    assert_eq!(r["exit_code"], 4, "{r}");
    assert_eq!(r["output"], "before", "{r}");

    // One pod for the task, labelled, locked down, requests = limits, a deadline.
    let found = pods(&format!("hermes-tools/owner={owner}"));
    assert_eq!(found.len(), 1, "{found:?}");
    let pod = &found[0];
    let name = pod["metadata"]["name"].as_str().unwrap().to_string();
    assert_eq!(
        pod["metadata"]["labels"]["hermes-tools/task"],
        task.as_str()
    );
    assert_eq!(
        pod["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "hermes-tools"
    );
    assert_eq!(pod["spec"]["automountServiceAccountToken"], false);
    assert_eq!(pod["spec"]["enableServiceLinks"], false);
    assert_eq!(pod["spec"]["activeDeadlineSeconds"], 900);
    assert_eq!(
        pod["spec"]["securityContext"]["seccompProfile"]["type"],
        "RuntimeDefault"
    );
    let container = &pod["spec"]["containers"][0];
    assert_eq!(
        container["securityContext"]["allowPrivilegeEscalation"],
        false
    );
    assert_eq!(
        container["securityContext"]["capabilities"]["drop"],
        json!(["ALL"])
    );
    assert_eq!(
        container["resources"]["limits"],
        json!({"cpu": "50m", "memory": "128Mi", "ephemeral-storage": "256Mi"})
    );
    assert_eq!(
        container["resources"]["requests"],
        container["resources"]["limits"]
    );
    // No service account token inside; no capabilities; the memory limit applies.
    let r = s.call(
        "terminal",
        json!({"command": "ls /var/run/secrets 2>&1 | head -1; grep CapEff /proc/self/status; cat /sys/fs/cgroup/memory/memory.limit_in_bytes"}),
    );
    let out = r["output"].as_str().unwrap();
    assert!(out.contains("No such file"), "{r}");
    assert!(out.contains("CapEff:\t0000000000000000"), "{r}");
    assert!(out.ends_with(&(128u64 << 20).to_string()), "{r}");

    // Shell state carries over between commands.
    let r = s.call(
        "terminal",
        json!({"command": "mkdir -p /tmp/w && cd /tmp/w && export INSIDE=7"}),
    );
    assert_eq!(r["cwd"], "/tmp/w", "{r}");
    let r = s.call(
        "terminal",
        json!({"command": "pwd; echo $INSIDE; echo err >&2"}),
    );
    assert_eq!(r["output"], "/tmp/w\n7\nerr", "{r}");

    // A timeout kills the command's process group inside the pod.
    let r = s.call(
        "terminal",
        json!({"command": "sleep 4721 | sleep 4722", "timeout": 2}),
    );
    assert_eq!(r["exit_code"], 124, "{r}");
    let left = processes_in_pod(&name);
    assert!(
        !left.contains("sleep 472"),
        "the timed-out command survived in the pod:\n{left}"
    );

    // Background processes: output streams in while it runs, log, kill.
    let r = s.call(
        "terminal",
        json!({"command": "for i in $(seq 1 600); do echo tick-$i; sleep 0.1; done; sleep 4731", "background": true}),
    );
    let id = r["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"))
        .to_string();
    let start = Instant::now();
    let mut streamed = false;
    while start.elapsed() < Duration::from_secs(30) {
        let r = s.call("process", json!({"action": "poll", "session_id": id}));
        assert_eq!(r["status"], "running", "{r}");
        if r["output_preview"]
            .as_str()
            .unwrap_or("")
            .contains("tick-3")
        {
            streamed = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        streamed,
        "no output of the running background process arrived"
    );
    let r = s.call("process", json!({"action": "kill", "session_id": id}));
    assert!(r["error"].is_null(), "{r}");
    let r = s.call("process", json!({"action": "log", "session_id": id}));
    assert!(
        r["output"].as_str().unwrap().contains("tick-1\ntick-2"),
        "{r}"
    );
    let left = processes_in_pod(&name);
    assert!(
        !left.contains("seq 1 600") && !left.contains("sleep 4731"),
        "the killed process survived:\n{left}"
    );

    // Concurrent tasks: each its own pod, all at once.
    let ids: Vec<String> = (0..4)
        .map(|i| {
            s.send_as(
                &format!("{task}-par-{i}"),
                "terminal",
                json!({"command": format!("echo task-{i}; cat /etc/hostname")}),
            )
        })
        .collect();
    let answers = s.answers(&ids);
    let mut hosts = std::collections::HashSet::new();
    for (i, r) in answers.iter().enumerate() {
        let out = r["output"].as_str().unwrap_or_else(|| panic!("{r}"));
        assert!(out.starts_with(&format!("task-{i}\nhermes-")), "{r}");
        hosts.insert(out.lines().nth(1).unwrap().to_string());
    }
    assert_eq!(hosts.len(), 4, "{hosts:?}");
    assert_eq!(pods(&format!("hermes-tools/owner={owner}")).len(), 5);

    // The server's exit deletes every pod it made.
    s.finish();
    assert!(
        no_pods_left(
            &format!("hermes-tools/owner={owner}"),
            Duration::from_secs(60)
        ),
        "pods outlived the server"
    );
}

#[test]
fn file_tools_work_inside_the_pod() {
    let home = home("");
    let cwd = TempDir::new().unwrap();
    let task = format!("k8s-files-{}", std::process::id());
    let owner = owner_of(home.path());
    let mut s = Session::start(home.path(), cwd.path(), &task);
    let dir = format!("/root/hermes-files-{}", std::process::id());
    file_tools_env::exercise(&mut s, &dir, cwd.path());
    // A write larger than one command line carries: it travels in pieces.
    let big: String = (0..6000)
        .map(|i| format!("line {i:05} of a large file\n"))
        .collect();
    let r = s.call(
        "write_file",
        json!({"path": format!("{dir}/big.txt"), "content": big}),
    );
    assert_eq!(r["verified"], true, "{r}");
    let r = s.call(
        "terminal",
        json!({"command": format!("wc -c < {dir}/big.txt; sed -n '1p;3000p;$p' {dir}/big.txt")}),
    );
    assert_eq!(
        r["output"],
        format!(
            "{}\nline 00000 of a large file\nline 02999 of a large file\nline 05999 of a large file",
            big.len()
        ),
        "{r}"
    );
    s.finish();
    assert!(!Path::new(&dir).exists(), "{dir} appeared on this machine");
    assert!(no_pods_left(
        &format!("hermes-tools/owner={owner}"),
        Duration::from_secs(60)
    ));
}

#[test]
fn execute_code_runs_in_the_pod() {
    let home = home("");
    let cwd = TempDir::new().unwrap();
    let mut s = Session::start(home.path(), cwd.path(), "k8s-code");
    let code = "import os\nfrom hermes_tools import terminal\n\
                open('made-by-script.txt', 'w').write('written by the script\\n')\n\
                print(os.getcwd(), open('/etc/hostname').read().startswith('hermes-'))\n\
                print(terminal('cat made-by-script.txt')['output'])\n";
    let r = s.call("execute_code", json!({"code": code}));
    assert_eq!(r["status"], "success", "{r}");
    assert_eq!(r["output"], "/root True\nwritten by the script\n", "{r}");
    let r = s.call(
        "terminal",
        json!({"command": "cat /root/made-by-script.txt"}),
    );
    assert_eq!(r["output"], "written by the script", "{r}");
    assert!(!cwd.path().join("made-by-script.txt").exists());
    s.finish();
}

/// The official Python client (`kubernetes` on PyPI, in the test venv) reads the pod the
/// backend made and runs a command in it: the same lockdown, the same exit code.
#[test]
fn the_python_client_agrees() {
    let c = cluster();
    let python = hermes_test_peers::python_with(&["kubernetes"]);
    let home = home("");
    let owner = owner_of(home.path());
    let cwd = TempDir::new().unwrap();
    let mut s = Session::start(home.path(), cwd.path(), "k8s-python");
    let ours = s.call("terminal", json!({"command": "echo seven; exit 7"}));
    assert_eq!(ours["exit_code"], 7, "{ours}");
    let check = format!(
        r#"
import json, kubernetes
from kubernetes.stream import stream
kubernetes.config.load_kube_config(config_file={config:?})
core = kubernetes.client.CoreV1Api()
pods = core.list_namespaced_pod("default", label_selector="hermes-tools/owner={owner}").items
assert len(pods) == 1, pods
pod = pods[0]
c = pod.spec.containers[0]
run = stream(core.connect_get_namespaced_pod_exec, pod.metadata.name, "default",
             command=["bash", "-c", "echo seven; exit 7"], stderr=True, stdin=False, stdout=True, tty=False,
             _preload_content=False)
run.run_forever(timeout=60)
print(json.dumps({{
    "token": pod.spec.automount_service_account_token,
    "links": pod.spec.enable_service_links,
    "escalation": c.security_context.allow_privilege_escalation,
    "drop": c.security_context.capabilities.drop,
    "seccomp": pod.spec.security_context.seccomp_profile.type,
    "same_limits": c.resources.limits == c.resources.requests,
    "output": run.read_stdout(),
    "exit": run.returncode,
}}))
"#,
        config = c.kubeconfig.display().to_string(),
    );
    let out = Command::new(python)
        .arg("-c")
        .arg(&check)
        // Not the checkout, whose kubernetes/ folder would pass for the package.
        .current_dir(cwd.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        seen,
        json!({"token": false, "links": false, "escalation": false, "drop": ["ALL"], "seccomp": "RuntimeDefault",
               "same_limits": true, "output": "seven\n", "exit": ours["exit_code"]}),
    );
    s.finish();
}

#[test]
fn one_call_through_the_binary_creates_and_deletes_its_pod() {
    let home = home("");
    let owner = owner_of(home.path());
    let out = Command::new(env!("CARGO_BIN_EXE_hermes-tools"))
        .args([
            "call",
            "terminal",
            r#"{"command": "echo from-call; nproc"}"#,
            "--task-id",
            "k8s-call",
        ])
        .env("HERMES_HOME", home.path())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let r: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    assert_eq!(r["exit_code"], 0, "{r}");
    assert!(
        r["output"].as_str().unwrap().starts_with("from-call\n"),
        "{r}"
    );
    assert!(no_pods_left(
        &format!("hermes-tools/owner={owner}"),
        Duration::from_secs(60)
    ));
}

#[test]
fn scheduling_and_image_failures_are_clear_errors() {
    let home_big = home("  kubernetes_start_timeout: 60\n");
    std::fs::write(
        home_big.path().join("config.yaml"),
        std::fs::read_to_string(home_big.path().join("config.yaml"))
            .unwrap()
            .replace("container_cpu: 0.05", "container_cpu: 64"),
    )
    .unwrap();
    let owner = owner_of(home_big.path());
    let cwd = TempDir::new().unwrap();
    let mut s = Session::start(home_big.path(), cwd.path(), "k8s-unschedulable");
    let r = s.call("terminal", json!({"command": "true"}));
    let text = r.to_string();
    assert!(
        text.contains("cannot be scheduled") && text.contains("Insufficient cpu"),
        "{r}"
    );
    assert!(
        text.contains("container_cpu"),
        "the hint names the setting: {r}"
    );
    s.finish();
    assert!(no_pods_left(
        &format!("hermes-tools/owner={owner}"),
        Duration::from_secs(60)
    ));

    let home_img = home(
        "  kubernetes_image: hermes.invalid/no-such-image:1\n  kubernetes_start_timeout: 90\n",
    );
    let mut s = Session::start(home_img.path(), cwd.path(), "k8s-badimage");
    let r = s.call("terminal", json!({"command": "true"}));
    let text = r.to_string();
    assert!(
        text.contains("ErrImagePull") || text.contains("ImagePullBackOff"),
        "{r}"
    );
    assert!(text.contains("kubernetes_image"), "{r}");
    s.finish();
}

#[test]
fn availability_says_what_is_missing() {
    let c = cluster();
    let check = |config: &str| -> String {
        let home = TempDir::new().unwrap();
        std::fs::write(home.path().join("config.yaml"), config).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_hermes-tools"))
            .args(["call", "terminal", r#"{"command": "true"}"#])
            .env("HERMES_HOME", home.path())
            .env("HOME", home.path())
            .env_remove("KUBECONFIG")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let none = check("terminal:\n  backend: kubernetes\n");
    assert!(
        none.contains("no Kubernetes configuration: KUBECONFIG is not set"),
        "{none}"
    );
    let forbidden = check(&format!(
        "terminal:\n  backend: kubernetes\n  kubernetes_kubeconfig: {}\n",
        c.dir.join("kubeconfig-restricted").display()
    ));
    assert!(
        forbidden.contains("forbidden: this Kubernetes identity may not create pods"),
        "{forbidden}"
    );
    // The same cluster's credentials against a port where nothing listens.
    let unreachable_config = c.dir.join("kubeconfig-unreachable");
    let text = std::fs::read_to_string(&c.kubeconfig).unwrap();
    let node_ip = std::fs::read_to_string(c.dir.join("node-ip")).unwrap();
    std::fs::write(
        &unreachable_config,
        text.replace(
            &format!("{}:6443", node_ip.trim()),
            &format!("{}:1", node_ip.trim()),
        ),
    )
    .unwrap();
    let unreachable = check(&format!(
        "terminal:\n  backend: kubernetes\n  kubernetes_kubeconfig: {}\n",
        unreachable_config.display()
    ));
    assert!(
        unreachable.contains("the Kubernetes API is unreachable"),
        "{unreachable}"
    );
    let bad = check("terminal:\n  backend: kubernetes\n  kubernetes_tolerations: 3\n");
    assert!(
        bad.contains("terminal.kubernetes_tolerations must be a list"),
        "{bad}"
    );
}

#[test]
fn a_killed_servers_pods_are_swept_by_the_next() {
    let home = home("");
    let owner = owner_of(home.path());
    let cwd = TempDir::new().unwrap();
    let mut first = Command::new(env!("CARGO_BIN_EXE_hermes-tools"))
        .arg("serve")
        .env("HERMES_HOME", home.path())
        .current_dir(cwd.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    {
        use std::io::{BufRead, Write};
        let mut stdin = first.stdin.take().unwrap();
        let call = json!({"id": "c1", "type": "function", "function": {"name": "terminal", "arguments": "{\"command\": \"echo up\"}"}, "task_id": "k8s-orphan"});
        writeln!(stdin, "{call}").unwrap();
        let mut line = String::new();
        std::io::BufReader::new(first.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert!(line.contains("up"), "{line}");
        // SIGKILL: no exit handler runs, the pod stays behind.
        first.kill().unwrap();
        first.wait().unwrap();
        drop(stdin);
    }
    let left = pods(&format!("hermes-tools/owner={owner}"));
    assert_eq!(
        left.len(),
        1,
        "the killed server's pod should still be there"
    );
    // The next server of the same home sweeps it when it first needs the cluster.
    let mut s = Session::start(home.path(), cwd.path(), "k8s-after");
    let r = s.call("terminal", json!({"command": "echo again"}));
    assert_eq!(r["output"], "again", "{r}");
    let orphan = left[0]["metadata"]["name"].as_str().unwrap().to_string();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60)
        && pods(&format!("hermes-tools/owner={owner}"))
            .iter()
            .any(|p| p["metadata"]["name"] == orphan.as_str())
    {
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(
        !pods(&format!("hermes-tools/owner={owner}"))
            .iter()
            .any(|p| p["metadata"]["name"] == orphan.as_str()),
        "the orphan {orphan} was not swept"
    );
    s.finish();
}

#[test]
fn warm_pool_claims_never_collide() {
    use hermes_kubernetes::{Cluster as Kube, Settings};
    let c = cluster();
    let settings = Settings {
        kubeconfig: Some(c.kubeconfig.clone()),
        image: c.image.clone(),
        cpu: 0.02,
        memory_mb: 64,
        ..Settings::default()
    };
    let kube = Kube::connect(&settings).unwrap();
    let pool = format!("race{}", std::process::id());
    kube.ensure_pool(&settings, &pool, 3).unwrap();
    assert!(
        kube.wait_pool(&pool, 3, Duration::from_secs(90)),
        "the pool did not fill"
    );
    // Eight claimers at once for three idle pods: each pod goes to one claimer.
    let barrier = std::sync::Arc::new(std::sync::Barrier::new(8));
    let handles: Vec<_> = (0..8)
        .map(|i| {
            let kube = kube.clone();
            let pool = pool.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                kube.claim_warm(&pool, &format!("racer-{i}"), &format!("racer{i}"))
                    .unwrap()
            })
        })
        .collect();
    let claimed: Vec<String> = handles
        .into_iter()
        .filter_map(|h| h.join().unwrap())
        .collect();
    let distinct: std::collections::HashSet<&String> = claimed.iter().collect();
    assert_eq!(
        distinct.len(),
        claimed.len(),
        "a pod was claimed twice: {claimed:?}"
    );
    assert!(claimed.len() >= 3, "{claimed:?}");
    for name in &claimed {
        let pod: Value =
            serde_json::from_str(&kubectl(&["get", "pod", name, "-o", "json"])).unwrap();
        let racer = pod["metadata"]["labels"]["hermes-tools/claimed"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(
            pod["metadata"]["labels"]["hermes-tools/owner"],
            racer.as_str()
        );
        assert!(
            pod["metadata"]["labels"]["hermes-tools/pool"].is_null(),
            "{pod}"
        );
    }
    // The ReplicaSet let go of them and starts replacements.
    assert!(
        kube.wait_pool(&pool, 3, Duration::from_secs(90)),
        "the pool did not refill"
    );

    // Through the binary: a task claims a pool pod instead of creating one.
    let home = home(&format!("  kubernetes_warm_pool: {pool}\n"));
    let owner = owner_of(home.path());
    let cwd = TempDir::new().unwrap();
    let mut s = Session::start(home.path(), cwd.path(), "k8s-warm");
    let r = s.call("terminal", json!({"command": "echo warm"}));
    assert_eq!(r["output"], "warm", "{r}");
    let mine = pods(&format!("hermes-tools/owner={owner}"));
    assert_eq!(mine.len(), 1);
    assert_eq!(
        mine[0]["metadata"]["labels"]["hermes-tools/claimed"],
        owner.as_str()
    );
    s.finish();
    assert!(no_pods_left(
        &format!("hermes-tools/owner={owner}"),
        Duration::from_secs(60)
    ));
    for name in &claimed {
        kube.delete_pod(name);
    }
    kube.delete_pool(&pool);
}

/// Against a real, current cluster (`KUBECONFIG` set; the image needs bash and sleep):
/// `cargo test --test terminal_kubernetes -- --ignored live_kubernetes`.
#[test]
#[ignore]
fn live_kubernetes() {
    let kubeconfig = std::env::var("KUBECONFIG").expect("KUBECONFIG names the cluster");
    let image = std::env::var("HERMES_LIVE_KUBERNETES_IMAGE")
        .unwrap_or_else(|_| "debian:stable-slim".into());
    let home = TempDir::new().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        format!(
            "terminal:\n  backend: kubernetes\n  kubernetes_kubeconfig: {kubeconfig}\n  kubernetes_image: {image}\n  \
             container_cpu: 0.25\n  container_memory: 256\n  container_disk: 1024\n  kubernetes_start_timeout: 300\n"
        ),
    )
    .unwrap();
    let cwd = TempDir::new().unwrap();
    let mut s = Session::start(home.path(), cwd.path(), "k8s-live");
    let r = s.call("terminal", json!({"command": "echo live; exit 3"}));
    assert_eq!(r["exit_code"], 3, "{r}");
    assert_eq!(r["output"], "live", "{r}");
    let r = s.call("terminal", json!({"command": "sleep 4741", "timeout": 2}));
    assert_eq!(r["exit_code"], 124, "{r}");
    let r = s.call(
        "terminal",
        json!({"command": "ps -eo args 2>/dev/null || cat /proc/[0-9]*/cmdline"}),
    );
    assert!(!r["output"].as_str().unwrap().contains("4741"), "{r}");
    file_tools_env::exercise(&mut s, "/tmp/hermes-live-files", cwd.path());
    s.finish();
}

/// The v5 exec protocol (`v5.channel.k8s.io`, Kubernetes 1.30 and later; the 1.20
/// cluster above speaks v4 only) against tests/fakes/exec_v5.py, a strict fake written
/// from the protocol's definition that kubectl 1.32 passes too.
#[test]
fn exec_over_the_v5_protocol() {
    let dir = TempDir::new().unwrap();
    let portfile = dir.path().join("port");
    let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fakes/exec_v5.py");
    let mut server = Command::new("python3")
        .arg(&fake)
        .arg(&portfile)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !portfile.exists() && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let port = std::fs::read_to_string(&portfile).unwrap();
    let kubeconfig = dir.path().join("kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters: [{{name: f, cluster: {{server: \"http://127.0.0.1:{port}\"}}}}]\n\
             users: [{{name: u, user: {{token: fake}}}}]\ncontexts: [{{name: f, context: {{cluster: f, user: u, namespace: default}}}}]\n\
             current-context: f\n"
        ),
    )
    .unwrap();
    let log = || -> Vec<Value> {
        std::fs::read_to_string(format!("{}.log", portfile.display()))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };

    // kubectl 1.32 against the fake: stdin ends with v5's close signal, output whole.
    let mut child = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args(["exec", "-i", "p1", "--", "cat"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"through v5\n")
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "through v5\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let entries = log();
    assert_eq!(entries[0]["stdin_closed_by_v5_signal"], true, "{entries:?}");

    // Ours: output of both streams and the exit code from the status channel.
    let settings = hermes_kubernetes::Settings {
        kubeconfig: Some(kubeconfig.clone()),
        ..Default::default()
    };
    let kube = hermes_kubernetes::Cluster::connect(&settings).unwrap();
    let argv = ["bash", "-c", "echo out; sleep 0.2; echo err >&2; exit 5"]
        .map(String::from)
        .to_vec();
    let Ok((output, code)) = kube.exec_output("p1", argv, Duration::from_secs(30)) else {
        panic!("exec failed");
    };
    assert_eq!(code, 5);
    assert_eq!(String::from_utf8_lossy(&output), "out\nerr\n");
    let argv = ["bash", "-c", "true"].map(String::from).to_vec();
    assert!(matches!(
        kube.exec_output("p1", argv, Duration::from_secs(30)),
        Ok((_, 0))
    ));
    let entries = log();
    assert_eq!(entries.len(), 3, "{entries:?}");
    assert!(entries.iter().all(|e| e["protocol"] == "v5.channel.k8s.io"));
    let _ = server.kill();
    let _ = server.wait();
}
