//! What a person is shown of a command they are asked to approve: the command as it
//! will run, secrets and all (a mask such as `API_KEY=***` can hide `$(rm -rf …)`), with
//! every character that could change what the screen shows made visible.

/// `command` with control characters (escape sequences, carriage returns, backspaces),
/// C1 controls, and invisible or direction-changing format characters written as
/// escapes (`\x1b`, `\r`, `\u{202e}`); newlines and tabs are kept.
pub fn shown_command(command: &str) -> String {
    let mut shown = String::with_capacity(command.len());
    for c in command.chars() {
        match c {
            '\n' | '\t' => shown.push(c),
            '\r' => shown.push_str("\\r"),
            '\\' => shown.push('\\'),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                shown.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if is_invisible(c) => shown.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => shown.push(c),
        }
    }
    shown
}

/// C1 controls, and format characters that are invisible or reorder text.
fn is_invisible(c: char) -> bool {
    matches!(c as u32,
        0x80..=0x9f
        | 0xad
        | 0x061c
        | 0x180e
        | 0x200b..=0x200f
        | 0x2028..=0x202e
        | 0x2060..=0x206f
        | 0xfeff
        | 0xfff9..=0xfffb
        | 0xe0000..=0xe007f)
}

#[cfg(test)]
mod tests {
    use super::shown_command;

    #[test]
    fn escapes_and_overwrites_become_visible() {
        assert_eq!(
            shown_command("rm -rf X #\x1b[2K\r\x1b[1Aecho hi"),
            "rm -rf X #\\x1b[2K\\r\\x1b[1Aecho hi"
        );
        assert_eq!(shown_command("a\u{202e}b\u{9b}c"), "a\\u{202e}b\\u{009b}c");
        assert_eq!(
            shown_command("export K=$(rm -rf /x)\nls\tx"),
            "export K=$(rm -rf /x)\nls\tx"
        );
    }
}
