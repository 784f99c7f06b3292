//! The network layer of every tool that fetches a URL (web_extract's `local` backend
//! today; browser, vision and attachments use the same API).
//!
//! - [`NetPolicy`]: the session's rules, from config.yaml (`security.allow_private_urls`,
//!   `security.website_blocklist`) and `HERMES_ALLOW_PRIVATE_URLS`.
//! - [`NetPolicy::screen`]: a model-supplied URL normalised ([`normalize_url`]) and
//!   refused when it carries secrets, is not http(s), names a metadata service or a
//!   refused literal address, or is blocklisted.
//! - [`Fetcher::get`]: GET under the policy. Each hop's name is resolved once, every
//!   answer is judged ([`classify`]), and the connection goes only to those
//!   addresses, so a DNS answer that changes between check and connect (rebinding)
//!   changes nothing; redirects are screened hop by hop; body size and total time are
//!   capped ([`Limits`]).
//! - [`Fetcher::preflight`]: the same judgement for URLs a third party fetches.
//! - [`truncate_and_store`]: head/tail window plus a stored full text and a
//!   `read_file` pointer.
//! - [`wrap_untrusted`]: the envelope around results an outsider controls (web,
//!   browser, MCP tools) before they reach a model.
//! - [`operator_agent`]: an HTTP client for endpoints the operator configured
//!   (provider APIs), never for URLs the model supplied.
//! - [`tls_config`]: the authorities both trust: Mozilla's roots, or the bundle
//!   `SSL_CERT_FILE` names instead.
//!
//! The metadata floor (169.254.0.0/16, 100.100.100.200, fd00:ec2::254,
//! metadata.google.internal, metadata.goog, in every embedded IPv6 spelling) is closed
//! whatever the settings.

mod address;
mod blocklist;
mod fetch;
mod policy;
mod screen;
mod store;
mod untrusted;

pub use address::{classify, AddressClass};
pub use blocklist::{BlockMatch, Blocklist};
pub use fetch::{Dial, FetchError, Fetched, Fetcher, Limits, Lookup, SystemDial, SystemLookup};
pub use hermes_runtime::tls_trust::tls_config;
pub use policy::NetPolicy;
pub use screen::{normalize_url, secret_in_url, Refusal};
pub use store::{store_dir, store_full_text, truncate_and_store, MAX_STORED_CHARS};
pub use untrusted::{is_untrusted_tool, wrap_untrusted};

use std::time::Duration;

/// An HTTP client for operator-configured endpoints (a search provider's API, a
/// self-hosted SearXNG): a total timeout, statuses returned rather than raised, the
/// environment's proxy honoured. Model-supplied URLs go through [`Fetcher`] instead.
pub fn operator_agent(timeout: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .user_agent(concat!("hermes-tools/", env!("CARGO_PKG_VERSION")))
        .tls_config(tls_config())
        .build()
        .into()
}
