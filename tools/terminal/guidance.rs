//! Foreground guidance (reference §3.2 step 2): a foreground call that would leave a
//! process behind or never finish is refused with advice to re-send it as a background
//! process. Quotes, backticks, comments and here-document bodies are blanked first, so
//! only real shell syntax counts.

use hermes_runtime::word_gated::WordGatedPattern;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuidanceKind {
    /// `nohup` / `setsid` / `disown`: re-send as background with notify_on_complete.
    Detach,
    /// A backgrounding `&`: re-send without it, as background.
    Ampersand,
    /// A long-running server: run it in the background and check readiness.
    Server,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guidance {
    pub kind: GuidanceKind,
    pub message: String,
}

/// Replaces quoted text, backtick spans, comments and here-document bodies with spaces
/// (newlines outside here-documents are kept).
pub fn blank_inert(command: &str) -> String {
    let chars: Vec<char> = command.chars().collect();
    let mut out = String::with_capacity(command.len());
    let mut i = 0;
    let mut pending_heredocs: Vec<(String, bool)> = Vec::new();
    let at_word_start = |out: &str| {
        out.chars()
            .last()
            .is_none_or(|c| c.is_whitespace() || ";&|()".contains(c))
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                out.push(' ');
                if i + 1 < chars.len() {
                    out.push(if chars[i + 1] == '\n' { '\n' } else { ' ' });
                }
                i += 2;
            }
            '\'' | '"' | '`' => {
                let close = c;
                out.push(c);
                i += 1;
                while i < chars.len() && chars[i] != close {
                    if chars[i] == '\\' && close != '\'' && i + 1 < chars.len() {
                        out.push_str("  ");
                        i += 2;
                        continue;
                    }
                    out.push(if chars[i] == '\n' { '\n' } else { ' ' });
                    i += 1;
                }
                if i < chars.len() {
                    out.push(close);
                    i += 1;
                }
            }
            '#' if at_word_start(&out) => {
                while i < chars.len() && chars[i] != '\n' {
                    out.push(' ');
                    i += 1;
                }
            }
            '<' if chars.get(i + 1) == Some(&'<') && chars.get(i + 2) != Some(&'<') => {
                out.push_str("<<");
                i += 2;
                let strip_tabs = chars.get(i) == Some(&'-');
                if strip_tabs {
                    out.push('-');
                    i += 1;
                }
                while i < chars.len() && (chars[i] == ' ' || chars[i] == '\t') {
                    out.push(chars[i]);
                    i += 1;
                }
                let mut word = String::new();
                while i < chars.len() && !chars[i].is_whitespace() && !";&|<>()".contains(chars[i])
                {
                    if chars[i] != '\'' && chars[i] != '"' && chars[i] != '\\' {
                        word.push(chars[i]);
                    }
                    out.push(chars[i]);
                    i += 1;
                }
                if !word.is_empty() {
                    pending_heredocs.push((word, strip_tabs));
                }
            }
            '\n' if !pending_heredocs.is_empty() => {
                out.push('\n');
                i += 1;
                for (delimiter, strip_tabs) in std::mem::take(&mut pending_heredocs) {
                    // Blank body lines up to and including the delimiter line.
                    loop {
                        if i >= chars.len() {
                            break;
                        }
                        let start = i;
                        while i < chars.len() && chars[i] != '\n' {
                            i += 1;
                        }
                        let line: String = chars[start..i].iter().collect();
                        let line_cmp = if strip_tabs {
                            line.trim_start_matches('\t')
                        } else {
                            line.as_str()
                        };
                        out.extend(std::iter::repeat_n(' ', i - start));
                        if i < chars.len() {
                            out.push('\n');
                            i += 1;
                        }
                        if line_cmp == delimiter {
                            break;
                        }
                    }
                }
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

static DETACHING: WordGatedPattern = WordGatedPattern::new(
    &["nohup", "setsid", "disown"],
    r"(?m)(?:^|[;&|(\n{]|&&|\|\|)\s*(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(nohup|setsid|disown)\b",
);

static SERVER: WordGatedPattern = WordGatedPattern::new(
    &[
        "npm",
        "yarn",
        "bun",
        "compose",
        "next",
        "vite",
        "nodemon",
        "uvicorn",
        "gunicorn",
        "http.server",
    ],
    r"(?m)(?:^|[;&|(\n]|&&|\|\|)\s*(?:[A-Za-z_][A-Za-z0-9_]*=\S*\s+)*(?:npx\s+|pnpm\s+exec\s+|exec\s+)?((?:npm|pnpm|yarn|bun)\s+(?:run\s+)?(?:dev|start|serve|watch)\b|docker(?:\s+|-)compose\s+up\b|next\s+dev\b|vite\b|nodemon\b|uvicorn\b|gunicorn\b|python3?\s+-m\s+http\.server\b)",
);

/// The advice for a foreground command, or `None` when it may run in the foreground.
pub fn foreground_guidance(command: &str) -> Option<Guidance> {
    let words: Vec<&str> = command.split_whitespace().collect();
    if words.iter().any(|w| *w == "--help" || *w == "--version")
        || matches!(words.last(), Some(&"-h") | Some(&"-v"))
    {
        return None;
    }
    let masked = blank_inert(command);
    if DETACHING.is_match(&masked) {
        return Some(Guidance {
            kind: GuidanceKind::Detach,
            message: "This command detaches a process (nohup, setsid or disown), which a foreground call cannot \
                      track. Re-send it WITHOUT the nohup/setsid/disown wrapper (and without a trailing `&`), with \
                      background=true and notify_on_complete=true; then use the process tool (poll, log, wait, kill) \
                      with the returned session_id."
                .into(),
        });
    }
    if has_background_ampersand(&masked) {
        return Some(Guidance {
            kind: GuidanceKind::Ampersand,
            message: "This command puts work in the background with `&`, which leaves a process the foreground call \
                      cannot track (and may hang it). Re-send it without the `&`, with background=true (split \
                      `cmd1 & cmd2` into separate calls); then use the process tool with the returned session_id."
                .into(),
        });
    }
    if let Some(m) = SERVER.captures(&masked) {
        let detached = words.iter().any(|w| *w == "-d" || *w == "--detach");
        if !detached {
            return Some(Guidance {
                kind: GuidanceKind::Server,
                message: format!(
                    "`{}` starts a long-running server that never exits on its own, so a foreground call would only \
                     end at its timeout. Re-send it with background=true, then check readiness with the process tool \
                     (poll or log) or with a request such as curl.",
                    m[1].split_whitespace().collect::<Vec<_>>().join(" ")
                ),
            });
        }
    }
    None
}

/// A `&` that backgrounds (not `&&`, `>&`, `<&`, `&>`, `|&`).
fn has_background_ampersand(masked: &str) -> bool {
    let chars: Vec<char> = masked.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        if *c != '&' {
            continue;
        }
        let prev = if i > 0 { chars[i - 1] } else { ' ' };
        let next = chars.get(i + 1).copied().unwrap_or(' ');
        if prev == '&' || next == '&' || prev == '>' || prev == '<' || prev == '|' || next == '>' {
            continue;
        }
        return true;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors() {
        let kind = |c: &str| foreground_guidance(c).map(|g| g.kind);
        assert_eq!(kind("sleep 5 &"), Some(GuidanceKind::Ampersand));
        assert_eq!(kind("python3 server.py &"), Some(GuidanceKind::Ampersand));
        assert_eq!(kind("nohup make test"), Some(GuidanceKind::Detach));
        assert_eq!(
            kind("nohup ./worker.sh > /dev/null 2>&1"),
            Some(GuidanceKind::Detach)
        );
        assert_eq!(kind("cmd1 & cmd2"), Some(GuidanceKind::Ampersand));
        assert_eq!(
            kind("cat <<EOF\nhi\nEOF\nsleep 5 &"),
            Some(GuidanceKind::Ampersand)
        );
        assert_eq!(
            kind("echo '<<EOF'\nsleep 5 &"),
            Some(GuidanceKind::Ampersand)
        );
        assert_eq!(kind("# <<EOF\nsleep 5 &"), Some(GuidanceKind::Ampersand));
        assert_eq!(kind("npm run dev"), Some(GuidanceKind::Server));
        assert_eq!(kind("echo hello"), None);
        assert_eq!(kind("pnpm dev --help"), None);
        assert_eq!(
            kind("python3 - <<PY\nprint(oct(st.st_mode & 0o7777))\nPY"),
            None
        );
        assert_eq!(kind("ls 2>&1 | grep x && echo ok"), None);
        assert_eq!(kind("echo 'a & b'"), None);
        assert_eq!(kind("make &> log.txt"), None);
    }

    #[test]
    fn every_form_the_patterns_know_passes_the_word_check() {
        let kind = |c: &str| foreground_guidance(c).map(|g| g.kind);
        let servers = [
            "npm run dev",
            "pnpm start",
            "yarn serve",
            "bun run watch",
            "npx vite",
            "pnpm exec next dev",
            "exec npm start",
            "PORT=3000 npm run dev",
            "docker compose up",
            "docker-compose up",
            "cd web && next dev",
            "vite --port 5173",
            "nodemon app.js",
            "uvicorn main:app --reload",
            "gunicorn app:app",
            "python -m http.server",
            "python3 -m http.server 8000",
        ];
        let detaching = [
            "nohup make",
            "setsid ./worker",
            "A=1 nohup ./worker",
            "(setsid ./worker)",
            "{ nohup ./worker; }",
            "./worker; disown",
        ];
        for (commands, pattern, expected) in [
            (&servers[..], &SERVER, GuidanceKind::Server),
            (&detaching[..], &DETACHING, GuidanceKind::Detach),
        ] {
            for command in commands {
                assert!(pattern.names_a_word(command), "{command}");
                assert_eq!(kind(command), Some(expected.clone()), "{command}");
            }
        }
        // A word alone is not enough: the patterns still decide.
        assert_eq!(kind("echo nohup is a program"), None);
        assert_eq!(kind("cat package.json | grep next"), None);
        assert_eq!(kind("docker-compose up -d"), None);
    }
}
