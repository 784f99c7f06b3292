//! The HTTP/HTTPS proxy that is a sandbox's one way out (see [`crate::network`]).
//!
//! It serves each sandbox's listener until that sandbox's first process ends. Each
//! connection names its destination once: `CONNECT host:port` (HTTPS, anything
//! tunnelled) or a request with an absolute `http://` URL. The host is checked against
//! the policy before any lookup, then resolved once; the connection goes to the first
//! address the policy accepts, by address. A refusal is an HTTP 403 whose reason and
//! body name the config key that opens it.

use crate::network::Reach;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The most a request head may take.
const MAX_HEAD: usize = 64 * 1024;
/// The most connections one sandbox may hold open at once: each is a thread (two while
/// relaying) of the server, which a command must not be able to exhaust.
const MAX_CONNECTIONS: usize = 256;

/// Serves the proxy listener a sandbox's first process sends on `channel`
/// ([`crate::network::set_up_in_this_process`]) until that process ends. Every sandbox
/// of this process is served by one thread, started with the first: a thread for each
/// would be one more stack, and one more allocator arena, for every live sandbox, and
/// both stay in the process after the sandbox ends. If that thread cannot be started,
/// the listener is never served: no network, as with off.
pub(crate) fn serve(channel: OwnedFd, reach: Arc<dyn Reach>) {
    if let Some(acceptor) = Acceptor::shared() {
        lock(&acceptor.arriving).push(Watched::Channel { channel, reach });
        acceptor.wake();
    }
}

/// The thread that accepts for every sandbox, and what it is handed.
struct Acceptor {
    /// Channels handed over since the thread last looked.
    arriving: Mutex<Vec<Watched>>,
    /// An eventfd the thread waits on beside the sandboxes: written when one arrives.
    wakeup: OwnedFd,
}

/// One sandbox, as the accepting thread knows it.
enum Watched {
    /// Its first process has not sent the listener yet.
    Channel {
        channel: OwnedFd,
        reach: Arc<dyn Reach>,
    },
    /// Its listener, served until `child` (a pidfd of its first process) ends.
    Serving {
        listener: TcpListener,
        child: OwnedFd,
        reach: Arc<dyn Reach>,
        open: Arc<AtomicUsize>,
    },
}

impl Acceptor {
    /// The running acceptor, started on the first call (and tried again on the next
    /// if it could not be).
    fn shared() -> Option<Arc<Acceptor>> {
        static SHARED: Mutex<Option<Arc<Acceptor>>> = Mutex::new(None);
        let mut shared = lock(&SHARED);
        if shared.is_none() {
            // SAFETY: eventfd makes a new descriptor, owned here.
            let wakeup = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
            if wakeup < 0 {
                return None;
            }
            let acceptor = Arc::new(Acceptor {
                arriving: Mutex::new(Vec::new()),
                // SAFETY: just made, and owned by nothing else.
                wakeup: unsafe { OwnedFd::from_raw_fd(wakeup) },
            });
            let running = Arc::clone(&acceptor);
            std::thread::Builder::new()
                .name("sandbox-proxy".into())
                .spawn(move || running.run())
                .ok()?;
            *shared = Some(acceptor);
        }
        shared.clone()
    }

    fn wake(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: an 8-byte write to our own eventfd. A full counter (never, in
        // practice) still leaves it readable, which is all a wake needs.
        unsafe { libc::write(self.wakeup.as_raw_fd(), one.as_ptr().cast(), one.len()) };
    }

    /// Waits on every sandbox's descriptors with one epoll set: a wait costs what is
    /// ready, not what is alive, so a sandbox that starts (two wakes, its channel then
    /// its listener) costs the same with ten sandboxes alive as with four hundred.
    fn run(&self) {
        // SAFETY: epoll_create1 makes a new descriptor, owned here.
        let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epoll < 0 {
            return; // no listener is served: no network, as with off
        }
        // SAFETY: just made, and owned by nothing else.
        let epoll = unsafe { OwnedFd::from_raw_fd(epoll) };
        let mut set = EpollSet {
            epoll,
            watched: HashMap::new(),
            next: 1,
        };
        if !set.add(self.wakeup.as_raw_fd(), WAKEUP) {
            return; // as above
        }
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 64];
        loop {
            // SAFETY: the kernel writes at most `events.len()` entries into `events`.
            let ready = unsafe {
                libc::epoll_wait(
                    set.epoll.as_raw_fd(),
                    events.as_mut_ptr(),
                    events.len() as i32,
                    -1,
                )
            };
            if ready < 0 {
                if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                // Nothing here can make the wait fail but memory: wait rather than spin.
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
            let ready: Vec<u64> = events[..ready as usize].iter().map(|e| e.u64).collect();
            // Ends first: a sandbox that ended is not served a connection it left.
            for &token in ready.iter().filter(|t| **t != WAKEUP && *t % 2 == FIRST) {
                set.first_ready(token / 2);
            }
            let mut refused = false;
            for &token in ready.iter().filter(|t| **t != WAKEUP && *t % 2 == LISTENER) {
                if let Some(Watched::Serving {
                    listener,
                    reach,
                    open,
                    ..
                }) = set.watched.get(&(token / 2))
                {
                    refused |= !accept(listener, reach, open);
                }
            }
            if refused {
                // Out of descriptors, say: the connection stays queued and its listener
                // readable, so the next wait would return at once.
                std::thread::sleep(Duration::from_millis(10));
            }
            if ready.contains(&WAKEUP) {
                let mut count = [0u8; 8];
                // SAFETY: an 8-byte read from our own non-blocking eventfd.
                unsafe { libc::read(self.wakeup.as_raw_fd(), count.as_mut_ptr().cast(), 8) };
                let arrived = std::mem::take(&mut *lock(&self.arriving));
                for one in arrived {
                    set.insert(one);
                }
            }
        }
    }
}

/// The token of the acceptor's eventfd; a sandbox's are `2 * key + FIRST` (its channel,
/// then the pidfd of its first process) and `2 * key + LISTENER`.
const WAKEUP: u64 = 0;
const FIRST: u64 = 0;
const LISTENER: u64 = 1;

/// The sandboxes the accepting thread watches, by key, and the epoll set that watches
/// their descriptors.
struct EpollSet {
    epoll: OwnedFd,
    watched: HashMap<u64, Watched>,
    next: u64,
}

impl EpollSet {
    fn add(&self, fd: RawFd, token: u64) -> bool {
        let mut event = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: registers a descriptor this set's owner keeps open while it is watched.
        unsafe { libc::epoll_ctl(self.epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut event) == 0 }
    }

    fn remove(&self, fd: RawFd) {
        // SAFETY: takes a descriptor out of the set; a null event is allowed since 2.6.9.
        unsafe {
            libc::epoll_ctl(
                self.epoll.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd,
                std::ptr::null_mut(),
            )
        };
    }

    /// Watches a sandbox that arrived (or whose listener came): a sandbox whose
    /// descriptors cannot be watched is let go, its listener never served.
    fn insert(&mut self, one: Watched) {
        let key = self.next;
        self.next += 1;
        self.watch(key, one);
    }

    fn watch(&mut self, key: u64, one: Watched) {
        let watching = match &one {
            Watched::Channel { channel, .. } => self.add(channel.as_raw_fd(), 2 * key + FIRST),
            Watched::Serving {
                listener, child, ..
            } => {
                let child_watched = self.add(child.as_raw_fd(), 2 * key + FIRST);
                if child_watched && !self.add(listener.as_raw_fd(), 2 * key + LISTENER) {
                    self.remove(child.as_raw_fd());
                    false
                } else {
                    child_watched
                }
            }
        };
        if watching {
            self.watched.insert(key, one);
        }
    }

    /// A sandbox's channel said something (its listener, or its end), or its first
    /// process ended.
    fn first_ready(&mut self, key: u64) {
        match self.watched.remove(&key) {
            Some(Watched::Channel { channel, reach }) => {
                self.remove(channel.as_raw_fd());
                // The listener, or an end without one (the child failed).
                if let Some(serving) = receive(&channel, reach) {
                    self.watch(key, serving);
                }
            }
            Some(Watched::Serving {
                listener, child, ..
            }) => {
                // The sandbox has ended: its listener closes.
                self.remove(listener.as_raw_fd());
                self.remove(child.as_raw_fd());
            }
            None => {}
        }
    }
}

/// The listener and pidfd a sandbox's first process sent on `channel`, to be served.
fn receive(channel: &OwnedFd, reach: Arc<dyn Reach>) -> Option<Watched> {
    let (listener, child) = crate::network::receive_listener(channel)?;
    let listener = TcpListener::from(listener);
    // A connection reset between the poll and the accept must not stall every sandbox.
    listener.set_nonblocking(true).ok()?;
    Some(Watched::Serving {
        listener,
        child,
        reach,
        open: Arc::new(AtomicUsize::new(0)),
    })
}

/// Takes one connection off `listener` and serves it on a thread of its own; false
/// when the system refused to hand one over that is waiting.
fn accept(listener: &TcpListener, reach: &Arc<dyn Reach>, open: &Arc<AtomicUsize>) -> bool {
    let mut client = match listener.accept() {
        Ok((client, _)) => client,
        Err(e) => {
            return matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock
                    | std::io::ErrorKind::Interrupted
                    | std::io::ErrorKind::ConnectionAborted
            )
        }
    };
    // The listener does not block; the connection does, as `handle` expects.
    if client.set_nonblocking(false).is_err() {
        return true;
    }
    if open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
        open.fetch_sub(1, Ordering::SeqCst);
        refuse(
            &mut client,
            503,
            &format!("this sandbox already has {MAX_CONNECTIONS} connections open"),
        );
        return true;
    }
    let reach = Arc::clone(reach);
    let held = Arc::clone(open);
    let spawned = std::thread::Builder::new()
        .name("sandbox-proxy-conn".into())
        .spawn(move || {
            handle(client, reach.as_ref());
            held.fetch_sub(1, Ordering::SeqCst);
        });
    if spawned.is_err() {
        open.fetch_sub(1, Ordering::SeqCst);
    }
    true
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

fn handle(mut client: TcpStream, reach: &dyn Reach) {
    let _ = client.set_read_timeout(Some(Duration::from_secs(30)));
    let Some((head, rest)) = read_head(&mut client) else {
        return;
    };
    let request = match parse(&head) {
        Ok(request) => request,
        Err(why) => return refuse(&mut client, 400, &why),
    };
    let upstream = match open(reach, &request.host, request.port) {
        Ok(stream) => stream,
        Err((status, why)) => return refuse(&mut client, status, &why),
    };
    let _ = client.set_read_timeout(None);
    let mut upstream_writer = match upstream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    };
    let sent = if request.connect {
        client.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
    } else {
        upstream_writer.write_all(&request.forwarded_head)
    };
    if sent.is_err() || upstream_writer.write_all(&rest).is_err() {
        return;
    }
    relay(client, upstream, upstream_writer);
}

/// Copies both ways until both sides are done.
fn relay(client: TcpStream, upstream: TcpStream, upstream_writer: TcpStream) {
    let Ok(client_writer) = client.try_clone() else {
        return;
    };
    let outbound = std::thread::spawn(move || copy_then_shut(client, upstream_writer));
    copy_then_shut(upstream, client_writer);
    let _ = outbound.join();
}

fn copy_then_shut(mut from: TcpStream, mut to: TcpStream) {
    let _ = std::io::copy(&mut from, &mut to);
    let _ = to.shutdown(std::net::Shutdown::Write);
}

fn read_head(client: &mut TcpStream) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut buf = Vec::with_capacity(4096);
    let mut chunk = [0u8; 4096];
    loop {
        let n = client.read(&mut chunk).ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buf.split_off(end + 4);
            return Some((buf, rest));
        }
        if buf.len() > MAX_HEAD {
            return None;
        }
    }
}

struct Request {
    connect: bool,
    host: String,
    port: u16,
    /// For a plain HTTP request: its head as the server gets it (origin-form target,
    /// no proxy headers, one request per connection).
    forwarded_head: Vec<u8>,
}

fn parse(head: &[u8]) -> Result<Request, String> {
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut parsed = httparse::Request::new(&mut headers);
    parsed
        .parse(head)
        .map_err(|e| format!("not an HTTP request: {e}"))?;
    let method = parsed.method.unwrap_or_default();
    let target = parsed.path.unwrap_or_default();
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = split_authority(target, 443)?;
        return Ok(Request {
            connect: true,
            host,
            port,
            forwarded_head: Vec::new(),
        });
    }
    let Some(after) = target.strip_prefix("http://") else {
        return Err(format!(
            "the proxy takes CONNECT or an absolute http:// URL, not '{target}'"
        ));
    };
    let (authority, path) = match after.find('/') {
        Some(i) => (&after[..i], &after[i..]),
        None => (after, "/"),
    };
    let (host, port) = split_authority(authority, 80)?;
    let mut out = format!("{method} {path} HTTP/1.1\r\n").into_bytes();
    for header in parsed.headers.iter() {
        let name = header.name.to_ascii_lowercase();
        if name.starts_with("proxy-") || name == "connection" || name == "keep-alive" {
            continue;
        }
        out.extend_from_slice(header.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(header.value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    Ok(Request {
        connect: false,
        host,
        port,
        forwarded_head: out,
    })
}

fn split_authority(authority: &str, default_port: u16) -> Result<(String, u16), String> {
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| format!("bad address '{authority}'"))?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(p) => p
            .parse()
            .map_err(|_| format!("bad port in '{authority}'"))?,
        None => default_port,
    };
    if host.is_empty() {
        return Err(format!("no host in '{authority}'"));
    }
    Ok((host.to_ascii_lowercase(), port))
}

/// Checks the name, resolves it once, and connects to an address the policy accepts.
fn open(reach: &dyn Reach, host: &str, port: u16) -> Result<TcpStream, (u16, String)> {
    reach.check(host, port, None).map_err(|why| (403, why))?;
    let addresses: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => (host, port)
            .to_socket_addrs()
            .map_err(|e| (502, format!("cannot resolve {host}: {e}")))?
            .collect(),
    };
    let mut refusal = None;
    let mut failure = None;
    for address in addresses {
        if let Err(why) = reach.check(host, port, Some(address.ip())) {
            refusal.get_or_insert(why);
            continue;
        }
        match TcpStream::connect_timeout(&address, Duration::from_secs(30)) {
            Ok(stream) => return Ok(stream),
            Err(e) => failure = Some(format!("cannot connect to {host}:{port} ({address}): {e}")),
        }
    }
    Err(match (failure, refusal) {
        (Some(failure), _) => (502, failure),
        (None, Some(refusal)) => (403, refusal),
        (None, None) => (502, format!("{host} has no address")),
    })
}

fn refuse(client: &mut TcpStream, status: u16, why: &str) {
    let body = format!("hermes-tools sandbox: {why}\n");
    // The reason phrase carries the message too: clients report it for a failed CONNECT.
    let reason: String = body
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = client.write_all(response.as_bytes());
}
