//! The `hermes-tools` command: list, describe and call the generated tools.

fn main() -> std::process::ExitCode {
    // This binary is also the launcher inside each task's command sandbox.
    hermes_sandbox::launcher::serve_if_requested();
    // Before any thread starts or file is opened: it may start the program again.
    hermes_tools::thread_caches::off_for_long_lived_commands();
    // Opened now, before any command ran: the binary's path may lie in a root commands
    // can write, the image this process runs from cannot be swapped.
    let _ = hermes_sandbox::launcher::set_program("/proc/self/exe");
    // Ended by a signal, the server still ends its sandboxes and removes its private
    // directory (snapshots, seccomp programs); a normal exit does so at exit.
    hermes_sandbox::run_dir::remove_on_signals(end_environments);
    hermes_tools::cli::run(&hermes_tools::CATALOG)
}

fn end_environments() {
    hermes_environments::env::cleanup_all_environments();
}
