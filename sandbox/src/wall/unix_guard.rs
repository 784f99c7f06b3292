//! Socket files of host services made after a sandbox started, refused on kernels
//! without Landlock's `RESOLVE_UNIX` (ABI 9): the same rule, kept by the sandbox's init.
//!
//! The command's process installs one more seccomp filter, with a listener
//! (`SECCOMP_FILTER_FLAG_NEW_LISTENER`), that hands `connect`, `sendmsg`, `sendmmsg`
//! and `sendto` with a destination to user space, and init (PID 1, which reaps
//! anyway) answers them. The answer rests on what the caller cannot change under it:
//!
//! - a `connect` is done by init itself, on the caller's socket (taken with
//!   `pidfd_getfd`: the same open socket) and with the address copied once. A pathname
//!   is resolved as the caller would (its working directory, symlinks followed) to a
//!   descriptor that pins the file, which must be bound by a unix socket of this
//!   sandbox's own network namespace (asked of sock_diag, which lists neither host
//!   sockets nor other sandboxes'); the connect then goes through that descriptor, so
//!   the file checked is the file connected to. Anything else is refused with EACCES,
//!   as Landlock's `RESOLVE_UNIX` does. Other families and abstract names connect as
//!   given: init lives in the sandbox's network namespace.
//! - a send on a unix datagram socket (the one kind that takes a destination) is done by
//!   init too, destination checked as above, payload copied, descriptors in
//!   `SCM_RIGHTS` taken from the caller; `SCM_CREDENTIALS`, which would name init,
//!   is refused with EPERM.
//! - any other send continues in the kernel unchanged, but only when the caller is a
//!   single thread: its descriptor table then cannot change until the call runs (the
//!   seccomp programs refuse `clone` that shares the table without a thread, and nested
//!   listeners). A caller with threads has its send done by init as well, since another
//!   thread could put a unix datagram socket in the place checked.
//!
//! Work that may block (a connect to a full backlog, a send to a full socket) runs on a
//! thread of its own, so init keeps reaping and answering; the caller's non-blocking
//! mode holds, because the socket init uses is the caller's own open socket. A send
//! that may not wait is made by init's main thread, with MSG_DONTWAIT.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

/// Whether the command's sandbox gets the guard: its own network namespace (whose
/// sock_diag lists exactly the sandbox's sockets), and a kernel whose Landlock does not
/// refuse the host's socket files by itself.
pub(super) fn wanted(own_network: bool) -> bool {
    own_network && crate::scope::landlock_abi() < 9 && !attaching_forbidden()
}

/// Yama's `ptrace_scope` 3 forbids every process to take another's descriptors or read
/// its memory, which the guard needs; there the sandbox runs as before it.
fn attaching_forbidden() -> bool {
    std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").is_ok_and(|s| s.trim() == "3")
}

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xC000_003E;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xC000_00B7;
/// x32 system calls share x86-64's architecture and carry this bit in their number.
const X32_BIT: u32 = 0x4000_0000;

const fn statement(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

const fn jump(code: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

/// The filter: notify on `connect`, `sendmsg`, `sendmmsg`, and `sendto` whose fifth
/// argument (the destination) is not NULL; everything else passes on to the other
/// programs.
fn program() -> Vec<libc::sock_filter> {
    use libc::{BPF_ABS, BPF_JEQ, BPF_JMP, BPF_JSET, BPF_K, BPF_LD, BPF_RET, BPF_W};
    const NR: u32 = 0;
    const ARCH: u32 = 4;
    const ARG4_LOW: u32 = 16 + 4 * 8;
    const ARG4_HIGH: u32 = ARG4_LOW + 4;
    let load = BPF_LD | BPF_W | BPF_ABS;
    let equal = BPF_JMP | BPF_JEQ | BPF_K;
    let ret = BPF_RET | BPF_K;
    vec![
        /* 0 */ statement(load, ARCH),
        /* 1 */ jump(equal, AUDIT_ARCH, 1, 0),
        /* 2 */ statement(ret, libc::SECCOMP_RET_KILL_PROCESS),
        /* 3 */ statement(load, NR),
        /* 4 */ jump(BPF_JMP | BPF_JSET | BPF_K, X32_BIT, 10, 0),
        /* 5 */ jump(equal, libc::SYS_connect as u32, 8, 0),
        /* 6 */ jump(equal, libc::SYS_sendmsg as u32, 7, 0),
        /* 7 */ jump(equal, libc::SYS_sendmmsg as u32, 6, 0),
        /* 8 */ jump(equal, libc::SYS_sendto as u32, 0, 4),
        /* 9 */ statement(load, ARG4_LOW),
        /* 10 */ jump(equal, 0, 0, 3),
        /* 11 */ statement(load, ARG4_HIGH),
        /* 12 */ jump(equal, 0, 0, 1),
        /* 13 */ statement(ret, libc::SECCOMP_RET_ALLOW),
        /* 14 */ statement(ret, libc::SECCOMP_RET_USER_NOTIF),
        /* 15 */ statement(ret, libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32),
    ]
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// The two ends of the channel on which the command's process tells init where its
/// listener is.
pub(super) struct Handoff {
    pub(super) init_end: OwnedFd,
    pub(super) command_end: OwnedFd,
}

impl Handoff {
    pub(super) fn new() -> Result<Handoff, String> {
        let mut ends = [0; 2];
        // SAFETY: socketpair fills the two descriptors, owned at once.
        unsafe {
            if libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                0,
                ends.as_mut_ptr(),
            ) != 0
            {
                return Err(super::failed("socketpair"));
            }
            Ok(Handoff {
                init_end: OwnedFd::from_raw_fd(ends[0]),
                command_end: OwnedFd::from_raw_fd(ends[1]),
            })
        }
    }
}

/// In the command's process, after no-new-privileges and before the other programs
/// (which refuse new listeners): installs the filter, lets init take the listener and
/// closes this process's copy. Plain `read` and `write` carry the handshake: a `send`
/// would already wait for the listener init does not have yet.
pub(super) fn install(channel: OwnedFd) -> Result<(), String> {
    let filters = program();
    let prog = libc::sock_fprog {
        len: filters.len() as u16,
        filter: filters.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: a program the kernel checks before taking it; `filters` outlives the call.
    let listener = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &prog as *const libc::sock_fprog,
        )
    };
    if listener < 0 {
        return Err(super::failed("cannot install the unix socket guard"));
    }
    // SAFETY: the kernel just made this descriptor for us.
    let listener = unsafe { OwnedFd::from_raw_fd(listener as RawFd) };
    let number = listener.as_raw_fd().to_ne_bytes();
    let mut taken = [0u8; 1];
    // SAFETY: writes and reads owned buffers of the sizes given.
    let answered = unsafe {
        libc::write(channel.as_raw_fd(), number.as_ptr().cast(), number.len()) == 4
            && libc::read(channel.as_raw_fd(), taken.as_mut_ptr().cast(), 1) == 1
    };
    if !answered || taken[0] != 1 {
        return Err("the sandbox's init could not take the unix socket guard's listener".into());
    }
    Ok(())
}

/// In init: the listener, taken from the command's process `command`.
pub(super) fn take(channel: OwnedFd, command: libc::pid_t) -> Result<OwnedFd, String> {
    let mut number = [0u8; 4];
    // SAFETY: reads into an owned buffer of its size.
    if unsafe { libc::read(channel.as_raw_fd(), number.as_mut_ptr().cast(), 4) } != 4 {
        return Err("the command's process ended before its unix socket guard".into());
    }
    let taken = open_pidfd(command)
        .and_then(|pidfd| steal(&pidfd, i32::from_ne_bytes(number)))
        .map_err(|e| {
            format!(
                "cannot take the unix socket guard's listener: {}",
                std::io::Error::from_raw_os_error(e)
            )
        });
    let answer = [u8::from(taken.is_ok())];
    // SAFETY: writes an owned byte.
    unsafe { libc::write(channel.as_raw_fd(), answer.as_ptr().cast(), 1) };
    taken
}

/// Init keeps `CAP_SYS_PTRACE` alone (to take descriptors of processes that made
/// themselves non-dumpable): the connects it makes for a command are checked against
/// the same user and groups, without the capabilities that would let it pass where
/// the command could not.
pub(super) fn keep_only_ptrace() -> Result<(), String> {
    const CAP_SYS_PTRACE: u32 = 19;
    super::keep_capabilities(1 << CAP_SYS_PTRACE)
        .map_err(|e| format!("cannot drop init's capabilities: {e}"))
}

/// Blocks SIGCHLD, for [`serve`]'s signalfd; before the command is forked, so no child's
/// end goes unseen (the command's process unblocks it again).
pub(super) fn block_child_signals() {
    // SAFETY: a signal set of our own.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Init's loop with the guard: reaps as before and answers the listener, until the
/// command's process ends; its status.
pub(super) fn serve(listener: OwnedFd, command: libc::pid_t) -> i32 {
    // SAFETY: a signalfd for the SIGCHLD that `block_child_signals` blocked.
    let signals = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        let fd = libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK);
        if fd < 0 {
            eprintln!("hermes-tools sandbox: {}", super::failed("signalfd"));
            return 1;
        }
        OwnedFd::from_raw_fd(fd)
    };
    let listener = Arc::new(listener);
    let workers = Workers::new();
    let mut listening = true;
    loop {
        let mut polled = [
            libc::pollfd {
                fd: signals.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: if listening { listener.as_raw_fd() } else { -1 },
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfds.
        if unsafe { libc::poll(polled.as_mut_ptr(), 2, -1) } < 0 {
            if last_errno() == libc::EINTR {
                continue;
            }
            return 1;
        }
        if polled[0].revents != 0 {
            let mut info = [0u8; std::mem::size_of::<libc::signalfd_siginfo>()];
            // SAFETY: reads into an owned buffer of its size.
            while unsafe { libc::read(signals.as_raw_fd(), info.as_mut_ptr().cast(), info.len()) }
                > 0
            {}
            loop {
                let mut raw = 0;
                // SAFETY: waitpid on our own children.
                let got = unsafe { libc::waitpid(-1, &mut raw, libc::WNOHANG) };
                if got == command {
                    return super::exit_code(raw);
                }
                if got <= 0 {
                    break;
                }
            }
        }
        let events = polled[1].revents;
        if events & libc::POLLIN != 0 {
            if let Some(notification) = receive(&listener) {
                answer(&listener, &workers, notification);
            }
        } else if events & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            // No process uses the filter any more.
            listening = false;
        }
    }
}

fn receive(listener: &OwnedFd) -> Option<libc::seccomp_notif> {
    // SAFETY: the kernel wants a zeroed structure and fills it.
    unsafe {
        let mut notification: libc::seccomp_notif = std::mem::zeroed();
        (libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_RECV as _,
            &mut notification,
        ) == 0)
            .then_some(notification)
    }
}

/// What the call returns: its value, or an errno.
type Outcome = Result<i64, i32>;

enum Reply {
    Continue,
    Done(Outcome),
}

fn respond(listener: &OwnedFd, id: u64, reply: Reply) {
    let response = match reply {
        Reply::Continue => libc::seccomp_notif_resp {
            id,
            val: 0,
            error: 0,
            flags: libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32,
        },
        Reply::Done(Ok(value)) => libc::seccomp_notif_resp {
            id,
            val: value,
            error: 0,
            flags: 0,
        },
        Reply::Done(Err(errno)) => libc::seccomp_notif_resp {
            id,
            val: 0,
            error: -errno,
            flags: 0,
        },
    };
    // SAFETY: a response structure of the kernel's layout. ENOENT (the caller was
    // interrupted or ended meanwhile) needs nothing more.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND as _,
            &response,
        )
    };
}

fn still_waiting(listener: &OwnedFd, id: u64) -> bool {
    // SAFETY: the id is read from the pointer given.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _,
            &id,
        ) == 0
    }
}

fn open_pidfd(pid: libc::pid_t) -> Result<OwnedFd, i32> {
    // SAFETY: returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(last_errno());
    }
    // SAFETY: the kernel just made this descriptor for us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

fn open_thread_pidfd(tid: libc::pid_t) -> Result<OwnedFd, i32> {
    const PIDFD_THREAD: libc::c_int = libc::O_EXCL;
    // SAFETY: returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, tid, PIDFD_THREAD) };
    if fd < 0 {
        return Err(last_errno());
    }
    // SAFETY: the kernel just made this descriptor for us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// The caller's descriptor `fd`, as a descriptor of init (the same open file).
fn steal(pidfd: &OwnedFd, fd: i32) -> Result<OwnedFd, i32> {
    // SAFETY: returns a new descriptor or -1.
    let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if got < 0 {
        return Err(last_errno());
    }
    // SAFETY: the kernel just made this descriptor for us.
    Ok(unsafe { OwnedFd::from_raw_fd(got as RawFd) })
}

fn socket_option(socket: &OwnedFd, option: libc::c_int) -> Result<libc::c_int, i32> {
    let mut value: libc::c_int = 0;
    let mut length = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: an int-sized buffer and its length.
    let done = unsafe {
        libc::getsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            option,
            (&mut value as *mut libc::c_int).cast(),
            &mut length,
        )
    };
    if done != 0 {
        return Err(last_errno());
    }
    Ok(value)
}

/// The calling thread (`tid`, as the notification names it), with what init needs of it.
struct Caller {
    tid: libc::pid_t,
    tgid: std::sync::OnceLock<libc::pid_t>,
    threads: u64,
    pidfd: OwnedFd,
}

impl Caller {
    fn find(tid: libc::pid_t) -> Result<Caller, i32> {
        // The thread's own pidfd where the kernel has them (Linux 6.9): a thread made
        // without CLONE_FILES has a descriptor table of its own.
        let (pidfd, tgid) = match open_thread_pidfd(tid) {
            Ok(pidfd) => (pidfd, None),
            Err(_) => {
                let tgid = thread_group(tid)?;
                (open_pidfd(tgid)?, Some(tgid))
            }
        };
        let known = std::sync::OnceLock::new();
        if let Some(tgid) = tgid {
            let _ = known.set(tgid);
        }
        Ok(Caller {
            tid,
            tgid: known,
            threads: threads(tid)?,
            pidfd,
        })
    }

    fn tgid(&self) -> libc::pid_t {
        *self
            .tgid
            .get_or_init(|| thread_group(self.tid).unwrap_or(self.tid))
    }

    /// `length` bytes of the caller's memory at `address`, copied once.
    fn read(&self, address: u64, length: usize) -> Result<Vec<u8>, i32> {
        let mut buffer = vec![0u8; length];
        if length == 0 {
            return Ok(buffer);
        }
        let local = libc::iovec {
            iov_base: buffer.as_mut_ptr().cast(),
            iov_len: length,
        };
        let remote = libc::iovec {
            iov_base: address as *mut libc::c_void,
            iov_len: length,
        };
        // SAFETY: the local buffer is ours and of the length given; the remote side is
        // checked by the kernel.
        let got = unsafe { libc::process_vm_readv(self.tid, &local, 1, &remote, 1, 0) };
        if got != length as isize {
            return Err(libc::EFAULT);
        }
        Ok(buffer)
    }

    fn write(&self, address: u64, bytes: &[u8]) -> Result<(), i32> {
        let local = libc::iovec {
            iov_base: bytes.as_ptr() as *mut libc::c_void,
            iov_len: bytes.len(),
        };
        let remote = libc::iovec {
            iov_base: address as *mut libc::c_void,
            iov_len: bytes.len(),
        };
        // SAFETY: as in `read`, the other way.
        let put = unsafe { libc::process_vm_writev(self.tid, &local, 1, &remote, 1, 0) };
        if put != bytes.len() as isize {
            return Err(libc::EFAULT);
        }
        Ok(())
    }
}

/// The thread group of thread `tid`.
fn thread_group(tid: libc::pid_t) -> Result<libc::pid_t, i32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status"))
        .map_err(|e| e.raw_os_error().unwrap_or(libc::ESRCH))?;
    status
        .lines()
        .find_map(|line| line.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or(libc::ESRCH)
}

/// How many threads the process of thread `tid` has: procfs counts them in the links
/// of its `task` directory (two more, for `.` and `..`), one `stat` where the status
/// file formats dozens of fields.
fn threads(tid: libc::pid_t) -> Result<u64, i32> {
    let task = CString::new(format!("/proc/{tid}/task")).map_err(|_| libc::EINVAL)?;
    // SAFETY: stat into a zeroed structure; the path is NUL-terminated.
    unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        if libc::stat(task.as_ptr(), &mut stat) != 0 {
            return Err(last_errno());
        }
        Ok((stat.st_nlink as u64).saturating_sub(2))
    }
}

/// One notification: answered here when the kernel can go on with the call, by a
/// worker when init makes the call.
fn answer(listener: &Arc<OwnedFd>, workers: &Workers, notification: libc::seccomp_notif) {
    let id = notification.id;
    match prepare(listener, &notification) {
        Err(errno) => respond(listener, id, Reply::Done(Err(errno))),
        Ok(None) => respond(listener, id, Reply::Continue),
        // A send that may not wait (a non-blocking socket, MSG_DONTWAIT) is made here,
        // without the trip to a worker, and with MSG_DONTWAIT: another thread of the
        // caller may clear O_NONBLOCK meanwhile, and init must never wait.
        Ok(Some(mut work)) if work.cannot_block() => {
            work.dont_wait = true;
            work.finish();
        }
        Ok(Some(work)) => {
            if workers.give(work).is_err() {
                respond(listener, id, Reply::Done(Err(libc::EAGAIN)));
            }
        }
    }
}

/// The threads that make calls for callers. Each call goes to a thread that is idle, or
/// to a new one when none is, so a call that blocks (a connect to a full backlog) never
/// holds up another; idle threads stay for the next calls.
struct Workers {
    /// Threads waiting for a call and not promised one yet: only `give` takes from it.
    idle: Arc<std::sync::atomic::AtomicUsize>,
    calls: std::sync::mpsc::Sender<Work>,
    queue: Arc<std::sync::Mutex<std::sync::mpsc::Receiver<Work>>>,
}

impl Workers {
    fn new() -> Workers {
        let (calls, queue) = std::sync::mpsc::channel();
        Workers {
            idle: Arc::default(),
            calls,
            queue: Arc::new(std::sync::Mutex::new(queue)),
        }
    }

    /// Hands `work` to a thread; an error when no thread could take it.
    fn give(&self, work: Work) -> Result<(), ()> {
        use std::sync::atomic::Ordering;
        if self.idle.load(Ordering::SeqCst) > 0 {
            self.idle.fetch_sub(1, Ordering::SeqCst);
            return self.calls.send(work).map_err(drop);
        }
        let (idle, queue) = (Arc::clone(&self.idle), Arc::clone(&self.queue));
        std::thread::Builder::new()
            .name("unix-guard".into())
            .spawn(move || {
                work.finish();
                loop {
                    idle.fetch_add(1, Ordering::SeqCst);
                    let next = queue.lock().map(|q| q.recv());
                    match next {
                        Ok(Ok(work)) => work.finish(),
                        _ => return,
                    }
                }
            })
            .map(drop)
            .map_err(drop)
    }
}

/// A call init makes for the caller.
struct Work {
    caller: Caller,
    socket: OwnedFd,
    domain: i32,
    kind: i32,
    unix_datagram: bool,
    listener: Arc<OwnedFd>,
    id: u64,
    call: Call,
    /// Made by init's own thread: the send must not wait.
    dont_wait: bool,
}

enum Call {
    Connect { address: u64, length: u64 },
    SendTo { message: Message, flags: i32 },
    SendMany { vector: u64, count: u64, flags: i32 },
}

/// A message as the caller laid it out in its memory: where each part is.
struct Message {
    name: u64,
    name_length: u64,
    iov: u64,
    iov_count: u64,
    control: u64,
    control_length: u64,
    /// `sendto`: one buffer, not an array of iovecs.
    single: bool,
}

impl Message {
    fn at(caller: &Caller, address: u64) -> Result<Message, i32> {
        let raw = caller.read(address, std::mem::size_of::<libc::msghdr>())?;
        // SAFETY: the bytes are a msghdr's size; any bit pattern is a valid msghdr.
        let header: libc::msghdr = unsafe { std::ptr::read_unaligned(raw.as_ptr().cast()) };
        Ok(Message {
            name: header.msg_name as u64,
            name_length: header.msg_namelen as u64,
            iov: header.msg_iov as u64,
            iov_count: header.msg_iovlen as u64,
            control: header.msg_control as u64,
            control_length: header.msg_controllen as u64,
            single: false,
        })
    }
}

fn prepare(
    listener: &Arc<OwnedFd>,
    notification: &libc::seccomp_notif,
) -> Result<Option<Work>, i32> {
    let data = &notification.data;
    let caller = Caller::find(notification.pid as libc::pid_t)?;
    // The pidfd is the caller's only if the caller still waits: its pid cannot have been
    // reused while it does.
    if !still_waiting(listener, notification.id) {
        return Err(libc::EINTR);
    }
    let socket = steal(&caller.pidfd, data.args[0] as i32)?;
    let domain = socket_option(&socket, libc::SO_DOMAIN)?;
    let kind = socket_option(&socket, libc::SO_TYPE)?;
    let unix_datagram = domain == libc::AF_UNIX && kind == libc::SOCK_DGRAM;
    let call = match i64::from(data.nr) {
        libc::SYS_connect => Call::Connect {
            address: data.args[1],
            length: data.args[2],
        },
        // Only unix datagram sockets take a destination that reaches a file, and no
        // other thread can swap another socket into this descriptor.
        _ if !unix_datagram && caller.threads == 1 => return Ok(None),
        libc::SYS_sendto => Call::SendTo {
            message: Message {
                name: data.args[4],
                name_length: data.args[5],
                iov: data.args[1],
                iov_count: data.args[2],
                control: 0,
                control_length: 0,
                single: true,
            },
            flags: data.args[3] as i32,
        },
        libc::SYS_sendmsg => Call::SendTo {
            message: Message::at(&caller, data.args[1])?,
            flags: data.args[2] as i32,
        },
        libc::SYS_sendmmsg => Call::SendMany {
            vector: data.args[1],
            count: data.args[2],
            flags: data.args[3] as i32,
        },
        _ => return Err(libc::ENOSYS),
    };
    Ok(Some(Work {
        caller,
        socket,
        domain,
        kind,
        unix_datagram,
        listener: Arc::clone(listener),
        id: notification.id,
        call,
        dont_wait: false,
    }))
}

/// The largest address a call may give (`sockaddr_storage`), as the kernel's limit.
const ADDRESS_MAX: u64 = 128;
/// The most bytes one send copies: a datagram larger is refused (EMSGSIZE); a stream
/// send is cut to it and returns what it sent, as a short write may.
const PAYLOAD_MAX: usize = 4 << 20;
const IOV_MAX: u64 = 1024;
const CONTROL_MAX: u64 = 64 * 1024;

impl Work {
    fn cannot_block(&self) -> bool {
        // A connect has no flag of its own to keep it from waiting.
        let flags = match &self.call {
            Call::Connect { .. } => return false,
            Call::SendTo { flags, .. } | Call::SendMany { flags, .. } => *flags,
        };
        // SAFETY: fcntl on a descriptor we own; the status flags are the caller's
        // (the same open file).
        let status = unsafe { libc::fcntl(self.socket.as_raw_fd(), libc::F_GETFL) };
        flags & libc::MSG_DONTWAIT != 0 || (status >= 0 && status & libc::O_NONBLOCK != 0)
    }

    fn finish(self) {
        let outcome = self.run();
        respond(&self.listener, self.id, Reply::Done(outcome));
    }

    fn run(&self) -> Outcome {
        match &self.call {
            Call::Connect { address, length } => self.connect(*address, *length),
            Call::SendTo { message, flags } => {
                let sent = self.send(message, *flags);
                self.after_send(&sent, *flags);
                sent
            }
            Call::SendMany {
                vector,
                count,
                flags,
            } => self.send_many(*vector, *count, *flags),
        }
    }

    fn address(&self, address: u64, length: u64) -> Result<Vec<u8>, i32> {
        if length > ADDRESS_MAX {
            return Err(libc::EINVAL);
        }
        let copied = self.caller.read(address, length as usize)?;
        if !still_waiting(&self.listener, self.id) {
            return Err(libc::EINTR);
        }
        Ok(copied)
    }

    fn connect(&self, address: u64, length: u64) -> Outcome {
        let copied = self.address(address, length)?;
        let (address, _pinned) = self.checked(copied)?;
        // SAFETY: the address buffer is ours and of the length given.
        let done = unsafe {
            libc::connect(
                self.socket.as_raw_fd(),
                address.as_ptr().cast(),
                address.len() as libc::socklen_t,
            )
        };
        if done != 0 {
            return Err(last_errno());
        }
        Ok(0)
    }

    /// The address to use instead of `copied` for this socket, and the descriptor that
    /// pins the file it names: a unix pathname becomes `/proc/self/fd/N` of a socket
    /// file bound inside the sandbox; anything else stays as given.
    fn checked(&self, copied: Vec<u8>) -> Result<(Vec<u8>, Option<OwnedFd>), i32> {
        let family_size = std::mem::size_of::<libc::sa_family_t>();
        let is_unix_path = copied.len() > family_size
            && copied[..family_size] == (libc::AF_UNIX as libc::sa_family_t).to_ne_bytes()
            && copied[family_size] != 0;
        if !is_unix_path {
            return Ok((copied, None));
        }
        let path = &copied[family_size..];
        let path = path.split(|b| *b == 0).next().unwrap_or(path);
        let file = resolve(&self.caller, path)?;
        if !own_socket_file(&file)? {
            return Err(libc::EACCES);
        }
        Ok((
            unix_address(format!("/proc/self/fd/{}", file.as_raw_fd()).as_bytes()),
            Some(file),
        ))
    }

    fn send(&self, message: &Message, flags: i32) -> Outcome {
        let name = if message.name != 0 && message.name_length != 0 {
            Some(self.address(message.name, message.name_length)?)
        } else {
            None
        };
        let data = self.payload(message, self.kind == libc::SOCK_STREAM)?;
        let mut control = if message.control != 0 && message.control_length != 0 {
            if message.control_length > CONTROL_MAX {
                return Err(libc::ENOBUFS);
            }
            self.caller
                .read(message.control, message.control_length as usize)?
        } else {
            Vec::new()
        };
        let _passed = if self.domain == libc::AF_UNIX {
            self.translate_rights(&mut control)?
        } else {
            Vec::new()
        };
        if !still_waiting(&self.listener, self.id) {
            return Err(libc::EINTR);
        }
        let (name, _pinned) = match name {
            // A unix stream or seqpacket socket refuses or ignores a destination itself.
            Some(name) if self.unix_datagram => {
                let (checked, pinned) = self.checked(name)?;
                (Some(checked), pinned)
            }
            other => (other, None),
        };
        let mut iov = libc::iovec {
            iov_base: data.as_ptr() as *mut libc::c_void,
            iov_len: data.len(),
        };
        // SAFETY: every pointer in the header points into buffers owned here, alive
        // for the call, of the lengths given.
        let sent = unsafe {
            let mut header: libc::msghdr = std::mem::zeroed();
            if let Some(name) = &name {
                header.msg_name = name.as_ptr() as *mut libc::c_void;
                header.msg_namelen = name.len() as libc::socklen_t;
            }
            header.msg_iov = &mut iov;
            header.msg_iovlen = 1;
            if !control.is_empty() {
                header.msg_control = control.as_mut_ptr().cast();
                header.msg_controllen = control.len() as _;
            }
            let wait = if self.dont_wait {
                libc::MSG_DONTWAIT
            } else {
                0
            };
            libc::sendmsg(
                self.socket.as_raw_fd(),
                &header,
                flags | libc::MSG_NOSIGNAL | wait,
            )
        };
        if sent < 0 {
            return Err(last_errno());
        }
        Ok(sent as i64)
    }

    /// The bytes to send, gathered from the caller's buffers.
    fn payload(&self, message: &Message, stream: bool) -> Result<Vec<u8>, i32> {
        let buffers: Vec<(u64, usize)> = if message.single {
            vec![(message.iov, message.iov_count as usize)]
        } else {
            if message.iov_count > IOV_MAX {
                return Err(libc::EMSGSIZE);
            }
            let size = std::mem::size_of::<libc::iovec>();
            let raw = self
                .caller
                .read(message.iov, message.iov_count as usize * size)?;
            raw.chunks_exact(size)
                .map(|chunk| {
                    // SAFETY: an iovec's worth of bytes; any bit pattern is valid.
                    let iov: libc::iovec =
                        unsafe { std::ptr::read_unaligned(chunk.as_ptr().cast()) };
                    (iov.iov_base as u64, iov.iov_len)
                })
                .collect()
        };
        let mut data = Vec::new();
        for (address, length) in buffers {
            let room = PAYLOAD_MAX - data.len();
            if length > room && !stream {
                return Err(libc::EMSGSIZE);
            }
            let take = length.min(room);
            data.extend(self.caller.read(address, take)?);
            if data.len() == PAYLOAD_MAX {
                break;
            }
        }
        Ok(data)
    }

    /// Rewrites the descriptors of `SCM_RIGHTS` in `control` to init's copies of the
    /// caller's descriptors (returned, to stay open until the send); refuses
    /// `SCM_CREDENTIALS`, which would carry init's identity or be refused as forged.
    fn translate_rights(&self, control: &mut [u8]) -> Result<Vec<OwnedFd>, i32> {
        let mut taken = Vec::new();
        if control.is_empty() {
            return Ok(taken);
        }
        // SAFETY: the header walks the copied control buffer with the kernel's macros,
        // which stay inside `msg_controllen`.
        unsafe {
            let mut header: libc::msghdr = std::mem::zeroed();
            header.msg_control = control.as_mut_ptr().cast();
            header.msg_controllen = control.len() as _;
            let mut message = libc::CMSG_FIRSTHDR(&header);
            while !message.is_null() {
                let level = (*message).cmsg_level;
                let kind = (*message).cmsg_type;
                if level != libc::SOL_SOCKET {
                    return Err(libc::EINVAL);
                }
                match kind {
                    libc::SCM_RIGHTS => {
                        let data = libc::CMSG_DATA(message).cast::<RawFd>();
                        let count = ((*message).cmsg_len as usize)
                            .saturating_sub(libc::CMSG_LEN(0) as usize)
                            / std::mem::size_of::<RawFd>();
                        for i in 0..count {
                            let theirs = std::ptr::read_unaligned(data.add(i));
                            let ours = steal(&self.caller.pidfd, theirs)?;
                            std::ptr::write_unaligned(data.add(i), ours.as_raw_fd());
                            taken.push(ours);
                        }
                    }
                    libc::SCM_CREDENTIALS => return Err(libc::EPERM),
                    _ => return Err(libc::EINVAL),
                }
                message = libc::CMSG_NXTHDR(&header, message);
            }
        }
        Ok(taken)
    }

    /// A send that failed for a broken connection raises SIGPIPE in the caller, as the
    /// kernel would have, unless the caller asked it not to.
    fn after_send(&self, sent: &Outcome, flags: i32) {
        if *sent == Err(libc::EPIPE) && flags & libc::MSG_NOSIGNAL == 0 {
            // SAFETY: a signal to the calling thread of the sandbox.
            unsafe {
                libc::syscall(
                    libc::SYS_tgkill,
                    self.caller.tgid(),
                    self.caller.tid,
                    libc::SIGPIPE,
                )
            };
        }
    }

    fn send_many(&self, vector: u64, count: u64, flags: i32) -> Outcome {
        let entry = std::mem::size_of::<libc::mmsghdr>() as u64;
        let mut sent = 0;
        for i in 0..count.min(IOV_MAX) {
            let at = vector + i * entry;
            let result = Message::at(&self.caller, at).and_then(|m| self.send(&m, flags));
            match result {
                Ok(bytes) => {
                    let length = (bytes as u32).to_ne_bytes();
                    self.caller
                        .write(at + std::mem::size_of::<libc::msghdr>() as u64, &length)?;
                    sent += 1;
                }
                Err(e) if sent == 0 => {
                    self.after_send(&Err(e), flags);
                    return Err(e);
                }
                Err(_) => break,
            }
        }
        Ok(sent)
    }
}

fn unix_address(path: &[u8]) -> Vec<u8> {
    let mut address = (libc::AF_UNIX as libc::sa_family_t).to_ne_bytes().to_vec();
    address.extend_from_slice(path);
    address.push(0);
    address
}

/// `path` as the caller's `connect` would find it (from its working directory,
/// symlinks followed), as a descriptor pinning that file; its errno where it finds
/// none, ECONNREFUSED for a file that is no socket, as the kernel says.
fn resolve(caller: &Caller, path: &[u8]) -> Result<OwnedFd, i32> {
    // Names of the caller's own /proc entries mean the caller, not init.
    let path = if let Some(rest) = path.strip_prefix(b"/proc/self/") {
        [format!("/proc/{}/", caller.tgid()).as_bytes(), rest].concat()
    } else if let Some(rest) = path.strip_prefix(b"/proc/thread-self/") {
        [
            format!("/proc/{}/task/{}/", caller.tgid(), caller.tid).as_bytes(),
            rest,
        ]
        .concat()
    } else {
        path.to_vec()
    };
    let path = CString::new(path).map_err(|_| libc::EINVAL)?;
    let start = if path.as_bytes().first() == Some(&b'/') {
        None
    } else {
        let cwd = CString::new(format!("/proc/{}/cwd", caller.tid)).map_err(|_| libc::EINVAL)?;
        // SAFETY: a NUL-terminated path; the descriptor is owned at once.
        let fd = unsafe {
            libc::open(
                cwd.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(last_errno());
        }
        // SAFETY: the kernel just made this descriptor for us.
        Some(unsafe { OwnedFd::from_raw_fd(fd) })
    };
    // SAFETY: a NUL-terminated path relative to a directory descriptor we hold.
    let fd = unsafe {
        libc::openat(
            start.as_ref().map_or(libc::AT_FDCWD, AsRawFd::as_raw_fd),
            path.as_ptr(),
            libc::O_PATH | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(last_errno());
    }
    // SAFETY: the kernel just made this descriptor for us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Whether `file` is a socket file bound by a socket of this sandbox.
fn own_socket_file(file: &OwnedFd) -> Result<bool, i32> {
    // SAFETY: fstat into a zeroed structure.
    let stat = unsafe {
        let mut stat: libc::stat = std::mem::zeroed();
        if libc::fstat(file.as_raw_fd(), &mut stat) != 0 {
            return Err(last_errno());
        }
        stat
    };
    if stat.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(libc::ECONNREFUSED);
    }
    let errno = |e: std::io::Error| e.raw_os_error().unwrap_or(libc::EIO);
    // Listening and unconnected sockets first; connected ones (every accepted stream
    // among them) only when that found none: a bound datagram socket connected to the
    // caller still takes the caller's datagrams.
    let listening = crate::host_sockets::bound_files(false).map_err(errno)?;
    let identity = kernel_identity(file, &stat)?;
    if listening.contains(&identity) {
        return Ok(true);
    }
    let fresh = (mount_device_of(file)?, identity.1);
    Ok(listening.contains(&fresh)
        || crate::host_sockets::bound_files(true)
            .map_err(errno)?
            .contains(&fresh))
}

/// The file's superblock device and inode number as the kernel holds them, which is
/// what sock_diag reports. `stat` may say otherwise: btrfs gives each subvolume a
/// device of its own, overlayfs may renumber inodes. The inode comes from the
/// descriptor's fdinfo (Linux 5.14; `stat`'s before), the device from the mount table
/// entry of the descriptor's mount.
fn kernel_identity(file: &OwnedFd, stat: &libc::stat) -> Result<(u64, u32), i32> {
    let io = |e: std::io::Error| e.raw_os_error().unwrap_or(libc::EIO);
    let info =
        std::fs::read_to_string(format!("/proc/self/fdinfo/{}", file.as_raw_fd())).map_err(io)?;
    let field = |name: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|value| value.trim().parse::<u64>().ok())
    };
    let mount = field("mnt_id:").ok_or(libc::EIO)?;
    let inode = field("ino:").unwrap_or(stat.st_ino) as u32;
    let known = MOUNT_DEVICES
        .lock()
        .ok()
        .and_then(|devices| devices.get(&mount).copied());
    let device = match known {
        Some(device) => device,
        None => {
            let device = mount_device(mount)?;
            if let Ok(mut devices) = MOUNT_DEVICES.lock() {
                devices.insert(mount, device);
            }
            device
        }
    };
    Ok((device, inode))
}

/// The devices of the mounts seen so far: a mount keeps its device, and the sandbox's
/// mount table changes only where the host's propagates into it. A refusal is checked
/// again against the table as it is now ([`own_socket_file`]).
static MOUNT_DEVICES: std::sync::LazyLock<std::sync::Mutex<std::collections::HashMap<u64, u64>>> =
    std::sync::LazyLock::new(Default::default);

/// The superblock device of the mount `file` is on, read afresh.
fn mount_device_of(file: &OwnedFd) -> Result<u64, i32> {
    let io = |e: std::io::Error| e.raw_os_error().unwrap_or(libc::EIO);
    let info =
        std::fs::read_to_string(format!("/proc/self/fdinfo/{}", file.as_raw_fd())).map_err(io)?;
    let mount = info
        .lines()
        .find_map(|line| line.strip_prefix("mnt_id:"))
        .and_then(|value| value.trim().parse::<u64>().ok())
        .ok_or(libc::EIO)?;
    mount_device(mount)
}

/// The superblock device of mount `mount`, from this process's mount table.
fn mount_device(mount: u64) -> Result<u64, i32> {
    let io = |e: std::io::Error| e.raw_os_error().unwrap_or(libc::EIO);
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").map_err(io)?;
    mounts
        .lines()
        .find_map(|line| {
            let mut fields = line.split(' ');
            if fields.next()?.parse::<u64>().ok()? != mount {
                return None;
            }
            let (major, minor) = fields.nth(1)?.split_once(':')?;
            Some(libc::makedev(major.parse().ok()?, minor.parse().ok()?))
        })
        .ok_or(libc::EIO)
}
