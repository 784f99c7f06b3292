//! The category corpus: `tests/corpus/*.tsv`, one command a line as `VERDICT<TAB>COMMAND`,
//! grouped under `# category: NAME` headers. Commands spell a newline `\n`, a tab `\t`, a
//! carriage return `\r`, an escape `\e` and a backslash `\\`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use hermes_command_guard::{GuardContext, Verdict};

/// The installation the corpus assumes: a user `alice` with Hermes in its default place.
pub fn context() -> GuardContext {
    GuardContext {
        home: Some("/home/alice".into()),
        hermes_home: Some("/home/alice/.hermes".into()),
        ..GuardContext::default()
    }
}

pub struct Case {
    pub category: String,
    pub expected: Verdict,
    pub command: String,
    /// `file:line`, for failure messages.
    pub origin: String,
}

/// Found from the guard crate's tests and from the workspace root's.
pub fn corpus_dir() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let own = manifest.join("tests/corpus");
    if own.join("categories.tsv").is_file() {
        own
    } else {
        manifest.join("command-guard/tests/corpus")
    }
}

fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('e') => out.push('\u{1b}'),
            Some('\\') => out.push('\\'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

fn parse_verdict(word: &str) -> Option<Verdict> {
    Some(match word {
        "safe" => Verdict::Safe,
        "dangerous" => Verdict::Dangerous,
        "hardline" => Verdict::Hardline,
        "blocked" => Verdict::Blocked,
        _ => return None,
    })
}

/// Every case of every corpus file, in file order; a malformed line panics with its place.
pub fn load() -> Vec<Case> {
    load_from(&corpus_dir())
}

/// The cases of every `.tsv` file in `dir`.
pub fn load_from(dir: &Path) -> Vec<Case> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the corpus directory exists")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "tsv"))
        .collect();
    files.sort();
    let mut cases = Vec::new();
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&file).expect("the corpus file is readable");
        let mut category = String::from("uncategorised");
        for (number, line) in text.lines().enumerate() {
            let origin = format!("{name}:{}", number + 1);
            if let Some(header) = line.strip_prefix("# category:") {
                category = header.trim().to_string();
                continue;
            }
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let (verdict, command) = line
                .split_once('\t')
                .unwrap_or_else(|| panic!("{origin}: expected VERDICT<TAB>COMMAND"));
            let expected = parse_verdict(verdict)
                .unwrap_or_else(|| panic!("{origin}: unknown verdict {verdict:?}"));
            cases.push(Case {
                category: category.clone(),
                expected,
                command: unescape(command),
                origin,
            });
        }
    }
    cases
}
