//! The seccomp programs every sandboxed command runs under: kernel interfaces root
//! inside has no business with, refused before they reach the kernel.
//!
//! Two programs, since one filter has one answer: most calls get EPERM; `clone3` gets
//! ENOSYS, because its flags sit behind a pointer a filter cannot read, and ENOSYS makes
//! the C library fall back to `clone`, whose namespace flags the first program checks.

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Refused outright: new namespaces and mounts (the walls are set up already), kernel
/// keyrings, eBPF, perf, userfaultfd, io_uring, modules, kexec, reboot, swap, accounting.
/// (seccompiler builds programs for 64-bit targets only, where syscall numbers are i64.)
const REFUSED: &[i64] = &[
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
];

const NAMESPACE_FLAGS: &[libc::c_int] = &[
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWCGROUP,
];

/// Terminal requests that type into or drive a terminal other than one's own output.
const REFUSED_IOCTLS: &[u64] = &[libc::TIOCSTI, libc::TIOCLINUX];

fn condition(arg: u8, op: SeccompCmpOp, value: u64) -> SeccompRule {
    let condition =
        SeccompCondition::new(arg, SeccompCmpArgLen::Qword, op, value).expect("a valid condition");
    SeccompRule::new(vec![condition]).expect("a valid rule")
}

fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32) -> Result<BpfProgram, String> {
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|e| format!("no seccomp support for this architecture: {e}"))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )
    .map_err(|e| format!("cannot build the seccomp filter: {e}"))?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| format!("cannot compile the seccomp filter: {e}"))
}

fn programs() -> Result<[BpfProgram; 2], String> {
    let mut refused: BTreeMap<i64, Vec<SeccompRule>> =
        REFUSED.iter().map(|n| (*n, Vec::new())).collect();
    let clone_rules = NAMESPACE_FLAGS
        .iter()
        .map(|f| condition(0, SeccompCmpOp::MaskedEq(*f as u64), *f as u64))
        .collect();
    let mut clone_rules: Vec<SeccompRule> = clone_rules;
    // A descriptor table shared without being a thread: the unix socket guard
    // (`wall/unix_guard.rs`) counts on a single-threaded caller's table staying as it is.
    let shared_table = (libc::CLONE_FILES | libc::CLONE_THREAD) as u64;
    clone_rules.push(condition(
        0,
        SeccompCmpOp::MaskedEq(shared_table),
        libc::CLONE_FILES as u64,
    ));
    refused.insert(libc::SYS_clone, clone_rules);
    // A seccomp listener of a command's own would answer before the guard's (the most
    // recent filter's notification wins) and could let a connect through unchecked.
    let listener = libc::SECCOMP_FILTER_FLAG_NEW_LISTENER;
    refused.insert(
        libc::SYS_seccomp,
        vec![condition(1, SeccompCmpOp::MaskedEq(listener), listener)],
    );
    let ioctl_rules = REFUSED_IOCTLS
        .iter()
        .map(|r| condition(1, SeccompCmpOp::Eq, *r))
        .collect();
    refused.insert(libc::SYS_ioctl, ioctl_rules);
    let no_clone3 = BTreeMap::from([(libc::SYS_clone3, Vec::new())]);
    Ok([
        compile(refused, libc::EPERM)?,
        compile(no_clone3, libc::ENOSYS)?,
    ])
}

/// For the Landlock-only wall ([`crate::wall`]): no IPv4 or IPv6 socket of any kind
/// (Landlock governs TCP only; this covers UDP and raw sockets too), as raw
/// instructions.
pub(crate) fn no_network_program() -> Result<Vec<u8>, String> {
    let rules = [libc::AF_INET, libc::AF_INET6, libc::AF_PACKET]
        .iter()
        .map(|family| condition(0, SeccompCmpOp::Eq, *family as u64))
        .collect();
    Ok(encode(&compile(
        BTreeMap::from([(libc::SYS_socket, rules)]),
        libc::EACCES,
    )?))
}

fn encode(program: &BpfProgram) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(program.len() * 8);
    for op in program {
        bytes.extend_from_slice(&op.code.to_ne_bytes());
        bytes.push(op.jt);
        bytes.push(op.jf);
        bytes.extend_from_slice(&op.k.to_ne_bytes());
    }
    bytes
}

/// Writes the programs into `dir` (as the raw instructions bubblewrap reads) and
/// returns their paths, in the order they are to be installed.
pub fn write_seccomp_programs(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let mut paths = Vec::new();
    for (name, bytes) in ["seccomp-refused.bpf", "seccomp-clone3.bpf"]
        .iter()
        .zip(encoded_programs()?)
    {
        let path = dir.join(name);
        std::fs::write(&path, bytes)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        paths.push(path);
    }
    Ok(paths)
}

/// The programs as raw instructions, compiled once per process (every task writes them).
fn encoded_programs() -> Result<&'static [Vec<u8>], String> {
    static ENCODED: std::sync::OnceLock<Result<Vec<Vec<u8>>, String>> = std::sync::OnceLock::new();
    let encoded = ENCODED.get_or_init(|| Ok(programs()?.iter().map(encode).collect()));
    encoded.as_deref().map_err(Clone::clone)
}
