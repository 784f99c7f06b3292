//! The launcher's side inside the sandbox: a loop that starts one command at a time and,
//! when the command's first process ends, kills everything else in the sandbox before
//! it answers — so, as with a sandbox per command, nothing a command started outlives it.

use super::protocol::{self, Request};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// Serves requests on `control` until the server closes it; returns the exit status.
pub fn serve(control: RawFd) -> i32 {
    // SAFETY: plain syscalls on our own process and on a descriptor we were handed.
    unsafe {
        // The sweep signals every process this one may signal: only ever inside a
        // sandbox's own PID namespace, where bubblewrap's init is 1 and we are 2, and
        // only when started with the channel a server set up.
        let mut stat: libc::stat = std::mem::zeroed();
        let is_socket = libc::fstat(control, &mut stat) == 0 && (stat.st_mode & libc::S_IFMT) == libc::S_IFSOCK;
        if libc::getpid() != 2 || !is_socket {
            eprintln!("{} is only run by the terminal inside its sandbox", super::LAUNCHER_ARG);
            return 2;
        }
        if libc::fcntl(control, libc::F_SETFD, libc::FD_CLOEXEC) != 0 {
            return 2;
        }
        // Not dumpable: a command (same uid, no capabilities) can neither ptrace this
        // process nor take its descriptors (pidfd_getfd) or read its memory, so no
        // command reaches the next command's request.
        libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        // Orphans of a command become our children, so the sweep can wait for all of them.
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
        // Descriptors the server happened to pass down are no business of the commands.
        libc::syscall(libc::SYS_close_range, 3u32, (control - 1) as u32, 0u32);
        libc::syscall(libc::SYS_close_range, (control + 1) as u32, u32::MAX, 0u32);
    }
    // SAFETY: the descriptor is ours from here on.
    let control = unsafe { OwnedFd::from_raw_fd(control) };
    if protocol::send_line(&control, "ready").is_err() {
        return 2;
    }
    loop {
        match protocol::receive(&control) {
            Ok(Some(Request::Run { cwd, argv, env, output, extra })) => {
                let status = run(&control, &cwd, &argv, &env, output, extra);
                if protocol::send_line(&control, &format!("exit {status}")).is_err() {
                    return 0;
                }
            }
            Ok(Some(Request::Kill { .. })) => {}
            // The server closed the channel (or sent garbage): end everything and go.
            Ok(None) | Err(_) => {
                sweep(None, &mut None);
                return 0;
            }
        }
    }
}

/// Starts one command and waits for it (and for a kill request); everything it left
/// behind is killed before this returns the command's status (`-N` for signal N).
fn run(control: &OwnedFd, cwd: &[u8], argv: &[Vec<u8>], env: &[Vec<u8>], output: OwnedFd, extra: Vec<OwnedFd>) -> i32 {
    let Some(exec) = Exec::new(cwd, argv, env) else {
        let _ = write_all(&output, b"the sandbox launcher got an empty or malformed command\n");
        return 126;
    };
    // SAFETY: this process is single-threaded, so the child may run ordinary code.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        let _ = write_all(&output, format!("cannot start the command: {}\n", std::io::Error::last_os_error()).as_bytes());
        return 126;
    }
    if pid == 0 {
        exec.run_in_child(&output, &extra);
    }
    drop(output);
    drop(extra);
    let mut status = None;
    let pidfd = pidfd_open(pid);
    loop {
        reap(pid, &mut status);
        if status.is_some() {
            break;
        }
        let mut fds = vec![libc::pollfd { fd: control.as_raw_fd(), events: libc::POLLIN, revents: 0 }];
        if let Some(fd) = &pidfd {
            fds.push(libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 });
        }
        // Without a pidfd (old kernels) the exit is noticed by polling.
        let wait = if pidfd.is_some() { -1 } else { 5 };
        // SAFETY: valid pollfds.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, wait) };
        if fds[0].revents != 0 {
            match protocol::receive(control) {
                Ok(Some(Request::Kill { grace })) => {
                    terminate(pid, grace, &mut status);
                    break;
                }
                Ok(Some(Request::Run { .. })) => {}
                Ok(None) | Err(_) => {
                    sweep(Some(pid), &mut status);
                    std::process::exit(0);
                }
            }
        }
    }
    sweep(Some(pid), &mut status);
    status.unwrap_or(-libc::SIGKILL)
}

/// What the child needs for execve, built before the fork.
struct Exec {
    cwd: CString,
    argv: Vec<CString>,
    env: Vec<CString>,
}

impl Exec {
    fn new(cwd: &[u8], argv: &[Vec<u8>], env: &[Vec<u8>]) -> Option<Exec> {
        let c = |bytes: &[u8]| CString::new(bytes.to_vec()).ok();
        let argv: Vec<CString> = argv.iter().map(|a| c(a)).collect::<Option<_>>()?;
        let env: Vec<CString> = env.iter().map(|e| c(e)).collect::<Option<_>>()?;
        (!argv.is_empty()).then_some(Exec { cwd: c(cwd)?, argv, env })
    }

    /// In the forked child: its own session, output on the pipe, no input, `extra` as
    /// descriptors 3, 4, ..., then exec.
    fn run_in_child(&self, output: &OwnedFd, extra: &[OwnedFd]) -> ! {
        let argv: Vec<*const libc::c_char> = self.argv.iter().map(|a| a.as_ptr()).chain([std::ptr::null()]).collect();
        let env: Vec<*const libc::c_char> = self.env.iter().map(|e| e.as_ptr()).chain([std::ptr::null()]).collect();
        // SAFETY: standard descriptor plumbing in a fresh child, then exec or exit.
        unsafe {
            // Rust ignores SIGPIPE in this process; a command starts with every signal at
            // its default, as a child of the server would (`yes | head` must end quietly).
            for signal in 1..libc::SIGRTMIN() {
                libc::signal(signal, libc::SIG_DFL);
            }
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
            libc::setsid();
            libc::dup2(output.as_raw_fd(), 1);
            libc::dup2(output.as_raw_fd(), 2);
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY);
            if null >= 0 {
                libc::dup2(null, 0);
            } else {
                libc::close(0);
            }
            // Copied above every target first, so no placement overwrites the source of
            // another (the copies close on exec).
            let lowest_copy = 3 + extra.len() as libc::c_int;
            let copies: Vec<libc::c_int> = extra.iter().map(|fd| libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, lowest_copy)).collect();
            for (target, copy) in (3..).zip(copies) {
                if copy < 0 || libc::dup2(copy, target) < 0 {
                    libc::_exit(126);
                }
            }
            if libc::chdir(self.cwd.as_ptr()) != 0 {
                libc::chdir(c"/".as_ptr());
            }
            libc::execve(argv[0], argv.as_ptr(), env.as_ptr());
            let message = format!("cannot start {}: {}\n", self.argv[0].to_string_lossy(), std::io::Error::last_os_error());
            libc::write(2, message.as_ptr().cast(), message.len());
            libc::_exit(127);
        }
    }
}

fn pidfd_open(pid: libc::pid_t) -> Option<OwnedFd> {
    // SAFETY: pidfd_open returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a fresh descriptor owned by nobody else.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// A `waitpid` status as the terminal reports it: the exit code, or `-N` for signal N.
pub fn status_code(raw: libc::c_int) -> i32 {
    if libc::WIFEXITED(raw) {
        libc::WEXITSTATUS(raw)
    } else if libc::WIFSIGNALED(raw) {
        -libc::WTERMSIG(raw)
    } else {
        -1
    }
}

/// Reaps every child that has ended, noting the command's own status. Returns false
/// once no child is left at all.
fn reap(main: libc::pid_t, status: &mut Option<i32>) -> bool {
    loop {
        let mut raw = 0;
        // SAFETY: waitpid on our own children.
        let pid = unsafe { libc::waitpid(-1, &mut raw, libc::WNOHANG) };
        // The error first: `main` is -1 when there is no command (the final sweep).
        if pid < 0 {
            return std::io::Error::last_os_error().raw_os_error() != Some(libc::ECHILD);
        } else if pid == 0 {
            return true;
        } else if pid == main {
            *status = Some(status_code(raw));
        }
    }
}

/// SIGTERM (and SIGCONT) to everything in the sandbox, up to `grace` for it to end.
fn terminate(main: libc::pid_t, grace: Duration, status: &mut Option<i32>) {
    // SAFETY: kill(-1) reaches every process of this PID namespace but us and its init.
    unsafe {
        libc::kill(-1, libc::SIGTERM);
        libc::kill(-1, libc::SIGCONT);
    }
    let deadline = Instant::now() + grace;
    while reap(main, status) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// SIGKILL to everything in the sandbox but us and its init, until no process of ours is
/// left (a process forking while the signal went round is caught on the next round).
fn sweep(main: Option<libc::pid_t>, status: &mut Option<i32>) {
    let main = main.unwrap_or(-1);
    let mut pause = Duration::from_micros(20);
    loop {
        // SAFETY: as in `terminate`.
        let signalled = unsafe { libc::kill(-1, libc::SIGKILL) } == 0;
        let children_left = reap(main, status);
        if !signalled && !children_left {
            return;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(5));
    }
}

fn write_all(fd: &OwnedFd, mut bytes: &[u8]) -> std::io::Result<()> {
    while !bytes.is_empty() {
        // SAFETY: writing from a valid buffer.
        let n = unsafe { libc::write(fd.as_raw_fd(), bytes.as_ptr().cast(), bytes.len()) };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        bytes = &bytes[n as usize..];
    }
    Ok(())
}
