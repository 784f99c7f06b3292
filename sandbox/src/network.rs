//! What a sandboxed command may reach on the network (`terminal.sandbox.network`).
//!
//! Every sandbox gets a network namespace of its own, so nothing of the host's
//! network stack is shared: not its loopback services, not its abstract unix sockets.
//! With [`Network::Off`] that namespace has only loopback. Otherwise the one way out is
//! an HTTP/HTTPS proxy the runtime runs ([`crate::proxy`]), which the command reaches
//! at `127.0.0.1:3128` inside its namespace (`HTTP_PROXY`, `HTTPS_PROXY` and
//! `ALL_PROXY` point there).
//!
//! The listening socket is made inside the sandbox's namespace but served outside:
//! the spawned child, before it becomes bubblewrap, makes a user and network namespace
//! of its own, brings loopback up, listens there and hands the listening socket (and a
//! pidfd of itself) back to the runtime over a socket pair ([`attach`]; the built-in
//! wall, which the runtime starts without a fork of itself, does the same as its first
//! step, told by `--proxy-channel`). The runtime
//! accepts on it, decides by [`Network::check`] and connects from the host's network
//! to the address it resolved and checked itself, so no second lookup can be steered
//! elsewhere. No process runs inside the sandbox for it, and no root is needed.
//!
//! The proxy carries what speaks HTTP or `CONNECT` (curl, pip, npm, cargo, git over
//! HTTPS, Python's urllib). Raw TCP, UDP and DNS from inside reach nothing: a program
//! that ignores the proxy settings fails to connect.

use std::net::IpAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::Command;

/// The proxy's port on the sandbox's own loopback.
pub const PROXY_PORT: u16 = 3128;

/// The config key that widens the sandbox's reach; every refusal names it.
pub const KEY: &str = "terminal.sandbox.network";

/// `terminal.sandbox.network`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Network {
    /// No network: a namespace with only loopback.
    Off,
    /// Through the runtime's proxy, to the hosts `allow` matches (see [`Network::check`]).
    /// `["*"]` is the default, `loopback-off`: every public address, none of the host's
    /// loopback or private networks.
    Proxied { allow: Vec<String> },
}

impl Default for Network {
    fn default() -> Self {
        Network::loopback_off()
    }
}

impl Network {
    pub const FORMS: &'static str =
        "off, loopback-off (the default), true (= loopback-off), false (= off), or {allow: [host, \"*.domain\", \"host:port\", ...]}";

    pub fn loopback_off() -> Network {
        Network::Proxied {
            allow: vec!["*".into()],
        }
    }

    /// A scalar setting: `off`/`false` or `loopback-off`/`true`.
    pub fn parse(word: &str) -> Result<Network, String> {
        match word.trim().to_ascii_lowercase().replace('_', "-").as_str() {
            "off" | "false" | "no" | "0" | "none" => Ok(Network::Off),
            "loopback-off" | "true" | "yes" | "on" | "1" | "" => Ok(Network::loopback_off()),
            other => Err(format!("{KEY} '{other}' is not one of {}", Network::FORMS)),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Network::Off => "off".into(),
            Network::Proxied { allow } if *allow == ["*"] => "loopback-off".into(),
            Network::Proxied { allow } => format!("allow {}", allow.join(", ")),
        }
    }

    /// The variables that send a command's HTTP clients through the proxy (none when off).
    pub fn proxy_env(&self) -> Vec<(String, String)> {
        if *self == Network::Off {
            return Vec::new();
        }
        let url = format!("http://127.0.0.1:{PROXY_PORT}");
        // The sandbox's own loopback is reached directly, but for names the allow-list
        // opens on the host (`localhost:8080`): those go to the proxy.
        let named = |local: &&str| match self {
            Network::Proxied { allow } => allow
                .iter()
                .any(|p| !is_wildcard(p) && matches(p, local, None)),
            Network::Off => false,
        };
        let local = ["localhost", "127.0.0.1", "::1"]
            .iter()
            .filter(|l| !named(l))
            .copied()
            .collect::<Vec<_>>()
            .join(",");
        let mut env = Vec::new();
        for name in ["http_proxy", "https_proxy", "all_proxy"] {
            env.push((name.to_string(), url.clone()));
            env.push((name.to_ascii_uppercase(), url.clone()));
        }
        env.push(("no_proxy".into(), local.clone()));
        env.push(("NO_PROXY".into(), local));
        env
    }

    /// Whether `host:port` may be reached at `address`: `Ok(())` or the refusal, which
    /// says how to open it. A host matched by a wildcard (`*`, `*.domain`) reaches
    /// public addresses only; the host's loopback and private networks need the host
    /// (or `host:port`) named itself.
    pub fn check(&self, host: &str, port: u16, address: Option<IpAddr>) -> Result<(), String> {
        let allow = match self {
            Network::Off => return Err(format!("the network is off ({KEY}: off)")),
            Network::Proxied { allow } => allow,
        };
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        let named = allow
            .iter()
            .any(|p| !is_wildcard(p) && matches(p, &host, Some(port)));
        let wild = allow
            .iter()
            .any(|p| is_wildcard(p) && matches(p, &host, Some(port)));
        if !named && !wild {
            return Err(format!(
                "{host}:{port} is not in {KEY}.allow; to open it add \"{host}\" to {KEY}.allow in config.yaml"
            ));
        }
        match address {
            Some(ip) if !named && !is_public(ip) => Err(format!(
                "{host}:{port} is {ip}, on the host's loopback or private network, which sandboxed commands do not \
                 reach; to open it name it in config.yaml: {KEY}: {{allow: [\"*\", \"{host}:{port}\"]}}"
            )),
            _ => Ok(()),
        }
    }
}

/// Who decides what a proxied sandbox may reach: asked once with the host name before
/// any lookup (`address` `None`), then for each address the name resolved to. The
/// terminal's sandboxes answer with [`Network`]; a program the runtime starts for a
/// tool (the browser) answers with that tool's own network policy.
pub trait Reach: Send + Sync {
    fn check(&self, host: &str, port: u16, address: Option<IpAddr>) -> Result<(), String>;
}

impl Reach for Network {
    fn check(&self, host: &str, port: u16, address: Option<IpAddr>) -> Result<(), String> {
        Network::check(self, host, port, address)
    }
}

/// What a client prints when the sandbox's network stopped it.
const CONNECT_FAILURES: &[&str] = &[
    "Connection refused",
    "Couldn't connect to server",
    "Failed to connect to",
    "Network is unreachable",
    "Could not resolve host",
    "Could not resolve proxy",
    "Temporary failure in name resolution",
    "Name or service not known",
    "No address associated with hostname",
    "getaddrinfo",
    "CONNECT tunnel failed",
    "Tunnel connection failed",
    KEY,
];

impl Network {
    /// When a sandboxed command's output shows a connection that failed, the note that
    /// says what the sandbox lets it reach and which key widens that.
    pub fn refusal_note(&self, output: &str) -> Option<String> {
        if !CONNECT_FAILURES.iter().any(|f| output.contains(f)) {
            return None;
        }
        // Without namespaces there is no proxy either: nothing gets out.
        let network = if crate::wall::confined_only() {
            &Network::Off
        } else {
            self
        };
        let reach = match network {
            Network::Off => "nothing outside the sandbox is reachable".to_string(),
            Network::Proxied { allow } => format!(
                "only HTTP and HTTPS through the runtime's proxy (HTTP_PROXY, 127.0.0.1:{PROXY_PORT} inside) get out, \
                 to {}; the host's loopback services (127.0.0.1 inside is the sandbox's own), its private networks and \
                 direct connections that bypass the proxy are out of reach",
                if *allow == ["*"] {
                    "public addresses".to_string()
                } else {
                    allow.join(", ")
                }
            ),
        };
        Some(format!(
            "The sandbox may have refused this connection: its network is {} ({KEY}), {reach}. Retrying another way \
                 does not lift it; the user can widen {KEY} in config.yaml: loopback-off (the outside world), or \
                 {{allow: [\"*\", \"127.0.0.1:PORT\"]}} to add a host service, or {{allow: [pypi.org, \"*.github.com\"]}} \
                 for listed hosts only.",
            network.describe()
        ))
    }
}

fn is_wildcard(pattern: &str) -> bool {
    pattern.starts_with('*')
}

/// `host`, `host:port`, `*.domain` (the domain and every name below it), `*` (all);
/// `port` `None` matches any port the pattern names.
fn matches(pattern: &str, host: &str, port: Option<u16>) -> bool {
    let pattern = pattern.trim().to_ascii_lowercase();
    let (name, wanted_port) = match pattern.rsplit_once(':') {
        Some((name, p)) if !name.contains(':') || name.ends_with(']') => match p.parse::<u16>() {
            Ok(p) => (name.to_string(), Some(p)),
            Err(_) => return false,
        },
        _ => (pattern.clone(), None),
    };
    if port.is_some() && wanted_port.is_some() && wanted_port != port {
        return false;
    }
    let name = name.trim_start_matches('[').trim_end_matches(']');
    match name.strip_prefix("*.") {
        _ if name == "*" => true,
        Some(domain) => host == domain || host.ends_with(&format!(".{domain}")),
        None => host == name,
    }
}

/// Reachable under a wildcard: not loopback, private, link-local, shared, multicast,
/// unspecified or documentation space (nor an IPv4 address wrapped in IPv6).
pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                || (a == 100 && (64..128).contains(&b))
                || (a == 198 && (b == 18 || b == 19))
                || a >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4() {
                return is_public(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || first == 0x2001 && v6.segments()[1] == 0xdb8)
        }
    }
}

/// Prepares `cmd` (which starts bubblewrap) so that its child makes the sandbox's
/// network namespace and hands its proxy listener to the proxy thread of this process,
/// which serves it until the child ends. `cmd` must be spawned with `proxied` wrap
/// options, or not at all.
pub fn attach(cmd: &mut Command, network: &Network) {
    attach_judged(cmd, std::sync::Arc::new(network.clone()));
}

/// [`attach`], with the proxy's decisions made by `reach`.
pub fn attach_judged(cmd: &mut Command, reach: std::sync::Arc<dyn Reach>) {
    use std::os::unix::process::CommandExt;
    if crate::wall::confined_only() {
        return; // no namespaces: the command has no network at all
    }
    let (ours, theirs) = match crate::launcher::protocol::socket_pair() {
        Ok(pair) => pair,
        Err(e) => {
            let why = format!("cannot prepare the sandbox's network: {e}");
            // SAFETY: the closure only builds an error.
            unsafe { cmd.pre_exec(move || Err(std::io::Error::other(why.clone()))) };
            return;
        }
    };
    let setup = ChildSetup::new(theirs);
    // SAFETY: the closure makes raw syscalls only, on memory prepared before the fork.
    unsafe {
        cmd.pre_exec(move || setup.run());
    }
    crate::proxy::serve(ours, reach);
}

/// What [`attach`] has the forked child do before it executes bubblewrap, done by the
/// built-in wall itself ([`crate::wall`]), which the server then starts with
/// `posix_spawn` (no fork of the whole server): a user and network namespace of this
/// process's own, loopback up, the proxy's listener in it, sent with a pidfd of this
/// process on `channel` (which is closed).
pub(crate) fn set_up_in_this_process(channel: OwnedFd) -> std::io::Result<()> {
    ChildSetup::new(channel).run()
}

/// Brings up the loopback interface of this process's (new) network namespace, as
/// bubblewrap does. Async-signal-safe: raw syscalls only.
pub(crate) fn loopback_up() -> std::io::Result<()> {
    // SAFETY: raw syscalls with a request structure that lives across them.
    unsafe {
        let control = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if control < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let mut request: libc::ifreq = std::mem::zeroed();
        for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
            *slot = *byte as libc::c_char;
        }
        let up = libc::ioctl(control, libc::SIOCGIFFLAGS, &mut request) == 0 && {
            request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            libc::ioctl(control, libc::SIOCSIFFLAGS, &request) == 0
        };
        let error = std::io::Error::last_os_error();
        libc::close(control);
        if up {
            Ok(())
        } else {
            Err(error)
        }
    }
}

/// What the child needs, formatted before the fork.
struct ChildSetup {
    channel: OwnedFd,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

impl ChildSetup {
    fn new(channel: OwnedFd) -> ChildSetup {
        // SAFETY: plain getters.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        ChildSetup {
            channel,
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        }
    }

    /// In the forked child: async-signal-safe syscalls only.
    fn run(&self) -> std::io::Result<()> {
        let fail = || Err(std::io::Error::last_os_error());
        // SAFETY: raw syscalls on our own process, with buffers that live across them.
        unsafe {
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) != 0 {
                return fail();
            }
            let files: [(&[u8], &[u8]); 3] = [
                (b"/proc/self/setgroups\0", b"deny"),
                (b"/proc/self/uid_map\0", &self.uid_map),
                (b"/proc/self/gid_map\0", &self.gid_map),
            ];
            for (path, content) in files {
                let fd = libc::open(path.as_ptr().cast(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return fail();
                }
                let written = libc::write(fd, content.as_ptr().cast(), content.len());
                libc::close(fd);
                if written != content.len() as isize {
                    return fail();
                }
            }
            if loopback_up().is_err() {
                return fail();
            }
            let listener = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            if listener < 0 {
                return fail();
            }
            let mut address: libc::sockaddr_in = std::mem::zeroed();
            address.sin_family = libc::AF_INET as libc::sa_family_t;
            address.sin_port = PROXY_PORT.to_be();
            address.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
            let bound = libc::bind(
                listener,
                (&address as *const libc::sockaddr_in).cast(),
                std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
            ) == 0
                && libc::listen(listener, 128) == 0;
            let pidfd = libc::syscall(libc::SYS_pidfd_open, libc::getpid(), 0) as RawFd;
            if !bound || pidfd < 0 {
                return fail();
            }
            let sent = send_fds(self.channel.as_raw_fd(), [listener, pidfd]);
            libc::close(listener);
            libc::close(pidfd);
            if !sent {
                return fail();
            }
        }
        Ok(())
    }
}

/// SCM_RIGHTS with one byte of data; async-signal-safe.
fn send_fds(channel: RawFd, fds: [RawFd; 2]) -> bool {
    // SAFETY: a sendmsg from buffers that outlive it.
    unsafe {
        let mut byte = [1u8];
        let mut iov = libc::iovec {
            iov_base: byte.as_mut_ptr().cast(),
            iov_len: 1,
        };
        // Room for the header and two descriptors, aligned for cmsghdr.
        let mut space = [0u64; 8];
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        message.msg_control = space.as_mut_ptr().cast();
        message.msg_controllen = libc::CMSG_SPACE(std::mem::size_of_val(&fds) as u32) as _;
        let header = libc::CMSG_FIRSTHDR(&message);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(std::mem::size_of_val(&fds) as u32) as _;
        std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(header).cast(), 2);
        libc::sendmsg(channel, &message, 0) == 1
    }
}

/// The listener and the child's pidfd, or `None` when the child never sent them
/// (the spawn failed and the other end was closed).
pub(crate) fn receive_listener(channel: &OwnedFd) -> Option<(OwnedFd, OwnedFd)> {
    let mut byte = [0u8];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut space = [0u64; 8];
    // SAFETY: a recvmsg into buffers that outlive it; descriptors received are ours.
    unsafe {
        let mut message: libc::msghdr = std::mem::zeroed();
        message.msg_iov = &mut iov;
        message.msg_iovlen = 1;
        message.msg_control = space.as_mut_ptr().cast();
        message.msg_controllen = std::mem::size_of_val(&space) as _;
        if libc::recvmsg(channel.as_raw_fd(), &mut message, libc::MSG_CMSG_CLOEXEC) != 1 {
            return None;
        }
        let header = libc::CMSG_FIRSTHDR(&message);
        if header.is_null()
            || (*header).cmsg_type != libc::SCM_RIGHTS
            || (*header).cmsg_len as usize != libc::CMSG_LEN(8) as usize
        {
            return None;
        }
        let mut fds = [0 as RawFd; 2];
        std::ptr::copy_nonoverlapping(libc::CMSG_DATA(header).cast(), fds.as_mut_ptr(), 2);
        Some((OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_reach_public_addresses_only() {
        let net = Network::loopback_off();
        assert!(net
            .check("pypi.org", 443, Some("151.101.0.223".parse().unwrap()))
            .is_ok());
        for local in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.1.1",
            "169.254.169.254",
            "::1",
            "::ffff:127.0.0.1",
            "fd00::1",
            "100.64.0.1",
            "0.0.0.0",
        ] {
            let refused = net
                .check("h", 80, Some(local.parse().unwrap()))
                .unwrap_err();
            assert!(refused.contains(KEY), "{local}: {refused}");
        }
    }

    #[test]
    fn allow_lists_match_names_domains_and_ports() {
        let net = Network::Proxied {
            allow: vec![
                "pypi.org".into(),
                "*.github.com".into(),
                "localhost:8080".into(),
            ],
        };
        let public = Some("140.82.112.3".parse().unwrap());
        assert!(net.check("pypi.org", 443, public).is_ok());
        assert!(net.check("api.github.com", 443, public).is_ok());
        assert!(net.check("github.com", 443, public).is_ok());
        assert!(net.check("evilgithub.com", 443, public).is_err());
        assert!(net.check("files.pythonhosted.org", 443, public).is_err());
        assert!(net
            .check("localhost", 8080, Some("127.0.0.1".parse().unwrap()))
            .is_ok());
        assert!(net
            .check("localhost", 8081, Some("127.0.0.1".parse().unwrap()))
            .is_err());
        // A listed domain's wildcard does not open a private address it resolves to.
        assert!(net
            .check("x.github.com", 443, Some("10.0.0.1".parse().unwrap()))
            .is_err());
        assert!(Network::Off.check("pypi.org", 443, public).is_err());
    }

    #[test]
    fn scalar_forms_keep_the_old_booleans() {
        assert_eq!(Network::parse("false").unwrap(), Network::Off);
        assert_eq!(Network::parse("true").unwrap(), Network::loopback_off());
        assert_eq!(
            Network::parse("loopback-off").unwrap(),
            Network::loopback_off()
        );
        assert!(Network::parse("maybe").unwrap_err().contains(KEY));
    }
}
