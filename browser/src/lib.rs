//! The browser door of hermes-tools: a real Chromium driven over the Chrome DevTools
//! Protocol for the `browser_*` tools.
//!
//! - [`launch`]: the machine's Chromium started headless with its DevTools pipe and a
//!   fresh profile in the server's private run directory, or a browser the operator
//!   runs reached through `browser.cdp_url` / `BROWSER_CDP_URL`.
//! - [`backend`]: what the tools drive, [`backend::Backend`] (a browser) and
//!   [`backend::Page`] (a task's page); [`chromium`] is the built-in backend.
//! - [`manager`]: one browser context per task, closed after
//!   `browser.inactivity_timeout`, when the task ends, and with the process.
//! - [`tab::Tab`]: the DevTools page: navigation that waits for load and then a bounded network idle,
//!   snapshots, ref-checked clicks and typing, keys, scrolling, history, console,
//!   evaluation, screenshots, dialogs, raw commands.
//! - [`snapshot`]: the accessibility tree as `- role "name" [ref=eN]` lines.
//! - [`guard`]: every request of a page (redirects, subresources, frames, workers)
//!   judged by the network policy of hermes-net before it leaves.

pub mod backend;
pub mod cdp;
pub mod chromium;
pub mod guard;
pub mod launch;
pub mod manager;
pub mod settings;
pub mod snapshot;
pub mod tab;

pub use backend::{Backend, Page};
pub use guard::{FileCheck, RequestPolicy};
pub use manager::{manager, Lease};
pub use settings::{DialogPolicy, Settings};
pub use tab::{Tab, Visit};
