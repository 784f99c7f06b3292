//! Fetching a URL so that the address checked is the address connected to.
//!
//! ureq's name resolver and TCP connector are replaced: the resolver looks the name
//! up once and judges every answer (one refused answer refuses the host), and the
//! connector opens sockets only to the addresses the resolver returned, judging each
//! again before it connects. Redirects are followed here, not by ureq, so that every
//! hop passes the same screening (scheme, metadata names, blocklist) before its own
//! lookup. No proxy from the environment is used: a proxy would resolve names itself.

use crate::policy::NetPolicy;
use crate::screen::{host_of, judge_address, Refusal};
use std::fmt;
use std::io;
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;
use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, LazyBuffers, NextTimeout, RustlsConnector, Transport,
};

/// Name lookup. The system resolver by default; tests inject answers.
pub trait Lookup: Send + Sync + 'static {
    fn lookup(&self, host: &str, port: u16) -> io::Result<Vec<IpAddr>>;
}

/// `getaddrinfo` through the standard library.
pub struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup(&self, host: &str, port: u16) -> io::Result<Vec<IpAddr>> {
        Ok((host, port).to_socket_addrs()?.map(|a| a.ip()).collect())
    }
}

/// Opening a TCP connection to an address already judged. Tests inject one that
/// records the addresses it is asked for.
pub trait Dial: Send + Sync + 'static {
    fn dial(&self, address: SocketAddr, timeout: Option<Duration>) -> io::Result<TcpStream>;
}

pub struct SystemDial;

impl Dial for SystemDial {
    fn dial(&self, address: SocketAddr, timeout: Option<Duration>) -> io::Result<TcpStream> {
        match timeout {
            Some(t) => TcpStream::connect_timeout(&address, t),
            None => TcpStream::connect(address),
        }
    }
}

/// Bounds of one fetch.
#[derive(Debug, Clone)]
pub struct Limits {
    /// The whole fetch, redirects and body included.
    pub timeout: Duration,
    /// Largest body read; a bigger one is an error, not a silent cut.
    pub max_body_bytes: u64,
    pub max_redirects: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            timeout: Duration::from_secs(30),
            max_body_bytes: 10 * 1024 * 1024,
            max_redirects: 10,
        }
    }
}

/// A fetched response (any status).
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The URL after redirects.
    pub url: String,
    pub status: u16,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
}

#[derive(Debug)]
pub enum FetchError {
    Refused(Refusal),
    TooLarge { limit: u64 },
    Timeout(Duration),
    TooManyRedirects(u32),
    Transport(String),
}

impl fmt::Display for FetchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FetchError::Refused(refusal) => refusal.fmt(f),
            FetchError::TooLarge { limit } => write!(
                f,
                "The response is larger than the {} MB limit and was not read",
                limit / (1024 * 1024)
            ),
            FetchError::Timeout(after) => write!(
                f,
                "Timed out after {}s; the page may be too large or unresponsive. Try browser_navigate instead.",
                after.as_secs()
            ),
            FetchError::TooManyRedirects(n) => write!(f, "More than {n} redirects"),
            FetchError::Transport(why) => write!(f, "Fetch failed: {why}"),
        }
    }
}

impl std::error::Error for FetchError {}

struct Guard {
    policy: NetPolicy,
    lookup: Arc<dyn Lookup>,
    dial: Arc<dyn Dial>,
}

impl fmt::Debug for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Guard")
            .field("allow_private", &self.policy.allow_private)
            .finish()
    }
}

impl Guard {
    /// One lookup, every answer judged; the answers are the only addresses used.
    fn resolve_checked(
        &self,
        host: &str,
        port: u16,
        timeout: Option<Duration>,
    ) -> Result<Vec<SocketAddr>, Refusal> {
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = host.parse::<IpAddr>() {
            judge_address(host, ip, self.policy.allow_private)?;
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        let answers = lookup_within(&self.lookup, host, port, timeout).map_err(|e| {
            Refusal::Unresolvable {
                host: host.to_string(),
                reason: e.to_string(),
            }
        })?;
        if answers.is_empty() {
            return Err(Refusal::Unresolvable {
                host: host.to_string(),
                reason: "no addresses".into(),
            });
        }
        for ip in &answers {
            judge_address(host, *ip, self.policy.allow_private)?;
        }
        Ok(answers
            .into_iter()
            .map(|ip| SocketAddr::new(ip, port))
            .collect())
    }
}

/// The lookup on a helper thread so a hanging resolver cannot outlast the timeout.
fn lookup_within(
    lookup: &Arc<dyn Lookup>,
    host: &str,
    port: u16,
    timeout: Option<Duration>,
) -> io::Result<Vec<IpAddr>> {
    let Some(timeout) = timeout else {
        return lookup.lookup(host, port);
    };
    let (send, receive) = mpsc::channel();
    let (lookup, name) = (Arc::clone(lookup), host.to_string());
    std::thread::spawn(move || {
        let _ = send.send(lookup.lookup(&name, port));
    });
    receive
        .recv_timeout(timeout)
        .unwrap_or_else(|_| Err(io::Error::new(io::ErrorKind::TimedOut, "lookup timed out")))
}

fn finite(timeout: &NextTimeout) -> Option<Duration> {
    (!timeout.after.is_not_happening()).then(|| *timeout.after)
}

/// A TCP socket opened by [`PinnedTcp`] (ureq's own TCP transport is not public).
#[derive(Debug)]
struct PinnedTransport {
    stream: TcpStream,
    buffers: LazyBuffers,
}

fn io_failure(error: io::Error, reason: ureq::Timeout) -> ureq::Error {
    match error.kind() {
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => ureq::Error::Timeout(reason),
        _ => ureq::Error::Io(error),
    }
}

impl Transport for PinnedTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        let timeout = timeout.for_write();
        if timeout.after.is_zero() {
            return Err(ureq::Error::Timeout(timeout.reason));
        }
        self.stream
            .set_write_timeout(timeout.not_zero().map(|d| *d))?;
        let output = &self.buffers.output()[..amount];
        self.stream
            .write_all(output)
            .map_err(|e| io_failure(e, timeout.reason))
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        let timeout = timeout.for_read();
        if timeout.after.is_zero() {
            return Err(ureq::Error::Timeout(timeout.reason));
        }
        self.stream
            .set_read_timeout(timeout.not_zero().map(|d| *d))?;
        let amount = loop {
            match self.stream.read(self.buffers.input_append_buf()) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other.map_err(|e| io_failure(e, timeout.reason))?,
            }
        };
        self.buffers.input_appended(amount);
        Ok(amount > 0)
    }

    fn is_open(&mut self) -> bool {
        // Open and idle: a non-blocking read would block.
        if self.stream.set_nonblocking(true).is_err() {
            return false;
        }
        let mut probe = [0u8];
        let idle =
            matches!(self.stream.read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock);
        self.stream.set_nonblocking(false).is_ok() && idle
    }
}

fn refused(refusal: Refusal) -> ureq::Error {
    ureq::Error::Other(Box::new(refusal))
}

#[derive(Debug)]
struct PinnedResolver(Arc<Guard>);

impl Resolver for PinnedResolver {
    fn resolve(
        &self,
        uri: &ureq::http::Uri,
        _config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let host = uri.host().ok_or(ureq::Error::HostNotFound)?;
        let https = uri.scheme_str() == Some("https");
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let addresses = self
            .0
            .resolve_checked(host, port, finite(&timeout))
            .map_err(refused)?;
        let mut out = self.empty();
        for address in addresses.into_iter().take(16) {
            out.push(address);
        }
        Ok(out)
    }
}

#[derive(Debug)]
struct PinnedTcp(Arc<Guard>);

impl Connector<()> for PinnedTcp {
    type Out = PinnedTransport;

    fn connect(
        &self,
        details: &ConnectionDetails,
        _chained: Option<()>,
    ) -> Result<Option<PinnedTransport>, ureq::Error> {
        let host = details.uri.host().unwrap_or_default();
        // Judged again here, so no path that skips the resolver reaches a socket.
        for address in details.addrs.iter() {
            judge_address(host, address.ip(), self.0.policy.allow_private).map_err(refused)?;
        }
        let mut last = None;
        for address in details.addrs.iter() {
            match self.0.dial.dial(*address, finite(&details.timeout)) {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    let buffers = LazyBuffers::new(
                        details.config.input_buffer_size(),
                        details.config.output_buffer_size(),
                    );
                    return Ok(Some(PinnedTransport { stream, buffers }));
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.map_or(ureq::Error::ConnectionFailed, ureq::Error::Io))
    }
}

/// Fetches URLs under a [`NetPolicy`].
#[derive(Clone)]
pub struct Fetcher {
    guard: Arc<Guard>,
}

impl Fetcher {
    pub fn new(policy: NetPolicy) -> Fetcher {
        Fetcher::with_parts(policy, Arc::new(SystemLookup), Arc::new(SystemDial))
    }

    /// A fetcher with its own name lookup and socket opening (tests).
    pub fn with_parts(policy: NetPolicy, lookup: Arc<dyn Lookup>, dial: Arc<dyn Dial>) -> Fetcher {
        Fetcher {
            guard: Arc::new(Guard {
                policy,
                lookup,
                dial,
            }),
        }
    }

    pub fn policy(&self) -> &NetPolicy {
        &self.guard.policy
    }

    /// For URLs that a third party will fetch (an extract provider): the screening of
    /// [`NetPolicy::screen`] plus one lookup with every answer judged. The third party
    /// resolves again, which this cannot prevent; [`Fetcher::get`] has no such gap.
    pub fn preflight(&self, raw: &str, timeout: Duration) -> Result<String, Refusal> {
        let url = self.guard.policy.screen(raw)?;
        let host = host_of(&url).ok_or(Refusal::NoHost)?;
        let port = url.port_or_known_default().unwrap_or(80);
        self.guard.resolve_checked(&host, port, Some(timeout))?;
        Ok(url.to_string())
    }

    /// For a request that another program makes on the model's behalf (a browser's
    /// redirect hop or subresource): the checks of [`NetPolicy::screen_hop`] (a secret in
    /// the URL is the page's choice, not refused here) plus one lookup with every answer
    /// judged. The other program resolves again, which this cannot prevent.
    pub fn check_hop(&self, raw: &str, timeout: Duration) -> Result<url::Url, Refusal> {
        let url = self.guard.policy.screen_hop(raw)?;
        let host = host_of(&url).ok_or(Refusal::NoHost)?;
        let port = url.port_or_known_default().unwrap_or(80);
        self.guard.resolve_checked(&host, port, Some(timeout))?;
        Ok(url)
    }

    fn agent(&self, limits: &Limits) -> ureq::Agent {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(limits.timeout))
            .max_redirects(0)
            .http_status_as_error(false)
            .proxy(None)
            .user_agent(concat!("hermes-tools/", env!("CARGO_PKG_VERSION")))
            .tls_config(crate::tls_config())
            .build();
        let connector = PinnedTcp(Arc::clone(&self.guard)).chain(RustlsConnector::default());
        ureq::Agent::with_parts(config, connector, PinnedResolver(Arc::clone(&self.guard)))
    }

    /// GET a URL the model supplied: screened ([`NetPolicy::screen`]), each hop
    /// resolved once and connected to only at the judged addresses, redirects
    /// screened again, the body read up to the cap.
    pub fn get(&self, raw: &str, limits: &Limits) -> Result<Fetched, FetchError> {
        let mut url = self.guard.policy.screen(raw).map_err(FetchError::Refused)?;
        let agent = self.agent(limits);
        for _ in 0..=limits.max_redirects {
            let mut response = agent
                .get(url.as_str())
                .header(
                    "Accept",
                    "text/html,application/xhtml+xml,text/plain;q=0.9,application/pdf;q=0.8,*/*;q=0.5",
                )
                .call()
                .map_err(|e| fetch_error(e, limits))?;
            let status = response.status().as_u16();
            let location = response
                .headers()
                .get("location")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            if matches!(status, 301 | 302 | 303 | 307 | 308) {
                if let Some(location) = location {
                    let next = url
                        .join(&location)
                        .map_err(|e| FetchError::Transport(format!("bad redirect target: {e}")))?;
                    url = self
                        .guard
                        .policy
                        .screen_hop(next.as_str())
                        .map_err(FetchError::Refused)?;
                    continue;
                }
            }
            let content_type = response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let declared = response
                .headers()
                .get("content-length")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok());
            if declared.is_some_and(|n| n > limits.max_body_bytes) {
                return Err(FetchError::TooLarge {
                    limit: limits.max_body_bytes,
                });
            }
            let body = response
                .body_mut()
                .with_config()
                .limit(limits.max_body_bytes)
                .read_to_vec()
                .map_err(|e| fetch_error(e, limits))?;
            return Ok(Fetched {
                url: url.to_string(),
                status,
                content_type,
                body,
            });
        }
        Err(FetchError::TooManyRedirects(limits.max_redirects))
    }
}

fn fetch_error(error: ureq::Error, limits: &Limits) -> FetchError {
    match error {
        ureq::Error::Other(inner) => match inner.downcast::<Refusal>() {
            Ok(refusal) => FetchError::Refused(*refusal),
            Err(other) => FetchError::Transport(other.to_string()),
        },
        ureq::Error::Timeout(_) => FetchError::Timeout(limits.timeout),
        ureq::Error::BodyExceedsLimit(limit) => FetchError::TooLarge { limit },
        ureq::Error::Io(e) if e.kind() == io::ErrorKind::TimedOut => {
            FetchError::Timeout(limits.timeout)
        }
        other => FetchError::Transport(other.to_string()),
    }
}
