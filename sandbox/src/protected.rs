//! A place a command may read but never write, even inside a writable root; or one it
//! sees empty (a secret on the deny-read list).

use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReadOnlyPlace {
    pub path: PathBuf,
    /// A directory tree (held by an empty read-only directory while it does not exist)
    /// rather than one file (held by an empty read-only file).
    pub tree: bool,
    /// Seen empty rather than read-only: an empty read-only file bound over a file, an
    /// empty read-only tmpfs over a directory, wherever it is.
    pub hidden: bool,
}

impl ReadOnlyPlace {
    pub fn tree(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            tree: true,
            hidden: false,
        }
    }

    pub fn file(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            tree: false,
            hidden: false,
        }
    }

    /// A secret: a directory tree (`tree`) or a file the command sees empty.
    pub fn hidden(path: impl Into<PathBuf>, tree: bool) -> Self {
        Self {
            path: path.into(),
            tree,
            hidden: true,
        }
    }
}
