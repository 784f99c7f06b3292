//! The fetcher against real HTTP servers on loopback, with name lookup and socket
//! opening injected where a test needs an answer that the machine's DNS cannot give
//! (a "public" address that is really a loopback server).

use hermes_net::{Dial, FetchError, Fetcher, Limits, Lookup, NetPolicy, Refusal};
use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Serves each connection with `respond(path)`: raw response bytes.
fn serve(respond: impl Fn(&str) -> Vec<u8> + Send + Sync + 'static) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let respond = Arc::new(respond);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let respond = Arc::clone(&respond);
            std::thread::spawn(move || {
                let mut request = Vec::new();
                let mut buf = [0u8; 1024];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&request);
                let path = text.split_whitespace().nth(1).unwrap_or("/").to_string();
                let _ = stream.write_all(&respond(&path));
            });
        }
    });
    port
}

fn ok(body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

fn redirect(to: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .into_bytes()
}

/// Answers in turn from a script (the last answer repeats), counting the lookups.
struct ScriptedLookup {
    answers: Mutex<Vec<Vec<IpAddr>>>,
    calls: Mutex<Vec<String>>,
}

impl ScriptedLookup {
    fn new(answers: &[&[&str]]) -> Arc<ScriptedLookup> {
        Arc::new(ScriptedLookup {
            answers: Mutex::new(
                answers
                    .iter()
                    .map(|a| a.iter().map(|ip| ip.parse().unwrap()).collect())
                    .collect(),
            ),
            calls: Mutex::new(Vec::new()),
        })
    }
}

impl Lookup for ScriptedLookup {
    fn lookup(&self, host: &str, _port: u16) -> std::io::Result<Vec<IpAddr>> {
        self.calls.lock().unwrap().push(host.to_string());
        let mut answers = self.answers.lock().unwrap();
        Ok(if answers.len() > 1 {
            answers.remove(0)
        } else {
            answers[0].clone()
        })
    }
}

/// Records every address it is asked to connect to; connects the pretend public
/// address 93.184.216.34 to the loopback server instead, and nothing else.
struct RecordingDial {
    server: u16,
    dialed: Mutex<Vec<SocketAddr>>,
}

impl Dial for RecordingDial {
    fn dial(&self, address: SocketAddr, _timeout: Option<Duration>) -> std::io::Result<TcpStream> {
        self.dialed.lock().unwrap().push(address);
        if address.ip().to_string() == "93.184.216.34" {
            TcpStream::connect(("127.0.0.1", self.server))
        } else {
            Err(std::io::Error::other("this test reaches nothing else"))
        }
    }
}

fn fetcher(
    policy: NetPolicy,
    lookup: Arc<ScriptedLookup>,
    server: u16,
) -> (Fetcher, Arc<RecordingDial>) {
    let dial = Arc::new(RecordingDial {
        server,
        dialed: Mutex::new(Vec::new()),
    });
    (Fetcher::with_parts(policy, lookup, dial.clone()), dial)
}

fn quick() -> Limits {
    Limits {
        timeout: Duration::from_secs(5),
        ..Limits::default()
    }
}

#[test]
fn rebinding_answer_is_never_connected_to() {
    let server = serve(|_| ok("public page"));
    // First answer public, every later one private: a check-then-resolve-again client
    // would connect to 127.0.0.1 on its second lookup.
    let lookup = ScriptedLookup::new(&[&["93.184.216.34"], &["127.0.0.1"]]);
    let (fetcher, dial) = fetcher(NetPolicy::default(), lookup.clone(), server);

    let page = fetcher
        .get(&format!("http://rebind.test:{server}/"), &quick())
        .unwrap();
    assert_eq!(page.body, b"public page");
    assert_eq!(
        lookup.calls.lock().unwrap().len(),
        1,
        "one lookup per connection"
    );
    assert_eq!(
        *dial.dialed.lock().unwrap(),
        vec![SocketAddr::new("93.184.216.34".parse().unwrap(), server)]
    );

    // The next connection gets the private answer: refused before any socket opens.
    let refused = fetcher.get(&format!("http://rebind.test:{server}/"), &quick());
    assert!(
        matches!(refused, Err(FetchError::Refused(Refusal::Private { .. }))),
        "{refused:?}"
    );
    assert_eq!(
        dial.dialed.lock().unwrap().len(),
        1,
        "no connection to the private answer"
    );
}

#[test]
fn one_private_answer_among_public_ones_refuses_the_host() {
    let lookup = ScriptedLookup::new(&[&["93.184.216.34", "10.0.0.7"]]);
    let (fetcher, dial) = fetcher(NetPolicy::default(), lookup, 1);
    let result = fetcher.get("http://mixed.test/", &quick());
    assert!(
        matches!(result, Err(FetchError::Refused(Refusal::Private { .. }))),
        "{result:?}"
    );
    assert!(dial.dialed.lock().unwrap().is_empty());
}

#[test]
fn redirect_into_a_private_address_is_refused() {
    let inner = serve(|_| ok("internal secrets"));
    let server = serve(move |path| match path {
        "/to-loopback" => redirect(&format!("http://127.0.0.1:{inner}/admin")),
        "/to-name" => redirect("http://intranet.test/"),
        "/to-metadata" => redirect("http://169.254.169.254/latest/meta-data/"),
        "/hop" => redirect("/final"),
        _ => ok("final page"),
    });
    // The redirecting server is "public" (93.184.216.34 dialed to loopback); the name
    // intranet.test answers a private address on its own lookup.
    let lookup = ScriptedLookup::new(&[&["93.184.216.34"], &["93.184.216.34"], &["10.1.2.3"]]);
    let (fetcher, dial) = fetcher(NetPolicy::default(), lookup, server);

    let followed = fetcher
        .get(&format!("http://site.test:{server}/hop"), &quick())
        .unwrap();
    assert_eq!(followed.body, b"final page");
    assert_eq!(followed.url, format!("http://site.test:{server}/final"));

    let result = fetcher.get(&format!("http://site.test:{server}/to-loopback"), &quick());
    assert!(
        matches!(result, Err(FetchError::Refused(Refusal::Private { .. }))),
        "{result:?}"
    );
    let result = fetcher.get(&format!("http://site.test:{server}/to-name"), &quick());
    assert!(
        matches!(result, Err(FetchError::Refused(Refusal::Private { .. }))),
        "{result:?}"
    );
    assert!(
        dial.dialed
            .lock()
            .unwrap()
            .iter()
            .all(|a| a.ip().to_string() == "93.184.216.34"),
        "only the public address was dialed: {:?}",
        dial.dialed.lock().unwrap()
    );

    // With private ranges open, the metadata floor still holds on a redirect.
    let open = NetPolicy {
        allow_private: true,
        ..NetPolicy::default()
    };
    let lookup = ScriptedLookup::new(&[&["93.184.216.34"]]);
    let (fetcher, _) = fetcher_with(open, lookup, server);
    let result = fetcher.get(&format!("http://site.test:{server}/to-metadata"), &quick());
    assert!(
        matches!(result, Err(FetchError::Refused(Refusal::Metadata { .. }))),
        "{result:?}"
    );
}

fn fetcher_with(
    policy: NetPolicy,
    lookup: Arc<ScriptedLookup>,
    server: u16,
) -> (Fetcher, Arc<RecordingDial>) {
    fetcher(policy, lookup, server)
}

#[test]
fn metadata_floor_holds_with_private_ranges_open() {
    let open = NetPolicy {
        allow_private: true,
        ..NetPolicy::default()
    };
    for answer in [
        "169.254.169.254",
        "::ffff:169.254.169.254",
        "100.100.100.200",
        "fd00:ec2::254",
    ] {
        let lookup = ScriptedLookup::new(&[&[answer]]);
        let (fetcher, dial) = fetcher(open.clone(), lookup, 1);
        let result = fetcher.get("http://innocent.test/latest/meta-data/", &quick());
        assert!(
            matches!(result, Err(FetchError::Refused(Refusal::Metadata { .. }))),
            "{answer}: {result:?}"
        );
        assert!(dial.dialed.lock().unwrap().is_empty());
    }
    let fetcher = Fetcher::new(open);
    for url in [
        "http://metadata.google.internal/",
        "http://169.254.169.254/",
        "http://[::ffff:a9fe:a9fe]/",
    ] {
        let result = fetcher.get(url, &quick());
        assert!(
            matches!(result, Err(FetchError::Refused(Refusal::Metadata { .. }))),
            "{url}: {result:?}"
        );
    }
}

#[test]
fn loopback_is_refused_by_default_and_reachable_when_opened() {
    let server = serve(|_| ok("local"));
    let closed = Fetcher::new(NetPolicy::default());
    for url in [
        format!("http://127.0.0.1:{server}/"),
        format!("http://localhost:{server}/"),
    ] {
        let result = closed.get(&url, &quick());
        assert!(
            matches!(result, Err(FetchError::Refused(Refusal::Private { .. }))),
            "{url}: {result:?}"
        );
    }
    let open = Fetcher::new(NetPolicy {
        allow_private: true,
        ..NetPolicy::default()
    });
    assert_eq!(
        open.get(&format!("http://127.0.0.1:{server}/"), &quick())
            .unwrap()
            .body,
        b"local"
    );
}

#[test]
fn slow_servers_time_out_and_big_bodies_are_capped() {
    let server = serve(|path| match path {
        "/slow" => {
            std::thread::sleep(Duration::from_secs(30));
            ok("too late")
        }
        "/big" => ok(&"x".repeat(3 * 1024 * 1024)),
        "/big-chunked" => {
            let mut out =
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
                    .to_vec();
            let chunk = "y".repeat(64 * 1024);
            for _ in 0..48 {
                out.extend_from_slice(format!("{:x}\r\n{chunk}\r\n", chunk.len()).as_bytes());
            }
            out.extend_from_slice(b"0\r\n\r\n");
            out
        }
        _ => ok("fine"),
    });
    let fetcher = Fetcher::new(NetPolicy {
        allow_private: true,
        ..NetPolicy::default()
    });
    let limits = Limits {
        timeout: Duration::from_secs(1),
        max_body_bytes: 1024 * 1024,
        max_redirects: 3,
    };
    let slow = fetcher.get(&format!("http://127.0.0.1:{server}/slow"), &limits);
    assert!(matches!(slow, Err(FetchError::Timeout(_))), "{slow:?}");
    let limits = Limits {
        timeout: Duration::from_secs(10),
        ..limits
    };
    for path in ["/big", "/big-chunked"] {
        let big = fetcher.get(&format!("http://127.0.0.1:{server}{path}"), &limits);
        assert!(
            matches!(big, Err(FetchError::TooLarge { .. })),
            "{path}: {big:?}"
        );
    }
    assert_eq!(
        fetcher
            .get(&format!("http://127.0.0.1:{server}/ok"), &limits)
            .unwrap()
            .body,
        b"fine"
    );
}

#[test]
fn secrets_and_blocklist_refuse_before_any_lookup() {
    let lookup = ScriptedLookup::new(&[&["93.184.216.34"]]);
    let policy = NetPolicy {
        blocklist: Ok(hermes_net::Blocklist::of_rules(["blocked.example"])),
        ..NetPolicy::default()
    };
    let (fetcher, dial) = fetcher(policy, lookup.clone(), 1);
    for (url, expect) in [
        (
            "https://api.example/?token=abc",
            "credential-like query parameter (token)",
        ),
        (
            "https://api.example/sk-abcdefghijklmnopqrst",
            "API key or token",
        ),
        (
            "https://docs.blocked.example/",
            "matched rule 'blocked.example' from config",
        ),
    ] {
        let error = fetcher.get(url, &quick()).unwrap_err().to_string();
        assert!(error.contains(expect), "{url}: {error}");
    }
    assert!(lookup.calls.lock().unwrap().is_empty());
    assert!(dial.dialed.lock().unwrap().is_empty());
}
