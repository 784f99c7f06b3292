//! Execution environments: where a task's shell commands run and its files live.
//!
//! `env/` holds the [`env::Environment`] trait and the seven backends, with the per-task
//! cache; `snapshot` the shell state carried between commands; `output` bounded capture,
//! redaction and exit codes; `process_registry` (with `watch`) the background processes;
//! `config` the `terminal.*` settings they are built from; `files` reading, writing and
//! searching files inside an environment that is not this machine. The terminal, process, file and
//! code-execution tools all reach a task's environment through this crate.

pub mod config;
pub mod env;
pub mod files;
pub mod output;
pub mod process_registry;
pub mod snapshot;
mod unchanged_state;
pub mod watch;
