//! Path vocabulary shared by the rules (reference §1.6): block devices and path families.
//! Fragments are regex source meant to be embedded in case-insensitive patterns.

use std::sync::LazyLock;

use regex::Regex;

/// A block device path, without any preceding-character condition.
pub(crate) const BLOCK_DEVICE: &str = r#"/dev/(?:(?:sd|hd|vd|xvd|nvme|mmcblk|md|dm-|loop|nbd)[a-z0-9]+|r?disk[0-9][a-z0-9]*|mapper/[^\s;&|<>()'"]+|disk/by-(?:id|uuid|path|label|partuuid|partlabel)/[^\s;&|<>()'"]+)"#;

/// Characters that may continue a path.
pub(crate) const PATH_CHAR: &str = r#"[^\s;&|<>'"()]"#;
/// Where a path ends (`#` deliberately is not an end).
pub(crate) const PATH_END: &str = r#"(?:$|[\s;&|<>'"()])"#;

const HOME: &str = r"(?:~|\$home|\$\{home\})";

pub(crate) fn ssh() -> String {
    format!(r"{HOME}/\.ssh(?:/{PATH_CHAR}*)?")
}
pub(crate) fn hermes_env_or_config() -> String {
    format!(r"(?:{HOME}/\.hermes|\$hermes_home|\$\{{hermes_home\}})/(?:\.env|config\.yaml)")
}
pub(crate) fn shell_rc() -> String {
    format!(r"{HOME}/\.(?:bashrc|zshrc|profile|bash_profile|zprofile)")
}
pub(crate) fn credential_files() -> String {
    format!(r"{HOME}/\.(?:netrc|pgpass|npmrc|pypirc)")
}
pub(crate) fn system_config() -> String {
    format!(r"(?:/etc/|/private/(?:etc|var|tmp|home)/){PATH_CHAR}*")
}
pub(crate) fn sensitive() -> String {
    format!(
        "(?:{}|{BLOCK_DEVICE}|{}|{}|{}|{})",
        system_config(),
        ssh(),
        hermes_env_or_config(),
        shell_rc(),
        credential_files()
    )
}
pub(crate) fn user_sensitive() -> String {
    format!("(?:{}|{}|{})", ssh(), shell_rc(), credential_files())
}
pub(crate) fn project_sensitive() -> String {
    format!(r#"(?:{PATH_CHAR}*/)?(?:\.env(?:\.[^\s;&|<>'"()/.]+)*|config\.yaml)"#)
}

static BLOCK_DEVICE_WORD: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!("(?i)^{BLOCK_DEVICE}")).expect("valid block device regex")
});

/// Whether a word (already unquoted) names a block device.
pub(crate) fn is_block_device(word: &str) -> bool {
    BLOCK_DEVICE_WORD.is_match(word)
}
