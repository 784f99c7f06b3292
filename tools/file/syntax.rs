//! Syntax checks after an edit, with no network: Python through the local
//! interpreter's own compiler (as `python3 -m py_compile` would), JSON with
//! serde_json, YAML with serde_yaml_ng (every document of a stream; tags allowed),
//! TOML with the `toml` crate.
//!
//! Only what the edit broke counts: the text before the edit is checked too, and an
//! error that was already there is reported as such. A structured file (JSON, YAML,
//! TOML) that parsed before and would not after is refused and left as it was; a
//! Python file is written and the error reported, since a half-finished edit of code
//! is often the first of several.
//!
//! Each language can be switched off in `$HERMES_HOME/config.yaml`:
//! `syntax_check: {python: false, json: false, yaml: false, toml: false}`.

use hermes_runtime::config::Config;
use serde_json::{json, Value};
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long the Python compiler may take before the check is given up.
const PYTHON_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Language {
    Python,
    Json,
    Yaml,
    Toml,
}

impl Language {
    pub fn of(path: &Path) -> Option<Language> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        Some(match ext.as_str() {
            "py" | "pyi" => Language::Python,
            "json" => Language::Json,
            "yaml" | "yml" => Language::Yaml,
            "toml" => Language::Toml,
            _ => return None,
        })
    }

    fn key(self) -> &'static str {
        match self {
            Language::Python => "python",
            Language::Json => "json",
            Language::Yaml => "yaml",
            Language::Toml => "toml",
        }
    }

    /// Structured data: a broken file is refused rather than written.
    pub fn refuses_breakage(self) -> bool {
        !matches!(self, Language::Python)
    }

    fn enabled(self, hermes_home: &Path) -> bool {
        let config = Config::load(hermes_home);
        config
            .get(&format!("syntax_check.{}", self.key()))
            .and_then(Value::as_bool)
            .unwrap_or(true)
    }
}

/// What a check found.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    Ok,
    Error(String),
    /// The check could not run (no interpreter, timeout); the text says why.
    Unavailable(String),
}

pub fn check(language: Language, text: &str) -> Verdict {
    match language {
        Language::Json => match serde_json::from_str::<serde::de::IgnoredAny>(text) {
            Ok(_) => Verdict::Ok,
            Err(e) => Verdict::Error(format!("JSON: {e}")),
        },
        Language::Yaml => {
            for document in serde_yaml_ng::Deserializer::from_str(text) {
                if let Err(e) = <serde::de::IgnoredAny as serde::Deserialize>::deserialize(document)
                {
                    return Verdict::Error(format!("YAML: {e}"));
                }
            }
            Verdict::Ok
        }
        Language::Toml => match text.parse::<toml::Table>() {
            Ok(_) => Verdict::Ok,
            Err(e) => Verdict::Error(format!("TOML: {}", e.to_string().trim_end())),
        },
        Language::Python => check_python(text),
    }
}

/// Compiles (without running or writing anything) with `python3 -I`: isolated from
/// the environment's PYTHON* variables, user site and the working directory.
fn check_python(text: &str) -> Verdict {
    const SCRIPT: &str = "import sys, warnings\n\
        warnings.simplefilter('ignore')\n\
        try:\n    compile(sys.stdin.buffer.read(), '<edited file>', 'exec', dont_inherit=True)\n\
        except SyntaxError as e:\n    print(f'{type(e).__name__}: {e.msg} (line {e.lineno}, column {e.offset})'); sys.exit(1)\n\
        except ValueError as e:\n    print(f'ValueError: {e}'); sys.exit(1)\n";
    let child = Command::new("python3")
        .args(["-I", "-c", SCRIPT])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn();
    let mut child = match child {
        Ok(child) => child,
        Err(e) => {
            return Verdict::Unavailable(format!(
                "Python syntax check skipped: no python3 interpreter ({e})"
            ))
        }
    };
    let mut stdin = child.stdin.take().expect("stdin was piped");
    let source = text.as_bytes().to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&source);
    });
    let started = Instant::now();
    // A compile takes tens of milliseconds: look often at first, then every 5 ms.
    let mut pause = Duration::from_micros(250);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if started.elapsed() > PYTHON_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            Ok(None) => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(5));
            }
            Err(_) => break None,
        }
    };
    let _ = writer.join();
    let Some(status) = status else {
        return Verdict::Unavailable(
            "Python syntax check skipped: the interpreter did not finish in time".into(),
        );
    };
    let mut output = String::new();
    if let Some(mut stdout) = child.stdout.take() {
        let _ = std::io::Read::read_to_string(&mut stdout, &mut output);
    }
    match status.code() {
        Some(0) => Verdict::Ok,
        Some(1) if !output.trim().is_empty() => Verdict::Error(output.trim().to_string()),
        _ => Verdict::Unavailable(format!(
            "Python syntax check skipped: the interpreter failed ({status})"
        )),
    }
}

/// The outcome of checking one edit.
pub struct Report {
    /// The `lint` field of the result.
    pub lint: Value,
    /// Set when the edit must not be written: why.
    pub refusal: Option<String>,
}

/// Checks `after` (and `before`, when `after` fails) for the file at `path`; `None`
/// when its language is not checked or the check is switched off.
pub fn review(
    path: &Path,
    shown: &str,
    before: Option<&str>,
    after: &str,
    hermes_home: &Path,
) -> Option<Report> {
    let language = Language::of(path)?;
    if !language.enabled(hermes_home) {
        return None;
    }
    let checker = match language {
        Language::Python => "python3 compile",
        Language::Json => "serde_json",
        Language::Yaml => "serde_yaml_ng",
        Language::Toml => "toml",
    };
    let report = match check(language, after) {
        Verdict::Ok => Report {
            lint: json!({"status": "ok", "checker": checker}),
            refusal: None,
        },
        Verdict::Unavailable(why) => Report {
            lint: json!({"status": "skipped", "checker": checker, "output": why}),
            refusal: None,
        },
        Verdict::Error(error) => {
            let broken_before =
                before.map(|text| matches!(check(language, text), Verdict::Error(_)));
            if broken_before == Some(true) {
                Report {
                    lint: json!({
                        "status": "error",
                        "checker": checker,
                        "output": error,
                        "note": "The file had a syntax error before this edit too; this edit did not cause it.",
                    }),
                    refusal: None,
                }
            } else if language.refuses_breakage() {
                Report {
                    lint: json!({"status": "error", "checker": checker, "output": error}),
                    refusal: Some(format!(
                        "Refusing the edit of {shown}: it would not parse afterwards ({error}). The file was {}; \
                         fix the edit and try again.",
                        if before.is_some() { "left as it was" } else { "not created" }
                    )),
                }
            } else {
                Report {
                    lint: json!({
                        "status": "error",
                        "checker": checker,
                        "output": error,
                        "note": "This edit introduced the syntax error; the file was written.",
                    }),
                    refusal: None,
                }
            }
        }
    };
    Some(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structured_formats() {
        assert_eq!(check(Language::Json, "{\"a\": [1, 2]}"), Verdict::Ok);
        assert!(
            matches!(check(Language::Json, "{\"a\": [1, 2}"), Verdict::Error(e) if e.contains("line 1"))
        );
        assert_eq!(check(Language::Yaml, "a: 1\n---\nb: !Ref x\n"), Verdict::Ok);
        assert!(matches!(
            check(Language::Yaml, "a: [1, 2\nb: 3\n"),
            Verdict::Error(_)
        ));
        assert_eq!(check(Language::Toml, "[x]\na = 1\n"), Verdict::Ok);
        assert!(matches!(
            check(Language::Toml, "[x\na = 1\n"),
            Verdict::Error(_)
        ));
    }
}
