//! The Kubernetes side of the `kubernetes` terminal backend: connecting (kubeconfig or
//! in-cluster), one Pod per task (created, watched until Running, deleted), commands
//! through the `pods/exec` subresource with live output and exit codes, the sweep of
//! this server's orphaned pods, and warm pools (idle pods of a ReplicaSet claimed with
//! an optimistic-concurrency patch).
//!
//! Everything here is blocking for its callers: the client runs on a small Tokio
//! runtime of its own, so it works the same from a plain thread and from a thread of
//! another runtime. The shell side (wrapping a script, killing its process group, file
//! scripts) is the environment's, in `hermes-environments`.

use futures_util::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::authorization::v1::SelfSubjectAccessReview;
use k8s_openapi::api::core::v1::Pod;
pub use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status as ExecStatus;
use kube::api::{
    Api, AttachParams, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::OnceLock;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// The label every pod of this program carries.
pub const MANAGED_BY: (&str, &str) = ("app.kubernetes.io/managed-by", "hermes-tools");
/// The label naming the server (host and home) that owns a pod.
pub const OWNER_LABEL: &str = "hermes-tools/owner";
/// The label naming the task a pod serves.
pub const TASK_LABEL: &str = "hermes-tools/task";
/// The label of a warm pool's pods (its value is the pool's name).
pub const POOL_LABEL: &str = "hermes-tools/pool";
/// The label a claimed pool pod gets (its value is the claimer's owner id); a ReplicaSet
/// whose selector requires `hermes-tools/claimed` to be absent lets go of it.
pub const CLAIM_LABEL: &str = "hermes-tools/claimed";
/// Annotations: the pid and start time of the server process that created the pod.
const PID_ANNOTATION: &str = "hermes-tools/pid";
const START_ANNOTATION: &str = "hermes-tools/process-start";
/// The one container of a task pod.
pub const CONTAINER: &str = "sandbox";

/// The `terminal.kubernetes_*` settings (see docs/configuration.md).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Settings {
    /// A kubeconfig file (`terminal.kubernetes_kubeconfig`); else `KUBECONFIG`, else
    /// `~/.kube/config`, else the in-cluster service account.
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    /// Else the context's namespace, else `default`.
    pub namespace: Option<String>,
    pub image: String,
    pub runtime_class: Option<String>,
    pub cpu: f64,
    pub memory_mb: u64,
    pub disk_mb: u64,
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations as Kubernetes writes them (`key`, `operator`, `value`, `effect`).
    pub tolerations: Vec<Value>,
    pub image_pull_secret: Option<String>,
    /// `activeDeadlineSeconds` of a task pod: the server-side end of a forgotten pod.
    pub pod_lifetime_secs: u64,
    /// How long to wait for a new pod to run.
    pub start_timeout_secs: u64,
    /// The warm pool (a ReplicaSet's `hermes-tools/pool` label value) to claim pods from.
    pub warm_pool: Option<String>,
}

/// A failure with what to do about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub reason: String,
    pub hint: Option<String>,
}

impl Failure {
    fn new(reason: impl Into<String>) -> Self {
        Failure {
            reason: reason.into(),
            hint: None,
        }
    }
    fn hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

// ------------------------------------------------------------------ runtime

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        // Already set (by this or another client) is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("kubernetes-client")
            .enable_all()
            .build()
            .expect("a Tokio runtime for the Kubernetes client")
    })
}

/// Runs `fut` on the client's runtime and waits for it, from any thread.
fn block<T: Send + 'static>(fut: impl Future<Output = T> + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    runtime().spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv().expect("the Kubernetes client's runtime stopped")
}

// ------------------------------------------------------------------ connecting

/// Where the configuration comes from, or why there is none.
fn config_source(settings: &Settings) -> Result<Option<PathBuf>, Failure> {
    if let Some(path) = &settings.kubeconfig {
        if !path.is_file() {
            return Err(Failure::new(format!(
                "the kubeconfig {} (terminal.kubernetes_kubeconfig) does not exist",
                path.display()
            )));
        }
        return Ok(Some(path.clone()));
    }
    if let Some(list) = std::env::var_os("KUBECONFIG").filter(|v| !v.is_empty()) {
        let paths: Vec<PathBuf> = std::env::split_paths(&list).collect();
        if !paths.iter().any(|p| p.is_file()) {
            return Err(Failure::new(format!(
                "KUBECONFIG names {}, which does not exist",
                list.to_string_lossy()
            )));
        }
        return Ok(None);
    }
    let home_config = std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kube/config"));
    if home_config.as_ref().is_some_and(|p| p.is_file()) {
        return Ok(None);
    }
    if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() {
        return Ok(None);
    }
    Err(Failure::new(
        "no Kubernetes configuration: KUBECONFIG is not set, ~/.kube/config does not exist, \
         terminal.kubernetes_kubeconfig is not set, and this is not running inside a cluster",
    )
    .hint("point KUBECONFIG at a kubeconfig file (kubectl config view --raw shows yours)"))
}

async fn load_config(settings: &Settings) -> Result<Config, Failure> {
    let explicit = config_source(settings)?;
    let options = KubeConfigOptions {
        context: settings.context.clone(),
        cluster: None,
        user: None,
    };
    let loaded = match explicit {
        Some(path) => {
            let file = Kubeconfig::read_from(&path)
                .map_err(|e| Failure::new(format!("cannot read {}: {e}", path.display())))?;
            Config::from_custom_kubeconfig(file, &options)
                .await
                .map_err(|e| Failure::new(format!("kubeconfig {}: {e}", path.display())))
        }
        None if std::env::var_os("KUBECONFIG").is_some()
            || std::env::var_os("HOME")
                .map(|h| PathBuf::from(h).join(".kube/config"))
                .is_some_and(|p| p.is_file()) =>
        {
            Config::from_kubeconfig(&options)
                .await
                .map_err(|e| Failure::new(format!("kubeconfig: {e}")))
        }
        None => {
            Config::incluster().map_err(|e| Failure::new(format!("in-cluster configuration: {e}")))
        }
    };
    let mut config = loaded?;
    config.connect_timeout = Some(Duration::from_secs(10));
    config.read_timeout = None;
    Ok(config)
}

/// A connected client and the namespace task pods live in.
#[derive(Clone)]
pub struct Cluster {
    client: Client,
    pub namespace: String,
}

impl Cluster {
    /// Connects as `settings` say (no request is sent yet).
    pub fn connect(settings: &Settings) -> Result<Cluster, Failure> {
        let settings = settings.clone();
        block(async move {
            let config = load_config(&settings).await?;
            let namespace = settings
                .namespace
                .clone()
                .unwrap_or_else(|| config.default_namespace.clone());
            let client = Client::try_from(config)
                .map_err(|e| Failure::new(format!("cannot build the Kubernetes client: {e}")))?;
            Ok(Cluster { client, namespace })
        })
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Whether the API answers and lets this identity create pods and exec into them;
    /// `None` when it does, else what is wrong.
    pub fn probe(&self) -> Option<String> {
        let client = self.client.clone();
        let namespace = self.namespace.clone();
        block(async move {
            let version = tokio::time::timeout(Duration::from_secs(15), client.apiserver_version());
            match version.await {
                Err(_) => return Some("the Kubernetes API did not answer within 15 s".into()),
                Ok(Err(e)) => return Some(format!("the Kubernetes API is unreachable: {e}")),
                Ok(Ok(_)) => {}
            }
            let reviews: Api<SelfSubjectAccessReview> = Api::all(client);
            for (verb, sub) in [
                ("create", ""),
                ("create", "exec"),
                ("delete", ""),
                ("watch", ""),
            ] {
                let review: SelfSubjectAccessReview = match serde_json::from_value(json!({
                    "apiVersion": "authorization.k8s.io/v1",
                    "kind": "SelfSubjectAccessReview",
                    "spec": {"resourceAttributes": {
                        "namespace": namespace, "verb": verb, "resource": "pods", "subresource": sub,
                    }},
                })) {
                    Ok(r) => r,
                    Err(e) => return Some(format!("access review: {e}")),
                };
                match reviews.create(&PostParams::default(), &review).await {
                    Ok(answer) => {
                        if !answer.status.is_some_and(|s| s.allowed) {
                            let what = if sub.is_empty() {
                                "pods".to_string()
                            } else {
                                format!("pods/{sub}")
                            };
                            return Some(format!(
                                "forbidden: this Kubernetes identity may not {verb} {what} in namespace {namespace} \
                                 (see docs/backends.md for the Role the backend needs)"
                            ));
                        }
                    }
                    Err(e) => {
                        return Some(format!("the Kubernetes API refused an access review: {e}"))
                    }
                }
            }
            None
        })
    }
}

/// Why the API refused, in a sentence.
fn api_error(what: &str, e: kube::Error) -> Failure {
    match &e {
        kube::Error::Api(status) if status.is_forbidden() => {
            Failure::new(format!("{what}: forbidden: {}", status.message))
                .hint("the identity in the kubeconfig needs the Role described in docs/backends.md")
        }
        kube::Error::Api(status) => Failure::new(format!("{what}: {}", status.message)),
        _ => Failure::new(format!("{what}: {e}")),
    }
}

// ------------------------------------------------------------------ owner

/// The start time of this process (clock ticks since boot, field 22 of /proc/self/stat),
/// which together with the pid tells a live server from a recycled pid.
fn process_start(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    after.split_whitespace().nth(19).map(str::to_owned)
}

/// A label value for `text` (at most 63 characters of `[A-Za-z0-9-_.]`, alphanumeric at
/// both ends).
pub fn label_value(text: &str) -> String {
    let cleaned: String = text
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .take(63)
        .collect();
    cleaned
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_string()
}

// ------------------------------------------------------------------ pods

/// The Pod of a task: labelled, locked down, requests = limits, a deadline.
pub fn pod_manifest(settings: &Settings, name: &str, task_id: &str, owner: &str) -> Value {
    let mut resources = serde_json::Map::new();
    if settings.cpu > 0.0 {
        resources.insert(
            "cpu".into(),
            json!(format!("{}m", (settings.cpu * 1000.0).round() as u64)),
        );
    }
    if settings.memory_mb > 0 {
        resources.insert("memory".into(), json!(format!("{}Mi", settings.memory_mb)));
    }
    if settings.disk_mb > 0 {
        resources.insert(
            "ephemeral-storage".into(),
            json!(format!("{}Mi", settings.disk_mb)),
        );
    }
    let pid = std::process::id();
    let mut spec = json!({
        "restartPolicy": "Never",
        "automountServiceAccountToken": false,
        "enableServiceLinks": false,
        "terminationGracePeriodSeconds": 0,
        "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": CONTAINER,
            "image": settings.image,
            "command": ["sleep", "infinity"],
            "resources": {"requests": resources.clone(), "limits": resources},
            "securityContext": {
                "allowPrivilegeEscalation": false,
                "capabilities": {"drop": ["ALL"]},
            },
        }],
    });
    if settings.pod_lifetime_secs > 0 {
        spec["activeDeadlineSeconds"] = json!(settings.pod_lifetime_secs);
    }
    if let Some(class) = &settings.runtime_class {
        spec["runtimeClassName"] = json!(class);
    }
    if !settings.node_selector.is_empty() {
        spec["nodeSelector"] = json!(settings.node_selector);
    }
    if !settings.tolerations.is_empty() {
        spec["tolerations"] = json!(settings.tolerations);
    }
    if let Some(secret) = &settings.image_pull_secret {
        spec["imagePullSecrets"] = json!([{"name": secret}]);
    }
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {
                MANAGED_BY.0: MANAGED_BY.1,
                OWNER_LABEL: owner,
                TASK_LABEL: label_value(task_id),
            },
            "annotations": {
                PID_ANNOTATION: pid.to_string(),
                START_ANNOTATION: process_start(pid).unwrap_or_default(),
                "hermes-tools/task-id": task_id,
            },
        },
        "spec": spec,
    })
}

/// What stops a pod from running, when it will not (`None` while it may still).
fn blocked(pod: &Pod) -> Option<Failure> {
    let status = pod.status.as_ref()?;
    let phase = status.phase.as_deref().unwrap_or("");
    if phase == "Failed" || phase == "Succeeded" {
        let reason = status.reason.clone().unwrap_or_default();
        let message = status.message.clone().unwrap_or_default();
        let hint = match reason.as_str() {
            r if r.starts_with("OutOf") => "the node could not admit the pod's requests: lower container_cpu / container_memory or add capacity",
            "DeadlineExceeded" => "the pod reached its activeDeadlineSeconds (terminal.kubernetes_pod_lifetime)",
            _ => "kubectl describe pod shows the events of the pod",
        };
        return Some(
            Failure::new(
                format!("the pod {phase}: {reason} {message}")
                    .trim()
                    .to_string(),
            )
            .hint(hint),
        );
    }
    for cond in status.conditions.iter().flatten() {
        if cond.type_ == "PodScheduled"
            && cond.status == "False"
            && cond.reason.as_deref() == Some("Unschedulable")
        {
            return Some(
                Failure::new(format!(
                    "the pod cannot be scheduled: {}",
                    cond.message.as_deref().unwrap_or("no node fits")
                ))
                .hint(
                    "lower container_cpu / container_memory / container_disk, or check \
                     terminal.kubernetes_node_selector and kubernetes_tolerations against the nodes",
                ),
            );
        }
    }
    for cs in status.container_statuses.iter().flatten() {
        let Some(waiting) = cs.state.as_ref().and_then(|s| s.waiting.as_ref()) else {
            continue;
        };
        let reason = waiting.reason.as_deref().unwrap_or("");
        let image_trouble = matches!(
            reason,
            "ErrImagePull"
                | "ImagePullBackOff"
                | "InvalidImageName"
                | "ErrImageNeverPull"
                | "RegistryUnavailable"
        );
        if image_trouble
            || matches!(
                reason,
                "CreateContainerConfigError" | "CreateContainerError" | "RunContainerError"
            )
        {
            let hint = if image_trouble {
                "check terminal.kubernetes_image (or docker_image), that the nodes can pull it, and \
                 terminal.kubernetes_image_pull_secret for a private registry"
            } else {
                "the image must contain sleep and bash (see docs/backends.md)"
            };
            return Some(
                Failure::new(format!(
                    "the pod's container cannot start: {reason}: {}",
                    waiting.message.as_deref().unwrap_or("")
                ))
                .hint(hint),
            );
        }
    }
    None
}

fn is_running(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        && pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|all| {
                all.iter()
                    .all(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
            })
}

impl Cluster {
    /// Creates the pod of `task_id` and waits (with a watch) until it runs; on a failure
    /// the pod is deleted and the error says why.
    pub fn create_pod(
        &self,
        settings: &Settings,
        name: &str,
        task_id: &str,
        owner: &str,
    ) -> Result<(), Failure> {
        let manifest = pod_manifest(settings, name, task_id, owner);
        let pod: Pod = serde_json::from_value(manifest)
            .map_err(|e| Failure::new(format!("pod manifest: {e}")))?;
        let api = self.pods();
        let timeout = Duration::from_secs(settings.start_timeout_secs.max(1));
        let pod_name = name.to_string();
        let name = name.to_string();
        let namespace = self.namespace.clone();
        let result = block(async move {
            let created = api
                .create(&PostParams::default(), &pod)
                .await
                .map_err(|e| {
                    api_error(&format!("cannot create a pod in namespace {namespace}"), e)
                })?;
            let wait = wait_running(&api, &name, created);
            match tokio::time::timeout(timeout, wait).await {
                Ok(result) => result,
                Err(_) => {
                    let last = api.get(&name).await.ok();
                    let state = last
                        .as_ref()
                        .and_then(|p| p.status.as_ref())
                        .map(|s| {
                            let waiting: Vec<String> = s
                                .container_statuses
                                .iter()
                                .flatten()
                                .filter_map(|c| c.state.as_ref()?.waiting.as_ref()?.reason.clone())
                                .collect();
                            format!(
                                "phase {}{}",
                                s.phase.as_deref().unwrap_or("?"),
                                if waiting.is_empty() {
                                    String::new()
                                } else {
                                    format!(", container {}", waiting.join(", "))
                                }
                            )
                        })
                        .unwrap_or_default();
                    Err(Failure::new(format!(
                        "the pod {name} did not run within {} s ({state})",
                        timeout.as_secs()
                    ))
                    .hint("a large image may still be pulling: raise terminal.kubernetes_start_timeout, or use a warm pool"))
                }
            }
        });
        if result.is_err() {
            self.delete_pod(&pod_name);
        }
        result
    }

    /// Deletes a pod now (grace period 0); a pod already gone is fine.
    pub fn delete_pod(&self, name: &str) {
        if name.is_empty() {
            return;
        }
        let api = self.pods();
        let name = name.to_string();
        block(async move {
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                ..DeleteParams::default()
            };
            let _ = tokio::time::timeout(Duration::from_secs(20), api.delete(&name, &params)).await;
        });
    }

    /// Whether the pod exists and runs.
    pub fn pod_running(&self, name: &str) -> bool {
        let api = self.pods();
        let name = name.to_string();
        block(async move { matches!(api.get_opt(&name).await, Ok(Some(pod)) if is_running(&pod)) })
    }

    /// The names of the pods with `selector` (a label selector).
    pub fn pods_labelled(&self, selector: &str) -> Result<Vec<String>, Failure> {
        let api = self.pods();
        let selector = selector.to_string();
        block(async move {
            let list = api
                .list(&ListParams::default().labels(&selector))
                .await
                .map_err(|e| api_error("cannot list pods", e))?;
            Ok(list
                .items
                .into_iter()
                .filter_map(|p| p.metadata.name)
                .collect())
        })
    }

    /// Deletes `owner`'s pods whose server process is gone (a crash, a kill): the
    /// pid and process start time the pod was annotated with no longer match a live
    /// process on this host. Returns the names deleted.
    pub fn sweep_orphans(&self, owner: &str) -> Vec<String> {
        let api = self.pods();
        let selector = format!("{}={},{OWNER_LABEL}={owner}", MANAGED_BY.0, MANAGED_BY.1);
        let orphans: Vec<String> = block(async move {
            let Ok(list) = api.list(&ListParams::default().labels(&selector)).await else {
                return Vec::new();
            };
            list.items
                .into_iter()
                .filter(|pod| {
                    let notes = pod.metadata.annotations.clone().unwrap_or_default();
                    let pid: Option<u32> = notes.get(PID_ANNOTATION).and_then(|p| p.parse().ok());
                    let alive = pid.is_some_and(|pid| {
                        process_start(pid)
                            .is_some_and(|start| Some(&start) == notes.get(START_ANNOTATION))
                    });
                    !alive
                })
                .filter_map(|pod| pod.metadata.name)
                .collect()
        });
        for name in &orphans {
            self.delete_pod(name);
        }
        orphans
    }
}

async fn wait_running(api: &Api<Pod>, name: &str, created: Pod) -> Result<(), Failure> {
    let mut current = created;
    loop {
        if is_running(&current) {
            return Ok(());
        }
        if let Some(failure) = blocked(&current) {
            return Err(failure);
        }
        let version = current
            .metadata
            .resource_version
            .clone()
            .unwrap_or_else(|| "0".into());
        let params = WatchParams::default()
            .fields(&format!("metadata.name={name}"))
            .timeout(60)
            .disable_bookmarks();
        let stream = api
            .watch(&params, &version)
            .await
            .map_err(|e| api_error(&format!("cannot watch the pod {name}"), e))?;
        let mut stream = stream.boxed();
        let mut changed = false;
        while let Some(event) = stream
            .try_next()
            .await
            .map_err(|e| api_error("watching the pod", e))?
        {
            match event {
                WatchEvent::Added(pod) | WatchEvent::Modified(pod) => {
                    current = pod;
                    changed = true;
                    if is_running(&current) || blocked(&current).is_some() {
                        break;
                    }
                }
                WatchEvent::Deleted(_) => {
                    return Err(Failure::new(format!(
                        "the pod {name} was deleted while starting"
                    )));
                }
                WatchEvent::Bookmark(_) => {}
                WatchEvent::Error(status) => {
                    // An expired resource version (410): read the pod again and go on.
                    if status.code == 410 {
                        current = api
                            .get(name)
                            .await
                            .map_err(|e| api_error("reading the pod", e))?;
                        changed = true;
                        break;
                    }
                    return Err(Failure::new(format!(
                        "watching the pod {name}: {}",
                        status.message
                    )));
                }
            }
        }
        if !changed {
            current = api
                .get(name)
                .await
                .map_err(|e| api_error("reading the pod", e))?;
        }
    }
}

// ------------------------------------------------------------------ exec

/// Progress of a command run through `pods/exec`.
#[derive(Debug)]
pub enum ExecEvent {
    Data(Vec<u8>),
    /// The command ended with this code (`-1`: the stream ended without a status).
    Exit(i32),
}

/// A command started in a pod: its output and exit code arrive on `events`.
pub struct Exec {
    pub events: mpsc::Receiver<ExecEvent>,
    task: tokio::task::JoinHandle<()>,
}

impl Exec {
    /// Stops reading (the connection closes; the remote process is the caller's to kill).
    pub fn abort(&self) {
        self.task.abort();
    }
}

impl Drop for Exec {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Why an exec could not start.
#[derive(Debug)]
pub enum ExecError {
    /// The pod is gone or no longer runs.
    PodGone(String),
    Other(Failure),
}

/// The exit code in the status the server sends on the error channel at the end.
pub fn exit_code(status: Option<&ExecStatus>) -> Result<i32, String> {
    let Some(status) = status else {
        return Err("the exec stream ended without an exit status".into());
    };
    if status.status.as_deref() == Some("Success") {
        return Ok(0);
    }
    if status.reason.as_deref() == Some("NonZeroExitCode") {
        if let Some(code) = status
            .details
            .as_ref()
            .and_then(|d| d.causes.as_ref())
            .and_then(|causes| {
                causes
                    .iter()
                    .find(|c| c.reason.as_deref() == Some("ExitCode"))
            })
            .and_then(|c| c.message.as_deref()?.parse().ok())
        {
            return Ok(code);
        }
    }
    Err(status
        .message
        .clone()
        .unwrap_or_else(|| "the command failed".into()))
}

impl Cluster {
    /// Starts `argv` in the pod's container, stdout and stderr read as they come. The
    /// command gets no stdin: input travels in the command line or a file written
    /// first, so nothing depends on a protocol's half-close.
    pub fn exec(&self, pod: &str, argv: Vec<String>) -> Result<Exec, ExecError> {
        let api = self.pods();
        let pod = pod.to_string();
        let connect_api = api.clone();
        let connect_pod = pod.clone();
        let attached = block(async move {
            let params = AttachParams::default()
                .container(CONTAINER)
                .stdin(false)
                .stdout(true)
                .stderr(true)
                .max_stdout_buf_size(64 * 1024)
                .max_stderr_buf_size(64 * 1024);
            connect_api.exec(&connect_pod, argv, &params).await
        });
        let mut attached = match attached {
            Ok(a) => a,
            Err(e) => {
                if !self.pod_running(&pod) {
                    return Err(ExecError::PodGone(format!(
                        "the pod {pod} is gone or no longer runs ({e})"
                    )));
                }
                return Err(ExecError::Other(api_error(
                    &format!("exec in the pod {pod}"),
                    e,
                )));
            }
        };
        let (tx, rx) = mpsc::channel();
        let task = runtime().spawn(async move {
            let mut out = attached.stdout();
            let mut err = attached.stderr();
            let status = attached.take_status();
            let mut a = vec![0u8; 32 * 1024];
            let mut b = vec![0u8; 32 * 1024];
            while out.is_some() || err.is_some() {
                tokio::select! {
                    n = async { out.as_mut().unwrap().read(&mut a).await }, if out.is_some() => match n {
                        Ok(n) if n > 0 => { let _ = tx.send(ExecEvent::Data(a[..n].to_vec())); }
                        _ => out = None,
                    },
                    n = async { err.as_mut().unwrap().read(&mut b).await }, if err.is_some() => match n {
                        Ok(n) if n > 0 => { let _ = tx.send(ExecEvent::Data(b[..n].to_vec())); }
                        _ => err = None,
                    },
                }
            }
            let status = match status {
                Some(s) => tokio::time::timeout(Duration::from_secs(10), s).await.ok().flatten(),
                None => None,
            };
            let code = match exit_code(status.as_ref()) {
                Ok(code) => code,
                Err(message) => {
                    if !message.is_empty() {
                        let _ = tx.send(ExecEvent::Data(format!("\n[exec: {message}]\n").into_bytes()));
                    }
                    -1
                }
            };
            let _ = tx.send(ExecEvent::Exit(code));
            let _ = attached.join().await;
        });
        Ok(Exec { events: rx, task })
    }

    /// Runs `argv` to the end (at most `timeout`), returning its output and exit code.
    pub fn exec_output(
        &self,
        pod: &str,
        argv: Vec<String>,
        timeout: Duration,
    ) -> Result<(Vec<u8>, i32), ExecError> {
        let exec = self.exec(pod, argv)?;
        let deadline = std::time::Instant::now() + timeout;
        let mut out = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match exec.events.recv_timeout(left) {
                Ok(ExecEvent::Data(d)) => out.extend_from_slice(&d),
                Ok(ExecEvent::Exit(code)) => return Ok((out, code)),
                Err(_) => {
                    exec.abort();
                    return Err(ExecError::Other(Failure::new(format!(
                        "the command in the pod {pod} did not finish within {} s",
                        timeout.as_secs()
                    ))));
                }
            }
        }
    }
}

// ------------------------------------------------------------------ warm pools

impl Cluster {
    /// Claims a running, unclaimed pod of the warm pool `pool` for `task_id`: a patch
    /// that carries the pod's `resourceVersion`, so of two servers claiming one pod at
    /// once exactly one succeeds (the other gets 409 Conflict and tries the next pod).
    /// The claim relabels the pod out of its ReplicaSet (which then starts a fresh
    /// one) and adds this owner's labels. `None` when the pool has no idle pod.
    pub fn claim_warm(
        &self,
        pool: &str,
        task_id: &str,
        owner: &str,
    ) -> Result<Option<String>, Failure> {
        let api = self.pods();
        let selector = format!("{POOL_LABEL}={pool},!{CLAIM_LABEL}");
        let task = label_value(task_id);
        let owner = owner.to_string();
        let task_id = task_id.to_string();
        block(async move {
            let list = api
                .list(&ListParams::default().labels(&selector))
                .await
                .map_err(|e| api_error("cannot list the warm pool's pods", e))?;
            for pod in list
                .items
                .into_iter()
                .filter(|p| is_running(p) && p.metadata.deletion_timestamp.is_none())
            {
                let (Some(name), Some(version)) = (
                    pod.metadata.name.clone(),
                    pod.metadata.resource_version.clone(),
                ) else {
                    continue;
                };
                let pid = std::process::id();
                let patch = json!({
                    "metadata": {
                        "resourceVersion": version,
                        "labels": {
                            CLAIM_LABEL: owner,
                            POOL_LABEL: null,
                            MANAGED_BY.0: MANAGED_BY.1,
                            OWNER_LABEL: owner,
                            TASK_LABEL: task,
                        },
                        "annotations": {
                            PID_ANNOTATION: pid.to_string(),
                            START_ANNOTATION: process_start(pid).unwrap_or_default(),
                            "hermes-tools/task-id": task_id,
                        },
                        "ownerReferences": null,
                    }
                });
                match api
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) => return Ok(Some(name)),
                    Err(kube::Error::Api(status))
                        if status.is_conflict() || status.is_not_found() =>
                    {
                        continue
                    }
                    Err(e) => {
                        return Err(api_error(&format!("cannot claim the pool pod {name}"), e))
                    }
                }
            }
            Ok(None)
        })
    }

    /// The manifest of a warm pool: a ReplicaSet of `replicas` idle task pods, labelled
    /// `hermes-tools/pool=<pool>`, whose selector lets go of claimed pods.
    pub fn pool_manifest(settings: &Settings, pool: &str, replicas: u32) -> Value {
        let mut template = pod_manifest(settings, "", "pool", "pool");
        let meta = template["metadata"].as_object_mut().expect("metadata");
        meta.remove("name");
        meta.remove("annotations");
        template["metadata"]["labels"] = json!({ POOL_LABEL: pool, MANAGED_BY.0: MANAGED_BY.1 });
        if let Some(spec) = template["spec"].as_object_mut() {
            spec.remove("activeDeadlineSeconds");
            spec.insert("restartPolicy".into(), json!("Always"));
        }
        json!({
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": format!("hermes-pool-{}", label_value(pool)), "labels": {POOL_LABEL: pool}},
            "spec": {
                "replicas": replicas,
                "selector": {
                    "matchLabels": {POOL_LABEL: pool},
                    "matchExpressions": [{"key": CLAIM_LABEL, "operator": "DoesNotExist"}],
                },
                "template": {"metadata": template["metadata"], "spec": template["spec"]},
            },
        })
    }

    /// Creates (or replaces the size of) a warm pool.
    pub fn ensure_pool(
        &self,
        settings: &Settings,
        pool: &str,
        replicas: u32,
    ) -> Result<(), Failure> {
        let manifest = Self::pool_manifest(settings, pool, replicas);
        let rs: ReplicaSet = serde_json::from_value(manifest)
            .map_err(|e| Failure::new(format!("pool manifest: {e}")))?;
        let api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), &self.namespace);
        block(async move {
            match api.create(&PostParams::default(), &rs).await {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(()),
                Err(e) => Err(api_error("cannot create the warm pool", e)),
            }
        })
    }

    /// Waits until `count` pods of `pool` run unclaimed (at most `timeout`).
    pub fn wait_pool(&self, pool: &str, count: usize, timeout: Duration) -> bool {
        let api = self.pods();
        let selector = format!("{POOL_LABEL}={pool},!{CLAIM_LABEL}");
        block(async move {
            let deadline = tokio::time::Instant::now() + timeout;
            while tokio::time::Instant::now() < deadline {
                if let Ok(list) = api.list(&ListParams::default().labels(&selector)).await {
                    if list.items.iter().filter(|p| is_running(p)).count() >= count {
                        return true;
                    }
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            false
        })
    }

    /// Deletes a warm pool's ReplicaSet and its idle pods.
    pub fn delete_pool(&self, pool: &str) {
        let api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), &self.namespace);
        let pods = self.pods();
        let name = format!("hermes-pool-{}", label_value(pool));
        let selector = format!("{POOL_LABEL}={pool}");
        block(async move {
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                ..DeleteParams::default()
            };
            let _ = api.delete(&name, &params).await;
            let _ = pods
                .delete_collection(&params, &ListParams::default().labels(&selector))
                .await;
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_valid() {
        assert_eq!(label_value("task 1/α"), "task_1");
        assert_eq!(label_value("-x-"), "x");
        assert_eq!(label_value(&"a".repeat(80)).len(), 63);
    }

    #[test]
    fn the_manifest_is_locked_down() {
        let settings = Settings {
            image: "img:1".into(),
            cpu: 0.5,
            memory_mb: 256,
            disk_mb: 1024,
            pod_lifetime_secs: 3600,
            runtime_class: Some("gvisor".into()),
            ..Settings::default()
        };
        let pod = pod_manifest(&settings, "hermes-x", "t/1", "owner1");
        assert_eq!(pod["spec"]["automountServiceAccountToken"], false);
        assert_eq!(pod["spec"]["enableServiceLinks"], false);
        assert_eq!(pod["spec"]["activeDeadlineSeconds"], 3600);
        assert_eq!(pod["spec"]["runtimeClassName"], "gvisor");
        assert_eq!(
            pod["spec"]["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault"
        );
        let c = &pod["spec"]["containers"][0];
        assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
        assert_eq!(c["securityContext"]["capabilities"]["drop"], json!(["ALL"]));
        assert_eq!(c["resources"]["requests"], c["resources"]["limits"]);
        assert_eq!(
            c["resources"]["limits"],
            json!({"cpu": "500m", "memory": "256Mi", "ephemeral-storage": "1024Mi"})
        );
        assert_eq!(pod["metadata"]["labels"][TASK_LABEL], "t_1");
        let typed: Pod = serde_json::from_value(pod).unwrap();
        assert_eq!(typed.metadata.name.as_deref(), Some("hermes-x"));
    }

    #[test]
    fn exit_codes_from_the_status_channel() {
        let ok: ExecStatus = serde_json::from_value(json!({"status": "Success"})).unwrap();
        assert_eq!(exit_code(Some(&ok)), Ok(0));
        let four: ExecStatus = serde_json::from_value(json!({
            "status": "Failure", "reason": "NonZeroExitCode", "message": "command terminated with non-zero exit code",
            "details": {"causes": [{"reason": "ExitCode", "message": "4"}]}
        }))
        .unwrap();
        assert_eq!(exit_code(Some(&four)), Ok(4));
        assert!(exit_code(None).is_err());
    }
}
