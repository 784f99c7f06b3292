#![allow(dead_code)]

use hermes_command_guard::{classify, detect_dangerous, detect_hardline, GuardContext, Verdict};

pub fn ctx() -> GuardContext {
    GuardContext::default()
}

pub fn ctx_home(home: &str) -> GuardContext {
    GuardContext {
        home: Some(home.to_string()),
        ..GuardContext::default()
    }
}

/// Collects every failing vector so one run reports them all.
#[derive(Default)]
pub struct Report {
    failures: Vec<String>,
    checked: usize,
}

impl Report {
    fn fail(&mut self, msg: String) {
        self.failures.push(msg);
    }

    pub fn hardline(&mut self, cmd: &str, key: &str) {
        self.hardline_in(&ctx(), cmd, key);
    }

    pub fn hardline_in(&mut self, ctx: &GuardContext, cmd: &str, key: &str) {
        self.checked += 1;
        let c = classify(cmd, ctx);
        if c.verdict != Verdict::Hardline || c.key.as_deref() != Some(key) {
            self.fail(format!(
                "{cmd:?}: expected hardline {key:?}, got {} {:?}",
                c.verdict, c.key
            ));
        }
        if detect_hardline(cmd, ctx).map(|f| f.key).as_deref() != Some(key) {
            self.fail(format!("{cmd:?}: detect_hardline disagrees"));
        }
        if detect_dangerous(cmd, ctx).is_none() {
            self.fail(format!("{cmd:?}: hardline but not dangerous"));
        }
    }

    /// Classify says dangerous with this key (so it is not on a floor).
    pub fn dangerous(&mut self, cmd: &str, key: &str) {
        self.dangerous_in(&ctx(), cmd, key);
    }

    pub fn dangerous_in(&mut self, ctx: &GuardContext, cmd: &str, key: &str) {
        self.checked += 1;
        let c = classify(cmd, ctx);
        if c.verdict != Verdict::Dangerous || c.key.as_deref() != Some(key) {
            self.fail(format!(
                "{cmd:?}: expected dangerous {key:?}, got {} {:?}",
                c.verdict, c.key
            ));
        }
    }

    /// `detect_dangerous` reports this key, whatever floor classify puts it on.
    pub fn dangerous_key(&mut self, cmd: &str, key: &str) {
        self.checked += 1;
        let got = detect_dangerous(cmd, &ctx()).map(|f| f.key);
        if got.as_deref() != Some(key) {
            self.fail(format!(
                "{cmd:?}: expected detect_dangerous {key:?}, got {got:?}"
            ));
        }
    }

    pub fn dangerous_any(&mut self, cmd: &str) {
        self.dangerous_any_in(&ctx(), cmd);
    }

    pub fn dangerous_any_in(&mut self, ctx: &GuardContext, cmd: &str) {
        self.checked += 1;
        let c = classify(cmd, ctx);
        if c.verdict != Verdict::Dangerous {
            self.fail(format!(
                "{cmd:?}: expected dangerous, got {} {:?}",
                c.verdict, c.key
            ));
        }
    }

    pub fn safe(&mut self, cmd: &str) {
        self.safe_in(&ctx(), cmd);
    }

    pub fn safe_in(&mut self, ctx: &GuardContext, cmd: &str) {
        self.checked += 1;
        let c = classify(cmd, ctx);
        if c.verdict != Verdict::Safe {
            self.fail(format!(
                "{cmd:?}: expected safe, got {} {:?}",
                c.verdict, c.key
            ));
        }
    }

    /// "(orig. dangerous)": either safe or dangerous, never a floor.
    pub fn not_floor(&mut self, cmd: &str) {
        self.checked += 1;
        let c = classify(cmd, &ctx());
        if !matches!(c.verdict, Verdict::Safe | Verdict::Dangerous) {
            self.fail(format!(
                "{cmd:?}: expected no floor, got {} {:?}",
                c.verdict, c.key
            ));
        }
    }

    /// The dangerous rule `key` must not be what flags this command.
    pub fn not_key(&mut self, cmd: &str, key: &str) {
        self.checked += 1;
        let got = detect_dangerous(cmd, &ctx()).map(|f| f.key);
        if got.as_deref() == Some(key) {
            self.fail(format!("{cmd:?}: must not be flagged as {key:?}"));
        }
        let c = classify(cmd, &ctx());
        if c.verdict == Verdict::Hardline {
            self.fail(format!("{cmd:?}: must not be hardline, got {:?}", c.key));
        }
    }

    pub fn blocked(&mut self, cmd: &str, key: &str) {
        self.blocked_in(&ctx(), cmd, key);
    }

    pub fn blocked_in(&mut self, ctx: &GuardContext, cmd: &str, key: &str) {
        self.checked += 1;
        let c = classify(cmd, ctx);
        if c.verdict != Verdict::Blocked || c.key.as_deref() != Some(key) {
            self.fail(format!(
                "{cmd:?}: expected blocked {key:?}, got {} {:?}",
                c.verdict, c.key
            ));
        }
    }

    pub fn finish(self) {
        assert!(self.checked > 0);
        if !self.failures.is_empty() {
            panic!(
                "{} of {} vectors failed:\n{}",
                self.failures.len(),
                self.checked,
                self.failures.join("\n")
            );
        }
    }
}
