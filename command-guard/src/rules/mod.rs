//! Rule tables. `hardline` is the unconditional floor (§1.7); `dangerous` needs approval (§1.9).

pub(crate) mod dangerous;
pub(crate) mod hardline;
pub(crate) mod lazy_set;
pub(crate) mod paths;
mod rule_literals;
