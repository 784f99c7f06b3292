use hermes_runtime::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Does nothing, quickly: the baseline of dispatch cost.
#[tool(toolset = "fx_basic")]
pub fn fx_noop() -> ToolResult {
    Ok(ToolOutput::Text("{}".into()))
}

/// Does nothing, asynchronously.
#[tool(toolset = "fx_basic")]
pub async fn fx_async_noop() -> ToolResult {
    Ok(ToolOutput::Text("{}".into()))
}

/// Echoes its arguments back.
#[tool(toolset = "fx_basic", aliases = ["fx_echo_old"], concurrency = "read_only")]
pub fn fx_echo(
    /// Some text.
    text: Option<String>,
    /// A count.
    count: Option<i64>,
    /// A switch.
    flag: Option<bool>,
    /// A list of names.
    names: Option<Vec<String>>,
) -> ToolResult {
    Ok(json!({"text": text, "count": count, "flag": flag, "names": names}).into())
}

/// Panics with the message given.
#[tool(toolset = "fx_faulty")]
pub fn fx_panic(
    /// What to panic with.
    message: String,
) -> ToolResult {
    panic!("{message}")
}

/// Fails with a handler error.
#[tool(toolset = "fx_faulty")]
pub fn fx_fail(
    /// The error text.
    message: String,
) -> ToolResult {
    Err(ToolError::new("RuntimeError", message))
}

/// Returns the given text verbatim as its result.
#[tool(toolset = "fx_faulty")]
pub fn fx_raw(
    /// The result text.
    text: String,
) -> ToolResult {
    Ok(ToolOutput::Text(text))
}

/// Returns a result of the given size.
#[tool(toolset = "fx_faulty", max_result_chars = 1_000)]
pub fn fx_big(
    /// How many characters.
    chars: u64,
) -> ToolResult {
    Ok(ToolOutput::Text("x".repeat(chars as usize)))
}

/// Set when a cancelled slow call's future is dropped.
pub static SLOW_CALL_DROPPED: AtomicBool = AtomicBool::new(false);

struct DropFlag;

impl Drop for DropFlag {
    fn drop(&mut self) {
        SLOW_CALL_DROPPED.store(true, Ordering::SeqCst);
    }
}

/// Sleeps asynchronously, then answers.
#[tool(toolset = "fx_slow", concurrency = "read_only")]
pub async fn fx_sleep(
    /// How long to sleep, in milliseconds.
    millis: u64,
) -> ToolResult {
    let _flag = DropFlag;
    tokio::time::sleep(std::time::Duration::from_millis(millis)).await;
    std::mem::forget(_flag);
    Ok(json!({"slept_ms": millis}).into())
}

/// What the flaky check answers; flipped by tests.
pub static FLAKY_PASSES: AtomicBool = AtomicBool::new(true);
/// How often the flaky check ran.
pub static FLAKY_PROBES: AtomicUsize = AtomicUsize::new(0);

pub fn flaky_check() -> bool {
    FLAKY_PROBES.fetch_add(1, Ordering::SeqCst);
    FLAKY_PASSES.load(Ordering::SeqCst)
}

pub fn panicking_check() -> bool {
    panic!("the probe broke")
}

pub fn never_available() -> bool {
    false
}

/// Visible only while the flaky check passes.
#[tool(toolset = "fx_checked", check = flaky_check)]
pub fn fx_flaky_a() -> ToolResult {
    Ok(json!({}).into())
}

/// Shares the flaky check with fx_flaky_a.
#[tool(toolset = "fx_checked", check = flaky_check)]
pub fn fx_flaky_b() -> ToolResult {
    Ok(json!({}).into())
}

/// Never visible: its check panics.
#[tool(toolset = "fx_broken", check = panicking_check)]
pub fn fx_broken_check() -> ToolResult {
    Ok(json!({}).into())
}

/// Never visible: its check fails.
#[tool(toolset = "fx_broken", check = never_available, requires_env = ["FX_API_KEY"])]
pub fn fx_needs_key() -> ToolResult {
    Ok(json!({}).into())
}

/// Runs a script that may call the fixture sandbox tools.
#[tool(toolset = "fx_sandbox", dynamic_schema = sandbox_schema)]
pub fn fx_run_code(
    /// The script.
    code: String,
) -> ToolResult {
    Ok(json!({"ran": code.len()}).into())
}

/// The tools a script may call: those of the sandbox list that are available now.
pub fn sandbox_schema(context: &SchemaContext<'_>) -> Option<Value> {
    let callable: Vec<&str> = ["fx_echo", "fx_noop", "fx_needs_key"]
        .into_iter()
        .filter(|t| context.is_available(t))
        .collect();
    Some(json!({"description": format!("Run a script. It may call: {}.", callable.join(", "))}))
}

/// Offered only when fx_noop is too.
#[tool(toolset = "fx_sandbox", dynamic_schema = needs_noop)]
pub fn fx_dependent() -> ToolResult {
    Ok(json!({}).into())
}

pub fn needs_noop(context: &SchemaContext<'_>) -> Option<Value> {
    context.is_available("fx_noop").then(|| json!({}))
}

/// Its dynamic schema panics, so the static one is used.
#[tool(toolset = "fx_sandbox", dynamic_schema = broken_schema)]
pub fn fx_broken_schema() -> ToolResult {
    Ok(json!({}).into())
}

pub fn broken_schema(_: &SchemaContext<'_>) -> Option<Value> {
    panic!("schema producer failed")
}

static RENDEZVOUS: std::sync::Mutex<Vec<(String, u64)>> = std::sync::Mutex::new(Vec::new());
static RENDEZVOUS_CHANGED: std::sync::Condvar = std::sync::Condvar::new();

/// Waits (5 s by default) until `size` calls of the same group are inside at once: proof,
/// without timing, that calls ran concurrently.
#[tool(toolset = "fx_slow", concurrency = "read_only")]
pub fn fx_rendezvous(
    /// Calls with the same group wait for each other.
    group: String,
    /// How many calls must meet.
    size: u64,
    /// How long to wait, in milliseconds. Default 5000.
    wait_ms: Option<u64>,
) -> ToolResult {
    let mut arrived = RENDEZVOUS.lock().unwrap();
    match arrived.iter_mut().find(|(g, _)| *g == group) {
        Some((_, count)) => *count += 1,
        None => arrived.push((group.clone(), 1)),
    }
    RENDEZVOUS_CHANGED.notify_all();
    let deadline =
        std::time::Instant::now() + std::time::Duration::from_millis(wait_ms.unwrap_or(5000));
    loop {
        let count = arrived
            .iter()
            .find(|(g, _)| *g == group)
            .map_or(0, |(_, c)| *c);
        if count >= size {
            return Ok(json!({"met": true}).into());
        }
        let now = std::time::Instant::now();
        if now >= deadline {
            return Ok(json!({"met": false, "arrived": count}).into());
        }
        arrived = RENDEZVOUS_CHANGED
            .wait_timeout(arrived, deadline - now)
            .unwrap()
            .0;
    }
}

/// Writes the given text to the file at `path`, one writer per path at a time.
#[tool(toolset = "fx_files", concurrency = "path_scoped")]
pub fn fx_append(
    /// The file to append to.
    path: String,
    /// What to append.
    text: String,
    ctx: &ToolContext,
) -> ToolResult {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(ctx.resolve_path(&path))?;
    for c in text.chars() {
        // One write per character, with a pause: overlapping writers would interleave.
        write!(file, "{c}")?;
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    Ok(json!({"appended": text.len()}).into())
}
