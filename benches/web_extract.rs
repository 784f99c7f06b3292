//! web_extract's keyless `local` backend against a plain fetch of the same page, both
//! from a server on loopback, measured in the same run: the plain GET (the baseline),
//! the same GET through hermes-net's pinned fetcher (lookup, judgement, pinning), and
//! the whole tool call (fetch, readability, markdown, result JSON). The three take
//! turns, so machine load weighs on each alike.
//!
//! cargo bench --bench web_extract

use hermes_runtime::{Registry, ToolCall, ToolContext};
use serde_json::json;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

const RUNS: usize = 40;

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

/// Each contender once per round, in turn, so a change of machine load weighs on all
/// of them alike; the median of each over the rounds, after one warm-up round.
fn race(contenders: &mut [&mut dyn FnMut()]) -> Vec<Duration> {
    for run in contenders.iter_mut() {
        run();
    }
    let mut samples = vec![Vec::new(); contenders.len()];
    for _ in 0..RUNS {
        for (run, times) in contenders.iter_mut().zip(samples.iter_mut()) {
            let started = Instant::now();
            run();
            times.push(started.elapsed());
        }
    }
    samples.into_iter().map(median).collect()
}

/// A news-like page: navigation, scripts, an article of `paragraphs` paragraphs, a
/// sidebar and a footer.
fn page(paragraphs: usize) -> String {
    let nav: String = (0..40)
        .map(|i| format!("<li><a href=\"/section/{i}\">Section {i}</a></li>"))
        .collect();
    let body: String = (0..paragraphs)
        .map(|i| {
            format!(
                "<p>Paragraph {i}: the committee published its findings on Tuesday, with \
                 <a href=\"/ref/{i}\">references</a> to earlier reports and <em>several</em> \
                 recommendations for the coming year, including changes to the budget.</p>\n"
            )
        })
        .collect();
    let sidebar: String = (0..30)
        .map(|i| format!("<div class=\"ad\">Sponsored link {i}</div>"))
        .collect();
    format!(
        "<!doctype html><html><head><title>Findings</title><script>{}</script></head><body>\
         <nav><ul>{nav}</ul></nav><main><article><h1>Committee findings</h1>{body}</article></main>\
         <aside>{sidebar}</aside><footer>Footer text</footer></body></html>",
        "var x = 1;".repeat(2000)
    )
}

fn serve(body: String) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let body = body.clone();
            std::thread::spawn(move || {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf) {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(body.as_bytes());
            });
        }
    });
    port
}

fn main() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        "security:\n  allow_private_urls: true\n",
    )
    .unwrap();
    let registry = Registry::with_home(&hermes_tools::CATALOG, home.path().to_path_buf());
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    for paragraphs in [20, 400] {
        let html = page(paragraphs);
        let size = html.len();
        let url = format!("http://127.0.0.1:{}/article", serve(html));

        // The baseline: the request written to a socket and the answer read to its end.
        let port: u16 = url
            .split(':')
            .nth(2)
            .unwrap()
            .split('/')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let mut raw = || {
            let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            stream
                .write_all(b"GET /article HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                .unwrap();
            let mut answer = Vec::new();
            stream.read_to_end(&mut answer).unwrap();
            assert!(answer.len() > size);
        };
        // An HTTP client's GET, its client made once, the body read whole.
        let agent = hermes_net::operator_agent(Duration::from_secs(10));
        let mut plain = || {
            let body = agent
                .get(&url)
                .call()
                .unwrap()
                .body_mut()
                .read_to_vec()
                .unwrap();
            assert_eq!(body.len(), size);
        };
        let fetcher = hermes_net::Fetcher::new(hermes_net::NetPolicy {
            allow_private: true,
            ..hermes_net::NetPolicy::default()
        });
        let mut pinned = || {
            let page = fetcher.get(&url, &hermes_net::Limits::default()).unwrap();
            assert_eq!(page.body.len(), size);
        };
        let mut tool = || {
            let ctx = ToolContext::builder().hermes_home(home.path()).build();
            let result = registry
                .handle_function_call(&ToolCall::new("web_extract", json!({"urls": [url]})), &ctx);
            assert!(result.contains("Committee findings"), "{result}");
        };
        let times = race(&mut [&mut raw, &mut plain, &mut pinned, &mut tool]);
        let (raw, plain, pinned, tool) = (times[0], times[1], times[2], times[3]);
        println!(
            "a {} KB page ({paragraphs} paragraphs) on loopback; median of {RUNS}",
            size / 1024
        );
        let row = |what: &str, time: Duration| {
            println!(
                "{what:<44} {:>9.2}ms  ({:.2}x raw)",
                ms(time),
                ms(time) / ms(raw)
            );
        };
        println!(
            "{:<44} {:>9.2}ms",
            "raw GET over a socket (baseline)",
            ms(raw)
        );
        row("GET with ureq", plain);
        row("GET through hermes-net (pinned, screened)", pinned);
        row("web_extract local (fetch + markdown)", tool);
    }
}
