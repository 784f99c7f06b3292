//! Every line of the category corpus (tests/corpus/*.tsv) gets exactly its expected verdict.
//! Rates per category: `cargo run --release -p hermes-command-guard --example corpus`.

#[path = "corpus/mod.rs"]
mod corpus;

use hermes_command_guard::classify;

#[test]
fn every_corpus_line_gets_its_expected_verdict() {
    let ctx = corpus::context();
    let cases = corpus::load();
    assert!(
        cases.len() > 200,
        "the corpus is loaded ({} cases)",
        cases.len()
    );
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|case| {
            let got = classify(&case.command, &ctx);
            (got.verdict != case.expected).then(|| {
                format!(
                    "{} [{}] expected {}, got {} ({:?}): {:?}",
                    case.origin, case.category, case.expected, got.verdict, got.key, case.command
                )
            })
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} corpus lines regressed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}
