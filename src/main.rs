//! The `hermes-tools` command: list, describe and call the generated tools.

fn main() -> std::process::ExitCode {
    // This binary is also the launcher inside each task's command sandbox.
    hermes_sandbox::launcher::serve_if_requested();
    // Before any child is started: none gets what our own caller left open.
    hermes_sandbox::keep_inherited_descriptors_from_children();
    // Before any thread starts or file is opened: it may start the program again.
    hermes_tools::allocator::tune_for_long_lived_commands();
    // Opened now, before any command ran: the binary's path may lie in a root commands
    // can write, the image this process runs from cannot be swapped.
    let _ = hermes_sandbox::launcher::set_program("/proc/self/exe");
    // Ended by a signal, the server still ends its sandboxes and removes its private
    // directory (snapshots, seccomp programs); a normal exit does so at exit.
    if may_run_tools() {
        hermes_sandbox::run_dir::remove_on_signals(end_environments);
    }
    hermes_tools::cli::run(&hermes_tools::CATALOG)
}

/// False for the commands that only describe tools and never run one, so make nothing
/// a signal would have to clean up: they start no thread to wait for one. Any other
/// command (an unknown one included) may run tools.
fn may_run_tools() -> bool {
    !hermes_tools::cli::command_is(&[
        "list",
        "schema",
        "toolsets",
        "check-command",
        "help",
        "--help",
        "-h",
        "--version",
        "-V",
    ])
}

fn end_environments() {
    hermes_environments::env::cleanup_all_environments();
}
