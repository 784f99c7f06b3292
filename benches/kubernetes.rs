//! The kubernetes backend on the one-node test cluster (`test-peers/kubernetes/cluster.sh`,
//! binaries from `.ci/setup.d/80-kubernetes.sh`; needs root), each figure against a
//! baseline of the same run:
//!
//! - 20 tasks at once, 10 commands (`true`) each, through the terminal tool, against the
//!   same 200 commands through `kubectl exec POD -- bash -c true` on the same pods, 20
//!   at once;
//! - a task's first command (pod start) with a fresh pod, and with a pod claimed from a
//!   warm pool, against `kubectl exec` of `true` in a running pod.
//!
//! cargo bench --bench kubernetes

use hermes_runtime::{Registry, ToolCall, ToolContext};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TASKS: usize = 20;
const COMMANDS: usize = 10;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

struct Cluster(PathBuf);

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .arg("stop")
            .arg(&self.0)
            .status();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("test-peers/kubernetes/cluster.sh")
}

fn call(registry: &Registry, ctx: &ToolContext, command: &str) -> Value {
    let raw =
        registry.handle_function_call(&ToolCall::new("terminal", json!({"command": command})), ctx);
    let v: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(v["exit_code"], 0, "{v}");
    v
}

fn kubectl_exec(kubeconfig: &Path, pod: &str) {
    let ok = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["exec", pod, "--", "bash", "-c", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

fn main() {
    let dir = tempfile::TempDir::with_prefix("hk8s-bench-")
        .unwrap()
        .keep();
    let cluster = Cluster(dir.clone());
    let started = Command::new("bash")
        .arg(script())
        .arg("start")
        .arg(&dir)
        .status()
        .unwrap();
    assert!(
        started.success(),
        "the cluster did not start: run .ci/setup.d/80-kubernetes.sh (as root)"
    );
    let kubeconfig = dir.join("kubeconfig");
    let image = std::fs::read_to_string(dir.join("image"))
        .unwrap()
        .trim()
        .to_string();
    let config = |extra: &str| {
        format!(
            "terminal:\n  backend: kubernetes\n  kubernetes_kubeconfig: {}\n  kubernetes_image: {image}\n  \
             container_cpu: 0.05\n  container_memory: 64\n  container_disk: 128\n{extra}",
            kubeconfig.display()
        )
    };
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.yaml"), config("")).unwrap();
    let registry = Registry::with_home(&hermes_tools::CATALOG, home.path().to_path_buf());
    let contexts: Vec<ToolContext> = (0..TASKS)
        .map(|i| {
            ToolContext::builder()
                .task_id(format!("bench-{i}"))
                .hermes_home(home.path())
                .build()
        })
        .collect();

    // Pod start, fresh: the first command of each task, one task at a time.
    let mut fresh = Vec::new();
    for ctx in &contexts {
        let t = Instant::now();
        call(&registry, ctx, "true");
        fresh.push(t.elapsed());
    }

    // 20 tasks x 10 commands, all tasks at once.
    let t = Instant::now();
    std::thread::scope(|s| {
        for ctx in &contexts {
            let registry = &registry;
            s.spawn(move || {
                for _ in 0..COMMANDS {
                    call(registry, ctx, "true");
                }
            });
        }
    });
    let ours = t.elapsed();

    let list = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .args([
            "get",
            "pods",
            "-l",
            "app.kubernetes.io/managed-by=hermes-tools",
            "-o",
            "jsonpath={.items[*].metadata.name}",
        ])
        .output()
        .unwrap();
    let pods: Vec<String> = String::from_utf8_lossy(&list.stdout)
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    assert_eq!(pods.len(), TASKS);
    let t = Instant::now();
    std::thread::scope(|s| {
        for pod in &pods {
            let kubeconfig = &kubeconfig;
            s.spawn(move || {
                for _ in 0..COMMANDS {
                    kubectl_exec(kubeconfig, pod);
                }
            });
        }
    });
    let baseline = t.elapsed();
    let mut one_exec = Vec::new();
    for _ in 0..10 {
        let t = Instant::now();
        kubectl_exec(&kubeconfig, &pods[0]);
        one_exec.push(t.elapsed());
    }
    let one_exec = median(one_exec);
    for ctx in &contexts {
        hermes_tools::tools::terminal::cleanup_task(ctx.task_id());
    }

    // Pod start from a warm pool.
    let settings = hermes_kubernetes::Settings {
        kubeconfig: Some(kubeconfig.clone()),
        image: image.clone(),
        cpu: 0.05,
        memory_mb: 64,
        disk_mb: 128,
        ..Default::default()
    };
    let kube = hermes_kubernetes::Cluster::connect(&settings).unwrap();
    kube.ensure_pool(&settings, "bench", 5).unwrap();
    let warm_home = tempfile::tempdir().unwrap();
    std::fs::write(
        warm_home.path().join("config.yaml"),
        config("  kubernetes_warm_pool: bench\n"),
    )
    .unwrap();
    let warm_registry = Registry::with_home(&hermes_tools::CATALOG, warm_home.path().to_path_buf());
    let mut warm = Vec::new();
    for i in 0..5 {
        assert!(
            kube.wait_pool("bench", 1, Duration::from_secs(120)),
            "the pool did not fill"
        );
        let ctx = ToolContext::builder()
            .task_id(format!("warm-{i}"))
            .hermes_home(warm_home.path())
            .build();
        let t = Instant::now();
        call(&warm_registry, &ctx, "true");
        warm.push(t.elapsed());
        hermes_tools::tools::terminal::cleanup_task(ctx.task_id());
    }
    kube.delete_pool("bench");

    let per_ours = ours / (TASKS * COMMANDS) as u32;
    let per_base = baseline / (TASKS * COMMANDS) as u32;
    println!("{TASKS} tasks x {COMMANDS} commands at once: ours {:.0} ms ({:.1} ms per command), kubectl exec {:.0} ms ({:.1} ms per command): ours / kubectl = {:.2}x",
        ms(ours), ms(per_ours), ms(baseline), ms(per_base), ours.as_secs_f64() / baseline.as_secs_f64());
    let fresh = median(fresh);
    let warm = median(warm);
    println!("first command of a task (pod start), median: fresh pod {:.0} ms, warm pool {:.0} ms; warm / fresh = {:.2}x; one kubectl exec of true {:.0} ms: fresh / exec = {:.1}x, warm / exec = {:.1}x",
        ms(fresh), ms(warm), warm.as_secs_f64() / fresh.as_secs_f64(), ms(one_exec),
        fresh.as_secs_f64() / one_exec.as_secs_f64(), warm.as_secs_f64() / one_exec.as_secs_f64());
    drop(cluster);
}
