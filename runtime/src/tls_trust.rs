//! Which certificate authorities every HTTPS client of the runtime trusts (the web
//! tools, the model endpoint, smart approvals, text to speech, the cloud backends): Mozilla's roots (bundled, so
//! a machine without a system store still works), or the PEM bundle `SSL_CERT_FILE`
//! names instead, as OpenSSL reads that variable. A company that inspects TLS through
//! its own authority, or a test with its own, names that bundle.

use std::sync::{Arc, OnceLock};
use ureq::tls::{Certificate, PemItem, RootCerts, TlsConfig};

/// The TLS settings every ureq agent of the workspace is built with, read once per
/// process.
pub fn tls_config() -> TlsConfig {
    static CONFIG: OnceLock<TlsConfig> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let roots = match std::env::var_os("SSL_CERT_FILE").filter(|v| !v.is_empty()) {
                None => RootCerts::WebPki,
                Some(path) => bundle_roots(std::path::Path::new(&path)),
            };
            TlsConfig::builder().root_certs(roots).build()
        })
        .clone()
}

/// The certificates of the bundle at `path`. A bundle that cannot be read, or holds
/// none, trusts nothing (every HTTPS connection fails, naming the certificate) rather
/// than falling back to roots the operator meant to replace; the reason is printed once.
fn bundle_roots(path: &std::path::Path) -> RootCerts {
    let certificates: Result<Vec<Certificate<'static>>, String> =
        std::fs::read(path).map_err(|e| e.to_string()).map(|pem| {
            ureq::tls::parse_pem(&pem)
                .filter_map(|item| match item {
                    Ok(PemItem::Certificate(certificate)) => Some(certificate.to_owned()),
                    _ => None,
                })
                .collect()
        });
    match certificates {
        Ok(certificates) if !certificates.is_empty() => RootCerts::Specific(Arc::new(certificates)),
        Ok(_) => {
            eprintln!(
                "hermes-tools: SSL_CERT_FILE {} holds no PEM certificate; HTTPS trusts nothing",
                path.display()
            );
            RootCerts::Specific(Arc::new(Vec::new()))
        }
        Err(e) => {
            eprintln!(
                "hermes-tools: SSL_CERT_FILE {} cannot be read ({e}); HTTPS trusts nothing",
                path.display()
            );
            RootCerts::Specific(Arc::new(Vec::new()))
        }
    }
}
