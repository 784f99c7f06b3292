//! The wall around the commands an agent runs on this machine.
//!
//! A [`Policy`] says what a command may write (`read-only`, `workspace-write`, `off`),
//! which places stay read-only even inside a writable root, and whether it has a
//! network. [`Policy::wrap`] turns any argv into one that runs inside that policy, so
//! every launcher (pipes, pseudo-terminals, code runners) shares one wall:
//!
//! - a mount namespace where `/` is read-only, the writable roots are bound writable and
//!   the protected places are bound read-only again on top of them;
//! - a PID namespace with its own `/proc`: the command sees none of the server's
//!   processes (so not their `/proc/<pid>/environ`), and when its first process ends the
//!   kernel ends everything it started;
//! - a user namespace with an empty capability bounding set, so even root inside has no
//!   capabilities, and no new privileges on exec (setuid binaries gain nothing);
//! - UTS and IPC namespaces, `/proc/sys` read-only, and a network namespace of its
//!   own: only loopback, or a way out through the runtime's proxy ([`network`]);
//! - seccomp programs ([`write_seccomp_programs`]) refusing new namespaces, mounts,
//!   keyrings, eBPF, io_uring, modules and terminal injection;
//! - Landlock scopes ([`spawn_scoped`]): signals outside the sandbox are out of reach
//!   (and abstract unix sockets, which the private network namespace already separates);
//! - a socket file can be connected to only if a socket of the same sandbox is bound to
//!   it (Landlock's `RESOLVE_UNIX` from ABI 9; before, the built-in wall's init checks
//!   each connect and unix datagram, see `wall/unix_guard.rs`).
//!
//! The namespaces and mounts are set up by the program itself ([`wall`]: the running
//! binary started with a reserved argument, so a fresh machine needs no package), or by
//! a system bubblewrap (`bwrap`, the tool Flatpak uses, whose command line the wall
//! reads) where the wall cannot start or `TERMINAL_SANDBOX_BWRAP` names one. Mount
//! namespaces are chosen over Landlock alone because Landlock cannot take a subpath back
//! out of a writable root (`$HERMES_HOME` under `/tmp`, `~/.ssh` under a home used as
//! the workspace) and forbids mounting once applied; read-only bind mounts in a mount
//! namespace can. A missing feature fails closed: [`Policy::wrap`] returns an error that
//! names `terminal.sandbox.mode: off`, never an unsandboxed argv.
//!
//! [`Limits`] bound what one sandbox may consume (a cgroup where one can be made,
//! resource limits always).
//!
//! The sandbox's own files (seccomp programs, snapshots) live in [`run_dir`], a
//! private directory per server that no sandbox can see.
//!
//! [`child_env`] is the environment allow-list children start from; [`launcher`] keeps a
//! sandbox per task with a small launcher inside, so a command costs a spawn (`posix_spawn`).

mod bwrap;
mod environment;
mod host_sockets;
pub mod launcher;
mod layout_watch;
mod limits;
pub mod network;
mod policy;
mod protected;
mod proxy;
mod read_buffer;
mod real_paths;
pub mod run_dir;
mod scope;
mod syscalls;
pub mod wall;

pub use bwrap::find_bwrap;
pub use environment::{
    child_env, is_allowed_name, keep_inherited_descriptors_from_children, ALLOWED_NAMES,
};
pub use limits::Limits;
pub use network::Network;
pub use policy::{Mode, Policy, SandboxError, WrapOptions};
pub use protected::ReadOnlyPlace;
pub use run_dir::random_hex;
pub use scope::{landlock_abi, spawn_scoped};
pub use syscalls::write_seccomp_programs;
