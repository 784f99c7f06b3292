//! The browser layer against a raw DevTools Protocol script doing the same work, on
//! one Chromium, in the same run: open a loopback page, wait for its load, read the
//! accessibility tree. Ours adds what the tools need: every request paused and judged
//! by the network policy, lifecycle bookkeeping, the bounded network-idle wait and the
//! snapshot text with its refs. Then the memory of each open browser context (a task's
//! context with its tab on the page): the proportional set size of Chromium's
//! processes before and after opening several. Last, the cost of the OS sandbox a
//! launched Chromium runs in: start-up and navigate + snapshot of a browser inside the
//! task sandbox's policy (its own namespaces, the judged proxy its only way out)
//! against one outside it, in turn.
//!
//! cargo bench --bench browser

use hermes_browser::cdp::{Connection, Event};
use hermes_browser::{RequestPolicy, Settings, Tab};
use hermes_net::NetPolicy;
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

const RUNS: usize = 20;
const CONTEXTS: usize = 8;
const CALL: Duration = Duration::from_secs(60);

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// A page of 200 links, a form and some text.
fn page() -> String {
    let links: String = (0..200)
        .map(|i| format!("<li><a href=\"/item/{i}\">Item number {i}</a></li>"))
        .collect();
    format!(
        "<!doctype html><html><head><title>Bench</title></head><body><h1>Bench page</h1>\
         <form><input aria-label=\"Query\"><button>Go</button></form><ul>{links}</ul>\
         <p>Some closing words.</p></body></html>"
    )
}

fn serve(page: String) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let page = page.clone();
            std::thread::spawn(move || {
                let mut buffer = [0u8; 4096];
                let _ = stream.read(&mut buffer);
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    page.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(page.as_bytes());
            });
        }
    });
    port
}

/// The raw script: its own context and tab, Page events, navigate, wait for
/// `Page.loadEventFired`, `Accessibility.getFullAXTree`.
struct Raw {
    connection: Arc<Connection>,
    session: String,
    loaded: mpsc::Receiver<()>,
}

impl Raw {
    fn open(connection: &Arc<Connection>) -> Raw {
        let context = connection
            .call("Target.createBrowserContext", json!({}), None, CALL)
            .unwrap();
        let target = connection
            .call(
                "Target.createTarget",
                json!({"url": "about:blank", "browserContextId": context["browserContextId"]}),
                None,
                CALL,
            )
            .unwrap();
        let attached = connection
            .call(
                "Target.attachToTarget",
                json!({"targetId": target["targetId"], "flatten": true}),
                None,
                CALL,
            )
            .unwrap();
        let session = attached["sessionId"].as_str().unwrap().to_string();
        let (tx, loaded) = mpsc::channel();
        let mine = session.clone();
        connection.listen(Arc::new(move |event: &Event| {
            if event.method == "Page.loadEventFired" && event.session_id.as_deref() == Some(&mine) {
                let _ = tx.send(());
            }
        }));
        connection
            .call("Page.enable", json!({}), Some(&session), CALL)
            .unwrap();
        Raw {
            connection: Arc::clone(connection),
            session,
            loaded,
        }
    }

    fn visit(&self, url: &str) -> usize {
        while self.loaded.try_recv().is_ok() {}
        self.connection
            .call(
                "Page.navigate",
                json!({"url": url}),
                Some(&self.session),
                CALL,
            )
            .unwrap();
        self.loaded.recv_timeout(CALL).unwrap();
        let tree = self
            .connection
            .call(
                "Accessibility.getFullAXTree",
                json!({}),
                Some(&self.session),
                CALL,
            )
            .unwrap();
        tree["nodes"].as_array().unwrap().len()
    }
}

/// Memory of the process group `group` (Chromium and its children), bytes.
fn group_rss(group: u32) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let Some(after) = stat.rsplit_once(')').map(|(_, rest)| rest) else {
            continue;
        };
        let fields: Vec<&str> = after.split_whitespace().collect();
        // fields[0] is the state; the process group is the third after the name.
        if fields.get(2).and_then(|g| g.parse::<u32>().ok()) != Some(group) {
            continue;
        }
        // Proportional set size: memory shared between the processes is divided
        // among them, not counted once per process.
        if let Some(kib) = std::fs::read_to_string(entry.path().join("smaps_rollup"))
            .ok()
            .and_then(|m| {
                m.lines()
                    .find_map(|l| l.strip_prefix("Pss:"))?
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
        {
            total += kib * 1024;
        }
    }
    total
}

fn main() {
    let port = serve(page());
    let url = format!("http://127.0.0.1:{port}/");
    let config =
        hermes_runtime::config::Config::load(&std::env::temp_dir().join("hermes-bench-none"));
    let settings = Settings::from_config(&config);
    let policy = || {
        RequestPolicy::new(
            NetPolicy {
                allow_private: true,
                ..NetPolicy::default()
            },
            None,
        )
    };
    let (connection, local) = match hermes_browser::launch::launch(&settings, &policy()) {
        Ok(started) => started,
        Err(why) => {
            eprintln!("no browser to measure: {why}");
            return;
        }
    };
    let tab = Tab::open(Arc::clone(&connection), settings.clone(), policy()).unwrap();
    let raw = Raw::open(&connection);

    // Warm-up, then both in turn so load weighs on each alike.
    tab.navigate(&url).unwrap();
    tab.snapshot(false).unwrap();
    raw.visit(&url);
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    let mut refs = 0;
    let mut nodes = 0;
    for _ in 0..RUNS {
        let started = Instant::now();
        tab.navigate(&url).unwrap();
        refs = tab.snapshot(false).unwrap().1;
        ours.push(started.elapsed());
        let started = Instant::now();
        nodes = raw.visit(&url);
        theirs.push(started.elapsed());
    }
    let (ours, theirs) = (median(ours), median(theirs));
    println!(
        "navigate + snapshot of a loopback page ({refs} refs, {nodes} AX nodes), median of {RUNS}:"
    );
    println!("  raw CDP script (navigate, load event, AX tree): {theirs:>10.2?}");
    println!(
        "  hermes-browser (judged requests, load + idle, snapshot): {ours:>10.2?}  ({:.2}x)",
        ours.as_secs_f64() / theirs.as_secs_f64()
    );

    // Memory per open context: CONTEXTS more contexts, each with a tab on the page.
    std::thread::sleep(Duration::from_secs(1));
    let before = group_rss(local.pid);
    let mut open = Vec::new();
    for _ in 0..CONTEXTS {
        let extra = Tab::open(Arc::clone(&connection), settings.clone(), policy()).unwrap();
        extra.navigate(&url).unwrap();
        extra.snapshot(false).unwrap();
        open.push(extra);
    }
    std::thread::sleep(Duration::from_secs(1));
    let after = group_rss(local.pid);
    println!(
        "memory: Chromium's processes {:.1} MiB with 2 contexts, {:.1} MiB with {}; {:.1} MiB per open context",
        before as f64 / 1048576.0,
        after as f64 / 1048576.0,
        CONTEXTS + 2,
        (after.saturating_sub(before)) as f64 / CONTEXTS as f64 / 1048576.0
    );
    for extra in open {
        extra.close();
    }
    tab.close();
    drop(local);
    sandbox_cost(&settings, &url, policy);
}

/// Start-up, and navigate + snapshot, of a Chromium inside the command sandbox against
/// one outside it, alternating so load weighs on both alike.
fn sandbox_cost(settings: &Settings, url: &str, policy: impl Fn() -> RequestPolicy) {
    let _ = hermes_sandbox::launcher::set_program(env!("CARGO_BIN_EXE_hermes-tools"));
    let home = tempfile::tempdir().unwrap();
    let terminal = hermes_environments::config::TerminalConfig::load(home.path()).unwrap();
    let mut boxed = settings.clone();
    boxed.sandbox = match hermes_environments::env::local::program_policy(&terminal) {
        Ok(Some(policy)) => Some(policy),
        other => {
            eprintln!("no sandbox to measure: {:?}", other.err());
            return;
        }
    };
    const STARTS: usize = 5;
    let (mut plain_start, mut boxed_start) = (Vec::new(), Vec::new());
    let (mut plain_visit, mut boxed_visit) = (Vec::new(), Vec::new());
    for _ in 0..STARTS {
        for (chosen, starts, visits) in [
            (settings, &mut plain_start, &mut plain_visit),
            (&boxed, &mut boxed_start, &mut boxed_visit),
        ] {
            let started = Instant::now();
            let (connection, local) = hermes_browser::launch::launch(chosen, &policy()).unwrap();
            starts.push(started.elapsed());
            let tab = Tab::open(Arc::clone(&connection), chosen.clone(), policy()).unwrap();
            tab.navigate(url).unwrap();
            tab.snapshot(false).unwrap();
            for _ in 0..RUNS / STARTS {
                let started = Instant::now();
                tab.navigate(url).unwrap();
                tab.snapshot(false).unwrap();
                visits.push(started.elapsed());
            }
            tab.close();
            drop(local);
        }
    }
    let (plain_start, boxed_start) = (median(plain_start), median(boxed_start));
    let (plain_visit, boxed_visit) = (median(plain_visit), median(boxed_visit));
    println!("Chromium inside the command sandbox against outside it:");
    println!(
        "  start until it answers (median of {STARTS}): {plain_start:>10.2?} outside, {boxed_start:>10.2?} inside ({:.2}x)",
        boxed_start.as_secs_f64() / plain_start.as_secs_f64()
    );
    println!(
        "  navigate + snapshot (median of {RUNS}):      {plain_visit:>10.2?} outside, {boxed_visit:>10.2?} inside ({:.2}x)",
        boxed_visit.as_secs_f64() / plain_visit.as_secs_f64()
    );
}
