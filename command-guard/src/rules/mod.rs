//! Rule tables. `hardline` is the unconditional floor (§1.7); `dangerous` needs approval (§1.9).

pub(crate) mod dangerous;
pub(crate) mod hardline;
pub(crate) mod lazy_set;
pub(crate) mod paths;
// Written by a test, byte for byte (see `remembered_rule_literals_are_fresh`): left as written.
#[rustfmt::skip]
mod rule_literals;
