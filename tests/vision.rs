//! vision_analyze through the binary: images of every accepted type made here, loaded
//! from data URLs, files and http URLs, brought within the caps, and described by an
//! auxiliary model: a strict chat-completions stand-in (tests/vision_support), which
//! the official `openai` Python SDK is run against too. Callers that take images
//! (`mcp`, `serve --images`) get the image itself. Files are read inside the task's
//! environment on the `docker` backend (podman, an image built here) and the `ssh`
//! backend (an sshd of the test's own on loopback).

mod common;
#[path = "vision_support/podman.rs"]
mod podman;
#[path = "common/sshd.rs"]
mod sshd;
#[path = "../agent/tests/support/mod.rs"]
mod support;
mod vision_support;
mod web_support;

use base64::Engine;
use serde_json::{json, Value};
use std::io::Cursor;
use std::path::Path;
use web_support::{call, redirect, respond, run, Reply, Request, Server};

fn home_for(aux: &Server, extra: &str) -> tempfile::TempDir {
    web_support::home_with(&format!(
        "auxiliary:\n  vision:\n    base_url: {}\n    model: test-vision-model\n    api_key: {}\n{extra}",
        aux.url("/v1"),
        vision_support::KEY
    ))
}

const OPEN: &str = "security:\n  allow_private_urls: true\n";

fn noise(w: u32, h: u32) -> image::DynamicImage {
    let mut state = 0x9e37_79b9_u32;
    image::DynamicImage::ImageRgb8(image::RgbImage::from_fn(w, h, |x, y| {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        image::Rgb([(x % 256) as u8, (y % 256) as u8, state as u8])
    }))
}

fn encode(img: &image::DynamicImage, format: image::ImageFormat) -> Vec<u8> {
    let mut out = Vec::new();
    img.write_to(&mut Cursor::new(&mut out), format).unwrap();
    out
}

fn data_url(mime: &str, bytes: &[u8]) -> String {
    format!(
        "data:{mime};base64,{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    )
}

fn analyze(home: &Path, image_url: &str) -> Value {
    call(
        home,
        "vision_analyze",
        &json!({"image_url": image_url, "question": "what is it?"}),
        &[],
    )
}

/// "I see image/png 40x30 1234b | ..." → ("image/png", 40, 30, 1234).
fn seen(result: &Value) -> (String, u32, u32, usize) {
    assert_eq!(result["success"], true, "{result}");
    let analysis = result["analysis"].as_str().unwrap();
    let seen = analysis
        .strip_prefix("I see ")
        .and_then(|r| r.split(" | ").next())
        .unwrap_or_else(|| panic!("{analysis}"));
    let mut parts = seen.split(' ');
    let mime = parts.next().unwrap().to_string();
    let (w, h) = parts.next().unwrap().split_once('x').unwrap();
    let len = parts.next().unwrap().trim_end_matches('b').parse().unwrap();
    (mime, w.parse().unwrap(), h.parse().unwrap(), len)
}

#[test]
fn every_type_reaches_the_model_as_an_image_it_accepts() {
    let aux = vision_support::start();
    let home = home_for(&aux, "");
    let img = noise(40, 30);
    for (format, mime, expected) in [
        (image::ImageFormat::Png, "image/png", "image/png"),
        (image::ImageFormat::Jpeg, "image/jpeg", "image/jpeg"),
        (image::ImageFormat::Gif, "image/gif", "image/gif"),
        (image::ImageFormat::WebP, "image/webp", "image/webp"),
        // BMP is no type providers take: it arrives as PNG.
        (image::ImageFormat::Bmp, "image/bmp", "image/png"),
    ] {
        let bytes = encode(&img, format);
        // Declared as something else: the bytes decide.
        let result = analyze(home.path(), &data_url("application/octet-stream", &bytes));
        let (seen_mime, w, h, _) = seen(&result);
        assert_eq!((seen_mime.as_str(), w, h), (expected, 40, 30), "{mime}");
    }
    // The prompt is the original's, with the question.
    let requests = aux.requests.lock().unwrap();
    let body = requests.last().unwrap().json().unwrap();
    let prompt = body["messages"][0]["content"][0]["text"].as_str().unwrap();
    assert!(prompt.starts_with("Fully describe and explain everything about this image"));
    assert!(prompt.ends_with("what is it?"));
    assert_eq!(body["model"], "test-vision-model");
    assert_eq!(body["max_tokens"], 2000);
    drop(requests);

    // SVG is drawn into a PNG of its size.
    let svg = r##"<svg xmlns="http://www.w3.org/2000/svg" width="64" height="48"><circle cx="32" cy="24" r="20" fill="#0a0"/></svg>"##;
    let file = home.path().join("drawing.svg");
    std::fs::write(&file, svg).unwrap();
    let result = analyze(home.path(), file.to_str().unwrap());
    assert_eq!(seen(&result).0, "image/png");
    assert_eq!((seen(&result).1, seen(&result).2), (64, 48));
}

#[test]
fn large_images_are_brought_within_the_caps() {
    let aux = vision_support::start();
    let home = home_for(&aux, "");
    // Taller than 7900 pixels, small in bytes.
    let tall = encode(&noise(60, 9000), image::ImageFormat::Png);
    std::fs::write(home.path().join("tall.png"), &tall).unwrap();
    let (mime, w, h, _) = seen(&analyze(home.path(), "tall.png"));
    assert_eq!((mime.as_str(), h), ("image/png", 7900));
    assert!(w < 60);
    // Over 4 MB as a data URL: scaled down until it fits.
    let heavy = encode(&noise(1500, 1400), image::ImageFormat::Png);
    assert!(heavy.len() * 4 / 3 > 4 * 1024 * 1024, "{}", heavy.len());
    std::fs::write(home.path().join("heavy.png"), &heavy).unwrap();
    let (mime, w, h, len) = seen(&analyze(home.path(), "heavy.png"));
    assert_eq!(mime, "image/png");
    assert!(
        len <= 4 * 1024 * 1024 && w < 1500 && h < 1400,
        "{len} {w}x{h}"
    );
    // A JPEG over the cap becomes a smaller JPEG.
    let photo = encode(&noise(3000, 2500), image::ImageFormat::Jpeg);
    assert!(photo.len() > 3 * 1024 * 1024, "{}", photo.len());
    std::fs::write(home.path().join("photo.jpg"), &photo).unwrap();
    let (mime, _, _, len) = seen(&analyze(home.path(), "photo.jpg"));
    assert_eq!(mime, "image/jpeg");
    assert!(len <= 4 * 1024 * 1024);
}

#[test]
fn urls_go_through_the_network_policy_with_retries_only_for_transient_failures() {
    let aux = vision_support::start();
    let png = encode(&noise(20, 10), image::ImageFormat::Png);
    let attempts = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (served, counter) = (png.clone(), attempts.clone());
    let pages = Server::start(move |req: &Request| match req.path() {
        "/flaky.png" => {
            if counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
                respond(503, "text/plain", "busy")
            } else {
                respond(200, "image/png", served.clone())
            }
        }
        "/gone.png" => respond(404, "text/plain", "no"),
        "/meta" => redirect("http://169.254.169.254/latest/meta-data/"),
        "/page" => respond(200, "text/html", "<html>not an image</html>"),
        // Declares more than the 50 MB cap: refused before the body is read.
        "/huge.png" => Box::new(|stream: &mut std::net::TcpStream| {
            use std::io::Write;
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: 60000000\r\nConnection: close\r\n\r\n",
            );
        }) as Reply,
        _ => respond(200, "image/png", served.clone()),
    });
    let home = home_for(&aux, OPEN);
    let result = analyze(home.path(), &pages.url("/flaky.png"));
    assert_eq!(seen(&result).0, "image/png");
    assert_eq!(
        attempts.load(std::sync::atomic::Ordering::SeqCst),
        2,
        "one retry after 503"
    );

    let gone = analyze(home.path(), &pages.url("/gone.png"));
    assert_eq!(gone["success"], false);
    assert!(
        gone["error"].as_str().unwrap().contains("HTTP 404"),
        "{gone}"
    );
    let count = |path: &str| {
        pages
            .requests
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.path() == path)
            .count()
    };
    assert_eq!(count("/gone.png"), 1, "a 404 is not retried");

    let meta = analyze(home.path(), &pages.url("/meta"));
    assert_eq!(meta["success"], false);
    assert!(
        meta["error"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("metadata"),
        "{meta}"
    );
    let huge = analyze(home.path(), &pages.url("/huge.png"));
    assert!(huge["error"].as_str().unwrap().contains("50 MB"), "{huge}");
    assert_eq!(count("/huge.png"), 1, "an oversize body is not retried");
    let page = analyze(home.path(), &pages.url("/page"));
    assert!(
        page["error"].as_str().unwrap().contains("not an image"),
        "{page}"
    );

    // Without allow_private_urls a loopback URL is refused before any request.
    let closed = home_for(&aux, "");
    let before = count("/private.png");
    let refused = analyze(closed.path(), &pages.url("/private.png"));
    assert_eq!(refused["success"], false, "{refused}");
    assert_eq!(count("/private.png"), before);
}

#[test]
fn files_are_read_under_the_read_policy() {
    let aux = vision_support::start();
    let home = home_for(&aux, "");
    let png = encode(&noise(8, 8), image::ImageFormat::Png);
    std::fs::create_dir_all(home.path().join(".ssh")).unwrap();
    std::fs::write(home.path().join(".ssh/id_rsa.png"), &png).unwrap();
    let refused = analyze(home.path(), "~/.ssh/id_rsa.png");
    assert_eq!(refused["success"], false);
    assert!(
        refused["error"].as_str().unwrap().contains("denied"),
        "{refused}"
    );
    // A link to it is the same file.
    std::os::unix::fs::symlink(
        home.path().join(".ssh/id_rsa.png"),
        home.path().join("innocent.png"),
    )
    .unwrap();
    let linked = analyze(home.path(), "innocent.png");
    assert_eq!(linked["success"], false, "{linked}");
    let missing = analyze(home.path(), "nowhere.png");
    assert!(
        missing["error"].as_str().unwrap().contains("not found"),
        "{missing}"
    );
    std::fs::write(home.path().join("notes.txt"), "just text").unwrap();
    let text = analyze(home.path(), "file://notes.txt");
    assert!(
        text["error"].as_str().unwrap().contains("not an image"),
        "{text}"
    );
    let fifo = home.path().join("pipe.png");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let pipe = analyze(home.path(), "pipe.png");
    assert!(
        pipe["error"]
            .as_str()
            .unwrap()
            .contains("not a regular file"),
        "{pipe}"
    );
    let device = analyze(home.path(), "/dev/zero");
    assert_eq!(device["success"], false);
    let odd = analyze(home.path(), "ftp://example.com/x.png");
    assert!(
        odd["error"]
            .as_str()
            .unwrap()
            .contains("Invalid image source"),
        "{odd}"
    );
    assert_eq!(
        aux.requests.lock().unwrap().len(),
        0,
        "nothing was sent to the model"
    );
}

#[test]
fn the_key_never_appears_and_model_errors_are_results() {
    let aux = vision_support::start();
    let png = encode(&noise(8, 8), image::ImageFormat::Png);
    // A wrong key: the endpoint's 401 echoes what it was sent.
    let home = web_support::home_with(&format!(
        "auxiliary:\n  vision:\n    base_url: {}\n    model: m\n    api_key: sk-wrong-key-abcdef0123456789\n",
        aux.url("/v1")
    ));
    let out = run(
        home.path(),
        &[
            "call",
            "vision_analyze",
            &json!({"image_url": data_url("image/png", &png), "question": "q"}).to_string(),
        ],
        &[],
        "",
    );
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(!text.contains("sk-wrong-key-abcdef0123456789"), "{text}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["success"], false);
    assert!(
        result["error"].as_str().unwrap().contains("HTTP 401"),
        "{result}"
    );

    // No model configured: not offered, with the reason; a call says why.
    let bare = tempfile::tempdir().unwrap();
    let listed = run(
        bare.path(),
        &["list", "--toolsets", "vision"],
        &[("OPENROUTER_API_KEY", "")],
        "",
    );
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("vision_analyze")
            && listed.contains("unavailable (no auxiliary vision model"),
        "{listed}"
    );
    let schema = run(
        bare.path(),
        &["schema", "--toolsets", "vision"],
        &[("OPENROUTER_API_KEY", "")],
        "",
    );
    assert!(!String::from_utf8_lossy(&schema.stdout).contains("vision_analyze"));
}

fn mcp_call(home: &Path, args: &Value) -> Value {
    let input = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "vision_analyze", "arguments": args}}),
    ]
    .iter()
    .map(|l| format!("{l}\n"))
    .collect::<String>();
    let out = run(
        home,
        &["mcp", "--toolsets", "vision"],
        &[("OPENROUTER_API_KEY", "")],
        &input,
    );
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let replies: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let listed = replies
        .iter()
        .find(|v| v["id"] == 2)
        .expect("tools/list answered");
    assert!(
        listed.to_string().contains("vision_analyze"),
        "offered without a model: {listed}"
    );
    replies
        .into_iter()
        .find(|v| v["id"] == 3)
        .unwrap_or_else(|| panic!("no tools/call answer: {stdout}"))
}

#[test]
fn callers_that_take_images_get_the_image_itself() {
    // No auxiliary model at all: MCP clients and `serve --images` need none.
    let home = tempfile::tempdir().unwrap();
    let png = encode(&noise(30, 20), image::ImageFormat::Png);
    std::fs::write(home.path().join("shot.png"), &png).unwrap();
    let reply = mcp_call(
        home.path(),
        &json!({"image_url": "shot.png", "question": "what colour?"}),
    );
    let content = reply["result"]["content"].as_array().unwrap();
    let text = content.iter().find(|c| c["type"] == "text").unwrap();
    assert!(text["text"]
        .as_str()
        .unwrap()
        .contains("Question: what colour?"));
    let image = content
        .iter()
        .find(|c| c["type"] == "image")
        .expect("an image block");
    assert_eq!(image["mimeType"], "image/png");
    let data = base64::engine::general_purpose::STANDARD
        .decode(image["data"].as_str().unwrap())
        .unwrap();
    assert_eq!(data, png, "a PNG within the caps arrives unchanged");

    let line = json!({"id": "v1", "type": "function", "function": {"name": "vision_analyze",
        "arguments": json!({"image_url": "shot.png", "question": "q"}).to_string()}});
    let out = run(
        home.path(),
        &["serve", "--images"],
        &[("OPENROUTER_API_KEY", "")],
        &format!("{line}\n"),
    );
    let answer: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    let parts = answer["content"]
        .as_array()
        .expect("content is an array of parts");
    assert_eq!(parts[0]["type"], "text");
    assert_eq!(parts[1]["type"], "image_url");
    assert_eq!(
        vision_support::describe_image(parts[1]["image_url"]["url"].as_str().unwrap())
            .unwrap()
            .split(' ')
            .take(2)
            .collect::<Vec<_>>(),
        ["image/png", "30x20"]
    );
    // Plain serve, without a model: not offered.
    let out = run(
        home.path(),
        &["serve"],
        &[("OPENROUTER_API_KEY", "")],
        &format!("{line}\n"),
    );
    let answer: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert!(
        answer["content"].as_str().unwrap().contains("error"),
        "{answer}"
    );
}

#[test]
fn the_openai_sdk_is_served_by_the_same_stand_in() {
    let aux = vision_support::start();
    let python = hermes_test_peers::python_with(&["openai"]);
    let png = encode(&noise(12, 9), image::ImageFormat::Png);
    let script = r#"
import sys, openai
client = openai.OpenAI(base_url=sys.argv[1], api_key=sys.argv[2], max_retries=0)
url = sys.argv[3]
answer = client.chat.completions.create(
    model="test-vision-model", temperature=0.1, max_tokens=2000,
    messages=[{"role": "user", "content": [
        {"type": "text", "text": "describe"},
        {"type": "image_url", "image_url": {"url": url, "detail": "auto"}}]}])
print(answer.choices[0].message.content)
try:
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": [
        {"type": "image_url", "image_url": "not-an-object"}]}])
    print("ACCEPTED")
except openai.BadRequestError as e:
    print("REFUSED", e.status_code)
try:
    openai.OpenAI(base_url=sys.argv[1], api_key="sk-wrong", max_retries=0).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}])
except openai.AuthenticationError as e:
    print("UNAUTHORIZED", e.status_code)
"#;
    let out = std::process::Command::new(python)
        .args([
            "-c",
            script,
            &aux.url("/v1"),
            vision_support::KEY,
            &data_url("image/png", &png),
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].starts_with("I see image/png 12x9"), "{stdout}");
    assert_eq!(lines[1], "REFUSED 400");
    assert_eq!(lines[2], "UNAUTHORIZED 401");
}

/// `hermes-tools agent` against the scripted model; the run must succeed.
fn agent(home: &Path, model: &support::ScriptedModel) {
    let args = [
        "agent",
        "Look at shot.png",
        "--base-url",
        &model.base_url,
        "--model",
        "stand-in",
        "--toolsets",
        "vision",
    ];
    let out = run(home, &args, &[("OPENROUTER_API_KEY", "")], "");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_agent_shows_its_model_the_image_or_the_description() {
    let png = encode(&noise(16, 12), image::ImageFormat::Png);
    let script = || {
        support::ScriptedModel::script(vec![
            support::Reply::Json(support::tool_calls(&[(
                "v1",
                "vision_analyze",
                json!({"image_url": "shot.png", "question": "what is it?"}),
            )])),
            support::Reply::Json(support::final_answer("done")),
        ])
    };
    // A model with vision: the tool message carries the image.
    let home = web_support::home_with("model:\n  supports_vision: true\n");
    std::fs::write(home.path().join("shot.png"), &png).unwrap();
    let model = script();
    agent(home.path(), &model);
    let request = model.request(1);
    let tool = request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    let parts = tool["content"].as_array().expect("content parts");
    let url = parts.iter().find(|p| p["type"] == "image_url").unwrap()["image_url"]["url"]
        .as_str()
        .unwrap();
    assert!(vision_support::describe_image(url)
        .unwrap()
        .starts_with("image/png 16x12"));

    // A model without: the auxiliary model describes it, the tool message is text.
    let aux = vision_support::start();
    let home = home_for(&aux, "");
    std::fs::write(home.path().join("shot.png"), &png).unwrap();
    let model = script();
    agent(home.path(), &model);
    let seen = support::last_message(&model.request(1), "tool").unwrap();
    assert!(seen.contains("I see image/png 16x12"), "{seen}");
}

#[test]
fn openrouter_is_the_default_provider_with_its_key() {
    let aux = vision_support::start();
    let home = tempfile::tempdir().unwrap();
    let png = encode(&noise(8, 6), image::ImageFormat::Png);
    let base = aux.url("/v1");
    let out = run(
        home.path(),
        &[
            "call",
            "vision_analyze",
            &json!({"image_url": data_url("image/png", &png), "question": "q"}).to_string(),
        ],
        &[
            ("OPENROUTER_API_KEY", vision_support::KEY),
            ("OPENROUTER_BASE_URL", &base),
        ],
        "",
    );
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(seen(&result).0, "image/png");
    let body = aux.requests.lock().unwrap()[0].json().unwrap();
    assert_eq!(body["model"], "google/gemini-3-flash-preview");
    assert_eq!(body["temperature"], 0.1);
}

/// A chat-completions stand-in that has no credits left, as OpenRouter answers then.
fn broke() -> Server {
    Server::start(|_: &Request| {
        web_support::json_reply(
            402,
            &json!({"error": {"message": "Insufficient credits. Add more using https://example.invalid/credits", "code": 402}}),
        )
    })
}

/// A DeepInfra-like provider: its model catalog (`GET /v1/models`, tagged by surface
/// and capability) and the chat-completions stand-in.
fn catalog_provider() -> Server {
    Server::start(|req: &Request| {
        if req.method == "GET" && req.path() == "/v1/models" {
            if req.header("authorization") != Some(&format!("Bearer {}", vision_support::KEY)) {
                return web_support::json_reply(401, &json!({"detail": "unauthorized"}));
            }
            return web_support::json_reply(
                200,
                &json!({"data": [
                    {"id": "acme/text-only-chat", "metadata": {"tags": ["chat", "reasoning"]}},
                    {"id": "acme/image-editor", "metadata": {"tags": ["image-gen", "vision"]}},
                    {"id": "acme/stub-listed-not-served", "metadata": null},
                    {"id": "acme/Vision-Chat-11B", "metadata": {"tags": ["chat", "vision"]}},
                    {"id": "acme/later-vision-chat", "metadata": {"tags": ["chat", "vision"]}},
                ]}),
            );
        }
        vision_support::answer(req)
    })
}

fn chat_requests(server: &Server) -> Vec<Value> {
    server
        .requests
        .lock()
        .unwrap()
        .iter()
        .filter(|r| r.path() == "/v1/chat/completions")
        .map(|r| r.json().unwrap())
        .collect()
}

#[test]
fn auto_tries_the_main_model_then_openrouter_then_deepinfra() {
    let (main, openrouter, deepinfra) = (
        vision_support::start(),
        vision_support::start(),
        catalog_provider(),
    );
    let png = encode(&noise(10, 7), image::ImageFormat::Png);
    let args = json!({"image_url": data_url("image/png", &png), "question": "q"});
    let (or_base, di_base) = (openrouter.url("/v1"), deepinfra.url("/v1"));
    let keys = |openrouter_key: &'static str| {
        vec![
            ("MAIN_MODEL_TEST_KEY", vision_support::KEY),
            ("OPENROUTER_API_KEY", openrouter_key),
            ("OPENROUTER_BASE_URL", or_base.as_str()),
            ("DEEPINFRA_API_KEY", vision_support::KEY),
            ("DEEPINFRA_BASE_URL", di_base.as_str()),
        ]
    };
    // The image reaches whichever endpoint is chosen.
    let look = |home: &Path, envs: &[(&str, &str)]| {
        let result = call(home, "vision_analyze", &args, envs);
        assert_eq!(seen(&result).0, "image/png", "{result}");
    };
    let main_model = |base: &str, vision: bool| {
        web_support::home_with(&format!(
            "model:\n  base_url: {base}\n  name: main-model-with-eyes\n  api_key_env: MAIN_MODEL_TEST_KEY\n  supports_vision: {vision}\n"
        ))
    };

    // A main model that reads images is asked first, under its own name.
    let home = main_model(&main.url("/v1"), true);
    look(home.path(), &keys(vision_support::KEY));
    let asked = chat_requests(&main);
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["model"], "main-model-with-eyes");
    assert!(chat_requests(&openrouter).is_empty() && chat_requests(&deepinfra).is_empty());

    // One that is not known to read images is skipped: OpenRouter's vision model.
    let home = main_model(&main.url("/v1"), false);
    look(home.path(), &keys(vision_support::KEY));
    assert_eq!(
        chat_requests(&main).len(),
        1,
        "the main model was not asked"
    );
    let asked = chat_requests(&openrouter);
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["model"], "google/gemini-3-flash-preview");

    // Without an OpenRouter key: DeepInfra, with the first chat model of its catalog
    // that has vision.
    look(home.path(), &keys(""));
    let asked = chat_requests(&deepinfra);
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0]["model"], "acme/Vision-Chat-11B");
    let catalog = deepinfra
        .requests
        .lock()
        .unwrap()
        .iter()
        .find(|r| r.path() == "/v1/models")
        .map(|r| (r.query("filter"), r.query("sort_by")))
        .expect("the catalog was read");
    assert_eq!(
        catalog,
        (Some("true".to_string()), Some("hermes".to_string()))
    );

    // A main model out of credits hands over to the next in the chain.
    let empty = broke();
    let home = main_model(&empty.url("/v1"), true);
    let before = chat_requests(&openrouter).len();
    look(home.path(), &keys(vision_support::KEY));
    assert_eq!(empty.requests.lock().unwrap().len(), 1);
    assert_eq!(chat_requests(&openrouter).len(), before + 1);

    // A provider named in config.yaml is used alone: its failure is the result.
    let home = web_support::home_with("auxiliary:\n  vision:\n    provider: openrouter\n");
    let empty_base = empty.url("/v1");
    let mut envs = keys(vision_support::KEY);
    envs[2] = ("OPENROUTER_BASE_URL", empty_base.as_str());
    let before = chat_requests(&deepinfra).len();
    let result = call(home.path(), "vision_analyze", &args, &envs);
    assert_eq!(result["success"], false, "{result}");
    assert!(
        result["analysis"]
            .as_str()
            .unwrap()
            .starts_with("Insufficient credits"),
        "{result}"
    );
    assert_eq!(chat_requests(&deepinfra).len(), before);

    // Nothing in the chain: not offered, and the reason names what would do.
    let bare = tempfile::tempdir().unwrap();
    let listed = run(
        bare.path(),
        &["list", "--toolsets", "vision"],
        &[("OPENROUTER_API_KEY", ""), ("DEEPINFRA_API_KEY", "")],
        "",
    );
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.contains("DEEPINFRA_API_KEY") && listed.contains("model.supports_vision"),
        "{listed}"
    );
}

#[test]
fn an_image_refused_as_too_large_is_sent_again_smaller() {
    // 600x400 of noise: about 1 MB as a data URL, within the caps, over this
    // provider's limit.
    let png = encode(&noise(600, 400), image::ImageFormat::Png);
    let limit = data_url("image/png", &png).len() * 2 / 3;
    let picky = vision_support::start_with_image_limit(limit);
    let home = home_for(&picky, "");
    std::fs::write(home.path().join("big.png"), &png).unwrap();
    let result = analyze(home.path(), "big.png");
    let (mime, w, h, len) = seen(&result);
    assert_eq!((mime.as_str(), w, h), ("image/png", 300, 200), "{result}");
    assert!(len <= limit);
    let sent: Vec<String> = picky
        .requests
        .lock()
        .unwrap()
        .iter()
        .flat_map(vision_support::image_urls)
        .collect();
    assert_eq!(sent.len(), 2, "the full image, then the smaller one");
    assert!(vision_support::describe_image(&sent[0])
        .unwrap()
        .starts_with("image/png 600x400"));

    // Still too large at half the size: one retry only, and the refusal is the result.
    let strict = vision_support::start_with_image_limit(2000);
    let home = home_for(&strict, "");
    std::fs::write(home.path().join("big.png"), &png).unwrap();
    let result = analyze(home.path(), "big.png");
    assert_eq!(result["success"], false);
    assert!(
        result["error"].as_str().unwrap().contains("exceeds"),
        "{result}"
    );
    assert!(
        result["analysis"]
            .as_str()
            .unwrap()
            .starts_with("The vision API rejected the image"),
        "{result}"
    );
    assert_eq!(strict.requests.lock().unwrap().len(), 2);

    // A refusal for another reason is not retried with a smaller image.
    let refusing = Server::start(|_: &Request| {
        web_support::json_reply(
            400,
            &json!({"error": {"message": "The model `test-vision-model` does not exist", "type": "invalid_request_error"}}),
        )
    });
    let home = home_for(&refusing, "");
    std::fs::write(home.path().join("big.png"), &png).unwrap();
    let result = analyze(home.path(), "big.png");
    assert_eq!(result["success"], false);
    assert_eq!(refusing.requests.lock().unwrap().len(), 1);
}

#[test]
fn files_are_read_inside_a_container_task() {
    let aux = vision_support::start();
    let home = home_for(&aux, &podman::terminal_config());
    let png = encode(&noise(36, 20), image::ImageFormat::Png);
    // On the host only: the task's environment does not have it.
    std::fs::write(home.path().join("host-only.png"), &png).unwrap();
    let host_only = home.path().join("host-only.png");
    let b64 = base64::engine::general_purpose::STANDARD.encode(&png);
    let task = format!("vision-docker-{}", std::process::id());
    let line = |id: &str, tool: &str, args: Value| {
        json!({"id": id, "type": "function", "task_id": task,
               "function": {"name": tool, "arguments": args.to_string()}})
        .to_string()
            + "\n"
    };
    let look = |id: &str, path: &str| {
        line(
            id,
            "vision_analyze",
            json!({"image_url": path, "question": "what is it?"}),
        )
    };
    let input = [
        line(
            "made",
            "terminal",
            json!({"command": format!("mkdir -p /root/shots && printf %s {b64} | base64 -d > /root/shots/pic.png && mkfifo /root/pipe.png && echo ok")}),
        ),
        look("relative", "shots/pic.png"),
        look("absolute", "/root/shots/pic.png"),
        look("tilde", "~/shots/pic.png"),
        look("host", host_only.to_str().unwrap()),
        look("fifo", "pipe.png"),
        look("device", "/dev/zero"),
        look("dir", "/root/shots"),
    ]
    .concat();
    let out = run(
        home.path(),
        &["serve"],
        &[("CONTAINERS_CONF", &podman::containers_conf())],
        &input,
    );
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let answers: std::collections::HashMap<String, Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| {
            let id = v["tool_call_id"].as_str()?.to_string();
            let content: Value = serde_json::from_str(v["content"].as_str()?).ok()?;
            Some((id, content))
        })
        .collect();
    let answer = |id: &str| {
        answers.get(id).cloned().unwrap_or_else(|| {
            panic!(
                "no answer {id}: {stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
    };
    assert_eq!(answer("made")["output"], "ok", "{}", answer("made"));
    for id in ["relative", "absolute", "tilde"] {
        let (mime, w, h, _) = seen(&answer(id));
        assert_eq!((mime.as_str(), w, h), ("image/png", 36, 20), "{id}");
    }
    let error = |id: &str| answer(id)["error"].as_str().unwrap_or("").to_string();
    assert!(error("host").contains("not found"), "{}", answer("host"));
    assert!(
        error("fifo").contains("not a regular file"),
        "{}",
        answer("fifo")
    );
    assert!(
        error("device").contains("device or kernel file"),
        "{}",
        answer("device")
    );
    assert!(
        error("dir").contains("not a regular file"),
        "{}",
        answer("dir")
    );
    assert_eq!(
        chat_requests(&aux).len(),
        3,
        "only the images found reached the model"
    );
    // The task's container is gone with the server.
    assert_eq!(podman::containers_of(&task), "");
}

#[test]
fn files_are_read_over_ssh_on_the_ssh_backend() {
    let sshd = sshd::start_sshd();
    let aux = vision_support::start();
    let d = sshd.dir.path().display();
    let home = home_for(
        &aux,
        &format!(
            "terminal:\n  backend: ssh\n  ssh_host: 127.0.0.1\n  ssh_user: {user}\n  ssh_port: {port}\n  \
             ssh_key: {d}/user_key\n  ssh_known_hosts: {d}/known_hosts\n",
            user = sshd::current_user(),
            port = sshd.port
        ),
    );
    let shots = tempfile::tempdir().unwrap();
    let png = encode(&noise(22, 14), image::ImageFormat::Png);
    std::fs::write(shots.path().join("over-ssh.png"), &png).unwrap();
    let result = analyze(
        home.path(),
        shots.path().join("over-ssh.png").to_str().unwrap(),
    );
    assert_eq!((seen(&result).1, seen(&result).2), (22, 14), "{result}");
    // A relative path is resolved where the remote shell starts (the account's home),
    // not in the caller's directory, which holds a file of this name.
    let name = format!("hermes-vision-{}-local.png", std::process::id());
    std::fs::write(home.path().join(&name), &png).unwrap();
    let missing = analyze(home.path(), &name);
    assert_eq!(missing["success"], false, "{missing}");
    assert!(
        missing["error"].as_str().unwrap().contains("not found"),
        "{missing}"
    );
    assert_eq!(chat_requests(&aux).len(), 1);
    let log = std::fs::read_to_string(sshd.dir.path().join("sshd.log")).unwrap_or_default();
    assert!(
        log.contains("Accepted publickey"),
        "the file was not read over ssh: {log}"
    );
}
