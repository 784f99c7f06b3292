//! What a contributor sees in the editor and in rustc's output: the attribute's own
//! errors point at the offending token. (The build script reports the same mistakes
//! first, with file:line:column; see codegen/tests.)

#[test]
fn attribute_errors_point_at_the_token() {
    let cases = trybuild::TestCases::new();
    cases.pass("tests/ui/pass_*.rs");
    cases.compile_fail("tests/ui/fail_*.rs");
}
