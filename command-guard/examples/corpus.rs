//! Detector quality on the category corpus (tests/corpus/*.tsv), per category:
//! * flagged: of the commands that must be flagged, how many are (any non-safe verdict);
//! * hardline: of the commands that must be hardline, how many are;
//! * safe kept: of the look-alikes that must stay safe, how many do;
//! * exact: how many get exactly the expected verdict.
//!
//! Also the cost of the first classification in a process (rule compilation included).
//!
//! cargo run --release -p hermes-command-guard --example corpus [-- --holdout]
//!
//! `--holdout` reads tests/holdout/*.tsv instead: commands written after the rules and never
//! tuned against.

#[path = "../tests/corpus/mod.rs"]
mod corpus;

use std::collections::BTreeMap;
use std::time::Instant;

use hermes_command_guard::{classify, Verdict};

#[derive(Default)]
struct Tally {
    must_flag: usize,
    flagged: usize,
    must_hardline: usize,
    hardline: usize,
    must_stay_safe: usize,
    kept_safe: usize,
    cases: usize,
    exact: usize,
}

impl Tally {
    fn add(&mut self, expected: Verdict, got: Verdict) {
        self.cases += 1;
        self.exact += usize::from(expected == got);
        if expected == Verdict::Safe {
            self.must_stay_safe += 1;
            self.kept_safe += usize::from(got == Verdict::Safe);
        } else {
            self.must_flag += 1;
            self.flagged += usize::from(got != Verdict::Safe);
        }
        if expected == Verdict::Hardline {
            self.must_hardline += 1;
            self.hardline += usize::from(got == Verdict::Hardline);
        }
    }

    fn merge(&mut self, other: &Tally) {
        self.must_flag += other.must_flag;
        self.flagged += other.flagged;
        self.must_hardline += other.must_hardline;
        self.hardline += other.hardline;
        self.must_stay_safe += other.must_stay_safe;
        self.kept_safe += other.kept_safe;
        self.cases += other.cases;
        self.exact += other.exact;
    }
}

fn rate(hit: usize, of: usize) -> String {
    if of == 0 {
        return "-".to_string();
    }
    format!("{hit}/{of} {:>5.1}%", 100.0 * hit as f64 / of as f64)
}

fn main() {
    let ctx = corpus::context();
    let started = Instant::now();
    classify("ls -la", &ctx);
    let first_call = started.elapsed();

    let cases = if std::env::args().any(|a| a == "--holdout") {
        corpus::load_from(&corpus::corpus_dir().join("../holdout"))
    } else {
        corpus::load()
    };
    let mut by_category: BTreeMap<String, Tally> = BTreeMap::new();
    let mut misses = Vec::new();
    let started = Instant::now();
    for case in &cases {
        let got = classify(&case.command, &ctx).verdict;
        by_category
            .entry(case.category.clone())
            .or_default()
            .add(case.expected, got);
        if got != case.expected {
            misses.push(format!(
                "  {} expected {} got {}: {:?}",
                case.origin, case.expected, got, case.command
            ));
        }
    }
    let per_command = started.elapsed() / cases.len().max(1) as u32;

    let row = |label: &str, cases: String, cells: [String; 4]| {
        let [flagged, hardline, kept, exact] = cells;
        println!("{label:<44} {cases:>5} {flagged:>14} {hardline:>14} {kept:>14} {exact:>14}");
    };
    let cells = |t: &Tally| {
        [
            rate(t.flagged, t.must_flag),
            rate(t.hardline, t.must_hardline),
            rate(t.kept_safe, t.must_stay_safe),
            rate(t.exact, t.cases),
        ]
    };
    row(
        "category",
        "cases".into(),
        [
            "flagged".into(),
            "hardline".into(),
            "safe kept".into(),
            "exact".into(),
        ],
    );
    let mut total = Tally::default();
    for (category, tally) in &by_category {
        total.merge(tally);
        row(category, tally.cases.to_string(), cells(tally));
    }
    row("all", total.cases.to_string(), cells(&total));
    println!(
        "first classification (rules compiled): {:.2} ms; then {:.1} us per command",
        first_call.as_secs_f64() * 1e3,
        per_command.as_secs_f64() * 1e6
    );
    if !misses.is_empty() {
        println!("verdicts other than expected:");
        for miss in misses {
            println!("{miss}");
        }
    }
}
