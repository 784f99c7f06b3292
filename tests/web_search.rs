//! web_search and web_extract on every backend through the binary.
//!
//! SearXNG is Debian's real `searx` (installed by .ci/setup.d/50-web.sh), started by
//! the test on a free loopback port with one engine: a JSON engine pointed at a
//! loopback server of the test. The paid providers (Tavily, Brave, Firecrawl, Exa,
//! Parallel) cannot be reached from here: they are strict fakes written from their
//! published API references (tests/web_support/fakes.rs), and the official Python
//! SDKs run against the same fakes, so a fake that drifted from the real API fails
//! on the SDK side too.

mod binary;
mod web_support;

use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use web_support::fakes::{self, Provider, KEY};
use web_support::{call, home_with, json_reply, run, Reply, Request, Server};

/// A running searx, stopped when dropped.
struct Searx {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Searx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// searx serving /search?format=json, its only engine the JSON server `engine`.
fn start_searx(engine: &Server) -> Searx {
    let run = PathBuf::from("/usr/bin/searx-run");
    assert!(
        run.exists(),
        "searx is missing: run `bash .ci/setup.d/50-web.sh`"
    );
    let dir = tempfile::tempdir().unwrap();
    let port = web_support::free_port();
    let settings = format!(
        r#"general: {{debug: false, instance_name: hermes-test, contact_url: false, enable_stats: false}}
brand: {{git_url: "https://example.invalid", git_branch: master, issue_url: "https://example.invalid", docs_url: "https://example.invalid", public_instances: "https://example.invalid", wiki_url: "https://example.invalid", twitter_url: "https://example.invalid"}}
search: {{safe_search: 0, autocomplete: "", default_lang: "", ban_time_on_fail: 5, max_ban_time_on_fail: 120, prefer_configured_language: false}}
server: {{port: {port}, bind_address: "127.0.0.1", secret_key: "a-key-for-this-test-only", base_url: false, image_proxy: false, http_protocol_version: "1.0", method: "GET"}}
ui: {{static_path: /usr/share/python3-searx/static, templates_path: /usr/share/python3-searx/templates, default_theme: oscar, default_locale: "", theme_args: {{oscar_style: logicodev}}}}
outgoing: {{request_timeout: 5.0, useragent_suffix: "", pool_connections: 10, pool_maxsize: 10}}
engines:
  - name: localjson
    engine: json_engine
    shortcut: lj
    categories: general
    enable_http: true
    search_url: "http://127.0.0.1:{engine}/find?q={{query}}"
    results_query: items
    url_query: link
    title_query: name
    content_query: snippet
locales: {{en: English}}
doi_resolvers: {{oadoi.org: "https://oadoi.org/"}}
default_doi_resolver: oadoi.org
"#,
        engine = engine.port
    );
    let path = dir.path().join("settings.yml");
    std::fs::write(&path, settings).unwrap();
    let child = Command::new(run)
        .env("SEARX_SETTINGS_PATH", &path)
        .current_dir(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("searx-run starts");
    let searx = Searx {
        child,
        url: format!("http://127.0.0.1:{port}"),
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "searx did not start listening");
        std::thread::sleep(Duration::from_millis(200));
    }
    searx
}

fn json_engine() -> Server {
    Server::start(|request: &Request| -> Reply {
        let query = request.query("q").unwrap_or_default();
        let items: Vec<Value> = (1..=8)
            .map(|i| json!({"link": format!("https://engine.example/{i}"), "name": format!("{query} hit {i}"), "snippet": format!("about {query}, number {i}")}))
            .collect();
        json_reply(200, &json!({"items": items}))
    })
}

#[test]
fn searxng_backend_against_debian_searx() {
    let engine = json_engine();
    let searx = start_searx(&engine);
    let home = tempfile::tempdir().unwrap();
    let env = [("SEARXNG_URL", searx.url.as_str())];
    let result = call(
        home.path(),
        "web_search",
        &json!({"query": "rust ownership", "limit": 3}),
        &env,
    );
    assert_eq!(result["success"], true, "{result}");
    let web = result["data"]["web"].as_array().unwrap();
    assert_eq!(web.len(), 3, "{result}");
    // searx scores the engine's first hit highest; positions follow the sorted order.
    assert_eq!(
        web[0],
        json!({"title": "rust ownership hit 1", "url": "https://engine.example/1", "description": "about rust ownership, number 1", "position": 1})
    );
    assert_eq!(web[2]["position"], 3);
    assert!(engine
        .requests
        .lock()
        .unwrap()
        .iter()
        .any(|r| r.query("q").as_deref() == Some("rust ownership")));

    // The default limit is 5; out-of-range limits are clamped.
    let default = call(home.path(), "web_search", &json!({"query": "x"}), &env);
    assert_eq!(default["data"]["web"].as_array().unwrap().len(), 5);
    let clamped = call(
        home.path(),
        "web_search",
        &json!({"query": "x", "limit": 0}),
        &env,
    );
    assert_eq!(clamped["data"]["web"].as_array().unwrap().len(), 1);

    // Over serve too.
    let answers = run(
        home.path(),
        &["serve"],
        &env,
        &format!(
            "{}\n",
            binary::serve_call("s1", "web_search", &json!({"query": "served", "limit": 2}))
        ),
    );
    let line = String::from_utf8_lossy(&answers.stdout);
    let answer: Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
    let content: Value = serde_json::from_str(answer["content"].as_str().unwrap()).unwrap();
    assert_eq!(
        content["data"]["web"][1]["title"], "served hit 2",
        "{content}"
    );

    // SearXNG cannot extract: asked to, the original's error text.
    let searx_home = home_with("web:\n  extract_backend: searxng\n");
    let refused = call(
        searx_home.path(),
        "web_extract",
        &json!({"urls": ["https://example.com/"]}),
        &env,
    );
    assert_eq!(
        refused,
        json!({"success": false, "error": "SearXNG is a search-only backend and cannot extract URL content. Set web.extract_backend to firecrawl, tavily, exa, parallel or local."})
    );
}

#[test]
fn searxng_that_is_down_is_an_error_result() {
    let home = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{}", web_support::free_port());
    let result = call(
        home.path(),
        "web_search",
        &json!({"query": "x"}),
        &[("SEARXNG_URL", url.as_str())],
    );
    assert_eq!(result["success"], false);
    assert!(
        result["error"]
            .as_str()
            .unwrap()
            .contains("Could not reach SearXNG"),
        "{result}"
    );
}

fn env_for(provider: Provider, base: &str) -> Vec<(&'static str, String)> {
    match provider {
        Provider::Tavily => vec![
            ("TAVILY_API_KEY", KEY.into()),
            ("TAVILY_BASE_URL", base.into()),
        ],
        Provider::Brave => vec![
            ("BRAVE_SEARCH_API_KEY", KEY.into()),
            ("BRAVE_SEARCH_BASE_URL", base.into()),
        ],
        Provider::Firecrawl => vec![
            ("FIRECRAWL_API_KEY", KEY.into()),
            ("FIRECRAWL_API_URL", base.into()),
        ],
        Provider::Exa => vec![("EXA_API_KEY", KEY.into()), ("EXA_BASE_URL", base.into())],
        Provider::Parallel => vec![
            ("PARALLEL_API_KEY", KEY.into()),
            ("PARALLEL_BASE_URL", base.into()),
        ],
    }
}

fn borrowed<'a>(env: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    env.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

/// The provider's official SDK against the fake: its parsed search and extract.
fn sdk_run(name: &str, base: &str, query: &str, urls: &[&str]) -> Value {
    let python = hermes_test_peers::python_with(&["tavily", "exa_py", "firecrawl", "parallel"]);
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/web_support/sdk_check.py");
    let output = Command::new(python)
        .arg(script)
        .args([name, base, KEY, query])
        .args(urls)
        .env_remove("PARALLEL_BASE_URL")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{name} SDK against the fake: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn check_provider(provider: Provider, name: &str) {
    let fake = fakes::start(provider);
    let base = fake.url("");
    let env = env_for(provider, &base);
    let home = tempfile::tempdir().unwrap();
    let query = format!("{name} query");

    let result = call(
        home.path(),
        "web_search",
        &json!({"query": query, "limit": 3}),
        &borrowed(&env),
    );
    assert_eq!(result["success"], true, "{name}: {result}");
    let expected: Vec<Value> = fakes::hits(&query, 3)
        .into_iter()
        .enumerate()
        .map(|(i, (title, url, description))| json!({"title": title, "url": url, "description": description, "position": i + 1}))
        .collect();
    assert_eq!(result["data"]["web"], json!(expected), "{name}");

    // A wrong key is an error result, not a crash.
    let mut wrong = env.clone();
    wrong[0].1 = "not-the-key".into();
    let failed = call(
        home.path(),
        "web_search",
        &json!({"query": query}),
        &borrowed(&wrong),
    );
    assert_eq!(failed["success"], false, "{name}: {failed}");
    assert!(
        failed["error"].as_str().unwrap().contains("401"),
        "{name}: {failed}"
    );

    if provider == Provider::Brave {
        // Brave only searches: asked to extract, the original's error text.
        let brave_home = home_with("web:\n  extract_backend: brave-free\n");
        let refused = call(
            brave_home.path(),
            "web_extract",
            &json!({"urls": ["https://93.184.216.34/"]}),
            &borrowed(&env),
        );
        assert_eq!(
            refused["error"],
            "Brave Search (Free) is a search-only backend and cannot extract URL content. Set web.extract_backend to firecrawl, tavily, exa, parallel or local."
        );
    } else {
        // Extraction through the provider. Literal public addresses need no name
        // lookup here; the provider (the fake) "fetches" them. A private target is
        // refused before the provider hears of it.
        let page = "https://93.184.216.34/page";
        let missing = "https://93.184.216.34/unreachable";
        let extracted = call(
            home.path(),
            "web_extract",
            &json!({"urls": [page, "http://10.0.0.8/internal", missing]}),
            &borrowed(&env),
        );
        let results = extracted["results"]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: {extracted}"));
        assert_eq!(results[0]["url"], page, "{name}: {extracted}");
        assert_eq!(results[0]["content"], fakes::page_text(page), "{name}");
        assert_eq!(results[0]["error"], Value::Null, "{name}");
        assert!(
            results[1]["error"]
                .as_str()
                .unwrap()
                .starts_with("Blocked: URL targets a private"),
            "{name}"
        );
        assert!(results[2]["error"].is_string(), "{name}: {}", results[2]);
        let sent: Vec<String> = fake
            .requests
            .lock()
            .unwrap()
            .iter()
            .map(|r| String::from_utf8_lossy(&r.body).into_owned())
            .collect();
        assert!(
            !sent.iter().any(|b| b.contains("10.0.0.8")),
            "{name}: the private URL reached the provider"
        );
    }

    // The SDK, against the same fake, sees the same search results.
    if provider != Provider::Brave {
        let sdk = sdk_run(name, &base, &query, &["https://docs.example.org/page"]);
        let sdk_search: Vec<Value> = sdk["search"].as_array().unwrap().clone();
        let ours: Vec<Value> = expected
            .iter()
            .map(|r| json!({"title": r["title"], "url": r["url"], "description": r["description"]}))
            .collect();
        assert_eq!(sdk_search, ours, "{name} SDK");
        assert_eq!(
            sdk["extract"][0]["content"],
            fakes::page_text("https://docs.example.org/page"),
            "{name} SDK"
        );
    }
}

#[test]
fn tavily_backend_and_sdk() {
    check_provider(Provider::Tavily, "tavily");
}

#[test]
fn brave_backend() {
    check_provider(Provider::Brave, "brave");
}

#[test]
fn firecrawl_backend_and_sdk() {
    check_provider(Provider::Firecrawl, "firecrawl");
}

#[test]
fn exa_backend_and_sdk() {
    check_provider(Provider::Exa, "exa");
}

#[test]
fn parallel_backend_and_sdk() {
    check_provider(Provider::Parallel, "parallel");
}

#[test]
fn backend_choice_follows_config_then_keys_in_order() {
    let (tavily, exa, parallel) = (
        fakes::start(Provider::Tavily),
        fakes::start(Provider::Exa),
        fakes::start(Provider::Parallel),
    );
    let mut env = env_for(Provider::Tavily, &tavily.url(""));
    env.extend(env_for(Provider::Exa, &exa.url("")));
    env.extend(env_for(Provider::Parallel, &parallel.url("")));
    let env = borrowed(&env);
    let searched = |yaml: &str| -> [usize; 3] {
        let home = home_with(yaml);
        let before = [&tavily, &exa, &parallel].map(|f| f.requests.lock().unwrap().len());
        let result = call(home.path(), "web_search", &json!({"query": "which"}), &env);
        assert_eq!(result["success"], true, "{yaml}: {result}");
        let after = [&tavily, &exa, &parallel].map(|f| f.requests.lock().unwrap().len());
        [0, 1, 2].map(|i| after[i] - before[i])
    };
    // Keys only: the original's order (Tavily before Exa before Parallel).
    assert_eq!(searched(""), [1, 0, 0]);
    // web.backend, then web.search_backend over it.
    assert_eq!(searched("web:\n  backend: parallel\n"), [0, 0, 1]);
    assert_eq!(
        searched("web:\n  backend: parallel\n  search_backend: exa\n"),
        [0, 1, 0]
    );
    // A search_backend that cannot run (no key) falls back to web.backend.
    assert_eq!(
        searched("web:\n  backend: parallel\n  search_backend: firecrawl\n"),
        [0, 0, 1]
    );

    // Extraction: web.extract_backend, else web.backend, else keys, else local.
    let extracted_by = |yaml: &str, env: &[(&str, &str)]| -> Value {
        let home = home_with(yaml);
        call(
            home.path(),
            "web_extract",
            &json!({"urls": ["https://93.184.216.34/doc"]}),
            env,
        )
    };
    let before = exa.requests.lock().unwrap().len();
    let result = extracted_by("web:\n  backend: tavily\n  extract_backend: exa\n", &env);
    assert_eq!(
        result["results"][0]["content"],
        fakes::page_text("https://93.184.216.34/doc"),
        "{result}"
    );
    assert_eq!(exa.requests.lock().unwrap().len(), before + 1);
    // With no key and no configuration the keyless local backend runs: every test in
    // tests/web_extract.rs is that case.
}

#[test]
fn web_search_over_mcp_and_a_result_passed_back_to_web_extract() {
    let pages = Server::start(|request: &Request| -> Reply {
        web_support::respond(
            200,
            "text/plain",
            format!("the page at {}\n", request.path()),
        )
    });
    let page_base = pages.url("");
    let engine = Server::start(move |request: &Request| -> Reply {
        let query = request.query("q").unwrap_or_default();
        let items: Vec<Value> = (1..=3)
            .map(|i| json!({"link": format!("{page_base}/page{i}"), "name": format!("{query} page {i}"), "snippet": format!("page {i}")}))
            .collect();
        json_reply(200, &json!({"items": items}))
    });
    let searx = start_searx(&engine);
    // The pages are on loopback, a private range the operator opens here.
    let home = home_with(web_support::OPEN_LOOPBACK);

    let python = hermes_test_peers::python_with(&["mcp.client.stdio"]);
    let client = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("mcp/tests/fixtures/py_client.py");
    let run_mcp = |calls: &Value| -> Value {
        let output = Command::new(&python)
            .arg(&client)
            .arg(env!("CARGO_BIN_EXE_hermes-tools"))
            .args(["mcp", "--toolsets", "web"])
            .arg("--")
            .arg(calls.to_string())
            .env("HERMES_HOME", home.path())
            .env("SEARXNG_URL", &searx.url)
            .current_dir(home.path())
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        serde_json::from_slice(&output.stdout).unwrap()
    };

    let searched =
        run_mcp(&json!([{"name": "web_search", "arguments": {"query": "over mcp", "limit": 2}}]));
    let tools = searched["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["web_extract", "web_search"],
        "a search backend is set"
    );
    let search_schema = &tools[1]["inputSchema"];
    assert_eq!(
        search_schema["required"],
        json!(["query"]),
        "{search_schema}"
    );
    let extract_items = &tools[0]["inputSchema"]["properties"]["urls"]["items"];
    assert_eq!(
        extract_items["anyOf"][0],
        json!({"type": "string"}),
        "{extract_items}"
    );
    assert_eq!(searched["calls"][0]["isError"], false, "{searched}");
    let result: Value =
        serde_json::from_str(searched["calls"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(result["success"], true, "{result}");
    let web = result["data"]["web"].as_array().unwrap();
    assert_eq!(web.len(), 2, "{result}");
    assert_eq!(web[0]["title"], "over mcp page 1");
    assert_eq!(web[0]["url"], pages.url("/page1"));

    // The search results go back to web_extract as they came, as objects.
    let extracted = run_mcp(
        &json!([{"name": "web_extract", "arguments": {"urls": [web[0], {"href": web[1]["url"]}, {"title": "no address"}]}}]),
    );
    let result: Value =
        serde_json::from_str(extracted["calls"][0]["text"].as_str().unwrap()).unwrap();
    let results = result["results"].as_array().unwrap();
    assert_eq!(results[0]["content"], "the page at /page1\n", "{result}");
    assert_eq!(results[1]["content"], "the page at /page2\n", "{result}");
    assert_eq!(
        results[2]["error"],
        "Invalid URL item at index 2: expected a URL string or an object with a string 'url' or 'href' field",
        "{result}"
    );
}
