fn main() {
    hermes_codegen::run_build_script(None);
}
