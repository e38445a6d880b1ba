//! `.ai` agent files: optional shebang, YAML frontmatter between `---` lines, then the system
//! prompt. Unknown frontmatter keys are rejected with the key named (SPEC §3).

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::duration::{CacheTtl, HumanDuration};

/// The frontmatter keys of SPEC §3, exactly; anything else is an error.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AgentFrontmatter {
    pub description: Option<String>,
    pub usage: Option<String>,
    pub tool_name: Option<String>,
    /// `provider/model` targets, tried in order on retries.
    pub models: Option<OneOrMany>,
    pub tools: Option<OneOrMany>,
    pub agents: Option<OneOrMany>,
    pub input: Option<IoSpec>,
    pub output: Option<IoSpec>,
    pub max_turns: Option<u32>,
    pub max_tool_calls_per_turn: Option<u32>,
    pub max_retries: Option<u32>,
    pub llm_timeout: Option<HumanDuration>,
    pub tool_timeout: Option<HumanDuration>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub top_k: Option<u32>,
    pub max_output_tokens: Option<u32>,
    pub repeat_penalty: Option<f64>,
    pub tool_response_max_bytes: Option<u64>,
    /// The most bytes one model response may carry: its text, reasoning and tool-call
    /// arguments as they stream, or its whole body when not streamed. Past it the run ends
    /// `output_too_large`.
    pub llm_response_max_bytes: Option<u64>,
    /// `truncate` (default) or `handles`.
    pub tool_output: Option<ToolOutputMode>,
    pub reasoning: Option<Value>,
    pub reasoning_tokens: Option<Value>,
    /// How long responses are cached (`off` when absent).
    pub cache: Option<CacheTtl>,
    pub context_window: Option<u64>,
    pub finalization: Option<Finalization>,
    pub transport: Option<Transport>,
    pub user_scoped: Option<bool>,
    /// OpenAI streaming: render progress (tools, task status, turns) into `reasoning_content`.
    pub progress_in_reasoning: Option<bool>,
    /// Tool-name patterns whose calls wait for a person's approval (SPEC §8).
    pub approve: Option<OneOrMany>,
    /// How long such a call waits before it counts as denied (default 10m).
    pub approval_timeout: Option<HumanDuration>,
    /// What one run of the agent may spend (SPEC §14).
    pub budget: Option<crate::vocabulary::budget::RunBudget>,
    /// What a run that reaches its budget does: `fail`.
    pub on_budget: Option<crate::vocabulary::budget::OnBudget>,
    /// What a message to a conversation still answering another does (SPEC §13).
    pub busy: Option<super::BusyPolicy>,
    /// `text`: PDFs go as their extracted text to models that cannot read them (SPEC §11).
    pub attachments: Option<super::attachments::AttachmentMode>,
    /// Agents run first, in parallel; their answers reach this agent as advisories.
    pub advisors: Option<OneOrMany>,
    /// Agents this one may hand the conversation to with `router__handoff-to`.
    pub router: Option<RouterSpec>,
    /// The agent that continues after this one finishes; its answer is the run's.
    pub handoff: Option<String>,
}

/// `router:` frontmatter.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RouterSpec {
    pub destinations: OneOrMany,
}

/// A YAML value that may be written as one string or a list of strings.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    pub fn to_vec(&self) -> Vec<String> {
        match self {
            Self::One(s) => vec![s.clone()],
            Self::Many(v) => v.clone(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct IoSpec {
    pub format: Option<String>,
    pub schema: Option<Value>,
}

/// How a session ends (SPEC §3).
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Finalization {
    /// The contract: only the final report (tool call or XML FINAL tag) ends the session.
    #[default]
    Report,
    /// The first assistant message without tool calls is the answer.
    Text,
}

/// What happens to a tool output longer than `toolResponseMaxBytes`.
#[derive(Debug, Clone, Copy, Default, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ToolOutputMode {
    /// The contract: cut behind the `[TRUNCATED]` notice.
    #[default]
    Truncate,
    /// Kept whole for the run; the model gets the notice, a handle, the head and the tail, and
    /// reads the rest with `agent__tool_output`.
    Handles,
}

/// How tools and the final report travel (contract §11).
#[derive(Debug, Clone, Copy, Default, Deserialize, serde::Serialize, PartialEq, Eq)]
pub enum Transport {
    #[default]
    #[serde(rename = "xml-final")]
    XmlFinal,
    #[serde(rename = "native")]
    Native,
    #[serde(rename = "xml")]
    Xml,
}

/// A parsed `.ai` file.
#[derive(Debug, Clone)]
pub struct AgentFile {
    pub frontmatter: AgentFrontmatter,
    /// The body after the frontmatter: the system prompt.
    pub prompt: String,
    /// The frontmatter text as written, part of the agent's cache hash.
    pub frontmatter_text: String,
}

#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct AgentFileError {
    pub path: String,
    pub message: String,
}

pub fn read_agent_file(path: &Path) -> Result<AgentFile, AgentFileError> {
    let text = std::fs::read_to_string(path).map_err(|e| AgentFileError {
        path: path.display().to_string(),
        message: format!("cannot read: {e}"),
    })?;
    parse_agent_file(&text).map_err(|message| AgentFileError {
        path: path.display().to_string(),
        message,
    })
}

/// Splits and parses an agent file's text.
pub fn parse_agent_file(text: &str) -> Result<AgentFile, String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (text, shebang_lines) = match text.strip_prefix("#!") {
        Some(rest) => (rest.split_once('\n').map_or("", |(_, after)| after), 1),
        None => (text, 0),
    };
    let Some(after_open) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return Ok(AgentFile {
            frontmatter: AgentFrontmatter::default(),
            prompt: text.trim().to_string(),
            frontmatter_text: String::new(),
        });
    };
    let (yaml, body) = split_at_closing_fence(after_open)
        .ok_or("frontmatter starts with --- but has no closing --- line")?;
    let frontmatter: AgentFrontmatter = if yaml.trim().is_empty() {
        AgentFrontmatter::default()
    } else {
        // The YAML starts after the shebang and the opening `---`.
        serde_yaml_ng::from_str(yaml).map_err(|e| frontmatter_error(&e, shebang_lines + 1))?
    };
    Ok(AgentFile {
        frontmatter,
        prompt: body.trim().to_string(),
        frontmatter_text: yaml.to_string(),
    })
}

/// A frontmatter error with its line counted from the top of the file (the YAML parser counts
/// from the frontmatter) and, for a misspelt key, the key that was probably meant.
fn frontmatter_error(error: &serde_yaml_ng::Error, lines_before: usize) -> String {
    let message = error.to_string();
    let Some(location) = error.location() else {
        return format!("frontmatter: {message}");
    };
    // The parser ends its message with its own " at line L column C".
    let own_suffix = format!(" at line {} column {}", location.line(), location.column());
    let text = message.strip_suffix(&own_suffix).unwrap_or(&message);
    let hint = misspelt_key_hint(text);
    format!(
        "frontmatter line {}, column {}: {text}{hint}",
        location.line() + lines_before,
        location.column()
    )
}

/// "; did you mean `maxTurns`?" for serde's "unknown field `maxTurnz`, expected one of …".
fn misspelt_key_hint(text: &str) -> String {
    let Some(rest) = text.strip_prefix("unknown field `") else {
        return String::new();
    };
    let Some((unknown, expected)) = rest.split_once('`') else {
        return String::new();
    };
    let closest = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|known| (strsim::jaro_winkler(unknown, known), known))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    match closest {
        Some((score, known)) if score >= 0.8 => format!("; did you mean `{known}`?"),
        _ => String::new(),
    }
}

fn split_at_closing_fence(text: &str) -> Option<(&str, &str)> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Some((&text[..offset], &text[offset + line.len()..]));
        }
        offset += line.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_frontmatter_and_prompt() {
        let file = parse_agent_file(
            "#!/usr/bin/env agentd\n---\ndescription: Helps\nmodels: [llm/gpt-4o-mini, other/m]\nmaxTurns: 4\nllmTimeout: 30s\nfinalization: text\ntransport: native\n---\nYou are helpful.\n",
        )
        .expect("parses");
        assert_eq!(file.frontmatter.description.as_deref(), Some("Helps"));
        assert_eq!(
            file.frontmatter.models.map(|m| m.to_vec()),
            Some(vec!["llm/gpt-4o-mini".into(), "other/m".into()])
        );
        assert_eq!(file.frontmatter.max_turns, Some(4));
        assert_eq!(
            file.frontmatter.llm_timeout,
            Some(HumanDuration(std::time::Duration::from_secs(30)))
        );
        assert_eq!(file.frontmatter.finalization, Some(Finalization::Text));
        assert_eq!(file.frontmatter.transport, Some(Transport::Native));
        assert_eq!(file.prompt, "You are helpful.");
    }

    #[test]
    fn bad_cache_ttl_is_named() {
        let err = parse_agent_file("---\ncache: someday\n---\nhi").unwrap_err();
        assert!(err.contains("cache") && err.contains("someday"), "{err}");
    }

    #[test]
    fn attachments_is_native_or_text() {
        let file = parse_agent_file("---\nattachments: text\n---\nhi").expect("valid");
        assert_eq!(
            file.frontmatter.attachments,
            Some(super::super::attachments::AttachmentMode::Text)
        );
        let err = parse_agent_file("---\nattachments: pdf\n---\nhi").unwrap_err();
        assert!(err.contains("attachments") && err.contains("pdf"), "{err}");
    }

    #[test]
    fn unknown_key_is_named() {
        let err = parse_agent_file("---\nmaxTurnz: 3\n---\nhi").unwrap_err();
        assert!(err.contains("unknown field `maxTurnz`"), "{err}");
    }

    #[test]
    fn errors_count_lines_from_the_top_of_the_file_and_suggest_the_key() {
        let err = parse_agent_file("---\ndescription: a\nmaxTurnz: 3\n---\nhi").unwrap_err();
        assert!(
            err.starts_with("frontmatter line 3, column 1: unknown field `maxTurnz`"),
            "{err}"
        );
        assert!(err.ends_with("did you mean `maxTurns`?"), "{err}");
        let err =
            parse_agent_file("#!/usr/bin/env agentd\n---\nmaxTurns: many\n---\nhi").unwrap_err();
        assert!(err.starts_with("frontmatter line 3,"), "{err}");
        let err = parse_agent_file("---\nzzqx: 1\n---\nhi").unwrap_err();
        assert!(!err.contains("did you mean"), "nothing close: {err}");
    }

    #[test]
    fn wrong_type_and_bad_enum_are_errors() {
        assert!(
            parse_agent_file("---\nmaxTurns: many\n---\nhi")
                .unwrap_err()
                .contains("maxTurns")
        );
        assert!(
            parse_agent_file("---\nfinalization: sometimes\n---\nhi")
                .unwrap_err()
                .contains("sometimes")
        );
    }

    #[test]
    fn file_without_frontmatter_is_all_prompt() {
        let file = parse_agent_file("Just a prompt.\n").expect("parses");
        assert_eq!(file.prompt, "Just a prompt.");
        assert_eq!(file.frontmatter, AgentFrontmatter::default());
    }

    #[test]
    fn unclosed_frontmatter_is_an_error() {
        assert!(
            parse_agent_file("---\ndescription: x\nno end")
                .unwrap_err()
                .contains("closing")
        );
    }

    #[test]
    fn single_model_string_is_accepted() {
        let file = parse_agent_file("---\nmodels: llm/m\n---\np").expect("parses");
        assert_eq!(
            file.frontmatter.models.map(|m| m.to_vec()),
            Some(vec!["llm/m".into()])
        );
    }
}
