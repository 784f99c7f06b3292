//! A place a command may read but never write, even inside a writable root.

use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReadOnlyPlace {
    pub path: PathBuf,
    /// A directory tree (held by an empty read-only directory while it does not exist)
    /// rather than one file (held by an empty read-only file).
    pub tree: bool,
}

impl ReadOnlyPlace {
    pub fn tree(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            tree: true,
        }
    }

    pub fn file(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            tree: false,
        }
    }
}
