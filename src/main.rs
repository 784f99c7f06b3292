//! The `hermes-tools` command: list, describe and call the generated tools.

fn main() -> std::process::ExitCode {
    // This binary is also the launcher inside each task's command sandbox.
    hermes_sandbox::launcher::serve_if_requested();
    if let Ok(me) = std::env::current_exe() {
        hermes_sandbox::launcher::set_program(me);
    }
    hermes_tools::cli::run(&hermes_tools::CATALOG)
}
