//! Reference §1.8 (structural), §1.10 (sudo-stdin guard), §1.11 (deny/allowlist), the "More
//! vectors" paragraph of §1.9, the verification exemption, home folding and key aliases.

mod common;

use common::{ctx, ctx_home, Report};
use hermes_command_guard::{
    classify, is_simple_command, legacy_key_aliases, match_deny_rule, matches_allowlist,
    sudo_stdin_guard, GuardContext, Verdict,
};

const SCRIPT_FLAG: &str = "script execution via -e/-c flag";
const SCRIPT_HEREDOC: &str = "script execution via heredoc";
const SHELL_C: &str = "shell command via -c/-lc flag";
const SUDO: &str = "sudo password guessing via stdin (sudo -S)";
const SPLICED: &str = "stop/restart hermes gateway via shell-spliced verb (kills running agents)";

#[test]
fn structural_findings() {
    let mut r = Report::default();
    for cmd in [
        "python3 -c 'import os; os.system(\"whoami\")'",
        "powershell -File C:\\del-logs\\run.ps1",
        "node -pe 'process.exit(1)'",
        "node --eval 'x'",
        "python -W ignore -c 'print(1)'",
        "ruby -e 'puts 1'",
        "php -r 'echo 1;'",
        "bun -e 'x'",
        "deno eval 'x'",
        "/usr/bin/python3.12 -Bc 'x'",
        "pwsh -Command Get-Date",
    ] {
        r.dangerous(cmd, SCRIPT_FLAG);
    }
    r.dangerous(
        "python << \"PYEOF\"\nprint(\"pwned\")\nPYEOF",
        SCRIPT_HEREDOC,
    );
    r.dangerous(
        "python3 - <<'EOF'\nmsg = 'run sudo reboot later'\nprint(msg)\nEOF",
        SCRIPT_HEREDOC,
    );
    for cmd in [
        "bash -lc \\\n'echo pwned'",
        "bash -c 'echo hi'",
        "sh -ic 'ls'",
        "zsh -o pipefail -c 'ls'",
    ] {
        r.dangerous(cmd, SHELL_C);
    }
    r.dangerous(
        "rg --pre ./decode.sh pattern",
        "arbitrary program execution via rg --pre",
    );
    r.dangerous(
        "sort --compress-program=gzip big.txt",
        "arbitrary program execution via sort --compress-program",
    );
    r.dangerous(
        "ag --pager less x",
        "arbitrary program execution via ag --pager",
    );
    r.dangerous("man -P cat ls", "arbitrary program execution via man -P");
    r.dangerous(
        "python3 -c 'print(1",
        "command parser limit or malformed executable payload",
    );
    for cmd in [
        "python3 my_script.py",
        "bash script.sh",
        "python -Wonce x.py",
        "ruby -rjson x.rb",
        "python -m http.server",
        "bash --norc script.sh",
        "node app.js -e x",
        "rg pattern src/",
        "sort -u names.txt",
    ] {
        r.safe(cmd);
    }
    // Payloads get every rule (R4), and the payload finding comes first.
    r.dangerous("bash -c 'rm -r build'", "recursive delete");
    r.dangerous(
        "rg --pre 'git push --force' x",
        "git force push (rewrites remote history)",
    );
    r.finish();
}

#[test]
fn sudo_stdin_floor() {
    let mut r = Report::default();
    for cmd in [
        "sudo -S whoami",
        "sudo -Sk whoami",
        "sudo -nS whoami",
        "sudo -k -S whoami",
        "sudo -kS whoami",
        "sudo -SkE whoami",
        "sudo --stdin whoami",
        "echo pwd | sudo -S whoami",
        "echo x && /usr/bin/sudo -S id",
        "nice sudo -S id",
        "bash -c 'sudo -S id'",
        "echo $(sudo -S id)",
        "(sudo -S id)",
        "sudo -u root -S id",
    ] {
        r.blocked(cmd, SUDO);
    }
    for cmd in [
        "sudo whoami",
        "echo -S hello",
        "sudo -k whoami",
        "sudo -u S whoami",
    ] {
        r.safe(cmd);
    }
    for cmd in [
        "echo 'use sudo -S to pipe passwords'",
        "grep -n 'sudo -S' README.md",
        "printf '%s\\n' 'sudo -S is dangerous'",
        "rg --line-number 'sudo -S' .",
    ] {
        r.not_floor(cmd);
    }
    assert!(sudo_stdin_guard("sudo -S id", &ctx()).is_some());
    assert!(sudo_stdin_guard("sudo id", &ctx()).is_none());
    r.finish();
}

#[test]
fn more_vectors() {
    let mut r = Report::default();
    r.dangerous("rm -rf /tmp/x", "delete in root path");
    r.dangerous("chmod -R 777 .", "world/other-writable permissions");
    r.safe("echo $IFSACONFIG");
    r.safe("ls -la /tmp");
    r.dangerous_any("rm -f /var/tmp/hermes-verify-example.py");
    r.dangerous_any("rm -f /tmp/hermes-verify-$(touch>/tmp/pwned).py");
    r.dangerous_any("launchctl kick\"start\" -k gui/501/ai.hermes.gateway");
    r.dangerous(r#"launchctl boot"out" gui/501/ai.hermes.gateway"#, SPLICED);
    r.dangerous(r#"hermes gateway re"start""#, SPLICED);
    r.safe(r#"launchctl kick"start" -k gui/501/ai.hermes.update-checker"#);
    r.safe(r#"git commit -m "document the api gateway restart flow""#);
    r.finish();
}

#[test]
fn verification_exemption_uses_the_given_temp_dir() {
    let mut r = Report::default();
    r.safe("rm -f /tmp/hermes-verify-example.py");
    r.safe("rm -f /tmp/hermes-ad-hoc-example.py");
    r.dangerous_any("rm -f /tmp/hermes-verify-.py; rm -rf /tmp/x");
    r.dangerous_any("rm -f /tmp/hermes-verify-");
    r.dangerous_any("rm -rf /tmp/hermes-verify-x");
    r.dangerous_any("rm -f /tmp/../etc/hermes-verify-x");
    let elsewhere = GuardContext {
        temp_dir: "/private/var/folders/t".into(),
        ..GuardContext::default()
    };
    r.safe_in(
        &elsewhere,
        "rm -f /private/var/folders/t/hermes-verify-a_b.c-d",
    );
    r.dangerous_any_in(&elsewhere, "rm -f /tmp/hermes-verify-example.py");
    r.finish();
}

#[test]
fn home_folding() {
    let mut r = Report::default();
    let alice = ctx_home("/home/alice");
    r.dangerous_in(
        &alice,
        "cat key >> /home/alice/.ssh/authorized_keys",
        "overwrite system file via redirection",
    );
    r.dangerous_in(
        &alice,
        "ruby -i -pe 'gsub(/a/, \"b\")' /home/alice/.zshrc",
        "in-place edit of sensitive credential/SSH/shell-rc path (perl/ruby)",
    );
    r.safe_in(&alice, "cat /home/alice/notes.txt");
    let real = GuardContext {
        home: Some("/home/alice".into()),
        home_real: Some("/data/users/alice".into()),
        ..GuardContext::default()
    };
    r.dangerous_in(
        &real,
        "cp x /data/users/alice/.ssh/authorized_keys",
        "copy/move file into sensitive credential/SSH/shell-rc path",
    );
    let hermes = GuardContext {
        home: Some("/home/alice".into()),
        hermes_home: Some("/opt/hermes-data".into()),
        ..GuardContext::default()
    };
    r.dangerous_in(
        &hermes,
        "echo x > /opt/hermes-data/.env",
        "overwrite system file via redirection",
    );
    r.dangerous_in(
        &hermes,
        "sed -i 's/a/b/' /opt/hermes-data/config.yaml",
        "in-place edit of Hermes config/env",
    );
    let windows = ctx_home("C:\\Users\\tester");
    r.dangerous_any_in(
        &windows,
        "cat key >> C:\\Users\\tester\\.ssh\\authorized_keys",
    );
    r.dangerous_any_in(&windows, "cat key >> C:/Users/tester/.ssh/authorized_keys");
    r.dangerous_in(
        &windows,
        "echo 'pwned' > C:\\Users\\tester\\.bashrc",
        "overwrite system file via redirection",
    );
    r.safe_in(&windows, "cp report.txt C:\\Users\\tester\\notes.txt");
    r.finish();
}

#[test]
fn deny_rules() {
    let deny = GuardContext {
        deny_globs: vec!["git push --force*".into(), "curl *evil.example*".into()],
        ..GuardContext::default()
    };
    assert_eq!(
        match_deny_rule("/usr/bin/git push --force origin", &deny).as_deref(),
        Some("git push --force*")
    );
    assert_eq!(
        match_deny_rule("GIT   PUSH --FORCE", &deny).as_deref(),
        Some("git push --force*")
    );
    assert_eq!(
        match_deny_rule("bash -c 'git push --force'", &deny).as_deref(),
        Some("git push --force*")
    );
    assert_eq!(
        match_deny_rule("env -S 'git push --force x'", &deny).as_deref(),
        Some("git push --force*")
    );
    assert_eq!(
        match_deny_rule("sudo git push --force", &deny).as_deref(),
        Some("git push --force*")
    );
    assert_eq!(
        match_deny_rule("curl https://evil.example/x", &deny).as_deref(),
        Some("curl *evil.example*")
    );
    assert_eq!(match_deny_rule("git push origin", &deny), None);
    let c = classify("git push --force origin", &deny);
    assert_eq!(c.verdict, Verdict::Blocked);
    assert_eq!(c.key.as_deref(), Some("deny:git push --force*"));
    // Hardline stays hardline even when a deny glob matches too.
    let deny_rm = GuardContext {
        deny_globs: vec!["rm *".into()],
        ..GuardContext::default()
    };
    assert_eq!(classify("rm -rf /", &deny_rm).verdict, Verdict::Hardline);
    assert_eq!(classify("rm -r build", &deny_rm).verdict, Verdict::Blocked);
}

#[test]
fn allowlist_matching() {
    let entries: Vec<String> = ["npm test", "git status", "cargo build *", "ls [a-z]*"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert!(matches_allowlist("git status", &entries));
    assert!(matches_allowlist("  npm test  ", &entries));
    assert!(matches_allowlist("cargo build --release", &entries));
    assert!(matches_allowlist("ls alpha", &entries));
    assert!(!matches_allowlist("Git status", &entries));
    assert!(!matches_allowlist("git status; rm -rf /", &entries));
    assert!(!matches_allowlist("cargo build && curl x | sh", &entries));
    assert!(!matches_allowlist("cargo build $(reboot)", &entries));
    assert!(!matches_allowlist("cargo build `reboot`", &entries));
    assert!(!matches_allowlist("cargo build \"$(reboot)\"", &entries));
    assert!(!matches_allowlist("cargo build > /etc/passwd", &entries));
    assert!(!matches_allowlist("cargo build\nreboot", &entries));
    assert!(!matches_allowlist("cargo build 'unclosed", &entries));

    assert!(is_simple_command("ls -la /tmp"));
    assert!(is_simple_command("echo 'a; b | c'"));
    assert!(is_simple_command("echo $HOME"));
    assert!(!is_simple_command("echo \"$HOME\""));
    assert!(!is_simple_command("echo a\rb"));
    assert!(is_simple_command("printf 'a\nb'"));
    assert!(!is_simple_command("bash -c 'a\nb'"));
    assert!(!is_simple_command("python3 -c 'import os\nos.system(1)'"));
}

#[test]
fn legacy_aliases_are_pairwise() {
    assert!(legacy_key_aliases("find").contains(&"find -exec/-execdir rm"));
    assert!(legacy_key_aliases("find").contains(&"find -delete"));
    assert_eq!(legacy_key_aliases("find -delete"), &["find"]);
    assert!(!legacy_key_aliases("find -exec/-execdir rm").contains(&"find -delete"));
    assert!(legacy_key_aliases("no such key").is_empty());
}
