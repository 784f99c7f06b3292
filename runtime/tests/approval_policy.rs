//! Policy from config.yaml, approval contexts, redaction, result shapes.

use hermes_runtime::approval::*;
use hermes_runtime::config::Config;
use serde_json::{json, Value};
use std::time::Duration;

fn policy_from(yaml: &str) -> ApprovalPolicy {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.yaml"), yaml).unwrap();
    ApprovalPolicy::from_config(&Config::load(dir.path()))
}

#[test]
fn mode_coercions_match_the_reference() {
    // §2.7 item 1.
    assert_eq!(parse_mode(Some(&json!(false))).0, ApprovalMode::Off);
    assert_eq!(parse_mode(Some(&json!("off"))).0, ApprovalMode::Off);
    assert_eq!(parse_mode(Some(&json!("  SMART  "))).0, ApprovalMode::Smart);
    assert_eq!(parse_mode(Some(&json!(true))).0, ApprovalMode::Manual);
    assert_eq!(parse_mode(Some(&json!(""))), (ApprovalMode::Manual, None));
    let (mode, warning) = parse_mode(Some(&json!("auto")));
    assert_eq!(mode, ApprovalMode::Manual);
    assert!(warning.unwrap().contains("auto"));
    assert_eq!(parse_mode(None), (ApprovalMode::Manual, None));
    assert_eq!(parse_mode(Some(&json!(7))).0, ApprovalMode::Manual);
    let config = json!({"approvals": {"mode": false}});
    assert_eq!(
        parse_mode(config.pointer("/approvals/mode")).0,
        ApprovalMode::Off
    );
}

#[test]
fn mode_from_yaml_file() {
    assert_eq!(
        policy_from("approvals:\n  mode: false\n").mode,
        ApprovalMode::Off
    );
    assert_eq!(
        policy_from("approvals:\n  mode: smart\n").mode,
        ApprovalMode::Smart
    );
    assert_eq!(
        policy_from("approvals:\n  mode: true\n").mode,
        ApprovalMode::Manual
    );
    let auto = policy_from("approvals:\n  mode: auto\n");
    assert_eq!(auto.mode, ApprovalMode::Manual);
    assert_eq!(auto.warnings.len(), 1);
    assert_eq!(policy_from("model: x\n").mode, ApprovalMode::Manual);
}

#[test]
fn defaults_when_the_file_is_missing_or_broken() {
    let dir = tempfile::tempdir().unwrap();
    let missing = ApprovalPolicy::load(dir.path());
    assert_eq!(missing, ApprovalPolicy::default());
    assert_eq!(missing.timeout, Duration::from_secs(300));
    assert_eq!(missing.denial_breaker_threshold, 3);
    assert_eq!(missing.cron_mode, NoHumanMode::Deny);
    assert_eq!(missing.single_query_mode, NoHumanMode::Deny);
    assert_eq!(missing.unattended_mode, NoHumanMode::Deny);
    assert!(missing.smart.is_none());
    let broken = policy_from("approvals: [unclosed\n");
    assert_eq!(broken.mode, ApprovalMode::Manual);
    assert_eq!(broken.timeout, Duration::from_secs(300));
}

#[test]
fn no_human_modes_accept_the_approve_words() {
    for word in ["approve", "off", "allow", "yes", " APPROVE "] {
        assert_eq!(
            parse_no_human_mode(Some(&json!(word))),
            NoHumanMode::Approve,
            "{word}"
        );
    }
    for value in [
        json!("deny"),
        json!("maybe"),
        json!(""),
        json!(false),
        Value::Null,
    ] {
        assert_eq!(
            parse_no_human_mode(Some(&value)),
            NoHumanMode::Deny,
            "{value}"
        );
    }
    assert_eq!(parse_no_human_mode(None), NoHumanMode::Deny);
    let policy = policy_from(
        "approvals:\n  cron_mode: approve\n  single_query_mode: allow\n  unattended_mode: nope\n",
    );
    assert_eq!(policy.cron_mode, NoHumanMode::Approve);
    assert_eq!(policy.single_query_mode, NoHumanMode::Approve);
    assert_eq!(policy.unattended_mode, NoHumanMode::Deny);
}

#[test]
fn timeout_deny_breaker_and_smart_endpoint() {
    let policy = policy_from(
        "approvals:\n  timeout: 12.5\n  deny: ['git push --force*', 'curl *']\n  denial_breaker_threshold: 0\n  smart_policy: never touch prod\n  smart:\n    base_url: http://127.0.0.1:9/v1\n    model: tiny\n    api_key_env: GUARD_KEY\n    timeout: 2\n",
    );
    assert_eq!(policy.timeout, Duration::from_millis(12_500));
    assert_eq!(policy.deny, vec!["git push --force*", "curl *"]);
    assert_eq!(policy.denial_breaker_threshold, 0);
    assert_eq!(policy.breaker_threshold(), None);
    assert_eq!(policy.smart_policy, "never touch prod");
    let smart = policy.smart.unwrap();
    assert_eq!(smart.base_url, "http://127.0.0.1:9/v1");
    assert_eq!(smart.model, "tiny");
    assert_eq!(smart.api_key_env.as_deref(), Some("GUARD_KEY"));
    assert_eq!(smart.timeout, Duration::from_secs(2));

    let bad = policy_from("approvals:\n  timeout: soon\n  denial_breaker_threshold: -2\n");
    assert_eq!(bad.timeout, Duration::from_secs(300));
    assert_eq!(bad.breaker_threshold(), None);
    assert_eq!(
        policy_from("approvals:\n  denial_breaker_threshold: 5\n").breaker_threshold(),
        Some(5)
    );
    // No model: smart review escalates.
    assert!(
        policy_from("approvals:\n  smart:\n    base_url: http://x\n")
            .smart
            .is_none()
    );
}

#[test]
fn command_allowlist_list_scalar_and_other_types() {
    assert_eq!(
        policy_from("command_allowlist:\n  - git status\n  - 'npm *'\n").command_allowlist,
        vec!["git status", "npm *"]
    );
    let scalar = policy_from("command_allowlist: \"[ls -la, make test]\"\n");
    assert_eq!(scalar.command_allowlist, vec!["ls -la", "make test"]);
    assert_eq!(scalar.warnings.len(), 1);
    let single = policy_from("command_allowlist: make build\n");
    assert_eq!(single.command_allowlist, vec!["make build"]);
    let mapping = policy_from("command_allowlist:\n  a: b\n");
    assert!(mapping.command_allowlist.is_empty());
    assert_eq!(mapping.warnings.len(), 1);
    assert_eq!(parse_allowlist(Some(&json!(42))).0, Vec::<String>::new());
}

#[test]
fn gateway_context_rules() {
    // §2.7 item 5.
    let vars = |pairs: &'static [(&'static str, &'static str)]| {
        ApprovalContext::from_vars(move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
    };
    for platform in ["webhook", "msgraph_webhook", "api_server"] {
        let ctx = ApprovalContext {
            gateway_session: true,
            platform: Some(platform.to_string()),
            ..Default::default()
        };
        assert!(!ctx.is_gateway(), "{platform}");
        assert_eq!(
            ctx.no_human_reason(),
            Some(NoHumanReason::Unattended(platform.to_string()))
        );
    }
    assert!(
        !vars(&[("HERMES_GATEWAY_SESSION", "1")]).is_gateway(),
        "no platform"
    );
    assert!(!vars(&[
        ("HERMES_GATEWAY_SESSION", "1"),
        ("HERMES_SESSION_PLATFORM", "telegram"),
        ("HERMES_CRON_SESSION", "1")
    ])
    .is_gateway());
    let telegram = vars(&[
        ("HERMES_GATEWAY_SESSION", "1"),
        ("HERMES_SESSION_PLATFORM", "telegram"),
    ]);
    assert!(telegram.is_gateway());
    assert!(telegram.has_human());
    let single = vars(&[
        ("HERMES_INTERACTIVE", "1"),
        ("HERMES_SINGLE_QUERY_SESSION", "true"),
        ("HERMES_EXEC_ASK", "1"),
    ]);
    assert!(!single.is_cli() && !single.is_ask() && !single.has_human());
    assert_eq!(single.no_human_reason(), Some(NoHumanReason::SingleQuery));
    assert_eq!(
        single.no_human_reason().unwrap().mode_key(),
        "approvals.single_query_mode"
    );
    let full = vars(&[
        ("HERMES_INTERACTIVE", "yes"),
        ("HERMES_SESSION_KEY", "abc"),
        ("HERMES_YOLO_MODE", "0"),
        ("HERMES_EXEC_ASK", "1"),
    ]);
    assert!(full.is_cli() && full.is_ask() && !full.yolo);
    assert_eq!(full.session_key(), "abc");
    assert_eq!(NoHumanReason::Cron.mode_key(), "approvals.cron_mode");
}

#[test]
fn redaction_masks_secrets() {
    // §2.7 item 10.
    let cmd = r#"curl -H "Authorization: Bearer sk-proj-abc123xyz4567890abcdef" https://api.openai.com/v1/models"#;
    let red = redact_secrets(cmd);
    assert_eq!(
        red,
        r#"curl -H "Authorization: Bearer ***" https://api.openai.com/v1/models"#
    );
    assert_eq!(
        redact_secrets("export OPENAI=sk-abcdefghijklmnop1234"),
        "export OPENAI=sk-***"
    );
    assert_eq!(
        redact_secrets("git clone https://ghp_abcdefghijklmnopqrstuvwxyz0123456789@github.com/x/y"),
        "git clone https://ghp_***@github.com/x/y"
    );
    assert_eq!(
        redact_secrets("aws --key AKIAIOSFODNN7EXAMPLE s3 ls"),
        "aws --key AKIA*** s3 ls"
    );
    let jwt = "curl -H 'X: eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U'";
    assert_eq!(redact_secrets(jwt), "curl -H 'X: ***JWT***'");
    let pem =
        "printf '-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nabc\n-----END RSA PRIVATE KEY-----' > k";
    assert_eq!(
        redact_secrets(pem),
        "printf '-----BEGIN RSA PRIVATE KEY-----***-----END RSA PRIVATE KEY-----' > k"
    );
    assert_eq!(
        redact_secrets("API_TOKEN=hunter22 ./deploy"),
        "API_TOKEN=*** ./deploy"
    );
    assert_eq!(redact_secrets("ls -la /tmp"), "ls -la /tmp");
}

#[test]
fn isolated_backends() {
    for env in [
        "singularity",
        "modal",
        "daytona",
        "vercel_sandbox",
        "kubernetes",
        "Modal",
    ] {
        assert!(is_isolated_backend(env, true), "{env}");
    }
    assert!(is_isolated_backend("docker", false));
    assert!(!is_isolated_backend("docker", true));
    assert!(!is_isolated_backend("local", false));
    assert!(!is_isolated_backend("ssh", false));
}

#[test]
fn smart_input_checks_and_verdict_parsing() {
    assert_eq!(parse_verdict("APPROVE"), SmartVerdict::Approve);
    assert_eq!(parse_verdict("  DENY\n"), SmartVerdict::Deny);
    assert_eq!(parse_verdict("approve"), SmartVerdict::Escalate);
    assert_eq!(parse_verdict("APPROVE."), SmartVerdict::Escalate);
    assert_eq!(parse_verdict("ESCALATE"), SmartVerdict::Escalate);
    assert!(!unreviewable("ls -la\tx\ny\r\n"));
    assert!(unreviewable("ls \x1b[31m"));
    assert!(unreviewable("ls \u{0}"));
    assert!(unreviewable("echo \u{FFFE}"));
    assert!(unreviewable("echo \u{FFFF}"));
    assert!(!unreviewable(&"a".repeat(MAX_REVIEW_CHARS)));
    assert!(unreviewable(&"a".repeat(MAX_REVIEW_CHARS + 1)));
    assert_eq!(
        xml_escape("<a href='x'>&\"</a>"),
        "&lt;a href=&apos;x&apos;&gt;&amp;&quot;&lt;/a&gt;"
    );
    let messages = review_messages(&ReviewRequest {
        command: "rm -rf build </command>".into(),
        description: "delete in <root>".into(),
        policy: "be strict".into(),
    });
    assert!(messages[0]["content"]
        .as_str()
        .unwrap()
        .ends_with("be strict"));
    assert_eq!(
        messages[1]["content"],
        "<review_data>\n<description>delete in &lt;root&gt;</description>\n<command>rm -rf build &lt;/command&gt;</command>\n</review_data>"
    );
}
