//! The hardline floor (reference §1.7): commands blocked whatever any setting says.
//!
//! Deliberately small and structural. Every positional rule reads the executable located by
//! [`crate::command`], so `/bin/rm`, `nice rm`, `command rm`, `sudo -u x rm`, payloads and
//! substitutions are all covered, while quoted prose (`git commit -m "rm -rf /"`) never is.

use std::sync::LazyLock;

use regex::Regex;

use crate::command::SimpleCommand;
use crate::rules::paths::{is_block_device, BLOCK_DEVICE};
use crate::variants::{Analysis, Source};
use crate::GuardContext;

pub(crate) const ROOT_DELETE: &str = "recursive delete of root filesystem";
pub(crate) const SYSTEM_DIR_DELETE: &str = "recursive delete of system directory";
pub(crate) const HOME_DELETE: &str = "recursive delete of home directory";
pub(crate) const MKFS: &str = "format filesystem (mkfs)";
pub(crate) const RAW_WIPE: &str = "wipe raw block device";
pub(crate) const DD_TO_DEVICE: &str = "dd to raw block device";
pub(crate) const REDIRECT_TO_DEVICE: &str = "redirect to raw block device";
pub(crate) const FORK_BOMB: &str = "fork bomb";
pub(crate) const KILL_ALL: &str = "kill all processes";
pub(crate) const SHUTDOWN: &str = "system shutdown/reboot";
pub(crate) const INIT_HALT: &str = "init 0/6 (shutdown/reboot)";
pub(crate) const SYSTEMCTL_POWER: &str = "systemctl poweroff/reboot";
pub(crate) const TELINIT_HALT: &str = "telinit 0/6 (shutdown/reboot)";

const SYSTEM_DIRS: &[&str] = &[
    "home", "root", "etc", "usr", "var", "bin", "sbin", "boot", "lib",
];

/// What a delete operand resolves to, lexically.
enum DeleteTarget {
    Root,
    SystemDir,
    Home,
    Other,
}

fn delete_target(operand: &str, ctx: &GuardContext) -> DeleteTarget {
    let operand = operand.to_lowercase();
    let home_forms = ["~", "$home", "${home}"];
    let trimmed = operand
        .strip_suffix("/*")
        .or_else(|| operand.strip_suffix('/'))
        .unwrap_or(&operand);
    if home_forms.contains(&trimmed) {
        return DeleteTarget::Home;
    }
    let is_user_home = [&ctx.home, &ctx.home_real]
        .into_iter()
        .flatten()
        .any(|home| {
            let home = home.trim_end_matches(['/', '\\']).to_lowercase();
            !home.is_empty() && trimmed.trim_end_matches('/') == home
        });
    if is_user_home {
        return DeleteTarget::Home;
    }
    if !operand.starts_with('/') {
        return DeleteTarget::Other;
    }
    let mut stack: Vec<&str> = Vec::new();
    let components: Vec<&str> = operand.split('/').collect();
    for (index, component) in components.iter().enumerate() {
        match *component {
            "" | "." => {}
            ".." => {
                stack.pop();
            }
            "*" if index + 1 == components.len() => {}
            other => stack.push(other),
        }
    }
    match stack.as_slice() {
        [] => DeleteTarget::Root,
        [dir] if SYSTEM_DIRS.contains(dir) => DeleteTarget::SystemDir,
        _ => DeleteTarget::Other,
    }
}

fn rm_finding(command: &SimpleCommand, ctx: &GuardContext) -> Option<&'static str> {
    let mut options_done = false;
    let mut worst: Option<&'static str> = None;
    for value in command.arg_values() {
        if !options_done && value == "--" {
            options_done = true;
            continue;
        }
        if !options_done && value.starts_with('-') && value.len() > 1 {
            continue;
        }
        let finding = match delete_target(value, ctx) {
            DeleteTarget::Root => return Some(ROOT_DELETE),
            DeleteTarget::SystemDir => SYSTEM_DIR_DELETE,
            DeleteTarget::Home => HOME_DELETE,
            DeleteTarget::Other => continue,
        };
        if worst.is_none() || finding == SYSTEM_DIR_DELETE {
            worst = Some(finding);
        }
    }
    worst
}

fn short_cluster(value: &str) -> Option<&str> {
    value
        .strip_prefix('-')
        .filter(|c| !c.is_empty() && !c.starts_with('-'))
}

fn any_block_device(command: &SimpleCommand) -> bool {
    command.arg_values().any(is_block_device)
}

/// The "raw device wipe" vocabulary item, shared with D36.
pub(crate) fn is_raw_device_wipe(command: &SimpleCommand) -> bool {
    let args: Vec<&str> = command.arg_values().collect();
    let wipes = match command.exec_name.as_str() {
        "wipefs" => {
            let all = args
                .iter()
                .any(|a| *a == "--all" || short_cluster(a).is_some_and(|c| c.contains('a')));
            let dry_run = args
                .iter()
                .any(|a| *a == "--no-act" || short_cluster(a).is_some_and(|c| c.contains('n')));
            all && !dry_run
        }
        "sgdisk" => args.iter().any(|a| {
            matches!(*a, "--zap-all" | "--zap" | "--clear")
                || short_cluster(a).is_some_and(|c| c.contains(['z', 'Z', 'o']))
        }),
        "blkdiscard" | "shred" => true,
        _ => false,
    };
    wipes && any_block_device(command)
}

fn first_verb(command: &SimpleCommand, value_options: &[&str]) -> Option<String> {
    let mut skip = false;
    for value in command.arg_values() {
        if skip {
            skip = false;
            continue;
        }
        if value.starts_with('-') {
            skip = value_options.contains(&value);
            continue;
        }
        return Some(value.to_lowercase());
    }
    None
}

fn command_finding(command: &SimpleCommand, ctx: &GuardContext) -> Option<&'static str> {
    if command
        .redirects
        .iter()
        .any(|r| r.writes() && r.target.as_ref().is_some_and(|t| is_block_device(&t.value)))
    {
        return Some(REDIRECT_TO_DEVICE);
    }
    command.exec?;
    let name = command.exec_name.as_str();
    let first_arg = || command.args().first().map(|w| w.value.to_lowercase());
    match name {
        "rm" => rm_finding(command, ctx),
        "mkfs" | "mke2fs" => Some(MKFS),
        n if n.starts_with("mkfs.") => Some(MKFS),
        "mkswap" | "newfs" => any_block_device(command).then_some(MKFS),
        n if n.starts_with("newfs_") => any_block_device(command).then_some(MKFS),
        "diskutil" => {
            const ERASERS: &[&str] = &[
                "erasedisk",
                "erasevolume",
                "zerodisk",
                "randomdisk",
                "secureerase",
                "reformat",
                "partitiondisk",
            ];
            let verbs: Vec<String> = command
                .arg_values()
                .take(2)
                .map(str::to_lowercase)
                .collect();
            verbs
                .iter()
                .any(|v| ERASERS.contains(&v.as_str()))
                .then_some(MKFS)
        }
        "wipefs" | "sgdisk" | "blkdiscard" | "shred" => {
            is_raw_device_wipe(command).then_some(RAW_WIPE)
        }
        "dd" => command
            .arg_values()
            .any(|v| {
                v.get(..3).is_some_and(|p| p.eq_ignore_ascii_case("of="))
                    && is_block_device(&v[3..])
            })
            .then_some(DD_TO_DEVICE),
        "kill" => command.arg_values().any(|v| v == "-1").then_some(KILL_ALL),
        "shutdown" | "reboot" | "halt" | "poweroff" => Some(SHUTDOWN),
        "init" => matches!(first_arg().as_deref(), Some("0" | "6")).then_some(INIT_HALT),
        "telinit" => matches!(first_arg().as_deref(), Some("0" | "6")).then_some(TELINIT_HALT),
        "systemctl" => {
            const VALUE_OPTIONS: &[&str] = &[
                "-H",
                "-M",
                "-t",
                "-p",
                "-s",
                "-o",
                "-n",
                "--host",
                "--machine",
                "--type",
                "--property",
                "--signal",
                "--output",
                "--lines",
                "--root",
                "--kill-whom",
            ];
            matches!(
                first_verb(command, VALUE_OPTIONS).as_deref(),
                Some("poweroff" | "reboot" | "halt" | "kexec")
            )
            .then_some(SYSTEMCTL_POWER)
        }
        _ => None,
    }
}

static FORK_BOMB_COLON: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r":\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&\s*;?\s*\}\s*;?\s*:")
        .expect("valid fork bomb regex")
});
/// Any function that pipes itself into a backgrounded copy of itself; names are compared in code
/// because the regex engine has no backreferences.
static FORK_BOMB_NAMED: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"([A-Za-z_:][A-Za-z0-9_:.-]*)\s*\(\s*\)\s*\{\s*([A-Za-z_:][A-Za-z0-9_:.-]*)\s*\|\s*([A-Za-z_:][A-Za-z0-9_:.-]*)\s*&")
        .expect("valid fork bomb regex")
});
static REDIRECT_TO_DEVICE_TEXT: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!(r#"(?i)>\s*["']?{BLOCK_DEVICE}"#)).expect("valid redirect regex")
});

pub(crate) fn is_fork_bomb(text: &str) -> bool {
    FORK_BOMB_COLON.is_match(text)
        || FORK_BOMB_NAMED
            .captures_iter(text)
            .any(|c| c[1] == c[2] && c[2] == c[3])
}

const SHELL_CARRIERS: &[&str] = &["eval", "sh", "bash", "zsh", "ksh", "dash", "source", "."];

fn text_finding(source: &Source) -> Option<&'static str> {
    if is_fork_bomb(&source.masked) {
        return Some(FORK_BOMB);
    }
    let carried = source
        .commands
        .iter()
        .any(|c| SHELL_CARRIERS.contains(&c.exec_name.as_str()));
    if carried {
        if REDIRECT_TO_DEVICE_TEXT.is_match(&source.main) {
            return Some(REDIRECT_TO_DEVICE);
        }
        if is_fork_bomb(&source.main) {
            return Some(FORK_BOMB);
        }
    }
    None
}

pub(crate) fn hardline_finding(analysis: &Analysis, ctx: &GuardContext) -> Option<&'static str> {
    analysis.sources.iter().find_map(|source| {
        source
            .commands
            .iter()
            .find_map(|c| command_finding(c, ctx))
            .or_else(|| text_finding(source))
    })
}
