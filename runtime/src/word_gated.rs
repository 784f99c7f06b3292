//! Patterns run on every call (a command's guidance, its output's redaction) that most
//! text cannot match: each is searched only in text that names one of its words.
//!
//! The `regex` crate gives each thread that searches with a pattern a cache of its own,
//! kept for good, and every thread that reads a server's calls runs these. A server
//! with 50 idle tasks kept about 30 KiB of such caches (heaptrack), made or grown on its
//! reading threads, and the blocks held up the end of their arena
//! (`benches/many_tasks.rs`, memory). Text without the words never reaches the pattern.

use regex::{Captures, Regex};
use std::sync::OnceLock;

pub struct WordGatedPattern {
    /// Every alternative of the pattern names one of these, as written.
    words: &'static [&'static str],
    pattern: &'static str,
    compiled: OnceLock<Regex>,
}

impl WordGatedPattern {
    pub const fn new(words: &'static [&'static str], pattern: &'static str) -> Self {
        WordGatedPattern {
            words,
            pattern,
            compiled: OnceLock::new(),
        }
    }

    /// Whether `text` names one of the words (and may match).
    pub fn names_a_word(&self, text: &str) -> bool {
        self.words.iter().any(|word| text.contains(word))
    }

    pub fn is_match(&self, text: &str) -> bool {
        self.names_a_word(text) && self.regex().is_match(text)
    }

    pub fn captures<'t>(&self, text: &'t str) -> Option<Captures<'t>> {
        if !self.names_a_word(text) {
            return None;
        }
        self.regex().captures(text)
    }

    fn regex(&self) -> &Regex {
        self.compiled
            .get_or_init(|| Regex::new(self.pattern).expect("valid regex"))
    }
}
