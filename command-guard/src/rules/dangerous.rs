//! Dangerous rules (reference §1.9), in order; the first rule that matches wins and its key is
//! its description.
//!
//! Three kinds of check:
//! * `Anywhere`: a case-insensitive regex over every text variant (positionless, as upstream);
//! * `AtExecutable`: a regex anchored at the start of an executable line, i.e. at the program
//!   the shell really runs after wrappers are peeled (R1);
//! * `Code`: checks regexes cannot express (negation, option parsing, sudo's own options).
//!
//! The regexes of the first two kinds form two [`LazySet`]s: one literal scan per text
//! picks the rules that text can match, and only those are compiled and run, each in
//! linear time.

use std::sync::LazyLock;

use regex::Regex;

use crate::rules::lazy_set::LazySet;
use crate::rules::rule_literals;

use crate::disks::{disk_use, DiskUse};
use crate::pipelines;
use crate::rules::hardline::{is_fork_bomb, is_raw_device_wipe};
use crate::rules::paths::{
    hermes_env_or_config, project_sensitive, sensitive, system_config, user_sensitive,
    BLOCK_DEVICE, PATH_END,
};
use crate::sudo;
use crate::variants::Analysis;
use crate::writes::{is_system_path, moved_away_paths, written_paths};

enum Check {
    Anywhere(String),
    AtExecutable(String),
    Code(fn(&Analysis) -> bool),
}

struct Rule {
    key: &'static str,
    check: Check,
}

struct CompiledRules {
    rules: Vec<Rule>,
    /// For each rule, its index in the set matching its kind.
    set_index: Vec<Option<usize>>,
    anywhere: LazySet,
    at_executable: LazySet,
}

/// Global options of a CLI: dash options, each with at most one non-dash value.
const GLOBAL_OPTIONS: &str = r"(?:\s+-\S+(?:\s+[^\s-]\S*)?)*";
const SHELL_SINK: &str =
    r"(?:sudo\s+(?:-\S+\s+)*)?(?:[^\s|;&]*/)?(?:bash|sh|zsh|ksh|dash)(?:\s|$|-c)";
const SAME_SEGMENT: &str = r"[^;&|\n]*";
const LAST_ARG_END: &str = r#"["']?\s*(?:$|\n|&&|\|\||;)"#;

fn anywhere(key: &'static str, pattern: impl Into<String>) -> Rule {
    Rule {
        key,
        check: Check::Anywhere(pattern.into()),
    }
}
fn at_executable(key: &'static str, pattern: impl Into<String>) -> Rule {
    Rule {
        key,
        check: Check::AtExecutable(pattern.into()),
    }
}
fn code(key: &'static str, check: fn(&Analysis) -> bool) -> Rule {
    Rule {
        key,
        check: Check::Code(check),
    }
}

const GATEWAY_OUTSIDE_SYSTEMD: &str =
    "start gateway outside systemd (use 'systemctl --user restart hermes-gateway')";
const PACKAGE_UNINSTALL: &str = "package manager uninstall";
const DYNAMIC_COMMAND: &str =
    "command name only known at run time (variable, substitution or glob in command position)";
const SYSTEM_FILE_WRITE: &str = "overwrite, move or truncate a system or credential file";

fn stdin_program_key(analysis: &Analysis) -> Option<&'static str> {
    analysis
        .sources
        .iter()
        .filter_map(|s| pipelines::stdin_program_finding(&s.commands))
        .min_by_key(|key| usize::from(*key == pipelines::PIPE_TO_PROGRAM))
}

/// Home-relative files whose change grants access or runs code at the next login.
const USER_CREDENTIAL_FILES: &[&str] = &[
    "~/.ssh/",
    "~/.bashrc",
    "~/.bash_profile",
    "~/.profile",
    "~/.zshrc",
    "~/.zprofile",
    "~/.netrc",
    "~/.pgpass",
    "~/.aws/",
    "~/.config/gcloud/",
    "~/.kube/config",
    "~/.docker/config.json",
    "~/.hermes/.env",
    "~/.hermes/config.yaml",
    "~/.gnupg/",
];

fn is_credential_file(path: &str) -> bool {
    let path = path.to_lowercase();
    let path = path
        .strip_prefix("$home/")
        .or_else(|| path.strip_prefix("${home}/"))
        .map(|rest| format!("~/{rest}"))
        .unwrap_or(path);
    USER_CREDENTIAL_FILES
        .iter()
        .any(|f| path == f.trim_end_matches('/') || path.starts_with(f))
}

fn writes_system_file(analysis: &Analysis) -> bool {
    analysis.commands().any(|command| {
        written_paths(command)
            .into_iter()
            .chain(moved_away_paths(command))
            .any(|p| is_system_path(&p) || is_credential_file(&p))
    })
}

fn rule_table() -> Vec<Rule> {
    let g = GLOBAL_OPTIONS;
    let seg = SAME_SEGMENT;
    // tee writes its operands; a file after `<` is what it reads.
    let input_seg = r"[^;&|\n<]*";
    let sink = SHELL_SINK;
    let sens = sensitive();
    let user = user_sensitive();
    let sys = system_config();
    let hermes = hermes_env_or_config();
    let project = project_sensitive();
    let end = PATH_END;
    let last = LAST_ARG_END;
    let chmod_open_mode = r"(?:777|666|(?:[ugoa]*[+=-][rwxst]*,)*[ugo]*[oa][ugoa]*[+=][rwxst]*w[rwxst]*)(?:$|[\s;&|),])";
    let sed_in_place = format!(r"\bsed\b{seg}\s-[a-z]*i");
    let sed_long_in_place = format!(r"\bsed\b{seg}\s--in-place");
    let perl_in_place = format!(r"\b(?:perl|ruby)\b{seg}\s-[a-z]*i(?:\.\S*)?(?:\s|$)");
    vec![
        anywhere("delete in root path", r#"\brm\s+(?:-\S*\s+)*["']?/"#),
        anywhere("recursive delete", r"\brm\s+-[a-z]*r"),
        anywhere(
            "recursive delete (long flag)",
            r"\brm\s+(?:-\S*\s+)*--recursive\b",
        ),
        code(
            "recursive delete (flags after operands)",
            rm_recursive_after_operands,
        ),
        anywhere(
            "Windows cmd destructive delete",
            r"\bcmd(?:\.exe)?\s+/[ck]\b[\s\S]*\b(?:del|erase|rd|rmdir)\b",
        ),
        anywhere(
            "Windows PowerShell destructive delete",
            r#"\b(?:powershell|pwsh)(?:\.exe)?(?:\s+-\S+(?:\s+[^\s"'-]\S*)?)*\s+["']?(?:remove-item|rmdir|erase|del|rd|ri|rm)\b"#,
        ),
        anywhere(
            "PowerShell encoded command execution",
            r"\b(?:powershell|pwsh)\b[\s\S]*?\s-(?:encodedcommand|enc|ec|e)\b",
        ),
        anywhere(
            "PowerShell destructive delete (Remove-Item)",
            format!(r"\bremove-item\b{seg}\s-(?:recurse|force)\b"),
        ),
        anywhere(
            "Windows destructive delete (recursive/quiet switch)",
            format!(r"\b(?:del|erase|rd|rmdir)\b{seg}\s/[sq]\b"),
        ),
        anywhere(
            "pipe remote content to PowerShell (iwr | iex)",
            r"\b(?:iwr|invoke-webrequest|invoke-restmethod|irm|curl|wget)\b[^\n]*\|\s*(?:iex|invoke-expression)\b",
        ),
        anywhere(
            "execute remote content via Invoke-Expression",
            r"\b(?:iex|invoke-expression)\s*\(\s*\(?\s*(?:iwr|invoke-webrequest|invoke-restmethod|irm|curl|wget|new-object)\b",
        ),
        anywhere(
            "force kill processes (taskkill /F)",
            r"\btaskkill\b[^\n]*\s/f\b",
        ),
        anywhere(
            "force kill processes (Stop-Process -Force)",
            r"\bstop-process\b[^\n]*\s-force\b",
        ),
        anywhere("format filesystem (Format-Volume)", r"\bformat-volume\b"),
        anywhere("wipe disk (Clear-Disk)", r"\bclear-disk\b"),
        anywhere("disk partitioning (diskpart)", r"\bdiskpart\b"),
        anywhere(
            "format drive (format.com)",
            r"(?:^|[\s;&|(])format(?:\.com)?\s+[a-z]:(?:$|[\s\\/])",
        ),
        anywhere("wipe free space (cipher /w)", r"\bcipher\s+/w\b"),
        anywhere(
            "grant Everyone access (icacls)",
            r#"\bicacls\b[^\n]*\s/grant(?::r)?\s+["']?(?:everyone|todos|jeder|tout le monde|\*s-1-1-0)"#,
        ),
        anywhere(
            "reset ACLs recursively (icacls /reset)",
            r"\bicacls\b[^\n]*\s/reset\b",
        ),
        anywhere(
            "delete volume shadow copies (vssadmin)",
            r"\bvssadmin\b[^\n]*\bdelete\s+shadows\b",
        ),
        anywhere("delete backups (wbadmin)", r"\bwbadmin\b[^\n]*\bdelete\b"),
        anywhere(
            "modify boot configuration (bcdedit /set)",
            r"\bbcdedit\b[^\n]*\s/set\b",
        ),
        anywhere(
            "registry delete (reg delete)",
            r"\breg(?:\.exe)?\s+delete\b",
        ),
        anywhere(
            "registry value delete (Remove-ItemProperty -Force)",
            r"\bremove-itemproperty\b[^\n]*\s-force\b",
        ),
        anywhere(
            "force stop service (Stop-Service -Force)",
            r"\bstop-service\b[^\n]*\s-force\b",
        ),
        anywhere(
            "stop/delete service (sc)",
            r"(?:^|[\s;&|(])sc(?:\.exe)?\s+(?:stop|delete)\b",
        ),
        anywhere(
            "access to SSH keys (Windows path)",
            r#"\busers[/\\][^/\\\s]+[/\\]\.ssh(?:$|[/\\\s'"])"#,
        ),
        anywhere(
            "access to Hermes secrets (Windows path)",
            r"\bappdata[/\\](?:local|roaming)[/\\][\s\S]*?hermes[\s\S]*?\.env\b",
        ),
        anywhere(
            "world/other-writable permissions",
            format!(r"\bchmod\s+(?:-[a-z]+\s+)*{chmod_open_mode}"),
        ),
        anywhere(
            "recursive world/other-writable (long flag)",
            format!(r"\bchmod\b{seg}\s--recursive\b{seg}\s{chmod_open_mode}"),
        ),
        anywhere(
            "recursive chown to root",
            r#"\bchown\s+-[a-z]*r\s+["']?root"#,
        ),
        anywhere(
            "recursive chown to root (long flag)",
            format!(r"\bchown\b{seg}\s--recur[a-z]*\b{seg}\sroot\b"),
        ),
        at_executable("format filesystem", r"mkfs(?:\.\S+)?(?:\s|$)"),
        at_executable("disk copy", r"dd\s[\s\S]*\bif="),
        code(
            "raw block device wipe (shred/wipefs/blkdiscard/sgdisk)",
            |a| a.commands().any(is_raw_device_wipe),
        ),
        anywhere(
            "write to block device",
            format!(r#">\s*["']?{BLOCK_DEVICE}"#),
        ),
        anywhere("SQL DROP", r"\bdrop\s+(?:table|database)\b"),
        code("SQL DELETE without WHERE", sql_delete_without_where),
        anywhere("SQL TRUNCATE", r"\btruncate\s+(?:table\s+)?\w"),
        anywhere("overwrite system config", format!(r#">\s*["']?{sys}"#)),
        anywhere(
            "stop/restart system service",
            r"\bsystemctl\s+(?:-\S+\s+)*(?:stop|restart|disable|mask|kill|isolate)\b",
        ),
        anywhere("kill all processes", r"\bkill\s+-9\s+-1\b"),
        anywhere("force kill processes", format!(r"\bpkill\b{seg}\s-9\b")),
        anywhere(
            "force kill processes (killall -KILL)",
            r"\bkillall\s+(?:-\S+\s+)*-(?:9|kill|sigkill)\b",
        ),
        anywhere(
            "force kill processes (killall -s KILL)",
            format!(r"\bkillall\b{seg}\s-s\s+(?:kill|sigkill|9)\b"),
        ),
        anywhere(
            "kill processes by regex (killall -r)",
            format!(r"\bkillall\b{seg}\s-r\b"),
        ),
        code("fork bomb", |a| a.texts.iter().any(|t| is_fork_bomb(t))),
        anywhere(
            "pipe remote content to shell",
            format!(r"\b(?:curl|wget)\b[\s\S]*\|\s*{sink}"),
        ),
        anywhere(
            "execute remote script via process substitution",
            r"\b(?:bash|sh|zsh|ksh|dash)\s+(?:<\s*)?<\(\s*(?:curl|wget)\b",
        ),
        anywhere(
            "execute remote content via command substitution",
            r#"(?:\beval|\bsource|(?:^|[\s;&|(])\.)\s+["']?(?:\$\(\s*|`\s*)(?:curl|wget)\b"#,
        ),
        anywhere(
            "cloud metadata endpoint access (instance credentials)",
            r"(?:^|[^0-9.])(?:169\.254\.169\.254|100\.100\.100\.200)(?:$|[^0-9])|(?:^|[^a-z0-9.-])metadata\.google\.internal(?:$|[^a-z0-9.-]|\.(?:$|[^a-z0-9-]))|fd00:ec2::254(?:$|[^0-9a-f:])",
        ),
        anywhere(
            "pipe decoded content to shell (possible command obfuscation)",
            format!(
                r"(?:^|[\s;&|(/`])base(?:64|32|16)\b[^|\n]*\s(?:-d|--decode)\b[\s\S]*\|\s*{sink}"
            ),
        ),
        anywhere(
            "pipe xxd-decoded content to shell (possible command obfuscation)",
            format!(r"\bxxd\b[^|\n]*\s-r[\s\S]*\|\s*{sink}"),
        ),
        anywhere(
            "pipe tr-transformed output to shell (possible command obfuscation)",
            format!(r"\becho\b[\s\S]*\|\s*tr\b[\s\S]*\|\s*{sink}"),
        ),
        anywhere(
            "pipe openssl-decoded content to shell (possible command obfuscation)",
            format!(r"\bopenssl\s+(?:base64|enc)\b[\s\S]*?\s-d\b[\s\S]*\|\s*{sink}"),
        ),
        anywhere(
            "overwrite system file via tee",
            format!(r#"\btee\b{input_seg}\s["']?{sens}{end}"#),
        ),
        anywhere(
            "overwrite system file via redirection",
            format!(r#">\s*["']?{sens}{end}"#),
        ),
        anywhere(
            "overwrite project env/config via tee",
            format!(r#"\btee\b{seg}\s["']?{project}{end}"#),
        ),
        anywhere(
            "overwrite project env/config via redirection",
            format!(r#">\s*["']?{project}{end}"#),
        ),
        anywhere(
            "xargs with rm",
            format!(r"\bxargs\b{seg}\s(?:[^\s;&|]*/)?rm(?:$|\s)"),
        ),
        anywhere(
            "find -exec/-execdir rm",
            r"\bfind\b[\s\S]*?\s-exec(?:dir)?\s+(?:[^\s;&|]*/)?rm(?:$|\s)",
        ),
        code(
            "find dynamic shell word may expand to destructive flag",
            find_dynamic_destructive_flag,
        ),
        anywhere("find -delete", r"\bfind\b[\s\S]*\s-delete\b"),
        code(
            "dynamic shell word may expand to arbitrary program execution flag",
            read_tool_dynamic_program_flag,
        ),
        anywhere(
            "stop/restart hermes gateway (kills running agents)",
            format!(r"\bhermes{g}\s+gateway\s+(?:stop|restart)\b"),
        ),
        anywhere(
            "hermes update (restarts gateway, kills running agents)",
            format!(r"\bhermes{g}\s+update\b"),
        ),
        anywhere(
            "docker with remote daemon redirect (-H/--host)",
            format!(r"\bdocker{g}\s+(?:(?-i:-H)|--host)(?:\s+|=)[^\s-]"),
        ),
        anywhere(
            "docker with daemon redirect (--context: alternate daemon)",
            format!(r"\bdocker{g}\s+(?:-c|--context)(?:\s+|=)[^\s-]"),
        ),
        anywhere(
            "docker context use (switches default daemon for future commands)",
            format!(r"\bdocker{g}\s+context\s+use\b"),
        ),
        anywhere(
            "podman with remote daemon redirect (--url/--connection/--identity)",
            format!(r"\bpodman{g}\s+(?:--url|--connection|--identity)(?:\s+|=)[^\s-]"),
        ),
        anywhere(
            "podman remote mode (-r/--remote: remote daemon)",
            format!(r"\bpodman{g}\s+(?:(?-i:-r)|--remote)(?:$|[\s=])"),
        ),
        anywhere(
            "docker/podman daemon redirect via environment (DOCKER_HOST/CONTAINER_HOST)",
            r"\b(?:docker_host|docker_context|container_host|container_connection)=[^\s;&|]",
        ),
        anywhere(
            "docker compose restart/stop/kill/down (container lifecycle)",
            format!(r"\bdocker(?:\s+compose|-compose){g}\s+(?:restart|stop|kill|down)\b"),
        ),
        anywhere(
            "docker restart/stop/kill (container lifecycle)",
            format!(r"\bdocker{g}\s+(?:restart|stop|kill)\b"),
        ),
        anywhere(
            GATEWAY_OUTSIDE_SYSTEMD,
            r"\bgateway\s+run\b[^\n]*(?:&\s*(?:$|\n)|&\s*;|\bdisown\b|\bsetsid\b)",
        ),
        anywhere(
            GATEWAY_OUTSIDE_SYSTEMD,
            r"\bnohup\b[\s\S]*\bgateway\s+run\b",
        ),
        anywhere(
            "kill hermes/gateway process (self-termination)",
            r"\b(?:pkill|killall)\b[^\n]*?(?:\bhermes\b|\bgateway\b|\bcli\.py\b)",
        ),
        anywhere(
            "kill process via pgrep/pidof expansion (self-termination)",
            r"\bkill\b[\s\S]*?\$\(\s*(?:pgrep|pidof)\b",
        ),
        anywhere(
            "kill process via backtick pgrep/pidof expansion (self-termination)",
            r"\bkill\b[\s\S]*?`\s*(?:pgrep|pidof)\b",
        ),
        code(
            "stop/restart hermes launchd service (kills running agents)",
            launchctl_hermes_lifecycle,
        ),
        anywhere(
            "copy/move file into system config path",
            format!(r#"\b(?:cp|mv|install)\b{seg}\s["']?{sys}{last}"#),
        ),
        anywhere(
            "overwrite project env/config file",
            format!(r#"\b(?:cp|mv|install)\b{seg}\s["']?{project}{last}"#),
        ),
        anywhere(
            "copy/move file into sensitive credential/SSH/shell-rc path",
            format!(r#"\b(?:cp|mv|install)\b{seg}\s["']?{sens}{last}"#),
        ),
        anywhere(
            "in-place edit of sensitive credential/SSH/shell-rc path",
            format!(r"{sed_in_place}[\s\S]*?{user}"),
        ),
        anywhere(
            "in-place edit of sensitive credential/SSH/shell-rc path (long flag)",
            format!(r"{sed_long_in_place}[\s\S]*?{user}"),
        ),
        anywhere(
            "in-place edit of sensitive credential/SSH/shell-rc path (perl/ruby)",
            format!(r"{perl_in_place}[\s\S]*?{user}"),
        ),
        anywhere(
            "in-place edit of system config",
            format!(r"{sed_in_place}[\s\S]*?{sys}"),
        ),
        anywhere(
            "in-place edit of system config (long flag)",
            format!(r"{sed_long_in_place}[\s\S]*?{sys}"),
        ),
        anywhere(
            "in-place edit of Hermes config/env",
            format!(r"{sed_in_place}[\s\S]*?{hermes}"),
        ),
        anywhere(
            "in-place edit of Hermes config/env (long flag)",
            format!(r"{sed_long_in_place}[\s\S]*?{hermes}"),
        ),
        anywhere(
            "in-place edit of Hermes config/env (perl/ruby)",
            format!(r"{perl_in_place}[\s\S]*?{hermes}"),
        ),
        anywhere(
            "shell execution via heredoc",
            r"\b(?:bash|sh|zsh|ksh|dash)\s*<<",
        ),
        anywhere(
            "git reset --hard (destroys uncommitted changes)",
            format!(r"\bgit{g}\s+reset\b{seg}\s--h(?:a|ar|ard)?(?:$|[\s;&|])"),
        ),
        anywhere(
            "git force push (rewrites remote history)",
            format!(r"\bgit{g}\s+push\b{seg}\s--forc"),
        ),
        anywhere(
            "git force push short flag (rewrites remote history)",
            format!(r"\bgit{g}\s+push\b{seg}\s-f(?:$|[\s;&|])"),
        ),
        anywhere(
            "git clean with force (deletes untracked files)",
            format!(r"\bgit{g}\s+clean\b{seg}\s(?:-[a-z]*f|--force\b)"),
        ),
        anywhere(
            "git branch force delete",
            format!(r"\bgit{g}\s+branch\b{seg}\s(?-i:-D)(?:$|[\s;&|])"),
        ),
        anywhere(
            "git branch force delete (long flags)",
            format!(r"\bgit{g}\s+branch\b{seg}\s(?:-d|--delete)\b{seg}\s(?:-f|--force)\b"),
        ),
        anywhere(
            "git branch force delete (long flags, force-first)",
            format!(r"\bgit{g}\s+branch\b{seg}\s(?:-f|--force)\b{seg}\s(?:-d|--delete)\b"),
        ),
        anywhere(
            "chmod +x followed by immediate execution",
            r"\bchmod\s+(?:-\S+\s+)*\+x\b[^\n]*?[;&|][^\n]*?(?:^|[\s;&|(])\./",
        ),
        code(
            "sudo with privilege flag (stdin/askpass/shell/list)",
            sudo::has_privilege_flag,
        ),
        code(
            "sudo with combined-flag privilege escalation",
            sudo::has_combined_privilege_flag,
        ),
        code(pipelines::REMOTE_TO_SHELL, |a| {
            stdin_program_key(a) == Some(pipelines::REMOTE_TO_SHELL)
        }),
        code(pipelines::REMOTE_TO_INTERPRETER, |a| {
            stdin_program_key(a) == Some(pipelines::REMOTE_TO_INTERPRETER)
        }),
        code(pipelines::PIPE_TO_PROGRAM, |a| {
            stdin_program_key(a) == Some(pipelines::PIPE_TO_PROGRAM)
        }),
        code(DYNAMIC_COMMAND, |a| a.commands().any(|c| c.dynamic_exec)),
        code(
            "define a shell alias (later commands run under another name)",
            |a| {
                a.commands()
                    .any(|c| c.exec_name == "alias" && c.arg_values().any(|v| v.contains('=')))
            },
        ),
        code(SYSTEM_FILE_WRITE, writes_system_file),
        at_executable(
            "delete source files after archiving or copying (--remove-files)",
            r"(?:(?:bsd|g)?tar\b[^\n;&|]*\s--remove-files|rsync\b[^\n;&|]*\s--remove-source-files)\b",
        ),
        code("disk partitioning or erase tool", |a| {
            a.commands().any(|c| disk_use(c) == DiskUse::RewritesImage)
        }),
        at_executable(
            "destroy storage volume or pool",
            r"(?:zpool\s+(?:-\S+\s+)*(?:destroy|labelclear)|zfs\s+(?:-\S+\s+)*destroy|(?:lvm\s+)?(?:lvremove|vgremove|pvremove)|dmsetup\s+(?:-\S+\s+)*(?:remove|remove_all|wipe_table))\b",
        ),
        at_executable(
            "flush or disable the firewall",
            r"(?:(?:ip6?tables|ip6?tables-legacy|ip6?tables-nft|arptables|ebtables)\b[^\n;&|]*(?:\s(?-i:-F)|\s--flush|\s(?-i:-X)|\s--delete-chain|\s(?-i:-P)\s+\S+\s+(?:drop|accept))|nft\b[^\n;&|]*\s(?:flush\s+(?:ruleset|table|chain)|delete\s+(?:table|chain))|ufw\b[^\n;&|]*\s(?:disable|reset)|firewall-cmd\b[^\n;&|]*\s--panic-on)\b",
        ),
        at_executable(
            "delete user crontab (crontab -r)",
            r"crontab\b[^\n;&|]*\s-[a-z]*r",
        ),
        at_executable(
            "replace user crontab",
            r"crontab(?:\s+-u\s+\S+)?\s+(?:-|[^\s-]\S*)(?:$|\s)",
        ),
        at_executable(
            "suspend or hibernate the machine",
            r"(?:systemctl|loginctl)(?:\s+-\S+)*\s+(?:suspend|hibernate|hybrid-sleep|suspend-then-hibernate|sleep)\b",
        ),
        at_executable(
            "end login sessions (loginctl)",
            r"loginctl(?:\s+-\S+)*\s+(?:terminate|kill)-(?:session|user|seat)\b",
        ),
        at_executable("load a kernel for kexec", r"kexec\b"),
        at_executable(
            "change kernel parameters (sysctl)",
            r"sysctl\b[^\n;&|]*(?:\s-w\b|\s--write\b|\s[a-z0-9_./-]+=|\s-p\b|\s--load\b|\s--system\b)",
        ),
        at_executable(
            PACKAGE_UNINSTALL,
            format!(r"npm{g}\s+(?:uninstall|unlink|remove|rm|r|un)(?:$|\s)"),
        ),
        at_executable(
            PACKAGE_UNINSTALL,
            format!(r"pnpm{g}\s+(?:uninstall|remove|rm|un)(?:$|\s)"),
        ),
        at_executable(
            PACKAGE_UNINSTALL,
            format!(r"yarn{g}(?:\s+global)?\s+(?:uninstall|remove)(?:$|\s)"),
        ),
        at_executable(
            PACKAGE_UNINSTALL,
            format!(r"(?:pip3?(?:\.[0-9]+)?|python[0-9.]*\s+-m\s+pip){g}\s+uninstall(?:$|\s)"),
        ),
        at_executable(
            PACKAGE_UNINSTALL,
            format!(r"brew{g}\s+(?:uninstall|remove|rm)(?:$|\s)"),
        ),
    ]
}

/// Rules are matched with ASCII semantics (`\s`, `\w`, `\b` and case folding over ASCII) on
/// the bytes of the text. The texts are NFKC-normalised first, which already turns
/// full-width letters and Unicode spaces into their ASCII forms, and every keyword is
/// ASCII; Unicode classes with case folding would cost more than a hundred milliseconds of
/// compilation per process for no extra match.
fn compile_pattern(source: &str, anchored: bool) -> String {
    if anchored {
        format!(r"(?is-u)^(?:{source})")
    } else {
        format!(r"(?is-u){source}")
    }
}

static RULES: LazyLock<CompiledRules> = LazyLock::new(|| {
    let rules = rule_table();
    let mut anywhere_patterns = Vec::new();
    let mut executable_patterns = Vec::new();
    let set_index = rules
        .iter()
        .map(|rule| match &rule.check {
            Check::Anywhere(p) => {
                anywhere_patterns.push((compile_pattern(p, false), p.clone()));
                Some(anywhere_patterns.len() - 1)
            }
            Check::AtExecutable(p) => {
                executable_patterns.push((compile_pattern(p, true), p.clone()));
                Some(executable_patterns.len() - 1)
            }
            Check::Code(_) => None,
        })
        .collect();
    CompiledRules {
        anywhere: LazySet::new(anywhere_patterns, rule_literals::ANYWHERE),
        at_executable: LazySet::new(executable_patterns, rule_literals::AT_EXECUTABLE),
        rules,
        set_index,
    }
});

pub(crate) fn dangerous_rule_finding(analysis: &Analysis) -> Option<&'static str> {
    let compiled = &*RULES;
    let anywhere = compiled.anywhere.candidates(&analysis.texts);
    let at_executable = compiled.at_executable.candidates(&analysis.exec_lines);
    compiled
        .rules
        .iter()
        .zip(&compiled.set_index)
        .find_map(|(rule, index)| {
            let hit = match (&rule.check, index) {
                (Check::Anywhere(_), Some(i)) => {
                    compiled
                        .anywhere
                        .matches_any(*i, &analysis.texts, &anywhere)
                }
                (Check::AtExecutable(_), Some(i)) => {
                    compiled
                        .at_executable
                        .matches_any(*i, &analysis.exec_lines, &at_executable)
                }
                (Check::Code(check), _) => check(analysis),
                _ => false,
            };
            hit.then_some(rule.key)
        })
}

/// Compiles every rule regex now rather than on the first text that needs it.
pub(crate) fn compile_all() {
    RULES.anywhere.compile_all();
    RULES.at_executable.compile_all();
}

/// Every rule key, in order (for alias tables and documentation).
pub(crate) fn rule_keys() -> impl Iterator<Item = &'static str> {
    RULES.rules.iter().map(|r| r.key)
}

fn is_recursive_flag(value: &str) -> bool {
    value == "--recursive"
        || value
            .strip_prefix('-')
            .is_some_and(|c| !c.is_empty() && !c.starts_with('-') && c.contains(['r', 'R']))
}

fn rm_recursive_after_operands(analysis: &Analysis) -> bool {
    analysis
        .commands()
        .filter(|c| c.exec_name == "rm")
        .any(|command| {
            command
                .arg_values()
                .take_while(|v| *v != "--")
                .enumerate()
                .any(|(index, value)| index > 0 && is_recursive_flag(value))
        })
}

static SQL_DELETE_FROM: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)(?-u:\b)delete\s+from(?-u:\b)").expect("valid regex"));
static SQL_WHERE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)(?-u:\b)where(?-u:\b)").expect("valid regex"));

/// A necessary condition of a case-insensitive keyword match (none of these keywords has
/// a letter whose Unicode case folding reaches beyond ASCII, such as `k` or `s`).
fn contains_ascii_ci(text: &str, keyword: &str) -> bool {
    text.as_bytes()
        .windows(keyword.len())
        .any(|window| window.eq_ignore_ascii_case(keyword.as_bytes()))
}

fn sql_delete_without_where(analysis: &Analysis) -> bool {
    // Only texts with the keyword get to the regexes (and compile them).
    analysis
        .texts
        .iter()
        .filter(|text| contains_ascii_ci(text, "delete"))
        .any(|text| {
            SQL_DELETE_FROM.find_iter(text).any(|m| {
                let rest = &text[m.end()..];
                let line = rest.split('\n').next().unwrap_or(rest);
                !SQL_WHERE.is_match(line)
            })
        })
}

/// The literal text before the first unquoted glob/brace character of a word, if any.
fn prefix_before_glob(value: &str, glob_at: Option<usize>) -> Option<&str> {
    glob_at.and_then(|at| value.get(..at))
}

fn find_dynamic_destructive_flag(analysis: &Analysis) -> bool {
    analysis
        .commands()
        .filter(|c| c.exec_name == "find")
        .any(|command| {
            command.args().iter().any(|word| {
                prefix_before_glob(&word.value, word.glob_at).is_some_and(|prefix| {
                    prefix.starts_with('-')
                        && ["-delete", "-exec", "-execdir"]
                            .iter()
                            .any(|flag| flag.starts_with(prefix))
                })
            })
        })
}

fn read_tool_dynamic_program_flag(analysis: &Analysis) -> bool {
    analysis.commands().any(|command| {
        let options = crate::structural::read_tool_options(&command.exec_name);
        !options.is_empty()
            && command.args().iter().any(|word| {
                prefix_before_glob(&word.value, word.glob_at).is_some_and(|prefix| {
                    options.iter().any(|o| o.starts_with("--") && *o == prefix)
                })
            })
    })
}

static LAUNCHCTL: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)(?-u:\b)launchctl(?-u:\b)").expect("valid regex"));
static LAUNCHCTL_VERB: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)(?-u:\b)(?:stop|kickstart|bootout|unload|kill|disable|remove)(?-u:\b)")
        .expect("valid regex")
});
static HERMES_WORD: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)(?-u:\b)hermes(?-u:\b)|ai\.hermes").expect("valid regex"));

fn launchctl_hermes_lifecycle(analysis: &Analysis) -> bool {
    analysis.texts.iter().any(|t| {
        contains_ascii_ci(t, "launchctl")
            && LAUNCHCTL.is_match(t)
            && LAUNCHCTL_VERB.is_match(t)
            && HERMES_WORD.is_match(t)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex::bytes::RegexSetBuilder;

    #[test]
    fn table_compiles() {
        assert!(super::rule_keys().count() > 100);
        compile_all();
    }

    /// Texts to compare on: every corpus command, as written and upper-cased, and each
    /// line split at its separators (closer to the texts the analysis produces).
    fn sample_texts() -> Vec<String> {
        let corpora = [
            include_str!("../../tests/corpus/categories.tsv"),
            include_str!("../../tests/holdout/unseen.tsv"),
        ];
        let mut texts = Vec::new();
        for line in corpora
            .iter()
            .flat_map(|c| c.lines())
            .filter(|l| !l.starts_with('#'))
        {
            let command = line
                .split_once('\t')
                .map_or(line, |(_, c)| c)
                .replace("\\n", "\n");
            texts.push(command.to_uppercase());
            texts.extend(
                command
                    .split([';', '|', '&'])
                    .map(|part| part.trim().to_string()),
            );
            texts.push(command);
        }
        texts
    }

    /// The literal prefilter only skips work: for every rule and text, the lazy set agrees
    /// with one eager `RegexSet` of every pattern.
    #[test]
    fn lazy_sets_match_exactly_what_eager_sets_match() {
        let texts = sample_texts();
        for anchored in [false, true] {
            let patterns = patterns_of_kind(anchored);
            let eager = RegexSetBuilder::new(patterns.iter().map(|(full, _)| full))
                .size_limit(64 << 20)
                .build()
                .unwrap();
            // Literals read afresh, not the remembered ones (another test keeps those fresh).
            let lazy = LazySet::new(patterns.clone(), &[]);
            let mut hits = 0;
            for text in &texts {
                let one = std::slice::from_ref(text);
                let candidates = lazy.candidates(one);
                let expected = eager.matches(text.as_bytes());
                for (slot, pattern) in patterns.iter().enumerate() {
                    let got = lazy.matches_any(slot, one, &candidates);
                    assert_eq!(
                        got,
                        expected.matched(slot),
                        "pattern {:?} on {text:?}",
                        pattern.0
                    );
                    hits += usize::from(got);
                }
            }
            assert!(hits > 50, "the sample texts hit rules ({hits} hits)");
        }
    }

    /// `(full, bare)` patterns of the anywhere rules, or of the executable ones.
    fn patterns_of_kind(anchored: bool) -> Vec<(String, String)> {
        rule_table()
            .into_iter()
            .filter_map(|rule| match (rule.check, anchored) {
                (Check::Anywhere(p), false) | (Check::AtExecutable(p), true) => {
                    Some((compile_pattern(&p, anchored), p))
                }
                _ => None,
            })
            .collect()
    }

    fn bare_patterns(anchored: bool) -> Vec<String> {
        patterns_of_kind(anchored)
            .into_iter()
            .map(|(_, bare)| bare)
            .collect()
    }

    /// `rule_literals.rs` holds the literals of the current rules; when it does not, this
    /// test rewrites it (review the change and commit it).
    #[test]
    fn remembered_rule_literals_are_fresh() {
        use crate::rules::lazy_set::known_literals_source;
        let source = format!(
            "//! The required literals of each dangerous rule, in table order, read from the patterns\n\
             //! at development time (the `remembered_rule_literals_are_fresh` test writes this file).\n\n\
             use crate::rules::lazy_set::KnownLiterals;\n\n{}\n{}",
            known_literals_source("ANYWHERE", &bare_patterns(false)),
            known_literals_source("AT_EXECUTABLE", &bare_patterns(true)),
        );
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/rules/rule_literals.rs");
        if std::fs::read_to_string(path).ok().as_deref() != Some(source.as_str()) {
            std::fs::write(path, &source).expect("rule_literals.rs is writable");
            panic!(
                "src/rules/rule_literals.rs was stale and has been rewritten; review and commit it"
            );
        }
    }

    /// Rules without a required literal run on every text; keep them few.
    #[test]
    fn almost_every_rule_has_a_required_literal() {
        let patterns = patterns_of_kind(false);
        let lazy = LazySet::new(patterns.clone(), &[]);
        let unfiltered: Vec<&str> = lazy
            .unfiltered()
            .iter()
            .map(|&i| patterns[i].1.as_str())
            .collect();
        assert!(
            unfiltered.len() <= 2,
            "rules without a literal: {unfiltered:#?}"
        );
    }
}
