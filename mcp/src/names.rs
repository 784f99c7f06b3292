//! Tool names of the dynamic layer and the include/exclude filters.

use globset::{Glob, GlobMatcher};

/// Every character outside `[A-Za-z0-9_]` becomes `_`.
pub fn sanitize(part: &str) -> String {
    part.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `mcp_<server>_<tool>`, each part sanitised.
pub fn mcp_tool_name(server: &str, tool: &str) -> String {
    format!("mcp_{}_{}", sanitize(server), sanitize(tool))
}

/// The toolset of a server's tools: `mcp-<server>` (raw server name).
pub fn mcp_toolset(server: &str) -> String {
    format!("mcp-{server}")
}

/// One include/exclude entry: an exact name or an fnmatch-style glob.
#[derive(Debug, Clone)]
pub struct Pattern {
    text: String,
    glob: Option<GlobMatcher>,
}

impl Pattern {
    pub fn new(text: &str) -> Pattern {
        let is_glob = text.contains(['*', '?', '[']);
        let glob = if is_glob {
            Glob::new(text).ok().map(|g| g.compile_matcher())
        } else {
            None
        };
        Pattern {
            text: text.to_string(),
            glob,
        }
    }

    pub fn matches(&self, name: &str) -> bool {
        self.text == name || self.glob.as_ref().is_some_and(|g| g.is_match(name))
    }
}

/// `tools.include` / `tools.exclude` of one server. Include wins: when it is given
/// (even empty) only the names it matches are registered and exclude is not read.
#[derive(Debug, Clone, Default)]
pub struct ToolFilter {
    pub include: Option<Vec<Pattern>>,
    pub exclude: Vec<Pattern>,
}

impl ToolFilter {
    pub fn allows(&self, tool: &str) -> bool {
        match &self.include {
            Some(include) => include.iter().any(|p| p.matches(tool)),
            None => !self.exclude.iter().any(|p| p.matches(tool)),
        }
    }

    /// Whether a tool passes, matching patterns against its own name and against
    /// its sanitised form (`get-tiny-image` is also `get_tiny_image`).
    pub fn allows_either(&self, tool: &str) -> bool {
        let clean = sanitize(tool);
        let matches = |patterns: &[Pattern]| {
            patterns
                .iter()
                .any(|p| p.matches(tool) || p.matches(&clean))
        };
        match &self.include {
            Some(include) => matches(include),
            None => !matches(&self.exclude),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_sanitised_per_part() {
        assert_eq!(
            mcp_tool_name("my-server.v2", "get/thing"),
            "mcp_my_server_v2_get_thing"
        );
        assert_eq!(mcp_toolset("my-server.v2"), "mcp-my-server.v2");
    }

    #[test]
    fn include_wins_and_empty_include_allows_nothing() {
        let filter = ToolFilter {
            include: Some(vec![Pattern::new("get_*")]),
            exclude: vec![Pattern::new("get_a")],
        };
        assert!(filter.allows("get_a"));
        assert!(!filter.allows("put_a"));
        let none = ToolFilter {
            include: Some(vec![]),
            exclude: vec![],
        };
        assert!(!none.allows("anything"));
        let exclude = ToolFilter {
            include: None,
            exclude: vec![Pattern::new("echo"), Pattern::new("long*")],
        };
        assert!(!exclude.allows("echo") && !exclude.allows("longRunning") && exclude.allows("add"));
    }
}
