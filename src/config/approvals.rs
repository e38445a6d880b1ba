//! Which tool calls need a person's approval before they run (SPEC §8): the agent's `approve:`
//! patterns (tool names as the model sees them, `*` as a wildcard) and `requireApproval` on MCP
//! servers and REST tools, folded into one [`ApprovalPolicy`] per agent at load, with the wait
//! bounded by `approvalTimeout`. Only decides; never pauses or resumes anything.

use std::time::Duration;

use serde::Deserialize;

use super::Config;

/// The namespace of REST tools (`rest__name`).
const REST_NAMESPACE: &str = "rest";

/// How long a call waits for its decision when neither the agent nor `defaults` say.
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(600);

/// `requireApproval` on an MCP server or REST tool: `true` (every tool) or a list of tool names.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum RequireApproval {
    All(bool),
    Tools(Vec<String>),
}

/// The calls of one agent that wait for a person, and how long they wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalPolicy {
    /// Tool-name patterns (`github__create_*`); a call matching any waits.
    pub patterns: Vec<String>,
    pub timeout: Duration,
}

impl Default for ApprovalPolicy {
    fn default() -> Self {
        Self {
            patterns: Vec::new(),
            timeout: DEFAULT_APPROVAL_TIMEOUT,
        }
    }
}

impl ApprovalPolicy {
    /// Whether a call of `tool` must be approved before it runs.
    pub fn requires(&self, tool: &str) -> bool {
        self.patterns.iter().any(|p| pattern_matches(p, tool))
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }
}

/// `*` matches any run of characters (none included); everything else matches itself.
pub fn pattern_matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// The patterns `requireApproval` adds for the tool entries an agent uses (`server` or
/// `rest__name`).
pub fn configured_patterns(config: &Config, agent_tools: &[String]) -> Vec<String> {
    let mut patterns = Vec::new();
    for entry in agent_tools {
        if let Some(rest) = entry
            .strip_prefix(REST_NAMESPACE)
            .and_then(|r| r.strip_prefix("__"))
        {
            let required = config
                .rest_tools
                .get(rest)
                .and_then(|tool| tool.require_approval.as_ref());
            match required {
                Some(RequireApproval::All(true)) => patterns.push(entry.clone()),
                Some(RequireApproval::Tools(names)) if names.iter().any(|n| n == rest) => {
                    patterns.push(entry.clone())
                }
                _ => {}
            }
            continue;
        }
        let Some(server) = config.mcp_servers.get(entry) else {
            continue;
        };
        match &server.require_approval {
            Some(RequireApproval::All(true)) => patterns.push(format!("{entry}__*")),
            Some(RequireApproval::Tools(names)) => {
                patterns.extend(names.iter().map(|name| format!("{entry}__{name}")))
            }
            _ => {}
        }
    }
    patterns
}

/// Why an `approve:` pattern cannot match any tool the agent has, if it cannot. `mcp_servers`
/// are the servers the agent uses (their tools are known only once connected, so a pattern that
/// can reach into a server's `server__` namespace is taken); `known_tools` are the names known
/// at load (`rest__…`, `agent__…`).
pub fn unmatched_pattern(
    pattern: &str,
    mcp_servers: &[&str],
    known_tools: &[String],
) -> Option<String> {
    if pattern.trim().is_empty() {
        return Some("an empty pattern matches no tool".into());
    }
    let literal = pattern.split('*').next().unwrap_or_default();
    let reaches_a_server = mcp_servers.iter().any(|server| {
        let prefix = format!("{server}__");
        literal.starts_with(&prefix) || (pattern.contains('*') && prefix.starts_with(literal))
    });
    if reaches_a_server
        || known_tools
            .iter()
            .any(|tool| pattern_matches(pattern, tool))
    {
        return None;
    }
    let mut names: Vec<String> = mcp_servers.iter().map(|s| format!("{s}__*")).collect();
    names.extend(known_tools.iter().cloned());
    let names = if names.is_empty() {
        "none".to_string()
    } else {
        names.join(", ")
    };
    Some(format!(
        "{pattern:?} matches no tool of this agent (its tools: {names})"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_whole_names_with_star_wildcards() {
        assert!(pattern_matches("github__create_*", "github__create_issue"));
        assert!(pattern_matches("github__create_*", "github__create_"));
        assert!(!pattern_matches("github__create_*", "github__delete_issue"));
        assert!(pattern_matches("*", "anything"));
        assert!(pattern_matches("rest__pay", "rest__pay"));
        assert!(!pattern_matches("rest__pay", "rest__payment"));
        assert!(pattern_matches("*__delete*", "fs__delete_file"));
        assert!(pattern_matches("a*b*c", "a-b-c"));
        assert!(!pattern_matches("a*b*c", "a-c-b"));
        assert!(!pattern_matches("ab*ab", "ab"), "the ends may not overlap");
    }

    #[test]
    fn a_pattern_that_reaches_no_tool_is_named() {
        let known = vec!["rest__pay".to_string(), "agent__helper".to_string()];
        assert_eq!(
            unmatched_pattern("github__create_*", &["github"], &known),
            None
        );
        assert_eq!(unmatched_pattern("git*", &["github"], &known), None);
        assert_eq!(unmatched_pattern("rest__pay", &[], &known), None);
        assert_eq!(unmatched_pattern("agent__*", &[], &known), None);
        let error = unmatched_pattern("gitlab__*", &["github"], &known).expect("unmatched");
        assert!(error.contains("\"gitlab__*\" matches no tool"), "{error}");
        assert!(
            error.contains("github__*, rest__pay, agent__helper"),
            "{error}"
        );
        assert!(unmatched_pattern("rest__payment", &[], &known).is_some());
    }

    #[test]
    fn require_approval_on_servers_and_rest_tools_becomes_patterns_for_the_tools_used() {
        let config = crate::config::parse_config(
            serde_json::json!({
                "mcpServers": {
                    "github": {"command": "gh-mcp", "requireApproval": true},
                    "fs": {"command": "fs-mcp", "requireApproval": ["write_file"]},
                    "time": {"command": "time-mcp", "requireApproval": false},
                    "unused": {"command": "x", "requireApproval": true}
                },
                "restTools": {
                    "pay": {"url": "http://127.0.0.1:9/pay", "requireApproval": true},
                    "look": {"url": "http://127.0.0.1:9/look"}
                }
            }),
            "test",
        )
        .expect("config");
        let tools: Vec<String> = ["github", "fs", "time", "rest__pay", "rest__look"]
            .iter()
            .map(|t| t.to_string())
            .collect();
        let policy = ApprovalPolicy {
            patterns: configured_patterns(&config, &tools),
            timeout: DEFAULT_APPROVAL_TIMEOUT,
        };
        assert_eq!(
            policy.patterns,
            ["github__*", "fs__write_file", "rest__pay"],
            "only the tools this agent uses"
        );
        assert!(policy.requires("github__create_issue"));
        assert!(policy.requires("fs__write_file"));
        assert!(!policy.requires("fs__read_file"));
        assert!(!policy.requires("time__now"));
        assert!(!policy.requires("rest__look"));
    }

    #[test]
    fn a_policy_requires_approval_for_matching_tools_only() {
        let policy = ApprovalPolicy {
            patterns: vec!["fs__write_*".into()],
            timeout: DEFAULT_APPROVAL_TIMEOUT,
        };
        assert!(policy.requires("fs__write_file"));
        assert!(!policy.requires("fs__read_file"));
        assert!(ApprovalPolicy::default().is_empty());
    }
}
