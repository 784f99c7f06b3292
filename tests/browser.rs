//! The browser toolset through the binary (`call`, `serve`, `mcp`, `agent`) against
//! Debian's Chromium (installed by .ci/setup.d/60-browser.sh), driving real pages that
//! the test serves on loopback. Loopback is a private range: the tests open it with
//! `security.allow_private_urls`, and the refusal tests show what happens without it.

mod binary;
mod common;
#[path = "../agent/tests/support/mod.rs"]
mod support;
mod web_support;

use binary::{content_of, serve_call};
use serde_json::{json, Value};
use std::time::Duration;
use web_support::{home_with, redirect, respond, run, Reply, Request, Server, OPEN_LOOPBACK};

/// A 1x1 transparent PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1F, 0x15, 0xC4,
    0x89, 0x00, 0x00, 0x00, 0x0D, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9C, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0D, 0x0A, 0x2D, 0xB4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4E, 0x44, 0xAE,
    0x42, 0x60, 0x82,
];

const HOME_PAGE: &str = r#"<!doctype html><html><head><title>Test Home</title></head><body>
<h1>Welcome</h1>
<a href="/second">Second page</a>
<form action="/result" method="get">
  <input name="q" aria-label="Query">
  <button type="submit">Search</button>
</form>
<img src="/pic.png" alt="A tiny picture" width="40" height="40">
<div style="height:3000px"></div><p>Bottom of the page</p>
<script>
console.log("page log line");
console.log("leaked key sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD");
console.error("page error line");
setTimeout(function(){ throw new Error("boom from a timer"); }, 0);
</script>
</body></html>"#;

const LIST_PAGE: &str = r#"<!doctype html><html><head><title>List</title></head><body>
<h1>Items</h1>
<div id="items"></div>
<button id="again" onclick="render()">Re-render</button>
<script>
window.clicks = {};
function render() {
  const box = document.getElementById('items');
  box.innerHTML = '';
  for (const name of ['Item 1', 'Item 2', 'Item 3']) {
    const b = document.createElement('button');
    b.textContent = name;
    b.onclick = () => { window.clicks[name] = (window.clicks[name] || 0) + 1; };
    box.appendChild(b);
  }
}
render();
</script></body></html>"#;

const DIALOG_PAGE: &str = r#"<!doctype html><html><head><title>Dialogs</title></head><body>
<button onclick="document.getElementById('out').textContent = 'Hello ' + prompt('Your name?', 'nobody')">Ask</button>
<button onclick="alert('Just so you know'); window.afterAlert = true">Alert</button>
<p id="out">nothing yet</p>
</body></html>"#;

/// The test site: every page the tests drive.
fn site() -> Server {
    Server::start(|request: &Request| -> Reply {
        match request.path() {
            "/" => respond(200, "text/html", HOME_PAGE),
            "/second" => respond(
                200,
                "text/html",
                "<html><head><title>Second</title></head><body><h1>Second page</h1><p>You made it</p></body></html>",
            ),
            "/result" => {
                let q = request.query("q").unwrap_or_default();
                respond(
                    200,
                    "text/html",
                    format!("<html><head><title>Result</title></head><body><h1>You searched for {q}</h1></body></html>"),
                )
            }
            "/pic.png" => respond(200, "image/png", PNG),
            "/list" => respond(200, "text/html", LIST_PAGE),
            "/dialog" => respond(200, "text/html", DIALOG_PAGE),
            "/redirect" => redirect("/second"),
            "/big" => {
                let mut page = String::from("<html><head><title>Big</title></head><body><h1>Big page</h1><ul>");
                for i in 0..100_000 {
                    page.push_str(&format!("<li>row {i}</li>"));
                }
                page.push_str("</ul></body></html>");
                respond(200, "text/html", page)
            }
            _ => respond(404, "text/plain", "not found"),
        }
    })
}

fn chromium_installed() {
    assert!(
        ["chromium", "chromium-browser", "google-chrome"]
            .iter()
            .any(|n| common::which(n).is_some()),
        "Chromium is needed for these tests: run .ci/setup.d/60-browser.sh"
    );
}

/// `serve --toolsets browser` with these calls, one task; the answers' contents by id.
fn serve(home: &std::path::Path, calls: &[(&str, &str, Value)]) -> Vec<(String, Value)> {
    chromium_installed();
    let lines: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| serve_call(id, name, args))
        .collect();
    let answers = binary::serve(home, &["--toolsets", "browser,file"], &lines);
    calls
        .iter()
        .map(|(id, _, _)| (id.to_string(), content_of(&answers, id)))
        .collect()
}

fn answer<'a>(answers: &'a [(String, Value)], id: &str) -> &'a Value {
    &answers.iter().find(|(i, _)| i == id).unwrap().1
}

/// The ref on the snapshot line that contains `needle`.
fn ref_of(snapshot: &str, needle: &str) -> String {
    let line = snapshot
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle} in:\n{snapshot}"));
    let start = line.find("[ref=").unwrap() + 5;
    let end = line[start..].find(']').unwrap() + start;
    format!("@{}", &line[start..end])
}

#[test]
fn a_task_browses_forms_history_console_and_images_over_serve() {
    let site = site();
    let home = home_with(OPEN_LOOPBACK);
    let first = serve(
        home.path(),
        &[("1", "browser_navigate", json!({"url": site.url("/")}))],
    );
    let page = answer(&first, "1");
    assert_eq!(page["success"], true, "{page}");
    assert_eq!(page["title"], "Test Home");
    let snapshot = page["snapshot"].as_str().unwrap();
    assert!(
        snapshot.contains("- heading \"Welcome\" [level=1] [ref=e1]"),
        "{snapshot}"
    );
    let query = ref_of(snapshot, "textbox \"Query\"");
    let search = ref_of(snapshot, "button \"Search\"");
    let link = ref_of(snapshot, "link \"Second page\"");
    assert!(page["element_count"].as_u64().unwrap() >= 4, "{page}");

    // One server, one task: the refs of the navigation are used by the later calls.
    let answers = serve(
        home.path(),
        &[
            ("nav", "browser_navigate", json!({"url": site.url("/")})),
            (
                "type",
                "browser_type",
                json!({"ref": query, "text": "rust tools"}),
            ),
            ("click", "browser_click", json!({"ref": search})),
            ("after", "browser_snapshot", json!({"full": true})),
            ("back", "browser_back", json!({})),
            ("console", "browser_console", json!({})),
            ("images", "browser_get_images", json!({})),
            ("scroll", "browser_scroll", json!({"direction": "down"})),
            (
                "y",
                "browser_console",
                json!({"expression": "window.scrollY > 0"}),
            ),
            ("snap", "browser_snapshot", json!({})),
            (
                "retype",
                "browser_type",
                json!({"ref": query, "text": "by key"}),
            ),
            ("enter", "browser_press", json!({"key": "Enter"})),
            (
                "where",
                "browser_console",
                json!({"expression": "({url: location.href, h: document.querySelector('h1').textContent})"}),
            ),
            (
                "redirect",
                "browser_navigate",
                json!({"url": site.url("/redirect")}),
            ),
            ("link-back", "browser_back", json!({})),
            ("clear", "browser_console", json!({"clear": true})),
            ("cleared", "browser_console", json!({})),
        ],
    );
    assert_eq!(answer(&answers, "type")["typed"], "rust tools");
    assert_eq!(answer(&answers, "type")["element"], query);
    assert_eq!(answer(&answers, "click")["clicked"], search);
    let after = answer(&answers, "after")["snapshot"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(after.contains("You searched for rust tools"), "{after}");
    let back = answer(&answers, "back");
    assert_eq!(back["url"], site.url("/"), "{back}");

    let console = answer(&answers, "console");
    let messages = console["console_messages"].as_array().unwrap();
    assert!(
        messages
            .iter()
            .any(|m| m["type"] == "log" && m["text"] == "page log line"),
        "{console}"
    );
    assert!(
        messages
            .iter()
            .any(|m| m["type"] == "error" && m["text"] == "page error line"),
        "{console}"
    );
    assert!(
        console["js_errors"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["message"].as_str().unwrap().contains("boom from a timer")),
        "{console}"
    );
    assert_eq!(console["total_messages"], messages.len());
    // Secrets the page prints are masked before the model sees them.
    assert!(
        !console
            .to_string()
            .contains("abcdefghijklmnopqrstuvwxyz0123456789ABCD"),
        "{console}"
    );
    assert!(messages
        .iter()
        .any(|m| m["text"].as_str().unwrap().starts_with("leaked key")));

    let images = answer(&answers, "images");
    assert_eq!(images["count"], 1, "{images}");
    assert_eq!(images["images"][0]["src"], site.url("/pic.png"));
    assert_eq!(images["images"][0]["alt"], "A tiny picture");
    assert_eq!(answer(&answers, "scroll")["scrolled"], "down");
    assert_eq!(answer(&answers, "y")["result"], true, "{answers:?}");
    assert_eq!(answer(&answers, "y")["result_type"], "bool");

    // After `back`, the refs came from a new snapshot of the same page.
    let snap = answer(&answers, "snap")["snapshot"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(ref_of(&snap, "textbox \"Query\""), query);
    assert_eq!(answer(&answers, "enter")["pressed"], "Enter");
    let place = &answer(&answers, "where")["result"];
    assert_eq!(place["h"], "You searched for by key", "{place}");
    assert_eq!(answer(&answers, "where")["result_type"], "dict");

    let redirected = answer(&answers, "redirect");
    assert_eq!(redirected["url"], site.url("/second"), "{redirected}");
    assert_eq!(redirected["title"], "Second");
    let _ = link;
    assert_eq!(answer(&answers, "clear")["success"], true);
    assert_eq!(answer(&answers, "cleared")["total_messages"], 0);
}

#[test]
fn a_stale_ref_fails_loudly_and_clicks_nothing() {
    let site = site();
    let home = home_with(OPEN_LOOPBACK);
    let first = serve(
        home.path(),
        &[("1", "browser_navigate", json!({"url": site.url("/list")}))],
    );
    let snapshot = answer(&first, "1")["snapshot"]
        .as_str()
        .unwrap()
        .to_string();
    let item = ref_of(&snapshot, "button \"Item 2\"");
    let again = ref_of(&snapshot, "button \"Re-render\"");
    let answers = serve(
        home.path(),
        &[
            ("nav", "browser_navigate", json!({"url": site.url("/list")})),
            ("render", "browser_click", json!({"ref": again})),
            ("old", "browser_click", json!({"ref": item})),
            (
                "count",
                "browser_console",
                json!({"expression": "JSON.stringify(window.clicks)"}),
            ),
            ("snap", "browser_snapshot", json!({})),
        ],
    );
    assert_eq!(answer(&answers, "render")["success"], true);
    let old = answer(&answers, "old");
    assert_eq!(old["success"], false, "{old}");
    let error = old["error"].as_str().unwrap();
    assert!(
        error.contains("stale") && error.contains("browser_snapshot"),
        "{error}"
    );
    assert_eq!(
        answer(&answers, "count")["result"],
        json!({}),
        "nothing was clicked"
    );

    // A fresh snapshot's ref reaches the new element.
    let fresh = answer(&answers, "snap")["snapshot"]
        .as_str()
        .unwrap()
        .to_string();
    let new_item = ref_of(&fresh, "button \"Item 2\"");
    let answers = serve(
        home.path(),
        &[
            ("nav", "browser_navigate", json!({"url": site.url("/list")})),
            ("render", "browser_click", json!({"ref": again})),
            ("snap", "browser_snapshot", json!({})),
            ("new", "browser_click", json!({"ref": new_item})),
            (
                "count",
                "browser_console",
                json!({"expression": "window.clicks"}),
            ),
            // The page navigates away behind the refs' back: they are refused.
            (
                "away",
                "browser_console",
                json!({"expression": "location.href = '/second'; 1"}),
            ),
            (
                "wait",
                "browser_console",
                json!({"expression": "new Promise(r => setTimeout(r, 500))"}),
            ),
            ("gone", "browser_click", json!({"ref": new_item})),
            ("bad", "browser_click", json!({"ref": "submit-button"})),
            ("unknown", "browser_click", json!({"ref": "@e999"})),
        ],
    );
    assert_eq!(answer(&answers, "new")["success"], true, "{answers:?}");
    assert_eq!(answer(&answers, "count")["result"], json!({"Item 2": 1}));
    let gone = answer(&answers, "gone")["error"]
        .as_str()
        .unwrap()
        .to_string();
    // Which of the two checks catches it depends on how far the navigation got (the
    // old document's node gone, or the new document there): either way, refused.
    assert!(
        gone.contains("stale")
            && (gone.contains("navigated") || gone.contains("no longer in the page")),
        "{gone}"
    );
    assert!(answer(&answers, "bad")["error"]
        .as_str()
        .unwrap()
        .contains("Invalid ref"));
    assert!(answer(&answers, "unknown")["error"]
        .as_str()
        .unwrap()
        .contains("Unknown ref @e999"));
}

#[test]
fn one_call_per_process_and_a_big_page_cut_with_the_rest_stored() {
    chromium_installed();
    let site = site();
    let home = home_with(OPEN_LOOPBACK);
    // `call` is one process: it navigates and answers with the snapshot.
    let page = web_support::call(
        home.path(),
        "browser_navigate",
        &json!({"url": site.url("/second")}),
        &[],
    );
    assert_eq!(page["title"], "Second", "{page}");
    assert!(page["snapshot"]
        .as_str()
        .unwrap()
        .contains("heading \"Second page\""));
    // Without a page, the other tools say what to do.
    let none = web_support::call(home.path(), "browser_snapshot", &json!({}), &[]);
    assert!(
        none["error"]
            .as_str()
            .unwrap()
            .contains("browser_navigate first"),
        "{none}"
    );

    let answers = serve(
        home.path(),
        &[
            ("nav", "browser_navigate", json!({"url": site.url("/big")})),
            ("full", "browser_snapshot", json!({"full": true})),
        ],
    );
    let full = answer(&answers, "full");
    let text = full["snapshot"].as_str().unwrap();
    assert!(text.chars().count() <= 15_000, "{}", text.len());
    assert!(text.contains("row 0"));
    assert!(!text.contains("row 99999"));
    let pointer = text.lines().last().unwrap();
    assert!(pointer.contains("more lines truncated"), "{pointer}");
    let path = pointer
        .split("path=\"")
        .nth(1)
        .unwrap()
        .split('"')
        .next()
        .unwrap();
    let offset: u64 = pointer
        .split("offset=")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    // Every line kept is a whole line of the stored snapshot.
    let stored = std::fs::read_to_string(path).unwrap();
    assert!(
        stored.contains("row 20000"),
        "the stored copy goes far past the cut"
    );
    let kept: Vec<&str> = text.lines().take_while(|l| !l.is_empty()).collect();
    let stored_lines: Vec<&str> = stored.lines().collect();
    assert_eq!(kept, stored_lines[..kept.len()]);
    assert_eq!(offset as usize, kept.len() + 1);
    // read_file pages through the rest.
    let rest = web_support::call(
        home.path(),
        "read_file",
        &json!({"path": path, "offset": offset, "limit": 5}),
        &[],
    );
    assert!(
        rest["content"]
            .as_str()
            .unwrap()
            .contains(stored_lines[offset as usize - 1]),
        "{rest}"
    );
}

#[test]
fn private_metadata_and_blocked_addresses_are_refused_at_every_hop() {
    chromium_installed();
    let metadata_probe = "http://169.254.169.254/latest/meta-data/";
    let site = Server::start(move |request: &Request| -> Reply {
        match request.path() {
            "/to-metadata" => redirect(metadata_probe),
            "/leaky" => respond(
                200,
                "text/html",
                format!(
                    "<html><head><title>Leaky</title></head><body><img src=\"{metadata_probe}x.png\">\
                     <script>window.result = 'pending'; fetch('{metadata_probe}').then(() => window.result = 'fetched', () => window.result = 'failed');</script></body></html>"
                ),
            ),
            "/to-localhost" => {
                let port = request.header("host").unwrap().rsplit(':').next().unwrap().to_string();
                redirect(&format!("http://localhost:{port}/ok"))
            }
            _ => respond(200, "text/html", "<html><head><title>ok</title></head><body>ok</body></html>"),
        }
    });
    // Private ranges closed (the default): loopback is refused before anything is sent.
    let closed = tempfile::tempdir().unwrap();
    let refused = web_support::call(
        closed.path(),
        "browser_navigate",
        &json!({"url": site.url("/")}),
        &[],
    );
    assert!(
        refused["error"]
            .as_str()
            .unwrap()
            .contains("private or internal network address"),
        "{refused}"
    );
    assert!(site.requests.lock().unwrap().is_empty());
    for (url, words) in [
        ("http://169.254.169.254/latest/", "cloud metadata"),
        (
            "http://127.0.0.1:9/?api_key=sk-proj-abcdefghijklmnopqrstuvwxyz123456",
            "API key",
        ),
        ("file:///etc/passwd", "file://"),
        ("chrome://settings", "'chrome:'"),
        ("data:text/html,<h1>hi</h1>", "'data:'"),
        ("javascript:alert(1)", "'javascript:'"),
    ] {
        let out = web_support::call(closed.path(), "browser_navigate", &json!({"url": url}), &[]);
        assert_eq!(out["success"], false, "{url}: {out}");
        assert!(
            out["error"].as_str().unwrap().contains(words),
            "{url}: {out}"
        );
    }

    // Loopback opened: the metadata floor still holds, at a redirect hop and for a
    // page's own requests; the blocklist holds at a redirect hop.
    let home = home_with(&format!(
        "{OPEN_LOOPBACK}  website_blocklist:\n    enabled: true\n    domains: [localhost]\n"
    ));
    let answers = serve(
        home.path(),
        &[
            (
                "meta",
                "browser_navigate",
                json!({"url": site.url("/to-metadata")}),
            ),
            (
                "leaky",
                "browser_navigate",
                json!({"url": site.url("/leaky")}),
            ),
            (
                "wait",
                "browser_console",
                json!({"expression": "new Promise(r => { const t = () => window.result === 'pending' ? setTimeout(t, 50) : r(window.result); t(); })"}),
            ),
            ("errors", "browser_console", json!({})),
            (
                "blocked",
                "browser_navigate",
                json!({"url": site.url("/to-localhost")}),
            ),
            (
                "direct",
                "browser_navigate",
                json!({"url": format!("http://localhost:{}/ok", site.port)}),
            ),
        ],
    );
    let meta = answer(&answers, "meta");
    assert_eq!(meta["success"], false, "{meta}");
    let why = meta["error"].as_str().unwrap();
    assert!(
        why.contains("cloud metadata") && why.contains("redirect"),
        "{why}"
    );
    assert_eq!(answer(&answers, "leaky")["success"], true);
    assert_eq!(
        answer(&answers, "wait")["result"],
        "failed",
        "the fetch was refused"
    );
    let errors = answer(&answers, "errors")["js_errors"].to_string();
    assert!(
        errors.contains("request refused by policy") && errors.contains("169.254.169.254"),
        "{errors}"
    );
    let blocked = answer(&answers, "blocked");
    assert!(
        blocked["error"].as_str().unwrap().contains("localhost"),
        "{blocked}"
    );
    let direct = answer(&answers, "direct");
    assert_eq!(direct["blocked_by_policy"]["host"], "localhost", "{direct}");
    // The site never saw a request for the blocked host.
    assert!(site.requests.lock().unwrap().iter().all(|r| !r
        .header("host")
        .unwrap_or_default()
        .starts_with("localhost")));
}

/// Over MCP with a `progressToken`, a navigation reports its steps (starting the
/// browser, opening the page, loaded) before its answer.
#[test]
fn navigation_steps_arrive_as_mcp_progress() {
    chromium_installed();
    let site = site();
    let home = home_with(OPEN_LOOPBACK);
    let url = site.url("/second");
    let (steps, answer) = web_support::mcp_call_with_progress(
        home.path(),
        "browser",
        "browser_navigate",
        &json!({"url": url}),
    );
    assert!(answer.contains("Second page"), "{answer}");
    assert_eq!(steps.len(), 3, "{steps:?}");
    assert_eq!(steps[0], "Starting the browser");
    assert_eq!(steps[1], format!("Opening {url}"));
    assert!(steps[2].starts_with("Loaded \"Second\""), "{steps:?}");
}

/// The processes under `root` (itself included) whose name starts with `name`.
fn descendants_named(root: u32, name: &str) -> Vec<u32> {
    let mut parents = std::collections::HashMap::new();
    let mut names = std::collections::HashMap::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": the name may hold spaces and parentheses.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let ppid: u32 = stat[close + 2..]
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        parents.insert(pid, ppid);
        names.insert(pid, stat[open + 1..close].to_string());
    }
    let under = |mut pid: u32| loop {
        if pid == root {
            return true;
        }
        match parents.get(&pid) {
            Some(&parent) if parent != 0 => pid = parent,
            _ => return false,
        }
    };
    names
        .iter()
        .filter(|(pid, comm)| comm.starts_with(name) && under(**pid))
        .map(|(pid, _)| *pid)
        .collect()
}

fn namespace(pid: &str, kind: &str) -> std::path::PathBuf {
    std::fs::read_link(format!("/proc/{pid}/ns/{kind}")).unwrap()
}

/// Chromium runs inside the sandbox the task's commands run in: its own network and
/// mount namespaces, the deny-read list hidden from it, the disk read-only but for its
/// profile. Seen from outside, through `/proc/PID/root` of its processes; with
/// `terminal.sandbox.mode: off` the same probes find the host's view, so they can fail.
#[test]
fn the_browser_runs_inside_the_sandbox() {
    chromium_installed();
    let site = site();
    for sandboxed in [true, false] {
        let home = home_with(&format!(
            "{OPEN_LOOPBACK}{}",
            if sandboxed {
                ""
            } else {
                "terminal:\n  sandbox:\n    mode: \"off\"\n"
            }
        ));
        std::fs::create_dir_all(home.path().join(".ssh")).unwrap();
        let key = home.path().join(".ssh/id_ed25519");
        std::fs::write(&key, "PRIVATE").unwrap();
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_hermes-tools"));
        command
            .args(["serve", "--toolsets", "browser"])
            .env("HERMES_HOME", home.path())
            .env("HOME", home.path())
            .current_dir(home.path());
        let mut session = common::ServeSession::spawn(command, json!({"task_id": "t1"}));
        let page = session.call("browser_navigate", json!({"url": site.url("/second")}));
        assert_eq!(page["title"], "Second", "{page}");
        let browsers = descendants_named(session.pid(), "chromium");
        assert!(!browsers.is_empty(), "no chromium process under the server");
        for pid in browsers.iter().map(u32::to_string) {
            let Ok(net) = std::fs::read_link(format!("/proc/{pid}/ns/net")) else {
                continue; // ended meanwhile
            };
            let root = std::path::PathBuf::from(format!("/proc/{pid}/root"));
            let seen = std::fs::read_to_string(root.join(key.strip_prefix("/").unwrap()));
            let planted = root
                .join(home.path().strip_prefix("/").unwrap())
                .join("planted");
            let wrote = std::fs::write(&planted, "x").is_ok();
            if sandboxed {
                assert_ne!(
                    net,
                    namespace("self", "net"),
                    "chromium {pid} shares our network"
                );
                assert_ne!(namespace(&pid, "mnt"), namespace("self", "mnt"));
                assert!(
                    !seen.as_deref().unwrap_or_default().contains("PRIVATE"),
                    "chromium {pid} sees the key"
                );
                assert!(!wrote, "chromium {pid} may write the home");
            } else {
                assert_eq!(net, namespace("self", "net"));
                assert_eq!(seen.unwrap(), "PRIVATE");
                assert!(wrote);
            }
        }
    }
}

/// Set in the copy of the test process that runs inside the private network namespace.
const IN_NAMESPACE: &str = "HERMES_BROWSER_TEST_IN_NETNS";
const PUBLIC_IP: &str = "1.1.1.1";

/// With private ranges closed, a public page's redirect into loopback, its image and
/// its fetch() from loopback are all refused, and the private server never sees a
/// request. 1.1.1.1 is put on the loopback of a new user and network namespace of
/// the test's own, so nothing leaves the machine (as in tests/web_extract.rs).
#[test]
fn a_public_page_cannot_reach_private_addresses() {
    if std::env::var_os(IN_NAMESPACE).is_some() {
        return public_page_inside_the_namespace();
    }
    chromium_installed();
    let this_test = "a_public_page_cannot_reach_private_addresses";
    let output = std::process::Command::new("unshare")
        .args(["--user", "--map-root-user", "--net", "--", "sh", "-c"])
        .arg(format!(
            "ip link set lo up && ip addr add {PUBLIC_IP}/32 dev lo && exec \"$0\" \"$@\""
        ))
        .arg(std::env::current_exe().unwrap())
        .args([this_test, "--exact", "--nocapture", "--test-threads=1"])
        .env(IN_NAMESPACE, "1")
        .output()
        .expect("unshare (util-linux) runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "inside the namespace: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

fn public_page_inside_the_namespace() {
    let private =
        Server::start(|_: &Request| -> Reply { respond(200, "text/plain", "private data\n") });
    let secret = private.url("/secret");
    let socket = private.url("/socket").replacen("http:", "ws:", 1);
    let popup = format!("{secret}?popup");
    let public = Server::start_at(PUBLIC_IP, move |request: &Request| -> Reply {
        match request.path() {
            "/page" => respond(
                200,
                "text/html",
                format!(
                    "<html><head><title>Public</title></head><body><h1>Public page</h1><img src=\"{secret}.png\">\
                     <script>window.result='pending';fetch('{secret}').then(()=>window.result='fetched',()=>window.result='failed');\
                     window.socket='pending';const ws=new WebSocket('{socket}');\
                     ws.onopen=()=>window.socket='open';ws.onerror=()=>window.socket='failed';</script></body></html>"
                ),
            ),
            _ => redirect(&secret),
        }
    });
    let home = tempfile::tempdir().unwrap();
    let answers = serve(
        home.path(),
        &[
            (
                "page",
                "browser_navigate",
                json!({"url": public.url("/page")}),
            ),
            (
                "wait",
                "browser_console",
                json!({"expression": "new Promise(r => { const t = () => window.result === 'pending' ? setTimeout(t, 50) : r(window.result); t(); })"}),
            ),
            (
                "socket",
                "browser_console",
                json!({"expression": "new Promise(r => { const t = () => window.socket === 'pending' ? setTimeout(t, 50) : r(window.socket); t(); })"}),
            ),
            (
                "popup",
                "browser_console",
                json!({"expression": format!("new Promise(r => {{ const opened = window.open('{popup}'); setTimeout(() => r(String(!!opened)), 1500); }})")}),
            ),
            ("go", "browser_navigate", json!({"url": public.url("/go")})),
        ],
    );
    assert_eq!(answer(&answers, "page")["title"], "Public", "{answers:?}");
    assert_eq!(answer(&answers, "wait")["result"], "failed");
    // A WebSocket and a popup are not paused by the page's request interception: the
    // browser's sandbox, whose one way out is the judged proxy, stops them.
    assert_eq!(
        answer(&answers, "socket")["result"],
        "failed",
        "{answers:?}"
    );
    assert_eq!(
        answer(&answers, "popup")["result"],
        true,
        "the popup opened"
    );
    let go = answer(&answers, "go")["error"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        go.contains("private or internal network address") && go.contains("redirect"),
        "{go}"
    );
    assert!(
        private.requests.lock().unwrap().is_empty(),
        "the private server was never contacted"
    );
}

/// The description as the model sees it for `--toolsets` (and a search backend).
fn navigate_description(toolsets: &str, search: bool) -> String {
    let home = tempfile::tempdir().unwrap();
    let envs: &[(&str, &str)] = if search {
        &[("SEARXNG_URL", "http://127.0.0.1:9")]
    } else {
        &[]
    };
    let out = run(home.path(), &["schema", "--toolsets", toolsets], envs, "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tools: Value = serde_json::from_slice(&out.stdout).unwrap();
    tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "browser_navigate")
        .map(|t| t["function"]["description"].as_str().unwrap().to_string())
        .expect("browser_navigate is offered")
}

#[test]
fn browser_navigate_points_only_at_tools_that_are_offered() {
    chromium_installed();
    let alone = navigate_description("browser", true);
    assert!(!alone.contains("web_search") && !alone.contains("web_extract"));
    insta::assert_snapshot!("browser_navigate_alone", alone);
    let search = navigate_description("browser,search", true);
    assert!(search.contains("web_search") && !search.contains("web_extract"));
    insta::assert_snapshot!("browser_navigate_with_web_search", search);
    let extract = navigate_description("browser,web", false);
    assert!(!extract.contains("web_search") && extract.contains("web_extract"));
    insta::assert_snapshot!("browser_navigate_with_web_extract", extract);
    let both = navigate_description("browser,web", true);
    assert!(both.contains("web_search or web_extract"));
    insta::assert_snapshot!("browser_navigate_with_both", both);
}

#[test]
fn offered_only_with_a_browser_and_cdp_tools_only_with_an_endpoint() {
    let home = tempfile::tempdir().unwrap();
    let empty_path = tempfile::tempdir().unwrap();
    let path = empty_path.path().to_str().unwrap();
    let listed = |envs: &[(&str, &str)]| -> Value {
        let out = run(
            home.path(),
            &["list", "--toolsets", "browser", "--json"],
            envs,
            "",
        );
        assert!(out.status.success());
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let available = |list: &Value, name: &str| -> bool {
        list.as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap()["available"]
            .as_bool()
            .unwrap()
    };
    let none = listed(&[("PATH", path)]);
    assert!(
        !available(&none, "browser_navigate"),
        "no Chromium on PATH: {none}"
    );
    assert!(!available(&none, "browser_cdp"));
    let text = run(
        home.path(),
        &["list", "--toolsets", "browser"],
        &[("PATH", path)],
        "",
    );
    let shown = String::from_utf8_lossy(&text.stdout);
    assert!(
        shown.contains("browser_cdp         browser-cdp      unavailable (needs BROWSER_CDP_URL)"),
        "{shown}"
    );
    // The main tools say what is missing, and how to get it.
    let reason = none
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "browser_navigate")
        .unwrap()["reason"]
        .to_string();
    assert!(
        reason.contains("install Chromium") && reason.contains("browser.cdp_url"),
        "{reason}"
    );
    // An endpoint must answer: a dead one offers nothing and says so.
    let dead = listed(&[("PATH", path), ("BROWSER_CDP_URL", "http://127.0.0.1:9")]);
    assert!(!available(&dead, "browser_navigate") && !available(&dead, "browser_cdp"));
    let why = dead
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "browser_navigate")
        .unwrap()["reason"]
        .to_string();
    assert!(why.contains("does not answer"), "{why}");
    chromium_installed();
    let profile = tempfile::tempdir().unwrap();
    let (endpoint_url, mut operator) = operator_browser(profile.path());
    let endpoint = listed(&[("PATH", path), ("BROWSER_CDP_URL", endpoint_url.as_str())]);
    let _ = operator.kill();
    let _ = operator.wait();
    assert!(available(&endpoint, "browser_navigate"));
    assert!(available(&endpoint, "browser_cdp") && available(&endpoint, "browser_dialog"));
    let local = listed(&[]);
    assert!(available(&local, "browser_navigate") && available(&local, "browser_vision"));
    assert!(
        !available(&local, "browser_dialog"),
        "dialogs need an endpoint, as in the original"
    );
}

#[test]
fn screenshots_come_back_as_images_over_serve_and_mcp() {
    let site = site();
    let home = home_with(OPEN_LOOPBACK);
    let answers = serve(
        home.path(),
        &[
            ("nav", "browser_navigate", json!({"url": site.url("/")})),
            (
                "look",
                "browser_vision",
                json!({"question": "What is the heading?", "annotate": true}),
            ),
        ],
    );
    let look = answer(&answers, "look");
    assert_eq!(look["_multimodal"], true, "{look}");
    let image = look["content"][1]["image_url"]["url"].as_str().unwrap();
    assert!(
        image.starts_with("data:image/png;base64,iVBOR"),
        "{}",
        &image[..40]
    );
    assert!(look["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("What is the heading?"));
    let path = look["meta"]["screenshot_path"].as_str().unwrap();
    assert!(std::fs::read(path).unwrap().starts_with(b"\x89PNG"));
    assert!(path.starts_with(home.path().to_str().unwrap()));
    let labels = look["meta"]["annotations"].as_array().unwrap();
    assert!(
        labels
            .iter()
            .any(|l| l["role"] == "button" && l["name"] == "Search"),
        "{labels:?}"
    );

    // MCP: one session is one task; the screenshot is an image block.
    let python = hermes_test_peers::python_with(&["mcp.client.stdio"]);
    let client = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("mcp/tests/fixtures/py_client.py");
    let calls = json!([
        {"name": "browser_navigate", "arguments": {"url": site.url("/")}},
        {"name": "browser_vision", "arguments": {"question": "Describe the page"}},
        {"name": "browser_get_images", "arguments": {}}
    ]);
    let output = std::process::Command::new(python)
        .arg(client)
        .arg(env!("CARGO_BIN_EXE_hermes-tools"))
        .args(["mcp", "--toolsets", "browser"])
        .arg("--")
        .arg(calls.to_string())
        .env("HERMES_HOME", home.path())
        .env_remove("BROWSER_CDP_URL")
        .current_dir(home.path())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let out: Value = serde_json::from_slice(&output.stdout).unwrap();
    let navigated: Value = serde_json::from_str(out["calls"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(navigated["title"], "Test Home");
    assert_eq!(out["calls"][1]["images"], json!(["image/png"]), "{out}");
    let images: Value = serde_json::from_str(out["calls"][2]["text"].as_str().unwrap()).unwrap();
    assert_eq!(images["count"], 1);
}

#[test]
fn the_agent_reads_pages_as_data() {
    chromium_installed();
    use support::{final_answer, last_message, tool_calls, Reply as ModelReply, ScriptedModel};
    let site = site();
    let model = ScriptedModel::script(vec![
        ModelReply::Json(tool_calls(&[(
            "n1",
            "browser_navigate",
            json!({"url": site.url("/")}),
        )])),
        ModelReply::Json(tool_calls(&[(
            "c1",
            "browser_console",
            json!({"expression": "document.title"}),
        )])),
        ModelReply::Json(final_answer("done")),
    ]);
    let home = home_with(OPEN_LOOPBACK);
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_hermes-tools"))
        .args([
            "agent",
            "Look at the page",
            "--base-url",
            &model.base_url,
            "--model",
            "stand-in",
            "--toolsets",
            "browser",
        ])
        .env("HERMES_HOME", home.path())
        .env_remove("HERMES_ALLOW_PRIVATE_URLS")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let seen = last_message(&model.request(1), "tool").unwrap();
    assert!(
        seen.starts_with("<untrusted_tool_result source=\"browser_navigate\">"),
        "{seen}"
    );
    assert!(seen.contains("heading \\\"Welcome\\\""), "{seen}");
    let second = last_message(&model.request(2), "tool").unwrap();
    assert!(
        second.contains("Test Home"),
        "the same page in the next call: {second}"
    );
}

/// Starts Chromium with a DevTools port of its own, as an operator would; its
/// `http://127.0.0.1:PORT` and the process.
fn operator_browser(dir: &std::path::Path) -> (String, std::process::Child) {
    let exe = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|n| common::which(n))
        .unwrap();
    let mut child = std::process::Command::new(exe)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--remote-debugging-port=0",
        ])
        .arg(format!("--user-data-dir={}", dir.display()))
        .arg("about:blank")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let port_file = dir.join("DevToolsActivePort");
    for _ in 0..300 {
        if let Ok(text) = std::fs::read_to_string(&port_file) {
            if let Some(port) = text.lines().next().filter(|l| !l.is_empty()) {
                return (format!("http://127.0.0.1:{port}"), child);
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the operator's browser did not start");
}

#[test]
fn with_an_endpoint_dialogs_wait_for_browser_dialog_and_raw_cdp_works() {
    chromium_installed();
    let site = site();
    let profile = tempfile::tempdir().unwrap();
    let (endpoint, mut browser) = operator_browser(profile.path());
    let home = home_with(&format!("{OPEN_LOOPBACK}browser:\n  cdp_url: {endpoint}\n"));
    let first = serve(
        home.path(),
        &[(
            "nav",
            "browser_navigate",
            json!({"url": site.url("/dialog")}),
        )],
    );
    let snapshot = answer(&first, "nav")["snapshot"]
        .as_str()
        .unwrap()
        .to_string();
    let ask = ref_of(&snapshot, "button \"Ask\"");
    let answers = serve(
        home.path(),
        &[
            (
                "nav",
                "browser_navigate",
                json!({"url": site.url("/dialog")}),
            ),
            ("ask", "browser_click", json!({"ref": ask})),
            ("snap", "browser_snapshot", json!({})),
            ("blocked", "browser_console", json!({"expression": "1 + 1"})),
            (
                "answer",
                "browser_dialog",
                json!({"action": "accept", "prompt_text": "Ada"}),
            ),
            ("none", "browser_dialog", json!({"action": "dismiss"})),
            (
                "out",
                "browser_console",
                json!({"expression": "document.getElementById('out').textContent"}),
            ),
            (
                "targets",
                "browser_cdp",
                json!({"method": "Target.getTargets"}),
            ),
            ("fetch", "browser_cdp", json!({"method": "Fetch.disable"})),
            (
                "nav-meta",
                "browser_cdp",
                json!({"method": "Page.navigate", "params": {"url": "http://169.254.169.254/"}}),
            ),
        ],
    );
    assert_eq!(answer(&answers, "ask")["success"], true, "{answers:?}");
    let pending = &answer(&answers, "snap")["pending_dialogs"];
    assert_eq!(pending[0]["type"], "prompt", "{answers:?}");
    assert_eq!(pending[0]["message"], "Your name?");
    assert_eq!(pending[0]["default_prompt"], "nobody");
    assert!(answer(&answers, "blocked")["error"]
        .as_str()
        .unwrap()
        .contains("browser_dialog"));
    let answered = answer(&answers, "answer");
    assert_eq!(answered["success"], true, "{answered}");
    assert_eq!(answered["dialog"]["message"], "Your name?");
    assert!(answer(&answers, "none")["error"]
        .as_str()
        .unwrap()
        .contains("no dialog"));
    assert_eq!(answer(&answers, "out")["result"], "Hello Ada");
    let targets = answer(&answers, "targets");
    assert_eq!(targets["method"], "Target.getTargets");
    assert!(
        targets["result"]["targetInfos"]
            .to_string()
            .contains("/dialog"),
        "{targets}"
    );
    assert!(answer(&answers, "fetch")["error"]
        .as_str()
        .unwrap()
        .contains("reserved"));
    assert!(answer(&answers, "nav-meta")["error"]
        .as_str()
        .unwrap()
        .contains("cloud metadata"));
    let _ = browser.kill();
    let _ = browser.wait();
}

#[test]
fn without_an_endpoint_dialogs_are_dismissed_and_never_hang_the_page() {
    let site = site();
    let home = home_with(OPEN_LOOPBACK);
    let first = serve(
        home.path(),
        &[(
            "nav",
            "browser_navigate",
            json!({"url": site.url("/dialog")}),
        )],
    );
    let snapshot = answer(&first, "nav")["snapshot"]
        .as_str()
        .unwrap()
        .to_string();
    let alert = ref_of(&snapshot, "button \"Alert\"");
    let answers = serve(
        home.path(),
        &[
            (
                "nav",
                "browser_navigate",
                json!({"url": site.url("/dialog")}),
            ),
            ("alert", "browser_click", json!({"ref": alert})),
            (
                "after",
                "browser_console",
                json!({"expression": "window.afterAlert === true"}),
            ),
        ],
    );
    assert_eq!(answer(&answers, "alert")["success"], true);
    assert_eq!(answer(&answers, "after")["result"], true, "{answers:?}");
}

#[test]
fn an_idle_context_is_closed_after_the_inactivity_timeout() {
    chromium_installed();
    let site = site();
    let home = home_with(&format!(
        "{OPEN_LOOPBACK}browser:\n  inactivity_timeout: 1\n"
    ));
    // The server's private run directory (and so each browser's profile) under a
    // directory of the test's own, to find this server's Chromium processes.
    let runtime = tempfile::tempdir().unwrap();
    let needle = runtime.path().to_str().unwrap().to_string();
    let mut command = common::serve_process::serve_command(home.path());
    command
        .args(["--toolsets", "browser"])
        .env("XDG_RUNTIME_DIR", runtime.path())
        .current_dir(home.path());
    let mut server = common::serve_process::ServeProcess::spawn(&mut command);
    let mut ask = |id: &str, name: &str, args: Value| -> Value {
        use std::io::Write;
        let line = format!("{}\n", serve_call(id, name, &args));
        server
            .stdin
            .as_mut()
            .unwrap()
            .write_all(line.as_bytes())
            .unwrap();
        let reply: Value =
            serde_json::from_str(&server.lines.recv_timeout(Duration::from_secs(120)).unwrap())
                .unwrap();
        serde_json::from_str(reply["content"].as_str().unwrap()).unwrap()
    };
    let first = ask("1", "browser_navigate", json!({"url": site.url("/second")}));
    assert_eq!(first["success"], true, "{first}");
    assert_eq!(ask("2", "browser_snapshot", json!({}))["success"], true);
    assert!(
        !common::host_pids_running(&needle).is_empty(),
        "Chromium runs"
    );
    std::thread::sleep(Duration::from_secs(4));
    // The idle context was closed, and with it the browser nothing else used.
    assert_eq!(common::survivors(&needle), Vec::<u32>::new());
    let closed = ask("3", "browser_snapshot", json!({}));
    assert!(
        closed["error"]
            .as_str()
            .unwrap()
            .contains("browser_navigate first"),
        "{closed}"
    );
    assert_eq!(
        ask("4", "browser_navigate", json!({"url": site.url("/second")}))["success"],
        true
    );
    assert!(!common::host_pids_running(&needle).is_empty());
    // The server ends: its browser goes with it.
    drop(server.stdin.take());
    let _ = server.child.wait();
    assert_eq!(common::survivors(&needle), Vec::<u32>::new());
}

#[test]
fn restricted_evaluation_and_file_pages_follow_the_operator_settings() {
    let site = site();
    let home = home_with(&format!(
        "{OPEN_LOOPBACK}browser:\n  restrict_evaluate: true\n  allow_file_urls: true\n"
    ));
    let notes = home.path().join("notes.html");
    std::fs::write(
        &notes,
        "<html><head><title>Local notes</title></head><body>notes</body></html>",
    )
    .unwrap();
    // HOME is the temporary home (web_support::run): its ~/.ssh is on the deny-read list.
    std::fs::create_dir_all(home.path().join(".ssh")).unwrap();
    let key = home.path().join(".ssh/id_ed25519");
    std::fs::write(&key, "PRIVATE").unwrap();
    let link = home.path().join("innocent.html");
    std::os::unix::fs::symlink(&key, &link).unwrap();
    let answers = serve(
        home.path(),
        &[
            ("nav", "browser_navigate", json!({"url": site.url("/")})),
            (
                "cookie",
                "browser_console",
                json!({"expression": "document.cookie"}),
            ),
            (
                "hidden",
                "browser_console",
                json!({"expression": "document['coo' + 'kie']"}),
            ),
            (
                "title",
                "browser_console",
                json!({"expression": "document.title"}),
            ),
            (
                "file",
                "browser_navigate",
                json!({"url": format!("file://{}", notes.display())}),
            ),
            (
                "key",
                "browser_navigate",
                json!({"url": format!("file://{}", key.display())}),
            ),
            (
                "link",
                "browser_navigate",
                json!({"url": format!("file://{}", link.display())}),
            ),
        ],
    );
    for id in ["cookie", "hidden"] {
        let refused = answer(&answers, id);
        assert!(
            refused["error"]
                .as_str()
                .unwrap()
                .contains("browser.restrict_evaluate"),
            "{refused}"
        );
    }
    assert_eq!(answer(&answers, "title")["result"], "Test Home");
    assert_eq!(
        answer(&answers, "file")["title"],
        "Local notes",
        "{answers:?}"
    );
    for id in ["key", "link"] {
        let refused = answer(&answers, id);
        assert_eq!(refused["success"], false, "{refused}");
        assert!(!refused.to_string().contains("PRIVATE"));
    }
}

#[test]
fn browser_vision_asks_the_auxiliary_vision_model_when_one_is_configured() {
    chromium_installed();
    use support::{final_answer, Reply as ModelReply, ScriptedModel};
    let site = site();
    let model = ScriptedModel::script(vec![ModelReply::Json(final_answer(
        "A page titled Welcome with a search form.",
    ))]);
    let home = home_with(&format!(
        "{OPEN_LOOPBACK}auxiliary:\n  vision:\n    base_url: {}\n    model: stand-in-vision\n",
        model.base_url
    ));
    let answers = serve(
        home.path(),
        &[
            ("nav", "browser_navigate", json!({"url": site.url("/")})),
            (
                "look",
                "browser_vision",
                json!({"question": "What is on the page?"}),
            ),
        ],
    );
    let look = answer(&answers, "look");
    assert_eq!(
        look["meta"]["analysis"], "A page titled Welcome with a search form.",
        "{look}"
    );
    assert!(look["text_summary"]
        .as_str()
        .unwrap()
        .starts_with("A page titled Welcome"));
    assert!(look["content"][1]["image_url"]["url"]
        .as_str()
        .unwrap()
        .starts_with("data:image/png;base64,"));
    // The model got the question and the screenshot itself.
    let request = model.request(0);
    let parts = request["messages"][0]["content"].to_string();
    assert!(
        parts.contains("What is on the page?") && parts.contains("data:image/png;base64,"),
        "{parts}"
    );
    assert_eq!(request["model"], "stand-in-vision");
}
