//! `hermes-fixture-tools`: the real command line over the fixture catalog.

fn main() -> std::process::ExitCode {
    hermes_tools::cli::run(&hermes_fixture_tools::CATALOG)
}
