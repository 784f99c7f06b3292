//! web_extract with the keyless `local` backend through the binary (`call`, `serve`,
//! `mcp`), against real pages served on loopback by the test. Loopback is a private
//! range: the tests open it with `security.allow_private_urls` or
//! `HERMES_ALLOW_PRIVATE_URLS`, and one test shows it is refused without them.

mod binary;
mod web_support;

use serde_json::{json, Value};
use std::io::Write;
use std::time::Duration;
use web_support::{call, home_with, redirect, respond, run, Reply, Request, Server, OPEN_LOOPBACK};

const ARTICLE: &str = r#"<!doctype html><html><head><title>Rust release notes</title>
<script>var tracking = "should not appear";</script></head><body>
<nav><a href="/">Home</a> | <a href="/about">About</a></nav>
<article><h1>What changed in this release</h1>
<p>The borrow checker now accepts more programs that were always sound. This paragraph is long
enough that a readability algorithm picks the article as the main content of this page.</p>
<p>Second paragraph: <a href="/docs/guide">the guide</a> explains the details of the change,
with examples, migration notes and a list of known issues that were fixed in this release.</p>
<p><img alt="benchmark chart" src="data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="></p>
<p><img alt="logo" src="https://example.com/logo.png"></p>
</article><footer>Copyright footer text</footer></body></html>"#;

fn long_page() -> String {
    let paragraphs: String = (0..400)
        .map(|i| {
            format!("<p>Paragraph number {i} of the long document, with some words in it.</p>\n")
        })
        .collect();
    format!("<html><head><title>Long</title></head><body><article><h1>Long document</h1>\n{paragraphs}</article></body></html>")
}

/// A one-page PDF whose page shows `text` in Helvetica, with a correct xref table.
fn pdf(text: &str) -> Vec<u8> {
    let stream = format!("BT /F1 18 Tf 72 720 Td ({text}) Tj ET");
    let objects = [
        "<< /Type /Catalog /Pages 2 0 R >>".to_string(),
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>".to_string(),
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>".to_string(),
        format!("<< /Length {} >>\nstream\n{stream}\nendstream", stream.len()),
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>".to_string(),
    ];
    let mut out = b"%PDF-1.4\n".to_vec();
    let mut offsets = Vec::new();
    for (i, object) in objects.iter().enumerate() {
        offsets.push(out.len());
        out.extend_from_slice(format!("{} 0 obj\n{object}\nendobj\n", i + 1).as_bytes());
    }
    let xref = out.len();
    out.extend_from_slice(
        format!("xref\n0 {}\n0000000000 65535 f \n", objects.len() + 1).as_bytes(),
    );
    for offset in offsets {
        out.extend_from_slice(format!("{offset:010} 00000 n \n").as_bytes());
    }
    out.extend_from_slice(
        format!(
            "trailer\n<< /Size {} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n",
            objects.len() + 1
        )
        .as_bytes(),
    );
    out
}

fn site() -> Server {
    Server::start(|request: &Request| -> Reply {
        match request.path() {
            "/article" => respond(200, "text/html; charset=utf-8", ARTICLE),
            "/long" => respond(200, "text/html", long_page()),
            "/notes.txt" => respond(200, "text/plain", "plain notes\nsecond line\n"),
            "/missing" => respond(404, "text/html", "<html><body>not here</body></html>"),
            "/image.png" => respond(200, "image/png", vec![0x89, b'P', b'N', b'G']),
            "/paper.pdf" => respond(200, "application/pdf", pdf("Attention is all you need")),
            "/broken.pdf" => respond(
                200,
                "application/pdf",
                b"%PDF-1.4\nnot really a pdf".to_vec(),
            ),
            "/hop1" => redirect("/hop2"),
            "/hop2" => redirect("/hop3"),
            "/hop3" => redirect("http://169.254.169.254/latest/meta-data/iam/"),
            "/to-blocked" => redirect("http://blocked.localhost/"),
            "/to-article" => redirect("/article"),
            "/slow" => Box::new(|stream| {
                std::thread::sleep(Duration::from_secs(20));
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nhi");
            }),
            "/huge" => Box::new(|stream| {
                // 50 MB, chunked, no length announced: the cap must hold while reading.
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nTransfer-Encoding: chunked\r\n\r\n",
                );
                let chunk = vec![b'a'; 1024 * 1024];
                for _ in 0..50 {
                    let head = format!("{:x}\r\n", chunk.len());
                    if stream.write_all(head.as_bytes()).is_err()
                        || stream.write_all(&chunk).is_err()
                        || stream.write_all(b"\r\n").is_err()
                    {
                        return;
                    }
                }
                let _ = stream.write_all(b"0\r\n\r\n");
            }),
            _ => respond(404, "text/plain", "no"),
        }
    })
}

fn first(result: &Value) -> &Value {
    &result["results"][0]
}

#[test]
fn loopback_is_refused_unless_opened_by_config_or_environment() {
    let server = site();
    let url = server.url("/article");
    let closed = tempfile::tempdir().unwrap();
    let result = call(closed.path(), "web_extract", &json!({"urls": [url]}), &[]);
    let error = first(&result)["error"].as_str().unwrap();
    assert!(
        error.starts_with("Blocked: URL targets a private or internal network address"),
        "{result}"
    );
    assert!(
        server.requests.lock().unwrap().is_empty(),
        "nothing was fetched"
    );

    let by_env = call(
        closed.path(),
        "web_extract",
        &json!({"urls": [url]}),
        &[("HERMES_ALLOW_PRIVATE_URLS", "true")],
    );
    assert_eq!(first(&by_env)["error"], Value::Null, "{by_env}");

    // An explicit `false` in the environment wins over the file.
    let opened = home_with(OPEN_LOOPBACK);
    let denied = call(
        opened.path(),
        "web_extract",
        &json!({"urls": [url]}),
        &[("HERMES_ALLOW_PRIVATE_URLS", "false")],
    );
    assert!(
        first(&denied)["error"]
            .as_str()
            .unwrap()
            .starts_with("Blocked"),
        "{denied}"
    );
}

#[test]
fn a_page_becomes_clean_markdown() {
    let server = site();
    let home = home_with(OPEN_LOOPBACK);
    let result = call(
        home.path(),
        "web_extract",
        &json!({"urls": [server.url("/article")]}),
        &[],
    );
    let page = first(&result);
    assert_eq!(page["error"], Value::Null, "{result}");
    assert_eq!(page["url"], server.url("/article"));
    assert_eq!(page["title"], "Rust release notes");
    let content = page["content"].as_str().unwrap();
    assert!(
        content.contains("The borrow checker now accepts more programs"),
        "{content}"
    );
    assert!(
        content.contains(&format!("[the guide]({})", server.url("/docs/guide"))),
        "{content}"
    );
    assert!(content.contains("[IMAGE: benchmark chart]"), "{content}");
    assert!(!content.contains("base64"), "{content}");
    assert!(
        content.contains("https://example.com/logo.png"),
        "{content}"
    );
    assert!(!content.contains("should not appear"), "{content}");
}

#[test]
fn pdfs_come_back_as_text_and_broken_ones_as_errors() {
    let server = site();
    let home = home_with(OPEN_LOOPBACK);
    let result = call(
        home.path(),
        "web_extract",
        &json!({"urls": [server.url("/paper.pdf"), server.url("/broken.pdf")]}),
        &[],
    );
    let results = result["results"].as_array().unwrap();
    assert_eq!(results[0]["error"], Value::Null, "{result}");
    assert!(
        results[0]["content"]
            .as_str()
            .unwrap()
            .contains("Attention is all you need"),
        "{result}"
    );
    assert!(
        results[1]["error"]
            .as_str()
            .unwrap()
            .starts_with("Could not read the PDF"),
        "{result}"
    );
}

#[test]
fn every_item_gets_a_result_in_order() {
    let server = site();
    let home = home_with(OPEN_LOOPBACK);
    let result = call(
        home.path(),
        "web_extract",
        &json!({"urls": [
            server.url("/notes.txt"),
            server.url("/missing"),
            "  ",
            server.url("/image.png"),
            server.url("/to-article"),
            server.url("/article"),
        ]}),
        &[],
    );
    let results = result["results"].as_array().unwrap();
    assert_eq!(results.len(), 5, "at most 5 URLs: {result}");
    assert_eq!(results[0]["content"], "plain notes\nsecond line\n");
    assert!(
        results[1]["error"].as_str().unwrap().contains("HTTP 404"),
        "{}",
        results[1]
    );
    assert!(
        results[2]["error"]
            .as_str()
            .unwrap()
            .starts_with("Invalid URL item at index 2"),
        "{}",
        results[2]
    );
    assert!(
        results[3]["error"].as_str().unwrap().contains("image/png"),
        "{}",
        results[3]
    );
    assert_eq!(
        results[4]["url"],
        server.url("/article"),
        "the URL after redirects"
    );
    assert_eq!(results[4]["title"], "Rust release notes");
}

#[test]
fn redirects_into_the_metadata_floor_or_a_blocked_site_are_refused() {
    let server = site();
    let home = home_with(&format!(
        "{OPEN_LOOPBACK}  website_blocklist:\n    enabled: true\n    domains: [blocked.localhost]\n"
    ));
    let result = call(
        home.path(),
        "web_extract",
        &json!({"urls": [server.url("/hop1"), server.url("/to-blocked"), "https://www.blocked.localhost/page"]}),
        &[],
    );
    let results = result["results"].as_array().unwrap();
    assert!(
        results[0]["error"]
            .as_str()
            .unwrap()
            .contains("cloud metadata endpoint"),
        "private ranges are open, the metadata floor is not: {}",
        results[0]
    );
    for blocked in &results[1..] {
        assert_eq!(
            blocked["blocked_by_policy"],
            json!({"host": blocked["blocked_by_policy"]["host"], "rule": "blocked.localhost", "source": "config"}),
            "{blocked}"
        );
        assert!(
            blocked["error"]
                .as_str()
                .unwrap()
                .starts_with("Blocked by website policy: '"),
            "{blocked}"
        );
    }
    assert_eq!(
        results[2]["blocked_by_policy"]["host"],
        "www.blocked.localhost"
    );
    let fetched: Vec<String> = server
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.target.clone())
        .collect();
    assert_eq!(
        fetched.iter().filter(|t| t.starts_with("/hop")).count(),
        3,
        "{fetched:?}"
    );
}

#[test]
fn slow_servers_time_out_and_huge_bodies_are_capped() {
    let server = site();
    let home = home_with(&format!("{OPEN_LOOPBACK}web:\n  extract_timeout: 2\n"));
    let result = call(
        home.path(),
        "web_extract",
        &json!({"urls": [server.url("/slow"), server.url("/huge"), server.url("/article")]}),
        &[],
    );
    let results = result["results"].as_array().unwrap();
    assert!(
        results[0]["error"]
            .as_str()
            .unwrap()
            .starts_with("Timed out after 2s"),
        "{}",
        results[0]
    );
    assert!(
        results[1]["error"]
            .as_str()
            .unwrap()
            .contains("larger than the 10 MB limit"),
        "{}",
        results[1]
    );
    assert_eq!(
        results[2]["error"],
        Value::Null,
        "the other URLs are still read"
    );
}

#[test]
fn long_pages_are_cut_with_a_read_file_pointer_to_the_stored_text() {
    let server = site();
    let home = home_with(OPEN_LOOPBACK);
    let result = call(
        home.path(),
        "web_extract",
        &json!({"urls": [server.url("/long")], "char_limit": 2000}),
        &[],
    );
    let content = first(&result)["content"].as_str().unwrap().to_string();
    assert!(content.contains("[TRUNCATED]"), "{content}");
    assert!(content.contains("Paragraph number 0 "), "head kept");
    assert!(content.contains("Paragraph number 399 "), "tail kept");
    assert!(
        !content.contains("Paragraph number 200 "),
        "middle left out"
    );
    let stored = content
        .lines()
        .find_map(|l| l.strip_prefix("Full text saved to: "))
        .unwrap()
        .to_string();
    assert!(
        stored.starts_with(&home.path().join("cache/web").display().to_string()),
        "{stored}"
    );
    let call_line = content
        .lines()
        .find(|l| l.starts_with("To read the omitted middle: read_file"))
        .unwrap();
    let offset: u64 = call_line
        .split("offset=")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();

    // The pointer works: read_file pages into the omitted middle.
    let middle = call(
        home.path(),
        "read_file",
        &json!({"path": stored, "offset": offset + 100, "limit": 5}),
        &[],
    );
    let text = middle["content"].as_str().unwrap();
    let first_line = text.lines().next().unwrap();
    assert!(
        first_line.starts_with(&format!("{}|Paragraph number", offset + 100)),
        "{middle}"
    );
    // Those lines are ones the inline window left out.
    let paragraph = first_line.split('|').nth(1).unwrap();
    assert!(
        !content.contains(paragraph),
        "{paragraph} was already inline"
    );
    let full = std::fs::read_to_string(&stored).unwrap();
    assert!(full.contains("Paragraph number 200 "));

    // Below the floor of 2000 the budget is raised to it; bad input is an error, not a crash.
    let small = call(
        home.path(),
        "web_extract",
        &json!({"urls": [server.url("/long")], "char_limit": 10}),
        &[],
    );
    assert!(first(&small)["content"]
        .as_str()
        .unwrap()
        .contains("[TRUNCATED]"));
}

#[test]
fn urls_carrying_secrets_are_refused_before_anything_is_sent() {
    let server = site();
    let home = home_with(OPEN_LOOPBACK);
    let token = call(
        home.path(),
        "web_extract",
        &json!({"urls": [server.url("/article?token=abc123")]}),
        &[],
    );
    assert_eq!(token["success"], false);
    assert!(
        token["error"]
            .as_str()
            .unwrap()
            .contains("credential-like query parameter (token)"),
        "{token}"
    );
    let key = call(
        home.path(),
        "web_extract",
        &json!({"urls": [server.url("/article?q=sk-abcdefghijklmnopqrstu")]}),
        &[],
    );
    assert_eq!(
        key["error"],
        "Blocked: URL contains what appears to be an API key or token. Secrets must not be sent in URLs."
    );
    assert!(server.requests.lock().unwrap().is_empty());
}

#[test]
fn web_extract_over_serve_and_mcp() {
    let server = site();
    let home = home_with(OPEN_LOOPBACK);
    let answers = binary::serve(
        home.path(),
        &[],
        &[binary::serve_call(
            "1",
            "web_extract",
            &json!({"urls": [server.url("/article")]}),
        )],
    );
    let served = binary::content_of(&answers, "1");
    assert_eq!(
        served["results"][0]["title"], "Rust release notes",
        "{served}"
    );

    let python = hermes_test_peers::python_with(&["mcp.client.stdio"]);
    let client = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("mcp/tests/fixtures/py_client.py");
    let calls = json!([{"name": "web_extract", "arguments": {"urls": [server.url("/notes.txt")]}}]);
    let output = std::process::Command::new(python)
        .arg(client)
        .arg(env!("CARGO_BIN_EXE_hermes-tools"))
        .args(["mcp", "--toolsets", "web"])
        .arg("--")
        .arg(calls.to_string())
        .env("HERMES_HOME", home.path())
        .env_remove("SEARXNG_URL")
        .current_dir(home.path())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let out: Value = serde_json::from_slice(&output.stdout).unwrap();
    let names: Vec<&str> = out["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["web_extract"],
        "no search backend, so no web_search"
    );
    let result: Value = serde_json::from_str(out["calls"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(
        result["results"][0]["content"], "plain notes\nsecond line\n",
        "{result}"
    );
}

#[test]
fn the_schema_offers_extract_always_and_search_with_a_backend() {
    let home = tempfile::tempdir().unwrap();
    let names = |envs: &[(&str, &str)]| -> Vec<String> {
        let out = run(home.path(), &["schema", "--toolsets", "web"], envs, "");
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
            .map(|t| t["function"]["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&[]), ["web_extract"]);
    assert_eq!(
        names(&[("SEARXNG_URL", "http://127.0.0.1:9")]),
        ["web_extract", "web_search"]
    );
    let out = run(
        home.path(),
        &["schema", "--toolsets", "web"],
        &[("TAVILY_API_KEY", "tvly-test")],
        "",
    );
    let tools: Value = serde_json::from_slice(&out.stdout).unwrap();
    let extract = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "web_extract")
        .unwrap();
    let params = &extract["function"]["parameters"];
    assert_eq!(params["properties"]["urls"]["maxItems"], 5);
    let items = &params["properties"]["urls"]["items"]["anyOf"];
    assert_eq!(items[0]["type"], "string", "{params}");
    assert_eq!(items[1]["type"], "object", "{params}");
    for key in ["url", "href"] {
        assert_eq!(items[1]["properties"][key]["type"], "string", "{params}");
    }
    assert_eq!(params["properties"]["char_limit"]["minimum"], 2000);
    let search = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "web_search")
        .unwrap();
    let limit = &search["function"]["parameters"]["properties"]["limit"];
    assert_eq!(
        (
            limit["minimum"].clone(),
            limit["maximum"].clone(),
            limit["default"].clone()
        ),
        (json!(1), json!(100), json!(5))
    );
}

/// Set in the copy of the test process that runs inside the private network namespace.
const IN_NAMESPACE: &str = "HERMES_WEB_TEST_IN_NETNS";
/// A public address (TEST-NET ranges would be refused as reserved before any redirect).
const PUBLIC_IP: &str = "1.1.1.1";

/// The first hop is a public address, its redirect points into loopback: the redirect
/// is refused with private ranges closed. The public address is made local without
/// touching the machine: the test runs itself again inside a new user and network
/// namespace (`unshare`), whose only interface is its own loopback, and puts
/// 1.1.1.1 on it there. No packet can leave that namespace, and the binary under test
/// is the shipped one, resolving and connecting as it always does.
#[test]
fn a_redirect_from_a_public_address_into_a_private_one_is_refused() {
    if std::env::var_os(IN_NAMESPACE).is_some() {
        return redirect_into_private_inside_the_namespace();
    }
    let this_test = "a_redirect_from_a_public_address_into_a_private_one_is_refused";
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

fn redirect_into_private_inside_the_namespace() {
    let private =
        Server::start(|_: &Request| -> Reply { respond(200, "text/plain", "private data\n") });
    let secret = private.url("/secret");
    let public = Server::start_at(PUBLIC_IP, move |request: &Request| -> Reply {
        match request.path() {
            "/page" => respond(200, "text/plain", "a public page\n"),
            _ => redirect(&secret),
        }
    });
    // Private ranges closed: the default.
    let home = tempfile::tempdir().unwrap();
    let result = call(
        home.path(),
        "web_extract",
        &json!({"urls": [public.url("/page"), public.url("/go")]}),
        &[],
    );
    let results = result["results"].as_array().unwrap();
    assert_eq!(
        results[0]["content"], "a public page\n",
        "the public address is reached: {result}"
    );
    let refused = results[1]["error"].as_str().unwrap_or_default();
    assert!(
        refused.contains("private or internal network address"),
        "{result}"
    );
    assert_eq!(results[1]["content"], "", "{result}");
    assert_eq!(public.requests.lock().unwrap().len(), 2);
    assert!(
        private.requests.lock().unwrap().is_empty(),
        "the private server was never contacted"
    );
}

#[test]
fn urls_take_search_results_and_name_a_wrong_item_type() {
    let server = site();
    let home = home_with(OPEN_LOOPBACK);
    let search_result = json!({"title": "Notes", "url": server.url("/notes.txt"), "description": "notes", "position": 1});
    let result = call(
        home.path(),
        "web_extract",
        // The third item is the shape a strict-mode model sends: every key, null for unset.
        &json!({"urls": [search_result, {"url": "", "href": server.url("/notes.txt")}, {"url": null, "href": server.url("/notes.txt")}, {"title": "no address"}]}),
        &[],
    );
    let results = result["results"].as_array().unwrap();
    for found in &results[..3] {
        assert_eq!(found["content"], "plain notes\nsecond line\n", "{result}");
    }
    assert_eq!(
        results[3]["error"],
        "Invalid URL item at index 3: expected a URL string or an object with a string 'url' or 'href' field"
    );

    let wrong = call(home.path(), "web_extract", &json!({"urls": [42]}), &[]);
    assert!(
        wrong["error"].as_str().unwrap_or_default().contains(
            "argument `urls`: each item of urls is a URL string or an object with a string 'url' or 'href' field"
        ),
        "{wrong}"
    );
}

/// Python's HTTPS server on a loopback port, serving one article to every GET.
struct TlsServer {
    child: std::process::Child,
    port: u16,
}

impl TlsServer {
    fn start(certificate: &std::path::Path, key: &std::path::Path) -> TlsServer {
        const SERVER: &str = r#"
import http.server, ssl, sys
class Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = (b"<html><head><title>Served over TLS</title></head><body><article>"
                b"<h1>Served over TLS</h1><p>This page came through a pinned connection that "
                b"checked the certificate against the authority the operator named.</p>"
                b"</article></body></html>")
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Page)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(sys.argv[1], sys.argv[2])
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;
        let mut child = std::process::Command::new("python3")
            .args(["-c", SERVER])
            .arg(certificate)
            .arg(key)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(child.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let port = line
            .trim()
            .parse()
            .expect("the TLS server printed its port");
        TlsServer { child, port }
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_https_page_comes_through_the_pinned_connection_checked_against_ssl_cert_file() {
    let dir = tempfile::tempdir().unwrap();
    let (authority, certificate, key) = web_support::test_authority(dir.path());
    let server = TlsServer::start(&certificate, &key);
    let home = home_with(OPEN_LOOPBACK);
    let url = format!("https://localhost:{}/article", server.port);
    let args = json!({"urls": [url]});

    // The name is resolved once, the checked address dialled, and TLS verifies the
    // certificate for the URL's name against the authority SSL_CERT_FILE names.
    let trusted = call(
        home.path(),
        "web_extract",
        &args,
        &[("SSL_CERT_FILE", authority.to_str().unwrap())],
    );
    let page = &trusted["results"][0];
    assert_eq!(page["error"], Value::Null, "{trusted}");
    assert!(
        page["content"]
            .as_str()
            .unwrap()
            .contains("came through a pinned connection"),
        "{trusted}"
    );

    // Without it, Mozilla's roots do not know the authority: no content, an error.
    let untrusted = call(home.path(), "web_extract", &args, &[]);
    let refused = &untrusted["results"][0];
    assert_eq!(refused["content"], "", "{untrusted}");
    assert!(
        refused["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{untrusted}"
    );
}

/// Over MCP with a `progressToken`, each page is reported as it is read.
#[test]
fn each_page_read_arrives_as_mcp_progress() {
    let site = Server::start(|request: &Request| -> Reply {
        respond(
            200,
            "text/html",
            format!(
                "<html><head><title>P</title></head><body><p>page {}</p></body></html>",
                request.path()
            ),
        )
    });
    let home = home_with(OPEN_LOOPBACK);
    let urls = [site.url("/one"), site.url("/two")];
    let (steps, answer) = web_support::mcp_call_with_progress(
        home.path(),
        "web",
        "web_extract",
        &json!({"urls": urls}),
    );
    assert!(
        answer.contains("page /one") && answer.contains("page /two"),
        "{answer}"
    );
    assert_eq!(steps.len(), 2, "{steps:?}");
    assert!(steps[0].starts_with("Read 1 of 2: ") && steps[1].starts_with("Read 2 of 2: "));
    for url in &urls {
        assert!(steps.iter().any(|s| s.ends_with(url.as_str())), "{steps:?}");
    }
}
