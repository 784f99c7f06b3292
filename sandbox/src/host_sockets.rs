//! The socket files of this network namespace that a command could reach: bound unix
//! sockets with a path, listening (stream, seqpacket) or unconnected (datagram).
//!
//! Asked of the kernel through `NETLINK_SOCK_DIAG` (what `ss -x` uses), filtered by
//! state in the kernel, so connected pairs, which every live sandbox adds to the server
//! (its launcher's channels, its terminals), cost nothing: reading `/proc/net/unix`
//! instead formats every socket of the namespace, a table that grows with the number
//! of live sandboxes, on every start. `/proc/net/unix` remains the fallback where the
//! kernel has no unix sock_diag.
//!
//! A few structures of `linux/sock_diag.h` and `linux/unix_diag.h`, written out here:
//! one request and its replies do not justify the netlink crates' dependency tree.

use std::ffi::OsStr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const UDIAG_SHOW_NAME: u32 = 0x1;
const UDIAG_SHOW_VFS: u32 = 0x2;
const UNIX_DIAG_NAME: u16 = 0;
const UNIX_DIAG_VFS: u16 = 1;
/// Kernel socket states (shared with TCP's names): unconnected, listening, connected.
const STATE_CLOSE: u32 = 7;
const STATE_LISTEN: u32 = 10;
const STATE_ESTABLISHED: u32 = 1;
const REACHABLE: u32 = (1 << STATE_CLOSE) | (1 << STATE_LISTEN);

#[repr(C)]
struct Request {
    header: libc::nlmsghdr,
    family: u8,
    protocol: u8,
    pad: u16,
    states: u32,
    inode: u32,
    show: u32,
    cookie: [u32; 2],
}

/// The bound socket paths, each once, in the kernel's order.
pub(crate) fn socket_paths() -> Vec<PathBuf> {
    let mut paths = match ask_kernel() {
        Ok(paths) => paths,
        Err(_) => from_proc_table(),
    };
    let mut seen = std::collections::HashSet::new();
    paths.retain(|p| seen.insert(p.clone()));
    paths
}

fn ask_kernel() -> std::io::Result<Vec<PathBuf>> {
    let mut paths = Vec::new();
    dump(REACHABLE, UDIAG_SHOW_NAME, |kind, name| {
        // An abstract name starts with NUL: no file to cover.
        if kind == UNIX_DIAG_NAME && name.first().is_some_and(|b| *b != 0) {
            let name = name.split(|b| *b == 0).next().unwrap_or(name);
            paths.push(PathBuf::from(OsStr::from_bytes(name)));
        }
    })?;
    Ok(paths)
}

/// The files (device and inode, as `stat` reports them) that unix sockets of this
/// network namespace are bound to: listening or unconnected ones, or (`connected`) the
/// connected ones, which include every accepted stream and so are many more. The device is the kernel's internal
/// number in sock_diag and is given back in `stat`'s encoding; sock_diag reports the
/// low 32 bits of the inode.
pub(crate) fn bound_files(
    connected: bool,
) -> std::io::Result<std::collections::HashSet<(u64, u32)>> {
    let mut files = std::collections::HashSet::new();
    let states = if connected {
        1 << STATE_ESTABLISHED
    } else {
        REACHABLE
    };
    dump(states, UDIAG_SHOW_VFS, |kind, vfs| {
        if kind == UNIX_DIAG_VFS {
            if let (Some(inode), Some(device)) = (u32_at(vfs, 0), u32_at(vfs, 4)) {
                // The kernel's dev_t: 12 bits of major above 20 bits of minor.
                let device = libc::makedev(device >> 20, device & 0xf_ffff);
                files.insert((device, inode));
            }
        }
    })?;
    Ok(files)
}

/// One unix sock_diag dump: the sockets in `states`, each attribute of `show` given to
/// `each` as its kind and payload.
fn dump(states: u32, show: u32, mut each: impl FnMut(u16, &[u8])) -> std::io::Result<()> {
    // SAFETY: a new socket; ownership is taken at once.
    let socket = unsafe {
        let fd = libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        );
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        OwnedFd::from_raw_fd(fd)
    };
    let request = Request {
        header: libc::nlmsghdr {
            nlmsg_len: std::mem::size_of::<Request>() as u32,
            nlmsg_type: SOCK_DIAG_BY_FAMILY,
            nlmsg_flags: (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16,
            nlmsg_seq: 1,
            nlmsg_pid: 0,
        },
        family: libc::AF_UNIX as u8,
        protocol: 0,
        pad: 0,
        states,
        inode: 0,
        show,
        cookie: [u32::MAX; 2],
    };
    // SAFETY: sends the request structure, which outlives the call.
    let sent = unsafe {
        libc::send(
            socket.as_raw_fd(),
            (&request as *const Request).cast(),
            std::mem::size_of::<Request>(),
            0,
        )
    };
    if sent < 0 {
        return Err(std::io::Error::last_os_error());
    }
    crate::read_buffer::with(|buffer| loop {
        // SAFETY: receives at most as many bytes as `fill` makes room for.
        let got = crate::read_buffer::fill(buffer, |at, room| unsafe {
            libc::recv(socket.as_raw_fd(), at, room, 0)
        });
        if got < 0 {
            let error = std::io::Error::last_os_error();
            if error.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(error);
        }
        match read_replies(buffer, &mut each)? {
            Replies::More => continue,
            Replies::Done => return Ok(()),
        }
    })
}

enum Replies {
    More,
    Done,
}

fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(bytes.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

/// One datagram of replies: each message a `unix_diag_msg` (16 bytes) and attributes.
fn read_replies(mut data: &[u8], each: &mut impl FnMut(u16, &[u8])) -> std::io::Result<Replies> {
    const HEADER: usize = std::mem::size_of::<libc::nlmsghdr>();
    const MESSAGE: usize = 16;
    let malformed = || std::io::Error::other("a malformed sock_diag reply");
    while data.len() >= HEADER {
        let length = u32_at(data, 0).ok_or_else(malformed)? as usize;
        let kind = u16_at(data, 4).ok_or_else(malformed)?;
        if length < HEADER || length > data.len() {
            return Err(malformed());
        }
        match kind as libc::c_int {
            libc::NLMSG_DONE => return Ok(Replies::Done),
            libc::NLMSG_ERROR => {
                let code = u32_at(data, HEADER).ok_or_else(malformed)? as i32;
                return Err(std::io::Error::from_raw_os_error(-code));
            }
            _ => {}
        }
        let mut attributes = data.get(HEADER + MESSAGE..length).ok_or_else(malformed)?;
        while attributes.len() >= 4 {
            let size = u16_at(attributes, 0).ok_or_else(malformed)? as usize;
            let kind = u16_at(attributes, 2).ok_or_else(malformed)?;
            if size < 4 || size > attributes.len() {
                return Err(malformed());
            }
            each(kind, &attributes[4..size]);
            attributes = attributes.get(align4(size)..).unwrap_or_default();
        }
        data = data.get(align4(length)..).unwrap_or_default();
    }
    Ok(Replies::More)
}

/// The same from `/proc/net/unix` (every socket of the namespace, formatted as text).
fn from_proc_table() -> Vec<PathBuf> {
    use std::io::Read;
    // The file reports no size: read into room for a few hundred sockets at once, not
    // through std's small first reads, each of which the kernel answers afresh.
    let mut table = String::with_capacity(64 * 1024);
    if std::fs::File::open("/proc/net/unix")
        .and_then(|mut f| f.read_to_string(&mut table))
        .is_err()
    {
        return Vec::new();
    }
    table
        .lines()
        .skip(1)
        .filter_map(|line| line.split_whitespace().nth(7))
        .filter(|p| p.starts_with('/'))
        .map(PathBuf::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::{UnixDatagram, UnixListener, UnixStream};

    #[test]
    fn the_kernel_names_the_bound_sockets_the_table_names() {
        let dir = tempfile::tempdir().unwrap();
        let listening = dir.path().join("service.sock");
        let datagram = dir.path().join("log.sock");
        let _listener = UnixListener::bind(&listening).unwrap();
        let _datagram = UnixDatagram::bind(&datagram).unwrap();
        // Connected pairs, as live sandboxes make: the kernel leaves them out.
        let _pairs: Vec<_> = (0..200).map(|_| UnixStream::pair().unwrap()).collect();
        let from_kernel = ask_kernel().expect("the kernel answers unix sock_diag");
        for wanted in [&listening, &datagram] {
            assert!(
                from_kernel.contains(wanted),
                "{wanted:?} in {from_kernel:?}"
            );
            assert!(from_proc_table().contains(wanted));
        }
        let bound = bound_files(false).expect("the kernel answers unix sock_diag with VFS");
        for wanted in [&listening, &datagram] {
            use std::os::unix::fs::MetadataExt;
            let file = std::fs::metadata(wanted).unwrap();
            assert!(
                bound.contains(&(file.dev(), file.ino() as u32)),
                "{wanted:?}"
            );
        }
        let unbound = dir.path().join("plain");
        std::fs::write(&unbound, "").unwrap();
        let plain = std::fs::metadata(&unbound).unwrap();
        {
            use std::os::unix::fs::MetadataExt;
            assert!(!bound.contains(&(plain.dev(), plain.ino() as u32)));
        }
        let all = socket_paths();
        assert_eq!(
            all.len(),
            all.iter().collect::<std::collections::HashSet<_>>().len(),
            "each once"
        );
    }
}
