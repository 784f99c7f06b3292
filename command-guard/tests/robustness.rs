//! Never panic, fail closed on oversized input (R5), stay bounded on nesting.

use hermes_command_guard::{
    classify, detect_dangerous, is_simple_command, strip_ansi, GuardContext, Verdict,
};
use proptest::prelude::*;

const LIMIT: &str = "command parser limit exceeded";

fn home_ctx() -> GuardContext {
    GuardContext {
        home: Some("/home/alice".into()),
        hermes_home: Some("/home/alice/.hermes".into()),
        deny_globs: vec!["git push*".into(), "[!a]*".into()],
        ..GuardContext::default()
    }
}

fn shellish_token() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("rm".to_string()),
        Just("-rf".to_string()),
        Just("/".to_string()),
        Just("sudo".to_string()),
        Just("-S".to_string()),
        Just("bash".to_string()),
        Just("-c".to_string()),
        Just("'".to_string()),
        Just("\"".to_string()),
        Just("$(".to_string()),
        Just(")".to_string()),
        Just("`".to_string()),
        Just(";".to_string()),
        Just("|".to_string()),
        Just("&&".to_string()),
        Just("<<EOF\n".to_string()),
        Just("EOF".to_string()),
        Just("\\".to_string()),
        Just("\n".to_string()),
        Just("${IFS}".to_string()),
        Just("eval".to_string()),
        Just("env -S".to_string()),
        Just("{".to_string()),
        Just("}".to_string()),
        Just("(".to_string()),
        Just("> /dev/sda".to_string()),
        Just("ｒｍ".to_string()),
        Just("\x1b[".to_string()),
        Just("\u{9b}".to_string()),
        Just("é".to_string()),
        Just("/home/alice/".to_string()),
        Just("$'\\x".to_string()),
        Just("find . -{".to_string()),
        Just("rg --pre*".to_string()),
        Just(":(){ :|:& };:".to_string()),
        "[a-z]{1,6}".prop_map(|s| s),
        any::<char>().prop_map(|c| c.to_string()),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn classify_never_panics_on_arbitrary_text(input in "\\PC{0,120}|[\\x00-\\x7f]{0,120}") {
        let _ = classify(&input, &home_ctx());
        let _ = is_simple_command(&input);
        let _ = strip_ansi(&input);
    }

    #[test]
    fn classify_never_panics_on_token_soup(tokens in prop::collection::vec(shellish_token(), 0..40)) {
        let spaced = tokens.join(" ");
        let glued = tokens.concat();
        for input in [spaced, glued] {
            let c = classify(&input, &home_ctx());
            // Hardline findings are always dangerous too.
            if c.verdict == Verdict::Hardline {
                prop_assert!(detect_dangerous(&input, &home_ctx()).is_some());
            }
        }
    }
}

#[test]
fn one_megabyte_fails_closed() {
    let big = "a".repeat(1 << 20);
    let c = classify(&big, &GuardContext::default());
    assert_eq!(c.verdict, Verdict::Hardline);
    assert_eq!(c.key.as_deref(), Some(LIMIT));
    let chained = "ls; ".repeat(1 << 18);
    assert_eq!(
        classify(&chained, &GuardContext::default()).verdict,
        Verdict::Hardline
    );
}

#[test]
fn input_limits() {
    let ctx = GuardContext::default();
    assert_eq!(
        classify(&format!("echo {}", "a".repeat(5000)), &ctx)
            .key
            .as_deref(),
        Some(LIMIT)
    );
    assert_ne!(
        classify(&format!("echo {}; ls", "a".repeat(5000)), &ctx)
            .key
            .as_deref(),
        Some(LIMIT)
    );
    assert_eq!(
        classify(&"|".repeat(25_000), &ctx).key.as_deref(),
        Some(LIMIT)
    );
    assert_eq!(
        detect_dangerous(&"x".repeat(200_000), &ctx)
            .map(|f| f.key)
            .as_deref(),
        Some(LIMIT)
    );
}

#[test]
fn deep_nesting_fails_closed() {
    let mut nested = "ls".to_string();
    for _ in 0..12 {
        nested = format!("echo $({nested})");
    }
    assert_eq!(
        classify(&nested, &GuardContext::default()).key.as_deref(),
        Some(LIMIT)
    );
    let mut shallow = "reboot".to_string();
    for _ in 0..5 {
        shallow = format!("echo $({shallow})");
    }
    assert_eq!(
        classify(&shallow, &GuardContext::default()).key.as_deref(),
        Some("system shutdown/reboot")
    );
}

#[test]
fn malformed_pcre_pattern_is_on_the_floor() {
    let c = classify("grep -P '(?<=x", &GuardContext::default());
    assert_eq!(c.verdict, Verdict::Hardline);
    assert_eq!(
        c.key.as_deref(),
        Some("command parser limit or malformed executable payload")
    );
    // A well-formed PCRE pattern is data.
    assert_eq!(
        classify("grep -P 'rm -rf /etc' notes.txt", &GuardContext::default()).verdict,
        Verdict::Safe
    );
}

#[test]
fn ansi_stripping_covers_ecma48() {
    assert_eq!(strip_ansi("plain"), "plain");
    assert_eq!(strip_ansi("\x1b[1;31mred\x1b[0m"), "red");
    assert_eq!(
        strip_ansi("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"),
        "link"
    );
    assert_eq!(
        strip_ansi("\x1b_apc\x1b\\a\x1bPdcs\u{9c}b\x1b^pm\x07c\x1bXsos\x1b\\d"),
        "abcd"
    );
    assert_eq!(strip_ansi("\x1b7save\x1b8\x1bcreset\x1b(0g"), "saveresetg");
    assert_eq!(strip_ansi("\u{9d}osc\u{9c}x\u{85}y"), "xy");
    assert_eq!(strip_ansi("\x1b]x".repeat(10_000).as_str()).len(), 10_000);
}
