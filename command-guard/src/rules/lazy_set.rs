//! A set of rule regexes that compiles and runs only the rules a text can match.
//!
//! Compiling every rule of the table up front costs milliseconds, more than the rest of a
//! `check-command` process; most commands can match only a handful of rules (a rule about
//! `git push` cannot match a text without `push`). So each rule's pattern is reduced to a
//! set of literals one of which every match must contain, all literals go into one
//! Aho-Corasick automaton (ASCII case-insensitive, like the rules), and a rule's regex is
//! compiled on the first text that contains one of its literals, and run only on such
//! texts. A rule with no such literal runs on every text.
//!
//! The literals are a necessary condition, never a sufficient one, so the verdicts are
//! exactly those of running every regex on every text.

use std::sync::OnceLock;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
use regex::bytes::{Regex, RegexBuilder};
use regex_syntax::ast::{Ast, RepetitionKind, RepetitionRange};

/// Above this many literals a rule's literal set filters too little to be worth it.
const MAX_LITERALS: usize = 64;

struct Slot {
    /// The full pattern, flags included.
    pattern: String,
    regex: OnceLock<Regex>,
}

pub(crate) struct LazySet {
    slots: Vec<Slot>,
    automaton: AhoCorasick,
    /// For each automaton pattern, the slots that literal stands for.
    slots_of_literal: Vec<Vec<usize>>,
    /// Slots without a required literal: candidates for every text.
    unfiltered: Vec<usize>,
}

/// Which slots may match which text: one bit per (text, slot).
pub(crate) struct Candidates {
    words_per_text: usize,
    bits: Vec<u64>,
}

impl Candidates {
    fn set(&mut self, text: usize, slot: usize) {
        self.bits[text * self.words_per_text + slot / 64] |= 1 << (slot % 64);
    }

    fn get(&self, text: usize, slot: usize) -> bool {
        self.bits[text * self.words_per_text + slot / 64] & (1 << (slot % 64)) != 0
    }
}

impl LazySet {
    /// `rules` are `(full pattern, pattern without the flags and anchors it is wrapped in)`;
    /// the second is what literals are read from, parsed case-sensitively (the automaton
    /// folds ASCII case, as the full patterns do). `known` holds literals read earlier
    /// (see [`KnownLiterals`]): a rule whose fingerprint matches is not parsed again.
    pub(crate) fn new(rules: Vec<(String, String)>, known: &[KnownLiterals]) -> LazySet {
        let mut literals: Vec<Vec<u8>> = Vec::new();
        let mut slots_of_literal: Vec<Vec<usize>> = Vec::new();
        let mut unfiltered = Vec::new();
        let mut slots = Vec::with_capacity(rules.len());
        for (index, (pattern, bare)) in rules.into_iter().enumerate() {
            let remembered = known
                .get(index)
                .filter(|k| k.fingerprint == fingerprint(&bare));
            let required = match remembered {
                Some(k) => k
                    .literals
                    .map(|set| set.iter().map(|l| l.as_bytes().to_vec()).collect()),
                None => required_literals_of(&bare),
            };
            match required {
                Some(required) => {
                    for literal in required {
                        let literal = literal.to_ascii_lowercase();
                        match literals.iter().position(|known| *known == literal) {
                            Some(at) => slots_of_literal[at].push(index),
                            None => {
                                literals.push(literal);
                                slots_of_literal.push(vec![index]);
                            }
                        }
                    }
                }
                None => unfiltered.push(index),
            }
            slots.push(Slot {
                pattern,
                regex: OnceLock::new(),
            });
        }
        let automaton = AhoCorasickBuilder::new()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            // A DFA or contiguous NFA would search a little faster but takes longer to
            // build than the searches of a one-shot process take.
            .kind(Some(AhoCorasickKind::NoncontiguousNFA))
            .build(&literals)
            .expect("rule literals build an automaton");
        LazySet {
            slots,
            automaton,
            slots_of_literal,
            unfiltered,
        }
    }

    /// The slots each text may match (one automaton pass per text).
    pub(crate) fn candidates(&self, texts: &[String]) -> Candidates {
        let words_per_text = self.slots.len().div_ceil(64).max(1);
        let mut candidates = Candidates {
            words_per_text,
            bits: vec![0; words_per_text * texts.len()],
        };
        for (text_index, text) in texts.iter().enumerate() {
            for &slot in &self.unfiltered {
                candidates.set(text_index, slot);
            }
            for found in self.automaton.find_overlapping_iter(text.as_bytes()) {
                for &slot in &self.slots_of_literal[found.pattern().as_usize()] {
                    candidates.set(text_index, slot);
                }
            }
        }
        candidates
    }

    /// Whether the regex of `slot` matches any of `texts` (those it is a candidate for).
    pub(crate) fn matches_any(
        &self,
        slot: usize,
        texts: &[String],
        candidates: &Candidates,
    ) -> bool {
        texts.iter().enumerate().any(|(index, text)| {
            candidates.get(index, slot) && self.regex(slot).is_match(text.as_bytes())
        })
    }

    fn regex(&self, slot: usize) -> &Regex {
        let slot = &self.slots[slot];
        slot.regex.get_or_init(|| {
            RegexBuilder::new(&slot.pattern)
                .size_limit(64 << 20)
                .build()
                .unwrap_or_else(|e| panic!("rule pattern {:?} compiles: {e}", slot.pattern))
        })
    }

    /// Compiles every rule now (for hosts that would rather pay at start than on a call).
    pub(crate) fn compile_all(&self) {
        for slot in 0..self.slots.len() {
            self.regex(slot);
        }
    }

    #[cfg(test)]
    pub(crate) fn unfiltered(&self) -> &[usize] {
        &self.unfiltered
    }
}

/// A rule's literals as read at development time, so a process does not parse every
/// pattern (parsing them all costs milliseconds). Checked against the rule's fingerprint,
/// so an edited rule is read afresh rather than filtered by stale literals.
pub(crate) struct KnownLiterals {
    pub fingerprint: u64,
    pub literals: Option<&'static [&'static str]>,
}

/// FNV-1a of the pattern text.
pub(crate) fn fingerprint(pattern: &str) -> u64 {
    pattern.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3)
    })
}

/// Rust source of a `KnownLiterals` table for `patterns` (what `rule_literals.rs` holds).
#[cfg(test)]
pub(crate) fn known_literals_source(name: &str, patterns: &[String]) -> String {
    let mut out = format!("pub(crate) const {name}: &[KnownLiterals] = &[\n");
    for pattern in patterns {
        let literals = match required_literals_of(pattern) {
            Some(set) => {
                let quoted: Vec<String> = set
                    .iter()
                    .map(|l| format!("{:?}", String::from_utf8_lossy(l)))
                    .collect();
                format!("Some(&[{}])", quoted.join(", "))
            }
            None => "None".to_string(),
        };
        out.push_str(&format!(
            "    KnownLiterals {{ fingerprint: {:#018x}, literals: {literals} }},\n",
            fingerprint(pattern)
        ));
    }
    out.push_str("];\n");
    out
}

/// Literals at least one of which occurs in every match of `pattern`; `None` when the
/// pattern has no useful such set. Read from the syntax tree alone (no translation, which
/// would cost as much again as compiling): character classes, `.` and assertions count as
/// having no literal, which is always safe.
pub(crate) fn required_literals_of(pattern: &str) -> Option<Vec<Vec<u8>>> {
    let ast = regex_syntax::ast::parse::Parser::new()
        .parse(pattern)
        .unwrap_or_else(|e| panic!("rule pattern {pattern:?} parses: {e}"));
    required(&ast)
}

fn required(ast: &Ast) -> Option<Vec<Vec<u8>>> {
    match ast {
        Ast::Literal(literal) => Some(vec![literal.c.to_string().into_bytes()]),
        Ast::Group(group) => required(&group.ast),
        Ast::Repetition(repetition) => {
            let at_least_once = match &repetition.op.kind {
                RepetitionKind::OneOrMore => true,
                RepetitionKind::Range(range) => match range {
                    RepetitionRange::Exactly(n)
                    | RepetitionRange::AtLeast(n)
                    | RepetitionRange::Bounded(n, _) => *n >= 1,
                },
                RepetitionKind::ZeroOrOne | RepetitionKind::ZeroOrMore => false,
            };
            at_least_once.then(|| required(&repetition.ast)).flatten()
        }
        // Every part occurs in a match (adjacent characters as one string): the most
        // selective part's literals will do.
        Ast::Concat(concat) => {
            let mut best: Option<Vec<Vec<u8>>> = None;
            let mut consider = |set: Vec<Vec<u8>>| {
                if best
                    .as_ref()
                    .is_none_or(|b| selectivity(&set) > selectivity(b))
                {
                    best = Some(set);
                }
            };
            let mut run: Vec<u8> = Vec::new();
            for part in &concat.asts {
                if let Ast::Literal(literal) = part {
                    run.extend_from_slice(literal.c.to_string().as_bytes());
                    continue;
                }
                if !run.is_empty() {
                    consider(vec![std::mem::take(&mut run)]);
                }
                if let Some(set) = required(part) {
                    consider(set);
                }
            }
            if !run.is_empty() {
                consider(vec![run]);
            }
            best
        }
        // A match is a match of one branch: every branch needs literals.
        Ast::Alternation(alternation) => {
            let mut union: Vec<Vec<u8>> = Vec::new();
            for branch in &alternation.asts {
                for literal in required(branch)? {
                    if !union.contains(&literal) {
                        union.push(literal);
                    }
                }
            }
            (union.len() <= MAX_LITERALS).then_some(union)
        }
        Ast::Empty(_)
        | Ast::Flags(_)
        | Ast::Dot(_)
        | Ast::Assertion(_)
        | Ast::ClassUnicode(_)
        | Ast::ClassPerl(_)
        | Ast::ClassBracketed(_) => None,
    }
}

/// Longer shortest literal first, then fewer literals.
fn selectivity(set: &[Vec<u8>]) -> (usize, std::cmp::Reverse<usize>) {
    (
        set.iter().map(Vec::len).min().unwrap_or(0),
        std::cmp::Reverse(set.len()),
    )
}

#[cfg(test)]
mod tests {
    use super::required_literals_of;

    fn literals(pattern: &str) -> Option<Vec<String>> {
        required_literals_of(pattern).map(|set| {
            set.into_iter()
                .map(|l| String::from_utf8(l).unwrap())
                .collect()
        })
    }

    #[test]
    fn the_most_selective_part_of_a_sequence_is_kept() {
        assert_eq!(
            literals(r"\bgit(?:\s+-\S+)*\s+push\b"),
            Some(vec!["push".into()])
        );
        assert_eq!(
            literals(r#">\s*["']?/dev/(?:sd|hd)[a-z]"#),
            Some(vec!["/dev/".into()])
        );
        assert_eq!(literals(r"\brm\s+-[a-z]*r"), Some(vec!["rm".into()]));
    }

    #[test]
    fn every_branch_of_an_alternation_must_have_literals() {
        assert_eq!(
            literals(r"\b(?:curl|wget)\b"),
            Some(vec!["curl".into(), "wget".into()])
        );
        assert_eq!(literals(r"(?:^|x)"), None);
        assert_eq!(literals(r"(?:x|[ab])"), None);
        assert_eq!(literals(r"[\s\S]*"), None);
    }
}
