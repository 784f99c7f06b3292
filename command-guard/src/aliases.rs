//! Legacy approval keys (reference §2.5): keys persisted by older versions keep working.
//! Aliasing is pairwise, never transitive: approving `find -exec/-execdir rm` for a session must
//! not approve `find -delete`, while the old permanent key `find` covers both.

const FIND_EXEC_RM: &str = "find -exec/-execdir rm";
const FIND_DELETE: &str = "find -delete";
const FIND_DYNAMIC: &str = "find dynamic shell word may expand to destructive flag";

/// Keys that approve `key` (and that `key` approves), excluding `key` itself.
pub fn legacy_key_aliases(key: &str) -> &'static [&'static str] {
    match key {
        "find" => &[FIND_EXEC_RM, FIND_DELETE, FIND_DYNAMIC],
        FIND_EXEC_RM | FIND_DELETE | FIND_DYNAMIC => &["find"],
        "mkfs" => &["format filesystem", "format filesystem (mkfs)"],
        "format filesystem" | "format filesystem (mkfs)" => &["mkfs"],
        "dd" => &["disk copy"],
        "disk copy" => &["dd"],
        "xargs" => &["xargs with rm"],
        "xargs with rm" => &["xargs"],
        _ => &[],
    }
}
