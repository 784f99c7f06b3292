//! Build errors that name the file, line and column, like rustc's.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// Relative to the crate root, with `/` separators, e.g. `tools/file.rs`.
    pub file: String,
    /// 1-based.
    pub line: usize,
    /// 1-based, in characters.
    pub column: usize,
    pub message: String,
}

impl Diagnostic {
    pub fn at(file: &str, span: proc_macro2::Span, message: impl Into<String>) -> Self {
        let start = span.start();
        Diagnostic {
            file: file.to_string(),
            line: start.line.max(1),
            column: start.column + 1,
            message: message.into(),
        }
    }

    pub fn from_syn(file: &str, error: &syn::Error) -> Vec<Self> {
        error
            .clone()
            .into_iter()
            .map(|e| Diagnostic::at(file, e.span(), e.to_string()))
            .collect()
    }

    /// For problems of a whole file (unreadable, missing).
    pub fn file_level(file: &str, message: impl Into<String>) -> Self {
        Diagnostic {
            file: file.to_string(),
            line: 1,
            column: 1,
            message: message.into(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )
    }
}
