//! image_generate through the binary against strict fakes of FAL's queue API (over
//! HTTPS with a certificate authority made here, trusted through SSL_CERT_FILE) and of
//! OpenAI's Images API (tests/fakes/image_apis.py), the official `fal-client` and
//! `openai` Python SDKs run against the same fakes.

mod common;
#[path = "vision_support/podman.rs"]
mod podman;
#[path = "../agent/tests/support/mod.rs"]
mod support;
mod web_support;

use serde_json::{json, Value};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use web_support::run;

const FAL_KEY: &str = "fal-test-key-id:secret-0123456789";
const OPENAI_KEY: &str = "sk-test-images-0123456789abcdef";

struct Fake {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for Fake {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Fake {
    fn start(args: &[&str], log: PathBuf) -> Fake {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fakes/image_apis.py");
        let mut child = Command::new("python3")
            .arg(script)
            .args(args)
            .arg(&log)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("the fake printed its port");
        Fake { child, port, log }
    }

    fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

fn call(home: &Path, args: &Value, envs: &[(&str, &str)]) -> (Value, String) {
    let out = run(
        home,
        &["call", "image_generate", &args.to_string()],
        envs,
        "",
    );
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    (serde_json::from_slice(&out.stdout).unwrap(), text)
}

/// The FAL fake over HTTPS, and the authority that signed its certificate.
fn start_fal(dir: &Path) -> (Fake, PathBuf) {
    let (ca, cert, key) = web_support::test_authority(dir);
    let args = [cert.to_str().unwrap(), key.to_str().unwrap(), FAL_KEY];
    let fal = Fake::start(&[&["fal"][..], &args[..]].concat(), dir.join("fal.log"));
    (fal, ca)
}

const OPEN: &str = "security:\n  allow_private_urls: true\n";

#[test]
fn fal_queue_end_to_end_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let (fal, ca) = start_fal(dir.path());
    let host = format!("localhost:{}", fal.port);
    let home = web_support::home_with(OPEN);
    let envs = [
        ("FAL_KEY", FAL_KEY),
        ("FAL_QUEUE_RUN_HOST", host.as_str()),
        ("SSL_CERT_FILE", ca.to_str().unwrap()),
        ("OPENAI_API_KEY", ""),
    ];

    // The schema names the active backend, as the original builds it.
    let schema = run(
        home.path(),
        &["schema", "--toolsets", "image_gen"],
        &envs,
        "",
    );
    let schema: Value = serde_json::from_slice(&schema.stdout).unwrap();
    let function = &schema[0]["function"];
    let description = function["description"].as_str().unwrap();
    assert!(
        description.contains("Active backend: FAL.ai · model: FLUX 2 Klein 9B"),
        "{description}"
    );
    assert!(
        description.contains("up to 9 reference image(s)"),
        "{description}"
    );
    assert_eq!(
        function["parameters"]["properties"]["aspect_ratio"]["enum"],
        json!(["landscape", "square", "portrait"])
    );
    assert_eq!(function["parameters"]["required"], json!(["prompt"]));

    let (result, text) = call(
        home.path(),
        &json!({"prompt": "a red fox in snow", "aspect_ratio": "portrait"}),
        &envs,
    );
    assert!(
        !text.contains("secret-0123456789"),
        "the key leaked: {text}"
    );
    assert_eq!(result["success"], true, "{result}");
    assert_eq!(result["provider"], "fal");
    assert_eq!(result["model"], "fal-ai/flux-2/klein/9b");
    assert_eq!(result["modality"], "text");
    assert_eq!(result["aspect_ratio"], "portrait");
    let image = PathBuf::from(result["image"].as_str().unwrap());
    assert!(
        image.starts_with(home.path().join("cache/images")),
        "{image:?}"
    );
    assert_eq!(image.extension().unwrap(), "png");
    let saved = image::open(&image).unwrap();
    assert_eq!((saved.width(), saved.height()), (48, 27));

    let requests = fal.requests();
    let submit = &requests[0];
    assert_eq!(submit["method"], "POST");
    assert_eq!(submit["path"], "/fal-ai/flux-2/klein/9b");
    assert_eq!(submit["headers"]["authorization"], format!("Key {FAL_KEY}"));
    assert!(submit["headers"]["x-idempotency-key"]
        .as_str()
        .is_some_and(|k| k.len() >= 16));
    assert_eq!(
        submit["body"],
        json!({"num_inference_steps": 4, "output_format": "png", "enable_safety_checker": false,
               "prompt": "a red fox in snow", "image_size": "portrait_16_9"})
    );
    let paths: Vec<&str> = requests
        .iter()
        .map(|r| r["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths.iter().filter(|p| p.ends_with("/status")).count(),
        2,
        "polled until COMPLETED: {paths:?}"
    );
    assert!(
        paths.iter().any(|p| p.starts_with("/files/")),
        "the image was downloaded: {paths:?}"
    );
    // Status and result use owner/app only, from the submit answer.
    assert!(
        paths[1].starts_with("/fal-ai/flux-2/requests/"),
        "{paths:?}"
    );

    // An edit: the configured model's edit endpoint, the source as a data URL.
    let source = home.path().join("source.png");
    saved.save(&source).unwrap();
    let (edited, _) = call(
        home.path(),
        &json!({"prompt": "make it blue", "image_url": source.to_str().unwrap()}),
        &envs,
    );
    assert_eq!(edited["modality"], "image", "{edited}");
    let submit = fal
        .requests()
        .into_iter()
        .rev()
        .find(|r| r["method"] == "POST")
        .unwrap();
    assert_eq!(submit["path"], "/fal-ai/flux-2/klein/9b/edit");
    let urls = submit["body"]["image_urls"].as_array().unwrap();
    assert!(urls[0]
        .as_str()
        .unwrap()
        .starts_with("data:image/png;base64,"));
    assert!(
        submit["body"].get("image_size").is_none(),
        "the edit endpoint takes no size"
    );

    // A text-only model refuses sources before any request.
    let before = fal.requests().len();
    std::fs::write(
        home.path().join("config.yaml"),
        format!("{OPEN}image_gen:\n  model: fal-ai/z-image/turbo\n"),
    )
    .unwrap();
    let (refused, _) = call(
        home.path(),
        &json!({"prompt": "x", "image_url": source.to_str().unwrap()}),
        &envs,
    );
    assert_eq!(refused["success"], false);
    assert_eq!(refused["error_type"], "unsupported");
    assert_eq!(fal.requests().len(), before);
    let schema = run(
        home.path(),
        &["schema", "--toolsets", "image_gen"],
        &envs,
        "",
    );
    assert!(String::from_utf8_lossy(&schema.stdout).contains("text-to-image only"));

    // Without the test authority the TLS handshake fails: the key is never sent.
    let before = fal.requests().len();
    let untrusted = [
        envs[0],
        envs[1],
        ("SSL_CERT_FILE", "/nonexistent-bundle.pem"),
        envs[3],
    ];
    std::fs::write(home.path().join("config.yaml"), OPEN).unwrap();
    let (failed, _) = call(home.path(), &json!({"prompt": "x"}), &untrusted);
    assert_eq!(failed["success"], false, "{failed}");
    assert_eq!(failed["error_type"], "api_error");
    assert_eq!(fal.requests().len(), before);

    // The generated image is a third-party URL: fetched under the network policy,
    // which by default refuses this loopback address.
    std::fs::write(home.path().join("config.yaml"), "").unwrap();
    let (closed, _) = call(home.path(), &json!({"prompt": "x"}), &envs);
    assert_eq!(closed["success"], false, "{closed}");
    assert!(
        closed["error"]
            .as_str()
            .unwrap()
            .contains("Could not download the generated image"),
        "{closed}"
    );
    std::fs::write(home.path().join("config.yaml"), OPEN).unwrap();

    // A wrong key: FAL's 401 as a result.
    let wrong = [("FAL_KEY", "wrong-key-zzzz"), envs[1], envs[2], envs[3]];
    let (denied, _) = call(home.path(), &json!({"prompt": "x"}), &wrong);
    assert!(
        denied["error"].as_str().unwrap().contains("HTTP 401"),
        "{denied}"
    );
}

#[test]
fn fal_client_sdk_is_served_by_the_same_fake() {
    let dir = tempfile::tempdir().unwrap();
    let (fal, ca) = start_fal(dir.path());
    let python = hermes_test_peers::python_with(&["fal_client"]);
    let script = r#"
import fal_client, json
handler = fal_client.submit("fal-ai/flux-2/klein/9b", arguments={"prompt": "a lighthouse", "image_size": "square_hd"})
result = handler.get()
print(json.dumps(result))
"#;
    let out = Command::new(python)
        .args(["-c", script])
        .env("FAL_KEY", FAL_KEY)
        .env("FAL_QUEUE_RUN_HOST", format!("localhost:{}", fal.port))
        .env("SSL_CERT_FILE", &ca)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["images"][0]["width"], 48);
    let submit = &fal.requests()[0];
    assert_eq!(submit["headers"]["authorization"], format!("Key {FAL_KEY}"));
    assert_eq!(submit["body"]["prompt"], "a lighthouse");
}

#[test]
fn openai_images_generate_and_edit() {
    let dir = tempfile::tempdir().unwrap();
    let api = Fake::start(&["openai", OPENAI_KEY], dir.path().join("openai.log"));
    let base = format!("http://127.0.0.1:{}/v1", api.port);
    let home = web_support::home_with(
        "image_gen:\n  provider: openai\n  openai:\n    model: gpt-image-2-low\n",
    );
    let envs = [
        ("OPENAI_API_KEY", OPENAI_KEY),
        ("OPENAI_BASE_URL", base.as_str()),
        ("FAL_KEY", ""),
    ];

    let schema = run(
        home.path(),
        &["schema", "--toolsets", "image_gen"],
        &envs,
        "",
    );
    assert!(String::from_utf8_lossy(&schema.stdout)
        .contains("Active backend: OpenAI · model: gpt-image-2-low"));

    let (result, text) = call(
        home.path(),
        &json!({"prompt": "a blue square", "aspect_ratio": "landscape"}),
        &envs,
    );
    assert!(!text.contains(OPENAI_KEY));
    assert_eq!(result["success"], true, "{result}");
    assert_eq!(result["provider"], "openai");
    assert_eq!(result["model"], "gpt-image-2-low");
    assert_eq!(result["size"], "1536x1024");
    assert_eq!(result["quality"], "low");
    let image = PathBuf::from(result["image"].as_str().unwrap());
    assert!(image.starts_with(home.path().join("cache/images")));
    let saved = image::open(&image).unwrap();
    assert_eq!((saved.width(), saved.height()), (24, 16));
    let sent = &api.requests()[0];
    assert_eq!(sent["path"], "/v1/images/generations");
    assert_eq!(
        sent["body"],
        json!({"model": "gpt-image-2", "prompt": "a blue square", "size": "1536x1024", "n": 1, "quality": "low"})
    );

    // An edit with a reference: multipart with image[] parts; a BMP source arrives as PNG.
    let first = home.path().join("a.png");
    saved.save(&first).unwrap();
    let second = home.path().join("b.bmp");
    saved
        .save_with_format(&second, image::ImageFormat::Bmp)
        .unwrap();
    let (edited, _) = call(
        home.path(),
        &json!({"prompt": "merge them", "aspect_ratio": "square", "image_url": "a.png", "reference_image_urls": ["b.bmp"]}),
        &envs,
    );
    assert_eq!(edited["modality"], "image", "{edited}");
    let sent = api.requests().into_iter().last().unwrap();
    assert_eq!(sent["path"], "/v1/images/edits");
    assert_eq!(sent["fields"]["prompt"], "merge them");
    assert_eq!(sent["fields"]["size"], "1024x1024");
    let files = sent["files"].as_array().unwrap();
    assert_eq!(files.len(), 2);
    assert!(
        files
            .iter()
            .all(|f| f["field"] == "image[]" && f["content_type"] == "image/png"),
        "{files:?}"
    );

    // OpenAI is used only when configured: a key alone does not opt in.
    let unset = tempfile::tempdir().unwrap();
    let listed = run(
        unset.path(),
        &["list", "--toolsets", "image_gen"],
        &envs,
        "",
    );
    let listed = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.contains("unavailable (no image backend"), "{listed}");

    // The SDK against the same fake.
    let python = hermes_test_peers::python_with(&["openai"]);
    let script = r#"
import sys, io, openai
client = openai.OpenAI(base_url=sys.argv[1], api_key=sys.argv[2], max_retries=0)
made = client.images.generate(model="gpt-image-2", prompt="a cat", size="1024x1024", n=1, quality="medium")
print(len(made.data[0].b64_json) > 0)
src = io.BytesIO(open(sys.argv[3], "rb").read()); src.name = "a.png"
ref = io.BytesIO(open(sys.argv[3], "rb").read()); ref.name = "b.png"
edited = client.images.edit(model="gpt-image-2", image=[src, ref], prompt="edit", size="1024x1024", quality="low", n=1)
print(len(edited.data[0].b64_json) > 0)
try:
    client.images.generate(model="gpt-image-2", prompt="x", size="999x999")
except openai.BadRequestError as e:
    print("REFUSED", e.status_code)
"#;
    let out = Command::new(python)
        .args(["-c", script, &base, OPENAI_KEY, first.to_str().unwrap()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        ["True", "True", "REFUSED 400"]
    );
    let sdk_edit = api
        .requests()
        .into_iter()
        .rev()
        .find(|r| r["path"] == "/v1/images/edits")
        .unwrap();
    assert!(
        sdk_edit["files"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["field"] == "image[]"),
        "{sdk_edit}"
    );
}

/// The last submit to the fake: its path and body.
fn last_submit(fal: &Fake) -> (String, Value) {
    let submit = fal
        .requests()
        .into_iter()
        .rev()
        .find(|r| r["method"] == "POST")
        .expect("a submit");
    (
        submit["path"].as_str().unwrap().to_string(),
        submit["body"].clone(),
    )
}

#[test]
fn each_fal_model_gets_its_own_payload() {
    let dir = tempfile::tempdir().unwrap();
    let (fal, ca) = start_fal(dir.path());
    let host = format!("localhost:{}", fal.port);
    let home = web_support::home_with(OPEN);
    let envs = [
        ("FAL_KEY", FAL_KEY),
        ("FAL_QUEUE_RUN_HOST", host.as_str()),
        ("SSL_CERT_FILE", ca.to_str().unwrap()),
        ("OPENAI_API_KEY", ""),
    ];
    let configure = |model: &str| {
        std::fs::write(
            home.path().join("config.yaml"),
            format!("{OPEN}image_gen:\n  model: {model}\n"),
        )
        .unwrap();
    };
    let description = || {
        let schema = run(
            home.path(),
            &["schema", "--toolsets", "image_gen"],
            &envs,
            "",
        );
        let schema: Value = serde_json::from_slice(&schema.stdout).unwrap();
        schema[0]["function"]["description"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let source = home.path().join("source.png");
    image::RgbImage::from_pixel(16, 9, image::Rgb([1, 2, 3]))
        .save(&source)
        .unwrap();
    let source = source.to_str().unwrap();

    // Gemini's model takes an aspect ratio, and at most two sources for an edit.
    configure("fal-ai/nano-banana-pro");
    let text = description();
    assert!(
        text.contains(
            "\n\nActive backend: FAL.ai · model: Nano Banana Pro (Gemini 3 Pro Image)\n- supports both"
        ),
        "{text}"
    );
    assert!(text.contains("up to 2 reference image(s)"), "{text}");
    let (result, _) = call(
        home.path(),
        &json!({"prompt": "a kite", "aspect_ratio": "square"}),
        &envs,
    );
    assert_eq!(result["success"], true, "{result}");
    assert_eq!(result["model"], "fal-ai/nano-banana-pro");
    assert_eq!(
        last_submit(&fal),
        (
            "/fal-ai/nano-banana-pro".to_string(),
            json!({"num_images": 1, "output_format": "png", "safety_tolerance": "5",
                   "resolution": "1K", "prompt": "a kite", "aspect_ratio": "1:1"})
        )
    );
    let (edited, _) = call(
        home.path(),
        &json!({"prompt": "add a tail", "image_url": source,
                "reference_image_urls": [source, source]}),
        &envs,
    );
    assert_eq!(edited["modality"], "image", "{edited}");
    let (path, body) = last_submit(&fal);
    assert_eq!(path, "/fal-ai/nano-banana-pro/edit");
    assert_eq!(
        body["aspect_ratio"], "16:9",
        "its edit endpoint takes a ratio"
    );
    assert_eq!(body["image_urls"].as_array().unwrap().len(), 2, "{body}");

    // GPT Image 1.5 takes literal dimensions, on its edits too.
    configure("fal-ai/gpt-image-1.5");
    let (result, _) = call(
        home.path(),
        &json!({"prompt": "a mug", "aspect_ratio": "portrait"}),
        &envs,
    );
    assert_eq!(result["success"], true, "{result}");
    assert_eq!(
        last_submit(&fal),
        (
            "/fal-ai/gpt-image-1.5".to_string(),
            json!({"quality": "medium", "num_images": 1, "output_format": "png",
                   "prompt": "a mug", "image_size": "1024x1536"})
        )
    );
    call(
        home.path(),
        &json!({"prompt": "blue mug", "image_url": source}),
        &envs,
    );
    let (path, body) = last_submit(&fal);
    assert_eq!(path, "/fal-ai/gpt-image-1.5/edit");
    assert_eq!(body["image_size"], "1536x1024");

    // GPT Image 2: 4:3 presets; its edit endpoint is under another owner and takes
    // the source's size.
    configure("fal-ai/gpt-image-2");
    call(
        home.path(),
        &json!({"prompt": "a map", "aspect_ratio": "landscape"}),
        &envs,
    );
    assert_eq!(last_submit(&fal).1["image_size"], "landscape_4_3");
    let (edited, _) = call(
        home.path(),
        &json!({"prompt": "older map", "image_url": source}),
        &envs,
    );
    assert_eq!(edited["success"], true, "{edited}");
    let (path, body) = last_submit(&fal);
    assert_eq!(path, "/openai/gpt-image-2/edit");
    assert!(body.get("image_size").is_none(), "{body}");
    assert!(fal.requests().iter().any(|r| r["path"]
        .as_str()
        .unwrap()
        .starts_with("/openai/gpt-image-2/requests/")));

    // FLUX 2 Pro's images go through the upscaler; the saved image is its output.
    configure("fal-ai/flux-2-pro");
    let (result, _) = call(home.path(), &json!({"prompt": "a harbour"}), &envs);
    assert_eq!(result["success"], true, "{result}");
    assert_eq!(result["upscaled"], true, "{result}");
    let saved = image::open(result["image"].as_str().unwrap()).unwrap();
    assert_eq!((saved.width(), saved.height()), (96, 54));
    let submits: Vec<Value> = fal
        .requests()
        .into_iter()
        .filter(|r| r["method"] == "POST")
        .collect();
    let (generate, upscale) = (&submits[submits.len() - 2], &submits[submits.len() - 1]);
    assert_eq!(generate["path"], "/fal-ai/flux-2-pro");
    assert_eq!(generate["body"]["guidance_scale"], 4.5);
    assert_eq!(generate["body"]["sync_mode"], true);
    assert_eq!(upscale["path"], "/fal-ai/clarity-upscaler");
    assert!(
        upscale["body"]["image_url"]
            .as_str()
            .unwrap()
            .contains("/files/"),
        "{upscale}"
    );
    assert_eq!(upscale["body"]["upscale_factor"], 2);
    assert!(upscale["body"]["prompt"]
        .as_str()
        .unwrap()
        .ends_with(", a harbour"));
    assert_ne!(
        generate["headers"]["x-idempotency-key"], upscale["headers"]["x-idempotency-key"],
        "each submit is its own request"
    );

    // FAL_IMAGE_MODEL names the model when config.yaml does not: Krea 2 Medium is
    // text-to-image only, with an aspect ratio.
    std::fs::write(home.path().join("config.yaml"), OPEN).unwrap();
    let krea = [
        envs[0],
        envs[1],
        envs[2],
        envs[3],
        ("FAL_IMAGE_MODEL", "fal-ai/krea/v2/medium/text-to-image"),
    ];
    let (result, _) = call(
        home.path(),
        &json!({"prompt": "a fox", "aspect_ratio": "portrait"}),
        &krea,
    );
    assert_eq!(result["success"], true, "{result}");
    assert_eq!(
        last_submit(&fal),
        (
            "/fal-ai/krea/v2/medium/text-to-image".to_string(),
            json!({"creativity": "medium", "prompt": "a fox", "aspect_ratio": "9:16"})
        )
    );
    let schema = run(
        home.path(),
        &["schema", "--toolsets", "image_gen"],
        &krea,
        "",
    );
    let schema = String::from_utf8_lossy(&schema.stdout);
    assert!(
        schema.contains("model: Krea 2 Medium") && schema.contains("text-to-image only"),
        "{schema}"
    );
}

#[test]
fn reachable_through_serve_mcp_and_agent() {
    let dir = tempfile::tempdir().unwrap();
    let api = Fake::start(&["openai", OPENAI_KEY], dir.path().join("openai.log"));
    let base = format!("http://127.0.0.1:{}/v1", api.port);
    let home = web_support::home_with("image_gen:\n  provider: openai\n");
    let envs = [
        ("OPENAI_API_KEY", OPENAI_KEY),
        ("OPENAI_BASE_URL", base.as_str()),
        ("FAL_KEY", ""),
    ];
    let saved = |result: &Value| {
        assert_eq!(result["success"], true, "{result}");
        let path = PathBuf::from(result["image"].as_str().unwrap());
        assert!(
            path.starts_with(home.path().join("cache/images")),
            "{path:?}"
        );
        image::open(&path).unwrap().width()
    };

    let line = json!({"id": "g1", "type": "function", "function": {"name": "image_generate",
        "arguments": json!({"prompt": "a lamp", "aspect_ratio": "square"}).to_string()}});
    let out = run(home.path(), &["serve"], &envs, &format!("{line}\n"));
    let answer: Value = serde_json::from_str(String::from_utf8_lossy(&out.stdout).trim()).unwrap();
    assert_eq!(answer["tool_call_id"], "g1");
    let result: Value = serde_json::from_str(answer["content"].as_str().unwrap()).unwrap();
    assert_eq!(saved(&result), 16);

    let input = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "image_generate", "arguments": {"prompt": "a chair", "aspect_ratio": "portrait"}}}),
    ]
    .iter()
    .map(|l| format!("{l}\n"))
    .collect::<String>();
    let out = run(
        home.path(),
        &["mcp", "--toolsets", "image_gen"],
        &envs,
        &input,
    );
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(!stdout.contains(OPENAI_KEY));
    let replies: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let listed = replies.iter().find(|v| v["id"] == 2).unwrap();
    let offered = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "image_generate")
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(offered["description"]
        .as_str()
        .unwrap()
        .contains("Active backend: OpenAI"));
    let called = replies.iter().find(|v| v["id"] == 3).unwrap();
    let text = called["result"]["content"][0]["text"].as_str().unwrap();
    let result: Value = serde_json::from_str(text).unwrap();
    assert_eq!(saved(&result), 16);
    assert_eq!(result["size"], "1024x1536");

    let model = support::ScriptedModel::script(vec![
        support::Reply::Json(support::tool_calls(&[(
            "c1",
            "image_generate",
            json!({"prompt": "a boat"}),
        )])),
        support::Reply::Json(support::final_answer("done")),
    ]);
    let out = run(
        home.path(),
        &[
            "agent",
            "Draw a boat",
            "--base-url",
            &model.base_url,
            "--model",
            "stand-in",
            "--toolsets",
            "image_gen",
        ],
        &envs,
        "",
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(support::offered_tools(&model.request(0)).contains(&"image_generate".to_string()));
    let seen = support::last_message(&model.request(1), "tool").unwrap();
    let result: Value = serde_json::from_str(&seen).unwrap();
    assert_eq!(saved(&result), 24, "landscape");
    assert!(!String::from_utf8_lossy(&out.stderr).contains(OPENAI_KEY));
    assert_eq!(
        api.requests()
            .iter()
            .filter(|r| r["path"] == "/v1/images/generations")
            .count(),
        3
    );
}

#[test]
fn on_a_container_backend_the_image_is_copied_into_the_task() {
    let dir = tempfile::tempdir().unwrap();
    let api = Fake::start(&["openai", OPENAI_KEY], dir.path().join("openai.log"));
    let base = format!("http://127.0.0.1:{}/v1", api.port);
    let home = web_support::home_with(&format!(
        "image_gen:\n  provider: openai\n{}",
        podman::terminal_config()
    ));
    let conf = podman::containers_conf();
    let envs = [
        ("OPENAI_API_KEY", OPENAI_KEY),
        ("OPENAI_BASE_URL", base.as_str()),
        ("FAL_KEY", ""),
        ("CONTAINERS_CONF", conf.as_str()),
    ];
    let task = format!("image-docker-{}", std::process::id());
    let line = |id: &str, tool: &str, args: Value| {
        json!({"id": id, "type": "function", "task_id": task,
               "function": {"name": tool, "arguments": args.to_string()}})
        .to_string()
            + "\n"
    };
    let input = [
        line("made", "image_generate", json!({"prompt": "a red door"})),
        line(
            "look",
            "terminal",
            json!({"command": "cd /root/.hermes/cache/images && for f in *; do echo \"$PWD/$f\"; sha256sum < \"$f\"; done"}),
        ),
    ]
    .concat();
    let out = run(home.path(), &["serve"], &envs, &input);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let answer = |id: &str| -> Value {
        let line = stdout
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v["tool_call_id"] == id)
            .unwrap_or_else(|| panic!("no answer {id}: {stdout}"));
        serde_json::from_str(line["content"].as_str().unwrap()).unwrap()
    };
    let made = answer("made");
    assert_eq!(made["success"], true, "{made}");
    let host = made["image"].as_str().unwrap();
    assert_eq!(made["host_image"], host);
    assert!(host.starts_with(home.path().to_str().unwrap()), "{made}");
    let inside = made["agent_visible_image"].as_str().unwrap();
    let name = Path::new(host).file_name().unwrap().to_str().unwrap();
    assert_eq!(inside, format!("/root/.hermes/cache/images/{name}"));
    // The task's commands see the same bytes there.
    let listed = answer("look");
    let output = listed["output"].as_str().unwrap();
    let hashed = Command::new("sha256sum").arg(host).output().unwrap();
    let digest = String::from_utf8_lossy(&hashed.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string();
    assert_eq!(
        output.lines().collect::<Vec<_>>(),
        [inside, &format!("{digest}  -")],
        "{listed}"
    );
    assert_eq!(podman::containers_of(&task), "");

    // On the local backend there is nothing to copy.
    let local = web_support::home_with("image_gen:\n  provider: openai\n");
    let (result, _) = call(local.path(), &json!({"prompt": "a door"}), &envs[..3]);
    assert_eq!(result["success"], true, "{result}");
    assert!(result.get("agent_visible_image").is_none(), "{result}");
}
