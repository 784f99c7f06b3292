//! Which paths a simple command writes over or takes away, read from its options the way the
//! tool itself would (destination of `cp`/`mv`/`install`/`ln`, `truncate` operands, `tee`
//! files, `dd of=`, write redirections; `mv` sources are moved away).

use crate::command::SimpleCommand;

/// Non-option operands, honouring `--`; `value_options` consume the next word.
pub(crate) fn operands<'a>(command: &'a SimpleCommand, value_options: &[&str]) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut options_done = false;
    let mut skip = false;
    for value in command.arg_values() {
        if skip {
            skip = false;
            continue;
        }
        if !options_done && value == "--" {
            options_done = true;
            continue;
        }
        if !options_done && value.starts_with('-') && value.len() > 1 {
            skip = value_options.contains(&value);
            continue;
        }
        out.push(value);
    }
    out
}

/// The value of `-t DIR`, `-tDIR`, `--target-directory DIR` or `--target-directory=DIR`.
fn target_directory(command: &SimpleCommand) -> Option<&str> {
    let args: Vec<&str> = command.arg_values().collect();
    for (i, value) in args.iter().enumerate() {
        if *value == "--" {
            return None;
        }
        if *value == "-t" || *value == "--target-directory" {
            return args.get(i + 1).copied();
        }
        if let Some(dir) = value.strip_prefix("--target-directory=") {
            return Some(dir);
        }
        if let Some(dir) = value.strip_prefix("-t").filter(|d| !d.is_empty()) {
            return Some(dir);
        }
    }
    None
}

const COPY_VALUE_OPTIONS: &[&str] = &[
    "-S",
    "--suffix",
    "-m",
    "--mode",
    "-o",
    "--owner",
    "-g",
    "--group",
    "-t",
    "--target-directory",
];

/// Paths the command writes over or creates.
pub(crate) fn written_paths(command: &SimpleCommand) -> Vec<String> {
    let mut out: Vec<String> = command
        .redirects
        .iter()
        .filter(|r| r.writes())
        .filter_map(|r| r.target.as_ref().map(|t| t.value.clone()))
        .collect();
    if command.exec.is_none() {
        return out;
    }
    match command.exec_name.as_str() {
        "cp" | "mv" | "install" | "ln" | "rsync" => {
            if let Some(dir) = target_directory(command) {
                out.push(dir.to_string());
            } else if let Some(last) = operands(command, COPY_VALUE_OPTIONS).last() {
                out.push((*last).to_string());
            }
        }
        "truncate" => out.extend(
            operands(command, &["-s", "--size", "-r", "--reference"])
                .into_iter()
                .map(String::from),
        ),
        "tee" => out.extend(operands(command, &[]).into_iter().map(String::from)),
        "dd" => out.extend(command.arg_values().filter_map(|v| {
            v.get(..3)
                .filter(|p| p.eq_ignore_ascii_case("of="))
                .map(|_| v[3..].to_string())
        })),
        _ => {}
    }
    out
}

/// Paths the command moves away (every `mv` operand but the destination).
pub(crate) fn moved_away_paths(command: &SimpleCommand) -> Vec<String> {
    if command.exec_name != "mv" {
        return Vec::new();
    }
    let mut sources = operands(command, COPY_VALUE_OPTIONS);
    if target_directory(command).is_none() {
        sources.pop();
    }
    sources.into_iter().map(String::from).collect()
}

/// Top directories whose files belong to the operating system; `/usr/local` is the admin's own.
const SYSTEM_TREES: &[&str] = &[
    "/etc",
    "/boot",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/usr",
    "/proc/sys",
    "/sys",
];

/// Lexically normalised absolute path (`.`/`..`/duplicate slashes resolved), lower-cased.
pub(crate) fn normalise_absolute(path: &str) -> Option<String> {
    if !path.starts_with('/') {
        return None;
    }
    let mut stack: Vec<&str> = Vec::new();
    for component in path.split('/') {
        match component {
            "" | "." => {}
            ".." => {
                stack.pop();
            }
            other => stack.push(other),
        }
    }
    Some(format!("/{}", stack.join("/")).to_lowercase())
}

/// Whether a path (absolute, lexically) lies in a tree the operating system owns.
pub(crate) fn is_system_path(path: &str) -> bool {
    let Some(normal) = normalise_absolute(path) else {
        return false;
    };
    if normal == "/usr/local" || normal.starts_with("/usr/local/") {
        return false;
    }
    SYSTEM_TREES
        .iter()
        .any(|tree| normal == *tree || normal.starts_with(&format!("{tree}/")))
}

pub(crate) const SYSRQ_TRIGGER: &str = "/proc/sysrq-trigger";
pub(crate) const POWER_STATE: &str = "/sys/power/state";
