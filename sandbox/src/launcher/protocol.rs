//! The channel between the server and its launcher inside a sandbox: a unix stream
//! socket. The server sends framed requests (a little-endian length, then NUL-separated
//! fields; a run carries the command's output pipe, and any descriptors it is to have
//! from 3 on, as attached descriptors); the
//! launcher answers with text lines (`ready`, `exit <status>`).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// Requests larger than this are refused (a command line is at most 128 KiB per
/// argument anyway).
const MAX_REQUEST: usize = 16 << 20;

pub enum Request {
    /// `extra` become the command's descriptors 3, 4, ... With `keep`, the process is
    /// not a command: the launcher answers once it has started and spares it in every
    /// sweep for as long as it lives (see `inside`).
    Run {
        keep: bool,
        cwd: Vec<u8>,
        argv: Vec<Vec<u8>>,
        env: Vec<Vec<u8>>,
        output: OwnedFd,
        extra: Vec<OwnedFd>,
    },
    Kill {
        grace: Duration,
    },
    /// Everything but the kept process is to end now.
    Sweep,
}

fn io_result(n: isize) -> std::io::Result<usize> {
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Sends one request; `fds` ride along with its first byte.
pub fn send(socket: &OwnedFd, fields: &[&[u8]], fds: &[RawFd]) -> std::io::Result<()> {
    let mut payload = Vec::new();
    for field in fields {
        payload.extend_from_slice(field);
        payload.push(0);
    }
    let mut message = (payload.len() as u32).to_le_bytes().to_vec();
    message.extend_from_slice(&payload);
    let mut sent = 0;
    while sent < message.len() {
        let n = if sent == 0 {
            send_with_fds(socket, &message, fds)?
        } else {
            send_plain(socket, &message[sent..])?
        };
        sent += n;
    }
    Ok(())
}

fn send_plain(socket: &OwnedFd, bytes: &[u8]) -> std::io::Result<usize> {
    // SAFETY: sending from a valid buffer; MSG_NOSIGNAL turns a closed peer into EPIPE.
    io_result(unsafe {
        libc::send(
            socket.as_raw_fd(),
            bytes.as_ptr().cast(),
            bytes.len(),
            libc::MSG_NOSIGNAL,
        )
    })
}

fn send_with_fds(socket: &OwnedFd, bytes: &[u8], fds: &[RawFd]) -> std::io::Result<usize> {
    if fds.is_empty() {
        return send_plain(socket, bytes);
    }
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut _,
        iov_len: bytes.len(),
    };
    let fds_len = std::mem::size_of_val(fds) as u32;
    // SAFETY: CMSG_SPACE is a pure size computation.
    let space = unsafe { libc::CMSG_SPACE(fds_len) } as usize;
    let mut control = vec![0u8; space];
    // SAFETY: msghdr is plain data; the pointers stay valid for the call; the control
    // buffer has room for exactly one SCM_RIGHTS header and the descriptors.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = space as _;
        let header = libc::CMSG_FIRSTHDR(&msg);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(fds_len) as _;
        for (i, fd) in fds.iter().enumerate() {
            std::ptr::write_unaligned(libc::CMSG_DATA(header).cast::<RawFd>().add(i), *fd);
        }
        io_result(libc::sendmsg(socket.as_raw_fd(), &msg, libc::MSG_NOSIGNAL))
    }
}

/// Reads exactly `buf.len()` bytes, collecting any descriptor that arrives; `false` on
/// end of stream before the first byte.
fn receive_exact(
    socket: &OwnedFd,
    buf: &mut [u8],
    fds: &mut Vec<OwnedFd>,
) -> std::io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        let rest = &mut buf[got..];
        let mut iov = libc::iovec {
            iov_base: rest.as_mut_ptr().cast(),
            iov_len: rest.len(),
        };
        // SAFETY: as in `send_with_fds`; room for the most a request carries.
        let space = unsafe { libc::CMSG_SPACE((8 * std::mem::size_of::<RawFd>()) as u32) } as usize;
        let mut control = vec![0u8; space];
        // SAFETY: the header points at `iov` and `control`, both alive and sized as
        // declared for the whole call.
        let n = unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = space as _;
            let n = libc::recvmsg(socket.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC);
            if n >= 0 {
                let mut header = libc::CMSG_FIRSTHDR(&msg);
                while !header.is_null() {
                    if (*header).cmsg_level == libc::SOL_SOCKET
                        && (*header).cmsg_type == libc::SCM_RIGHTS
                    {
                        let data = libc::CMSG_DATA(header).cast::<RawFd>();
                        let count = ((*header).cmsg_len as usize - libc::CMSG_LEN(0) as usize)
                            / std::mem::size_of::<RawFd>();
                        for i in 0..count {
                            fds.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                        }
                    }
                    header = libc::CMSG_NXTHDR(&msg, header);
                }
            }
            n
        };
        match io_result(n) {
            Ok(0) if got == 0 => return Ok(false),
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

fn bad(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string())
}

/// A message's fields and the descriptors that came with it.
pub type Message = (Vec<Vec<u8>>, Vec<OwnedFd>);

/// The fields and descriptors of the next message [`send`] sent, or `None` at end of
/// stream.
pub fn receive_fields(socket: &OwnedFd) -> std::io::Result<Option<Message>> {
    let mut fds = Vec::new();
    let mut header = [0u8; 4];
    if !receive_exact(socket, &mut header, &mut fds)? {
        return Ok(None);
    }
    let len = u32::from_le_bytes(header) as usize;
    if len > MAX_REQUEST {
        return Err(bad("request too large"));
    }
    let mut payload = vec![0u8; len];
    if !receive_exact(socket, &mut payload, &mut fds)? && len > 0 {
        return Err(bad("truncated request"));
    }
    let mut fields: Vec<Vec<u8>> = payload.split(|b| *b == 0).map(<[u8]>::to_vec).collect();
    fields.pop(); // after the last NUL
    Ok(Some((fields, fds)))
}

/// The next request, or `None` at end of stream.
pub fn receive(socket: &OwnedFd) -> std::io::Result<Option<Request>> {
    let Some((mut fields, fds)) = receive_fields(socket)? else {
        return Ok(None);
    };
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    match fields.first().map(|k| k.as_slice()) {
        Some(b"kill") => {
            let ms: u64 = fields
                .get(1)
                .and_then(|f| text(f).parse().ok())
                .ok_or_else(|| bad("kill without a grace"))?;
            Ok(Some(Request::Kill {
                grace: Duration::from_millis(ms),
            }))
        }
        Some(b"sweep") => Ok(Some(Request::Sweep)),
        Some(kind @ (b"run" | b"keep")) => {
            let keep = kind == b"keep";
            let mut fds = fds.into_iter();
            let output = fds
                .next()
                .ok_or_else(|| bad("run without an output pipe"))?;
            let extra = fds.collect();
            let argc: usize = fields
                .get(2)
                .and_then(|f| text(f).parse().ok())
                .ok_or_else(|| bad("run without argc"))?;
            if fields.len() < 3 + argc {
                return Err(bad("run with fewer arguments than announced"));
            }
            let cwd = fields[1].clone();
            let env = fields.split_off(3 + argc);
            let argv = fields.split_off(3);
            Ok(Some(Request::Run {
                keep,
                cwd,
                argv,
                env,
                output,
                extra,
            }))
        }
        _ => Err(bad("unknown request")),
    }
}

/// Sends one answer line.
pub fn send_line(socket: &OwnedFd, line: &str) -> std::io::Result<()> {
    let message = format!("{line}\n");
    let mut rest = message.as_bytes();
    while !rest.is_empty() {
        match send_plain(socket, rest) {
            Ok(n) => rest = &rest[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Whether `fd` is open on a socket: the launcher and the zygote serve only a channel a
/// server placed there, never whatever a person who started them by hand left open.
pub(super) fn is_socket(fd: RawFd) -> bool {
    // SAFETY: fstat into a zeroed structure; any descriptor number may be asked about.
    unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        libc::fstat(fd, &mut stat) == 0 && (stat.st_mode & libc::S_IFMT) == libc::S_IFSOCK
    }
}

/// A stream socket pair whose ends close on exec.
pub fn socket_pair() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: socketpair fills two descriptors on success.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fresh descriptors owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}
