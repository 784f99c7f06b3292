//! The documentation stays true to the code: every setting the code reads is in
//! docs/configuration.md and every setting listed there is still read, the shell
//! examples marked ```` ```sh test ```` run against the built binary, and every relative
//! link in README.md and docs/ leads to a file (and heading).
//!
//! How settings are found: the sources of the binary and its crates (`src/`, `tools/`,
//! `<crate>/src/`, each file up to its `#[cfg(test)]` module) are scanned for string
//! literals at read sites:
//! - an environment variable is an UPPER_CASE literal given first to one of
//!   [`ENV_READERS`] (`std::env::var("X")`, `src.string("X", "key")`, `env("X")`, ...),
//!   or named in a tool's `requires_env = [...]`; `.env("X", value)` sets a child's
//!   variable and is not a read;
//! - a config.yaml key is a dotted lower-case literal given to `get`, `positive_usize`,
//!   `text`, `number` or `configured(config, ..)`, a plain literal given to
//!   `config.get(..)`, or, for the terminal's `src.string("ENV", "key")` readers,
//!   `terminal.` + the second literal.
//!
//! A read the scan cannot see (a key built with `format!`, a list of keys) is listed in
//! [`UNSEEN_READS`] with a fragment of its read site, which must still be in that file.
//! A literal the scan finds that is no user setting goes into [`NOT_SETTINGS`] with the
//! reason.

use regex::Regex;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Functions whose first argument, an UPPER_CASE literal, names an environment variable
/// they read.
const ENV_READERS: &[&str] = &[
    "var",
    "var_os",
    "string",
    "list",
    "words",
    "secret",
    "env",
    "key",
    "x_api_key",
    "text",
    "flag",
    "base",
];

/// Settings read where the scan cannot see them: (setting, file, a fragment of the read).
const UNSEEN_READS: &[(&str, &str, &str)] = &[
    (
        "serve.max_line_bytes",
        "src/serve.rs",
        "key(\"max_line_bytes\"",
    ),
    (
        "serve.max_in_flight",
        "src/serve.rs",
        "key(\"max_in_flight\"",
    ),
    (
        "serve.max_in_flight_per_task",
        "src/serve.rs",
        "key(\"max_in_flight_per_task\"",
    ),
    (
        "serve.max_queued_per_task",
        "src/serve.rs",
        "key(\"max_queued_per_task\"",
    ),
    ("serve.max_queued", "src/serve.rs", "key(\"max_queued\""),
    (
        "serve.max_queued_bytes",
        "src/serve.rs",
        "key(\"max_queued_bytes\"",
    ),
    (
        "terminal.sandbox.limits.max_processes",
        "environments/src/config.rs",
        "read(\"max_processes\"",
    ),
    (
        "terminal.sandbox.limits.max_memory_mb",
        "environments/src/config.rs",
        "read(\"max_memory_mb\"",
    ),
    (
        "terminal.sandbox.limits.max_file_size_mb",
        "environments/src/config.rs",
        "read(\"max_file_size_mb\"",
    ),
    (
        "terminal.sandbox.limits.max_cpu_seconds",
        "environments/src/config.rs",
        "read(\"max_cpu_seconds\"",
    ),
    (
        "TERMINAL_SANDBOX_MAX_PROCESSES",
        "environments/src/config.rs",
        "format!(\"TERMINAL_SANDBOX_{}\"",
    ),
    (
        "TERMINAL_SANDBOX_MAX_MEMORY_MB",
        "environments/src/config.rs",
        "format!(\"TERMINAL_SANDBOX_{}\"",
    ),
    (
        "TERMINAL_SANDBOX_MAX_FILE_SIZE_MB",
        "environments/src/config.rs",
        "format!(\"TERMINAL_SANDBOX_{}\"",
    ),
    (
        "TERMINAL_SANDBOX_MAX_CPU_SECONDS",
        "environments/src/config.rs",
        "format!(\"TERMINAL_SANDBOX_{}\"",
    ),
    (
        "tts.provider",
        "tools/tts/providers.rs",
        ".get(\"provider\")",
    ),
    (
        "tts.piper.model",
        "tools/tts/providers.rs",
        ".get(\"piper\", \"model\")",
    ),
    (
        "tts.espeak.voice",
        "tools/tts/providers.rs",
        ".get(\"espeak\", \"voice\")",
    ),
    (
        "tts.espeak.speed",
        "tools/tts/providers.rs",
        ".get(\"speed\")",
    ),
    (
        "tts.edge.voice",
        "tools/tts/providers.rs",
        ".get(\"edge\", \"voice\")",
    ),
    (
        "tts.openai.base_url",
        "tools/tts/providers.rs",
        ".get(\"openai\", \"base_url\")",
    ),
    (
        "tts.openai.model",
        "tools/tts/providers.rs",
        ".get(\"openai\", \"model\")",
    ),
    (
        "tts.openai.voice",
        "tools/tts/providers.rs",
        ".get(\"openai\", \"voice\")",
    ),
    (
        "tts.elevenlabs.voice_id",
        "tools/tts/providers.rs",
        ".get(\"elevenlabs\", \"voice_id\")",
    ),
    (
        "tts.elevenlabs.model_id",
        "tools/tts/providers.rs",
        ".get(\"elevenlabs\", \"model_id\")",
    ),
    (
        "security.allow_private_urls",
        "net/src/policy.rs",
        "\"security.allow_private_urls\"",
    ),
    (
        "browser.allow_private_urls",
        "net/src/policy.rs",
        "\"browser.allow_private_urls\"",
    ),
    (
        "OPENROUTER_API_KEY",
        "agent/src/config.rs",
        "DEFAULT_API_KEY_ENV: &str = \"OPENROUTER_API_KEY\"",
    ),
];

/// Literals the scan finds that are no user setting: (literal, why).
const NOT_SETTINGS: &[(&str, &str)] = &[(
    "MCP_CONFORMANCE_SCENARIO",
    "read only by mcp/src/bin/fixture.rs, the MCP conformance test's server",
)];

fn rust_sources() -> Vec<PathBuf> {
    let crates = [
        "runtime",
        "environments",
        "sandbox",
        "agent",
        "mcp",
        "plugins",
        "net",
        "vision",
        "command-guard",
        "kubernetes",
        "browser",
    ];
    let mut roots: Vec<PathBuf> = vec![Path::new(ROOT).join("src"), Path::new(ROOT).join("tools")];
    roots.extend(crates.iter().map(|c| Path::new(ROOT).join(c).join("src")));
    let mut files = Vec::new();
    while let Some(dir) = roots.pop() {
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            if path.is_dir() {
                roots.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// A file's text up to its test module: what the tests read is no setting of the binary.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    match text.find("#[cfg(test)]") {
        Some(at) => text[..at].to_string(),
        None => text,
    }
}

/// Every setting the code reads, with the file that reads it.
fn settings_read_by_the_code() -> BTreeSet<(String, String)> {
    let env_read = Regex::new(&format!(
        r#"\b({})\(\s*"([A-Z][A-Z0-9_]+)"\s*([,)])"#,
        ENV_READERS.join("|")
    ))
    .unwrap();
    let requires_env = Regex::new(r"requires_env\s*=\s*\[([^\]]*)\]").unwrap();
    let quoted_upper = Regex::new(r#""([A-Z][A-Z0-9_]+)""#).unwrap();
    let dotted_key = Regex::new(
        r#"\b(?:get|positive_usize|text|number|configured\(\s*\w+\s*,)\(?\s*"([a-z][a-z0-9_]*(?:\.[a-z][a-z0-9_]*)+)""#,
    )
    .unwrap();
    let top_key = Regex::new(r#"\bconfig(?:\(\))?\s*\.get\(\s*"([a-z][a-z0-9_]*)"\s*\)"#).unwrap();
    let terminal_key =
        Regex::new(r#"\b(?:string|list|words|secret)\(\s*"[A-Z][A-Z0-9_]+"\s*,\s*"([a-z0-9_.]+)""#)
            .unwrap();
    let mut found = BTreeSet::new();
    for path in rust_sources() {
        let code = code_of(&path);
        let file = path.strip_prefix(ROOT).unwrap().display().to_string();
        let mut add = |name: &str| {
            found.insert((name.to_string(), file.clone()));
        };
        for m in env_read.captures_iter(&code) {
            // `.env("X", value)` and `.key(..)` on a value set or index; a reader of
            // `key`/`env`/`text`/`flag` takes the name alone.
            let one_argument = &m[3] == ")";
            if matches!(&m[1], "env" | "key" | "text" | "flag") && !one_argument {
                continue;
            }
            add(&m[2]);
        }
        for list in requires_env.captures_iter(&code) {
            for name in quoted_upper.captures_iter(&list[1]) {
                add(&name[1]);
            }
        }
        for m in dotted_key.captures_iter(&code) {
            add(&m[1]);
        }
        for m in top_key.captures_iter(&code) {
            add(&m[1]);
        }
        for m in terminal_key.captures_iter(&code) {
            add(&format!("terminal.{}", &m[1]));
        }
    }
    found.retain(|(name, _)| !NOT_SETTINGS.iter().any(|(n, _)| n == name));
    found
}

fn read_doc(relative: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(relative))
        .unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// The settings named in the first two cells (key, variable) of the reference tables
/// of docs/configuration.md.
fn settings_in_the_reference() -> BTreeSet<String> {
    let doc = read_doc("docs/configuration.md");
    let code_span = Regex::new(r"`([^`]+)`").unwrap();
    let mut names = BTreeSet::new();
    for line in doc.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.split('|').collect();
        for cell in cells.iter().skip(1).take(2) {
            for m in code_span.captures_iter(cell) {
                names.insert(m[1].to_string());
            }
        }
    }
    names
}

#[test]
fn every_setting_the_code_reads_is_in_the_configuration_reference() {
    let documented = settings_in_the_reference();
    let mut missing: Vec<String> = settings_read_by_the_code()
        .into_iter()
        .filter(|(name, _)| !documented.contains(name))
        .map(|(name, file)| format!("{name} (read in {file})"))
        .collect();
    missing.extend(
        UNSEEN_READS
            .iter()
            .filter(|(name, _, _)| !documented.contains(*name))
            .map(|(name, file, _)| format!("{name} (read in {file})")),
    );
    missing.dedup();
    assert!(
        missing.is_empty(),
        "docs/configuration.md does not list these settings the code reads:\n  {}",
        missing.join("\n  ")
    );
}

#[test]
fn every_setting_in_the_configuration_reference_is_still_read() {
    let read: BTreeSet<String> = settings_read_by_the_code()
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    for (name, file, fragment) in UNSEEN_READS {
        assert!(
            read_doc(file).contains(fragment),
            "{name}: its read site `{fragment}` is no longer in {file}; update UNSEEN_READS in tests/docs.rs"
        );
    }
    let stale: Vec<String> = settings_in_the_reference()
        .into_iter()
        .filter(|name| !read.contains(name) && !UNSEEN_READS.iter().any(|(n, _, _)| n == name))
        .collect();
    assert!(
        stale.is_empty(),
        "docs/configuration.md lists settings no code reads any more: {stale:?}"
    );
}

/// README.md and every page of docs/.
fn doc_pages() -> Vec<PathBuf> {
    let mut pages = vec![Path::new(ROOT).join("README.md")];
    let docs = Path::new(ROOT).join("docs");
    for entry in std::fs::read_dir(&docs).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            pages.push(path);
        }
    }
    pages.sort();
    pages
}

/// The bodies of the blocks fenced ```` ```sh test ````.
fn runnable_examples(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        match &mut current {
            None if line.trim() == "```sh test" => current = Some(String::new()),
            None => {}
            Some(_) if line.trim() == "```" => blocks.push(current.take().unwrap()),
            Some(body) => {
                body.push_str(line);
                body.push('\n');
            }
        }
    }
    assert!(current.is_none(), "a ```sh test block is not closed");
    blocks
}

#[test]
fn the_marked_shell_examples_run() {
    let binary = Path::new(env!("CARGO_BIN_EXE_hermes-tools"));
    let path = format!(
        "{}:{}",
        binary.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = 0;
    for page in doc_pages() {
        for example in runnable_examples(&std::fs::read_to_string(&page).unwrap()) {
            assert!(
                example.lines().any(|l| l.starts_with("hermes-tools ")),
                "{}: a ```sh test block runs no hermes-tools command:\n{example}",
                page.display()
            );
            let home = tempfile::tempdir().unwrap();
            let work = tempfile::tempdir().unwrap();
            let out = Command::new("bash")
                .args(["-e", "-o", "pipefail", "-c", &example])
                .current_dir(work.path())
                .env("PATH", &path)
                .env("HOME", home.path())
                .env("HERMES_HOME", home.path().join(".hermes"))
                .env_remove("TERMINAL_ENV")
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}: the example failed ({}):\n{example}\nstdout: {}\nstderr: {}",
                page.display(),
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            ran += 1;
        }
    }
    assert!(ran >= 3, "only {ran} ```sh test examples found");
}

/// The anchors GitHub gives the headings of a Markdown page (outside code blocks).
fn heading_anchors(text: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    let mut in_code = false;
    for line in text.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        } else if !in_code && line.starts_with('#') {
            let title = line.trim_start_matches('#').trim().to_lowercase();
            let anchor: String = title
                .chars()
                .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
                .map(|c| if c == ' ' { '-' } else { c })
                .collect();
            anchors.insert(anchor);
        }
    }
    anchors
}

#[test]
fn relative_links_lead_to_files_and_headings() {
    let link = Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    let mut broken = Vec::new();
    for page in doc_pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        for m in link.captures_iter(&text) {
            let target = &m[1];
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (target, None),
            };
            let file = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(file)
            };
            if !file.exists() {
                broken.push(format!("{}: {target}", page.display()));
                continue;
            }
            if let Some(anchor) = anchor {
                let text = std::fs::read_to_string(&file).unwrap_or_default();
                if !heading_anchors(&text).contains(anchor) {
                    broken.push(format!("{}: {target} (no such heading)", page.display()));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links to no file or heading:\n  {}",
        broken.join("\n  ")
    );
}

#[test]
fn every_help_ends_by_pointing_at_its_manual_page() {
    let binary = env!("CARGO_BIN_EXE_hermes-tools");
    let commands: &[&[&str]] = &[
        &[],
        &["list"],
        &["schema"],
        &["toolsets"],
        &["call"],
        &["serve"],
        &["mcp"],
        &["agent"],
        &["check-command"],
        &["cron"],
    ];
    for command in commands {
        let out = Command::new(binary)
            .args(*command)
            .arg("--help")
            .output()
            .unwrap();
        assert!(out.status.success(), "{command:?} --help failed");
        let text = String::from_utf8(out.stdout).unwrap();
        let last = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap();
        let page = last
            .split_whitespace()
            .find(|word| word.starts_with("docs/") || *word == "README.md")
            .unwrap_or_else(|| panic!("{command:?} --help ends with {last:?}, not a manual page"));
        assert!(
            Path::new(ROOT).join(page).exists(),
            "{command:?} --help points at {page}, which does not exist"
        );
    }
}

/// The library example of README.md, with a scratch home and working directory.
#[test]
fn the_readme_library_example_works() {
    use hermes_tools::runtime::{serde_json::json, Registry, ToolCall, ToolContext};

    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    std::fs::write(
        work.path().join("Cargo.toml"),
        "[workspace]\nmembers = []\n",
    )
    .unwrap();
    let readme = read_doc("README.md");
    for line in [
        "let registry = Registry::new(&hermes_tools::CATALOG);",
        "let tools = registry.definitions(Some(&[\"file\"]), None::<&[&str]>).tools;",
        "let call = ToolCall::new(\"read_file\", json!({\"path\": \"Cargo.toml\", \"limit\": 5}));",
        "let answer: String = registry.handle_function_call(&call, &ctx);",
    ] {
        assert!(readme.contains(line), "README.md no longer shows: {line}");
    }

    let registry = Registry::with_home(&hermes_tools::CATALOG, home.path().to_path_buf());
    let tools = registry.definitions(Some(&["file"]), None::<&[&str]>).tools;
    assert!(tools.iter().any(|t| t["function"]["name"] == "read_file"));
    let call = ToolCall::new("read_file", json!({"path": "Cargo.toml", "limit": 5}));
    let ctx = ToolContext::builder()
        .task_id("t1")
        .cwd(work.path())
        .hermes_home(home.path())
        .build();
    let answer: String = registry.handle_function_call(&call, &ctx);
    assert!(answer.contains("[workspace]"), "{answer}");
}

#[test]
fn a_broken_setting_names_the_manual_page_that_explains_it() {
    let binary = env!("CARGO_BIN_EXE_hermes-tools");
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        "terminal:\n  sandbox:\n    network: sideways\n",
    )
    .unwrap();
    let out = std::process::Command::new(binary)
        .args(["call", "terminal", r#"{"command": "true"}"#])
        .env("HERMES_HOME", home.path())
        .env("HOME", home.path())
        .current_dir(home.path())
        .output()
        .unwrap();
    let result = String::from_utf8_lossy(&out.stdout);
    assert!(result.contains("terminal.sandbox.network"), "{result}");
    let page = "docs/configuration.md";
    assert!(result.contains(&format!("(see {page})")), "{result}");
    assert!(
        read_doc(page).contains("`terminal.sandbox.network`"),
        "{page} explains the key the error names"
    );
}
