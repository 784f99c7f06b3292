//! Validation of the per-command `workdir` argument (reference §3.1, §3.7).

/// `Ok(())` when every character is allowed: Unicode letters and digits, `/ \ : _ - . ~`,
/// space, `+ @ = ,`. Otherwise the message names the first bad character.
pub fn validate(workdir: &str) -> Result<(), String> {
    if workdir.trim().is_empty() {
        return Err("Blocked: workdir is empty".into());
    }
    for c in workdir.chars() {
        let ok = c.is_alphanumeric()
            || matches!(
                c,
                '/' | '\\' | ':' | '_' | '-' | '.' | '~' | ' ' | '+' | '@' | '=' | ','
            );
        if !ok {
            let shown = match c {
                '\n' => "\\n (newline)".to_string(),
                '\r' => "\\r (carriage return)".to_string(),
                '\t' => "\\t (tab)".to_string(),
                c if c.is_control() => format!("U+{:04X} (control character)", c as u32),
                c => format!("'{c}'"),
            };
            return Err(format!(
                "Blocked: workdir contains the disallowed character {shown}. A workdir may only contain letters, \
                 digits, spaces and / \\ : _ - . ~ + @ = , (no shell syntax); run `cd` inside the command instead \
                 if you need something unusual."
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::validate;

    #[test]
    fn vectors() {
        for ok in [
            r"C:\Users\Alice\project",
            "C:/Users/Alice/project",
            r"\\server\share\project",
            "/tmp/a b",
            "~/proj",
            "/données/ü",
        ] {
            assert!(validate(ok).is_ok(), "{ok}");
        }
        for bad in [
            r"C:\Users\Alice\project; rm -rf /",
            r"C:\Users\Alice\project$(whoami)",
            "/tmp/a\nb",
            "/tmp/`x`",
            "/tmp|x",
        ] {
            assert!(validate(bad).unwrap_err().starts_with("Blocked:"), "{bad}");
        }
    }
}
