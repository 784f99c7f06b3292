//! Environment-driven behaviour. One test only: it changes process variables.

use hermes_runtime::approval::*;

#[test]
fn environment_signals() {
    let dir = tempfile::tempdir().unwrap();
    // SAFETY: this binary runs this single test; nothing else reads the environment meanwhile.
    unsafe {
        std::env::set_var("HERMES_SESSION_KEY", "from-env");
        std::env::set_var("HERMES_INTERACTIVE", "1");
        std::env::set_var("HERMES_GATEWAY_SESSION", "1");
        std::env::set_var("HERMES_SESSION_PLATFORM", "Telegram");
        std::env::set_var("HERMES_YOLO_MODE", "1");
    }
    let ctx = ApprovalContext::from_env();
    assert_eq!(ctx.session_key(), "from-env");
    assert!(ctx.is_gateway() && ctx.is_cli() && ctx.yolo);
    assert_eq!(ctx.platform.as_deref(), Some("telegram"));
    // §2.7 item 3: the context's key beats the environment's.
    let explicit = ApprovalContext {
        session_key: Some("ctx".into()),
        ..Default::default()
    };
    assert_eq!(explicit.session_key(), "ctx");
    assert_eq!(ApprovalContext::default().session_key(), "from-env");

    // HERMES_YOLO_MODE is read once, when the instance is built.
    let yolo = Approvals::load(dir.path());
    assert!(yolo.process_yolo());
    // SAFETY: this test binary runs this one test, so no other thread reads the
    // environment meanwhile.
    unsafe { std::env::remove_var("HERMES_YOLO_MODE") };
    assert!(yolo.process_yolo());
    let plain = ApprovalContext {
        session_key: Some("p".into()),
        interactive: true,
        ..Default::default()
    };
    assert!(yolo
        .check_all_command_guards("rm -rf build", "local", &plain, &GuardOptions::default())
        .is_approved());
    // ... and never opens the floor.
    assert!(yolo
        .check_all_command_guards(
            "rm -rf \"$HOME\"",
            "local",
            &plain,
            &GuardOptions::default()
        )
        .is_hardline());
    assert!(!Approvals::load(dir.path()).process_yolo());

    // SAFETY: this test binary runs this one test, so no other thread reads the
    // environment meanwhile.
    unsafe { std::env::remove_var("HERMES_SESSION_KEY") };
    assert_eq!(ApprovalContext::default().session_key(), "default");
}
