//! The `hermes-tools` command: list, describe and call the generated tools.

mod cli;

fn main() -> std::process::ExitCode {
    cli::run()
}
