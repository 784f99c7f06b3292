//! Partitioners and disk erasers: whether a command only reads a disk's layout or rewrites it,
//! and whether what it rewrites is a block device or an image file.

use crate::command::SimpleCommand;
use crate::rules::paths::is_block_device;
use crate::writes::operands;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DiskUse {
    /// Not a disk tool, or a listing that changes nothing.
    None,
    RewritesImage,
    RewritesDevice,
}

fn has_any(args: &[&str], options: &[&str]) -> bool {
    args.iter().any(|a| {
        options.iter().any(|o| {
            a == o
                || (o.starts_with("--")
                    && a.strip_prefix(o).is_some_and(|rest| rest.starts_with('=')))
        })
    })
}

const LISTING_OPTIONS: &[&str] = &[
    "-l",
    "--list",
    "-s",
    "--show-size",
    "-d",
    "--dump",
    "-J",
    "--json",
    "-V",
    "--verify",
    "-v",
    "--version",
    "-h",
    "--help",
    "-g",
    "--show-geometry",
    "-p",
    "--print",
    "-i",
    "--info",
    "-O",
    "--print-mbr",
    "--list-types",
    "-T",
    "--list-free",
    "-F",
];

const PARTED_WRITE_VERBS: &[&str] = &[
    "mklabel",
    "mktable",
    "mkpart",
    "mkpartfs",
    "rm",
    "resizepart",
    "resize",
    "rescue",
    "name",
    "set",
    "toggle",
    "disk_set",
    "disk_toggle",
    "mkfs",
    "cp",
    "move",
    "type",
];

/// Whether the tool, as invoked, rewrites a partition table, a filesystem header or the
/// whole disk. Listings (`fdisk -l`, `parted /dev/sda print`, `wipefs /dev/sda`) do not.
fn rewrites(command: &SimpleCommand) -> bool {
    let args: Vec<&str> = command.arg_values().collect();
    let verbs: Vec<String> = operands(command, &["-a", "--align", "-u", "--unit"])
        .into_iter()
        .filter(|o| !is_block_device(o) && !o.contains('/'))
        .map(str::to_lowercase)
        .collect();
    match command.exec_name.as_str() {
        "fdisk" | "cfdisk" | "gdisk" | "sfdisk" | "cgdisk" | "fixparts" => {
            !has_any(&args, LISTING_OPTIONS)
        }
        "sgdisk" => args
            .iter()
            .any(|a| a.starts_with('-') && !has_any(&[a], LISTING_OPTIONS)),
        "parted" | "partx"
            if has_any(
                &args,
                &["-l", "--list", "-v", "--version", "-h", "--help", "--show"],
            ) =>
        {
            false
        }
        "parted" => {
            verbs.is_empty()
                || verbs
                    .iter()
                    .any(|v| PARTED_WRITE_VERBS.contains(&v.as_str()))
        }
        "wipefs" => {
            let dry_run = args.iter().any(|a| {
                *a == "--no-act" || (a.starts_with('-') && !a.starts_with("--") && a.contains('n'))
            });
            !dry_run
                && args.iter().any(|a| {
                    matches!(*a, "--all" | "--offset" | "-o")
                        || a.starts_with("--offset=")
                        || (a.starts_with('-') && !a.starts_with("--") && a.contains(['a', 'o']))
                })
        }
        "blkdiscard" => true,
        "cryptsetup" => {
            verbs.iter().any(|v| {
                matches!(
                    v.as_str(),
                    "luksformat"
                        | "erase"
                        | "lukserase"
                        | "reencrypt"
                        | "lukskillslot"
                        | "luksremovekey"
                )
            }) || has_any(&args, &["luksFormat"])
        }
        "badblocks" => args
            .iter()
            .any(|a| a.starts_with('-') && !a.starts_with("--") && a.contains('w')),
        "hdparm" => has_any(
            &args,
            &[
                "--security-erase",
                "--security-erase-enhanced",
                "--trim-sector-ranges",
                "--trim-sector-ranges-stdin",
                "--write-sector",
                "--make-bad-sector",
                "--dco-restore",
                "--fwdownload",
            ],
        ),
        "nvme" => verbs.first().is_some_and(|v| {
            matches!(
                v.as_str(),
                "format" | "sanitize" | "write-zeroes" | "delete-ns" | "fw-download"
            )
        }),
        "mdadm" => has_any(&args, &["--zero-superblock", "--create", "-C"]),
        _ => false,
    }
}

pub(crate) fn disk_use(command: &SimpleCommand) -> DiskUse {
    if command.exec.is_none() || !rewrites(command) {
        return DiskUse::None;
    }
    let mentions_device = command
        .arg_values()
        .any(|v| is_block_device(v) || v.strip_prefix("--device=").is_some_and(is_block_device));
    let device_node = command.arg_values().any(|v| v.starts_with("/dev/"));
    if mentions_device || device_node {
        DiskUse::RewritesDevice
    } else {
        DiskUse::RewritesImage
    }
}
