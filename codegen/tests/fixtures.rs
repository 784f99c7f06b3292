//! The generator on fixture folders: each failure case must produce a build error that
//! names the file, line and column in plain words (snapshotted), and the valid folder
//! must produce the schemas, table and toolsets we expect.

use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn errors_of(name: &str) -> String {
    match hermes_codegen::generate(&fixture(name)) {
        Ok(_) => panic!("fixture {name} should fail to generate"),
        Err(diagnostics) => diagnostics.iter().map(|d| format!("{d}\n")).collect(),
    }
}

macro_rules! failure_cases {
    ($($case:ident),* $(,)?) => {$(
        #[test]
        fn $case() {
            insta::assert_snapshot!(stringify!($case), errors_of(stringify!($case)));
        }
    )*};
}

failure_cases!(
    unknown_key,
    duplicate_key,
    missing_toolset,
    missing_tool_description,
    missing_param_description,
    unsupported_type,
    missing_deserialize,
    enum_with_data,
    duplicate_name,
    name_is_alias,
    invalid_name,
    nested_in_fn,
    nested_in_impl,
    nested_in_mod,
    not_a_function,
    syntax_error,
    unknown_tool_in_toolsets,
    unknown_include,
    untagged_unit_variant,
    untagged_tuple_variant,
);

#[test]
fn every_failure_names_file_line_and_column() {
    let cases =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")).unwrap();
    for case in cases {
        let name = case.unwrap().file_name().to_string_lossy().into_owned();
        if name == "valid" {
            continue;
        }
        let errors = errors_of(&name);
        for line in errors.lines() {
            let mut parts = line.splitn(4, ':');
            let file = parts.next().unwrap();
            assert!(
                file.starts_with("tools/") && file.ends_with(".rs"),
                "{name}: {line}"
            );
            let row: usize = parts
                .next()
                .unwrap()
                .parse()
                .unwrap_or_else(|_| panic!("{name}: no line in {line}"));
            let column: usize = parts
                .next()
                .unwrap()
                .parse()
                .unwrap_or_else(|_| panic!("{name}: no column in {line}"));
            assert!(row >= 1 && column >= 1, "{name}: {line}");
        }
    }
}

#[test]
fn valid_fixture_generates_schemas_and_toolsets() {
    let generated =
        hermes_codegen::generate(&fixture("valid")).expect("the valid fixture generates");
    insta::assert_snapshot!("valid_tool_schemas", generated.tool_schemas_json);
    insta::assert_snapshot!("valid_toolsets", generated.toolsets_json);
    assert!(generated.registry_rs.starts_with("// @generated"));
    assert!(generated
        .registry_rs
        .contains("Handler::Async(shims::slow_fetch)"));
    assert!(generated
        .registry_rs
        .contains("\"kitchen_sink_old\" => Some(0usize)"));
    assert!(generated
        .registry_rs
        .contains("crate::tools::a::demo_ready"));
    syn::parse_file(&generated.registry_rs).expect("the registry is valid Rust");
}

#[test]
fn generation_is_deterministic() {
    let first = hermes_codegen::generate(&fixture("valid")).unwrap();
    let second = hermes_codegen::generate(&fixture("valid")).unwrap();
    assert_eq!(first, second);
}

#[test]
fn unchanged_output_is_not_rewritten() {
    let dir = std::env::temp_dir().join(format!("hermes-codegen-write-{}", std::process::id()));
    let path = dir.join("out.txt");
    assert!(hermes_codegen::write_if_changed(&path, "one").unwrap());
    let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert!(!hermes_codegen::write_if_changed(&path, "one").unwrap());
    assert_eq!(
        std::fs::metadata(&path).unwrap().modified().unwrap(),
        modified
    );
    assert!(hermes_codegen::write_if_changed(&path, "two").unwrap());
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
    std::fs::remove_dir_all(dir).unwrap();
}
