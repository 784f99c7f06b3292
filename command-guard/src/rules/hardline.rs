//! The hardline floor (reference §1.7): commands blocked whatever any setting says.
//!
//! Deliberately small and structural. Every positional rule reads the executable located by
//! [`crate::command`], so `/bin/rm`, `nice rm`, `command rm`, `sudo -u x rm`, payloads and
//! substitutions are all covered, while quoted prose (`git commit -m "rm -rf /"`) never is.

use std::sync::LazyLock;

use regex::Regex;

use crate::command::SimpleCommand;
use crate::disks::{disk_use, DiskUse};
use crate::rules::paths::{is_block_device, BLOCK_DEVICE};
use crate::variants::{Analysis, Source};
use crate::writes::{
    moved_away_paths, normalise_absolute, operands, written_paths, POWER_STATE, SYSRQ_TRIGGER,
};
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
pub(crate) const SINGLE_USER: &str = "init/telinit single-user mode (stops every service)";
pub(crate) const LOGINCTL_POWER: &str = "loginctl poweroff/reboot";
pub(crate) const SIGNAL_INIT: &str = "signal to init (PID 1)";
pub(crate) const SYSRQ: &str = "write to /proc/sysrq-trigger (instant reboot, crash or power-off)";
pub(crate) const DISK_REWRITE: &str = "partition table or disk rewrite";
pub(crate) const SYSTEM_DIR_MOVE: &str = "move of root, system or home directory";
pub(crate) const SYSTEM_PERMISSIONS: &str =
    "recursive permission or ownership change of system directory";

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

fn has_glob(text: &str) -> bool {
    text.contains(['*', '?', '[', '{'])
}

/// A relative operand joined to the directory a preceding `cd` moved to.
fn resolve(operand: &str, cwd: Option<&str>) -> String {
    match cwd {
        Some(dir) if !operand.starts_with(['/', '~', '$']) => {
            format!("{}/{operand}", dir.trim_end_matches('/'))
        }
        _ => operand.to_string(),
    }
}

fn delete_target(operand: &str, ctx: &GuardContext, cwd: Option<&str>) -> DeleteTarget {
    let operand = resolve(operand, cwd).to_lowercase();
    let home_forms = ["~", "$home", "${home}"];
    let trimmed = operand
        .strip_suffix("/*")
        .or_else(|| operand.strip_suffix("/."))
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
        [dir, ..] if has_glob(dir) => DeleteTarget::SystemDir,
        [dir] if SYSTEM_DIRS.contains(dir) => DeleteTarget::SystemDir,
        [dir, sub] if SYSTEM_DIRS.contains(dir) && has_glob(sub) => DeleteTarget::SystemDir,
        _ => DeleteTarget::Other,
    }
}

/// The worst target among operands: root, then system directory, then home.
fn worst_target<'a>(
    operands: impl IntoIterator<Item = &'a str>,
    ctx: &GuardContext,
    cwd: Option<&str>,
) -> Option<DeleteTarget> {
    let mut worst: Option<DeleteTarget> = None;
    for operand in operands {
        match delete_target(operand, ctx, cwd) {
            DeleteTarget::Root => return Some(DeleteTarget::Root),
            DeleteTarget::SystemDir => worst = Some(DeleteTarget::SystemDir),
            DeleteTarget::Home if worst.is_none() => worst = Some(DeleteTarget::Home),
            _ => {}
        }
    }
    worst
}

fn delete_key(target: DeleteTarget) -> Option<&'static str> {
    match target {
        DeleteTarget::Root => Some(ROOT_DELETE),
        DeleteTarget::SystemDir => Some(SYSTEM_DIR_DELETE),
        DeleteTarget::Home => Some(HOME_DELETE),
        DeleteTarget::Other => None,
    }
}

fn rm_finding(
    command: &SimpleCommand,
    ctx: &GuardContext,
    cwd: Option<&str>,
) -> Option<&'static str> {
    worst_target(operands(command, &[]), ctx, cwd).and_then(delete_key)
}

/// `tar --remove-files` deletes what it archived; `find START -delete` / `-exec rm` deletes
/// what it walks.
fn deleting_tool_finding(
    command: &SimpleCommand,
    ctx: &GuardContext,
    cwd: Option<&str>,
) -> Option<&'static str> {
    let args: Vec<&str> = command.arg_values().collect();
    let operands: Vec<&str> = match command.exec_name.as_str() {
        "tar" | "bsdtar" | "gtar" if args.contains(&"--remove-files") => operands(
            command,
            &[
                "-f",
                "--file",
                "-C",
                "--directory",
                "-T",
                "--files-from",
                "-X",
                "--exclude-from",
            ],
        )
        .into_iter()
        .filter(|o| !o.ends_with(".tar") && !o.contains(".tar.") && !o.ends_with(".tgz"))
        .collect(),
        "find" if deletes_what_it_finds(&args) => args
            .iter()
            .take_while(|a| !a.starts_with(['-', '(', '!']))
            .copied()
            .collect(),
        _ => return None,
    };
    worst_target(operands, ctx, cwd).and_then(delete_key)
}

fn deletes_what_it_finds(args: &[&str]) -> bool {
    args.iter().enumerate().any(|(i, a)| {
        *a == "-delete"
            || (matches!(*a, "-exec" | "-execdir" | "-ok" | "-okdir")
                && args
                    .get(i + 1)
                    .is_some_and(|p| crate::command::basename(p) == "rm"))
    })
}

fn is_recursive_option(value: &str) -> bool {
    value == "--recursive" || short_cluster(value).is_some_and(|c| c.contains('R'))
}

fn permission_finding(
    command: &SimpleCommand,
    ctx: &GuardContext,
    cwd: Option<&str>,
) -> Option<&'static str> {
    if !matches!(
        command.exec_name.as_str(),
        "chmod" | "chown" | "chgrp" | "setfacl" | "chattr"
    ) {
        return None;
    }
    if !command
        .arg_values()
        .take_while(|v| *v != "--")
        .any(is_recursive_option)
    {
        return None;
    }
    match worst_target(
        operands(command, &["-m", "-M", "-x", "-X", "--reference"]),
        ctx,
        cwd,
    ) {
        Some(DeleteTarget::Root | DeleteTarget::SystemDir) => Some(SYSTEM_PERMISSIONS),
        _ => None,
    }
}

fn move_finding(
    command: &SimpleCommand,
    ctx: &GuardContext,
    cwd: Option<&str>,
) -> Option<&'static str> {
    let sources = moved_away_paths(command);
    worst_target(sources.iter().map(String::as_str), ctx, cwd).map(|_| SYSTEM_DIR_MOVE)
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

const SYSTEMCTL_VALUE_OPTIONS: &[&str] = &[
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

/// Targets whose activation stops or restarts the whole system.
const POWER_TARGETS: &[&str] = &[
    "poweroff",
    "reboot",
    "halt",
    "kexec",
    "rescue",
    "emergency",
    "shutdown",
    "soft-reboot",
    "ctrl-alt-del",
    "final",
    "sleep",
    "suspend",
    "hibernate",
    "hybrid-sleep",
];

fn is_power_target(unit: &str) -> bool {
    let unit = unit.to_lowercase();
    unit.strip_suffix(".target").is_some_and(|name| {
        POWER_TARGETS.contains(&name)
            && !matches!(name, "sleep" | "suspend" | "hibernate" | "hybrid-sleep")
    })
}

fn systemctl_finding(command: &SimpleCommand) -> Option<&'static str> {
    let verb = first_verb(command, SYSTEMCTL_VALUE_OPTIONS)?;
    match verb.as_str() {
        "poweroff" | "reboot" | "halt" | "kexec" | "rescue" | "emergency" | "soft-reboot" => {
            Some(SYSTEMCTL_POWER)
        }
        "start" | "isolate" | "restart" | "try-restart" | "reload-or-restart" | "enqueue" => {
            operands(command, SYSTEMCTL_VALUE_OPTIONS)
                .iter()
                .skip(1)
                .any(|unit| is_power_target(unit))
                .then_some(SYSTEMCTL_POWER)
        }
        _ => None,
    }
}

/// `kill` operands after its options: `-1` is every process, `1` is init.
fn kill_finding(command: &SimpleCommand) -> Option<&'static str> {
    let args: Vec<&str> = command.arg_values().collect();
    if args.contains(&"-1") {
        return Some(KILL_ALL);
    }
    if args
        .iter()
        .any(|a| matches!(*a, "-l" | "-L" | "--list" | "--table"))
    {
        return None;
    }
    operands(
        command,
        &["-s", "-n", "--signal", "-q", "--queue", "--timeout"],
    )
    .into_iter()
    .find_map(|pid| match pid {
        "-1" => Some(KILL_ALL),
        "1" => Some(SIGNAL_INIT),
        _ => None,
    })
}

/// D-Bus calls asking logind to power the machine off or restart it.
fn dbus_power_call(command: &SimpleCommand) -> bool {
    let text: String = command
        .arg_values()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase();
    text.contains("login1")
        && [
            "poweroff",
            "reboot",
            "halt",
            "kexec",
            "suspend",
            "hibernate",
        ]
        .iter()
        .any(|verb| text.contains(verb))
}

fn writes_power_file(command: &SimpleCommand) -> Option<&'static str> {
    written_paths(command)
        .iter()
        .find_map(|path| match normalise_absolute(path).as_deref() {
            Some(SYSRQ_TRIGGER) => Some(SYSRQ),
            Some(POWER_STATE) => Some(SHUTDOWN),
            _ => None,
        })
}

fn command_finding(
    command: &SimpleCommand,
    ctx: &GuardContext,
    cwd: Option<&str>,
) -> Option<&'static str> {
    if command
        .redirects
        .iter()
        .any(|r| r.writes() && r.target.as_ref().is_some_and(|t| is_block_device(&t.value)))
    {
        return Some(REDIRECT_TO_DEVICE);
    }
    if let Some(key) = writes_power_file(command) {
        return Some(key);
    }
    command.exec?;
    let name = command.exec_name.as_str();
    let first_arg = || command.args().first().map(|w| w.value.to_lowercase());
    let found = match name {
        "rm" => rm_finding(command, ctx, cwd),
        "mkfs" | "mke2fs" | "mkntfs" | "mkdosfs" | "mkexfatfs" | "mkreiserfs" | "mkudffs"
        | "mkfs_msdos" => Some(MKFS),
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
        "wipefs" | "sgdisk" | "blkdiscard" | "shred" if is_raw_device_wipe(command) => {
            Some(RAW_WIPE)
        }
        "dd" => command
            .arg_values()
            .any(|v| {
                v.get(..3).is_some_and(|p| p.eq_ignore_ascii_case("of="))
                    && is_block_device(&v[3..])
            })
            .then_some(DD_TO_DEVICE),
        "kill" => kill_finding(command),
        "killall5" => Some(KILL_ALL),
        "shutdown" | "reboot" | "halt" | "poweroff" => Some(SHUTDOWN),
        "kexec" => (!command.arg_values().any(|v| {
            matches!(
                v,
                "-l" | "--load"
                    | "-p"
                    | "--load-panic"
                    | "-u"
                    | "--unload"
                    | "-h"
                    | "--help"
                    | "-v"
                    | "--version"
            )
        }))
        .then_some(SHUTDOWN),
        "busctl" | "dbus-send" | "gdbus" | "qdbus" => dbus_power_call(command).then_some(SHUTDOWN),
        "init" | "telinit" => match first_arg().as_deref() {
            Some("0" | "6") if name == "init" => Some(INIT_HALT),
            Some("0" | "6") => Some(TELINIT_HALT),
            Some("1" | "s" | "single" | "emergency") => Some(SINGLE_USER),
            _ => None,
        },
        "systemctl" => systemctl_finding(command),
        "loginctl" => matches!(
            first_verb(command, SYSTEMCTL_VALUE_OPTIONS).as_deref(),
            Some("poweroff" | "reboot" | "halt" | "kexec")
        )
        .then_some(LOGINCTL_POWER),
        _ => None,
    };
    found
        .or_else(|| deleting_tool_finding(command, ctx, cwd))
        .or_else(|| permission_finding(command, ctx, cwd))
        .or_else(|| move_finding(command, ctx, cwd))
        .or_else(|| (disk_use(command) == DiskUse::RewritesDevice).then_some(DISK_REWRITE))
}

/// Where a `cd`/`pushd` leaves the shell, lexically: an absolute directory, `~` for home, or
/// unknown (`None`) when the target is not a literal.
fn directory_after(command: &SimpleCommand, cwd: Option<&str>) -> Option<Option<String>> {
    if !matches!(command.exec_name.as_str(), "cd" | "pushd" | "chdir") {
        return None;
    }
    let target = operands(command, &[]).first().map(|t| t.to_string());
    Some(match target.as_deref() {
        None | Some("~") | Some("$HOME") | Some("${HOME}") => Some("~".to_string()),
        Some(t) if t.contains(['$', '`', '*', '?', '[']) => None,
        Some(t) if t.starts_with('/') => normalise_absolute(t),
        Some(t) if t.starts_with("~/") => Some(t.to_string()),
        Some(t) => cwd.and_then(|dir| {
            if dir.starts_with('/') {
                normalise_absolute(&format!("{dir}/{t}"))
            } else {
                Some(format!("{dir}/{t}"))
            }
        }),
    })
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
    // Both shapes need a brace and a pipe; most commands have neither.
    (text.contains('{') && text.contains('|'))
        && (FORK_BOMB_COLON.is_match(text)
            || FORK_BOMB_NAMED
                .captures_iter(text)
                .any(|c| c[1] == c[2] && c[2] == c[3]))
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
            .scan(None::<String>, |cwd, c| {
                let finding = command_finding(c, ctx, cwd.as_deref());
                if let Some(next) = directory_after(c, cwd.as_deref()) {
                    *cwd = next;
                }
                Some(finding)
            })
            .find_map(|finding| finding)
            .or_else(|| text_finding(source))
    })
}
