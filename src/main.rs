//! The `hermes-tools` command: list, describe and call the generated tools.

fn main() -> std::process::ExitCode {
    hermes_tools::cli::run(&hermes_tools::CATALOG)
}
