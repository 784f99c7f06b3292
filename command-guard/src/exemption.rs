//! The verification-file exemption (reference §1.2 step 2): Hermes deletes its own scratch files
//! with exactly `rm -f <temp dir>/hermes-verify-<name>` (or `hermes-ad-hoc-`); nothing else.

use crate::tokenize::{tokenize, Token};
use crate::GuardContext;

const PREFIXES: &[&str] = &["hermes-verify-", "hermes-ad-hoc-"];

pub(crate) fn is_verification_cleanup(raw: &str, ctx: &GuardContext) -> bool {
    let lexed = tokenize(raw);
    if lexed.unterminated || !lexed.payloads.is_empty() || lexed.tokens.len() != 3 {
        return false;
    }
    let words: Vec<&str> = lexed
        .tokens
        .iter()
        .filter_map(|t| match t {
            Token::Word(w) => Some(w.value.as_str()),
            _ => None,
        })
        .collect();
    let ["rm", "-f", path] = words.as_slice() else {
        return false;
    };
    let Some((parent, name)) = path.rsplit_once('/') else {
        return false;
    };
    let temp_dir = ctx.temp_dir.trim_end_matches('/');
    if parent != temp_dir || temp_dir.split('/').any(|c| c == "..") {
        return false;
    }
    PREFIXES.iter().any(|prefix| {
        name.strip_prefix(prefix).is_some_and(|rest| {
            !rest.is_empty()
                && rest
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        })
    })
}
