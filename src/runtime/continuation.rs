//! Client tools and the runs that continue them (SPEC §9.2), shared by every headend that takes
//! them (chat completions, Anthropic messages, Responses): a submission's client tools are
//! checked against the agent's own (names, schemas, clashes), a history that answers tool calls
//! must answer calls it contains, and the turns its earlier requests took count against the
//! agent's `maxTurns`.
//!
//! Headends translate their wire into a [`RunSubmission`]; they never decide these rules.

use std::collections::HashSet;
use std::sync::Arc;

use super::{RunSubmission, Runtime};
use crate::agent::client_tools::ClientToolChoice;
use crate::agent::final_report::FINAL_REPORT_TOOL;
use crate::agent::internal_tools::{BATCH_TOOL, TASK_STATUS_TOOL};
use crate::config::AgentSpec;
use crate::llm::{ChatMessage, Role};
use crate::store::StoreError;

/// Why a submission's client tools or tool results cannot be used; every variant names what
/// the client sent, so each headend can point at its own field.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ClientToolError {
    #[error("client tool {index} has no name")]
    Unnamed { index: usize },
    #[error(
        "client tool {index} has a name of {length} characters; the most is {MAX_TOOL_NAME_CHARS}"
    )]
    NameTooLong { index: usize, length: usize },
    #[error(
        "client tool name `{name}` may hold only ASCII letters, digits, `_` and `-` (the \
         providers' rule `^[a-zA-Z0-9_-]{{1,64}}$`)"
    )]
    InvalidName { index: usize, name: String },
    #[error(
        "client tool `{name}` is in the `{prefix}` namespace, which agentd keeps for its internal \
         tools; rename it"
    )]
    ReservedName {
        index: usize,
        name: String,
        prefix: &'static str,
    },
    #[error("client tool `{name}` has an invalid JSON schema for its parameters: {reason}")]
    InvalidSchema {
        index: usize,
        name: String,
        reason: String,
    },
    #[error("client tool `{name}` has the name of one of the agent's own tools; rename it")]
    ClashesWithAgentTool { index: usize, name: String },
    #[error("client tool `{name}` is listed twice")]
    Duplicate { index: usize, name: String },
    #[error(
        "the tool result for call `{call_id}` answers no pending tool call of this conversation"
    )]
    UnknownCall { call_id: String },
    #[error("tool_choice names `{name}`, which is not one of the tools sent")]
    UnknownChoice { name: String },
}

/// The longest client tool name the providers take.
const MAX_TOOL_NAME_CHARS: usize = 64;

/// The namespaces of agentd's internal tools (`agent__final_report`, `agent__tool_output`,
/// `agent__<sub-agent>`, `router__handoff-to`, …): a client tool there could shadow one, today's
/// or a later one, so none is taken.
const RESERVED_PREFIXES: [&str; 2] = ["agent__", "router__"];

impl Runtime {
    /// Checks a submission's client tools and tool results, and sets how many turns its tool
    /// loop already took.
    pub(super) async fn prepare_continuation(
        &self,
        submission: &mut RunSubmission,
    ) -> Result<(), ClientToolError> {
        let continues = submission.prompt.trim().is_empty()
            && submission.attachments.is_empty()
            && crate::agent::client_tools::continues_tool_calls(&submission.history);
        if !continues && submission.client_tools.definitions.is_empty() {
            // No client tool loop: the history is the caller's business, as it always was.
            return Ok(());
        }
        check_tool_results(&submission.history)?;
        submission.client_tools.turns_used = turns_since_last_user(&submission.history);
        if submission.client_tools.definitions.is_empty() {
            return match &submission.client_tools.choice {
                ClientToolChoice::Function(name) => {
                    Err(ClientToolError::UnknownChoice { name: name.clone() })
                }
                _ => Ok(()),
            };
        }
        let agent_tools = self.agent_tool_names(&submission.agent).await;
        check_client_tools(submission, &agent_tools)
    }

    /// The conversation a finished run ended with, without the agent's system prompt: what a
    /// request continuing it (`previous_response_id`) starts from. `None` while the run has
    /// not ended or was never recorded.
    pub async fn finished_conversation(
        &self,
        run_id: &str,
    ) -> Result<Option<Vec<ChatMessage>>, StoreError> {
        self.recorder.flush().await;
        let Some(run) = self.store.get_run(run_id).await? else {
            return Ok(None);
        };
        let Some(conversation) = run.result.as_ref().and_then(|r| r.get("conversation")) else {
            return Ok(None);
        };
        let mut messages: Vec<ChatMessage> =
            serde_json::from_value(conversation.clone()).map_err(|error| StoreError::Encode {
                what: "a stored conversation",
                detail: error.to_string(),
            })?;
        if messages.first().is_some_and(|m| m.role == Role::System) {
            messages.remove(0);
        }
        Ok(Some(messages))
    }

    /// Every tool name a run of `agent` offers the model.
    async fn agent_tool_names(&self, agent: &Arc<AgentSpec>) -> HashSet<String> {
        let mut names: HashSet<String> = self
            .tools
            .registry_for(agent)
            .definitions()
            .await
            .into_iter()
            .map(|tool| tool.name)
            .collect();
        names.extend(agent.sub_agents.iter().map(|name| format!("agent__{name}")));
        names.extend(
            [FINAL_REPORT_TOOL, TASK_STATUS_TOOL, BATCH_TOOL]
                .iter()
                .map(|name| name.to_string()),
        );
        names
    }
}

fn check_client_tools(
    submission: &RunSubmission,
    agent_tools: &HashSet<String>,
) -> Result<(), ClientToolError> {
    let tools = &submission.client_tools;
    let mut seen = HashSet::new();
    for (position, tool) in tools.definitions.iter().enumerate() {
        let index = tools.request_index(position);
        let name = tool.name.clone();
        check_name(&name, index)?;
        if agent_tools.contains(&name) {
            return Err(ClientToolError::ClashesWithAgentTool { index, name });
        }
        if !seen.insert(name.clone()) {
            return Err(ClientToolError::Duplicate { index, name });
        }
        check_schema(&tool.parameters).map_err(|reason| ClientToolError::InvalidSchema {
            index,
            name,
            reason,
        })?;
    }
    match &tools.choice {
        ClientToolChoice::Function(name) if !seen.contains(name) && !agent_tools.contains(name) => {
            Err(ClientToolError::UnknownChoice { name: name.clone() })
        }
        _ => Ok(()),
    }
}

/// A client tool's name follows the providers' rule (`^[a-zA-Z0-9_-]{1,64}$`) and stays out of
/// the internal tools' namespaces.
fn check_name(name: &str, index: usize) -> Result<(), ClientToolError> {
    if name.trim().is_empty() {
        return Err(ClientToolError::Unnamed { index });
    }
    let length = name.chars().count();
    if length > MAX_TOOL_NAME_CHARS {
        return Err(ClientToolError::NameTooLong { index, length });
    }
    let allowed = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    if !name.chars().all(allowed) {
        return Err(ClientToolError::InvalidName {
            index,
            name: name.to_string(),
        });
    }
    if let Some(prefix) = RESERVED_PREFIXES
        .into_iter()
        .find(|prefix| name.starts_with(prefix))
    {
        return Err(ClientToolError::ReservedName {
            index,
            name: name.to_string(),
            prefix,
        });
    }
    Ok(())
}

/// A tool's parameters must be a JSON schema of an object.
fn check_schema(schema: &serde_json::Value) -> Result<(), String> {
    if !schema.is_object() {
        return Err("it must be a JSON object".into());
    }
    if let Some(kind) = schema.get("type")
        && kind != "object"
    {
        return Err(format!("its type must be \"object\", not {kind}"));
    }
    jsonschema::validator_for(schema)
        .map(drop)
        .map_err(|error| error.to_string())
}

/// Every `tool` message must answer a pending call: one of an assistant message before it
/// that no earlier `tool` message answered.
fn check_tool_results(history: &[ChatMessage]) -> Result<(), ClientToolError> {
    let mut pending: HashSet<&str> = HashSet::new();
    for message in history {
        match message.role {
            Role::Assistant => pending.extend(message.tool_calls.iter().map(|c| c.id.as_str())),
            Role::Tool => {
                let call_id = message.tool_call_id.as_deref().unwrap_or_default();
                if !pending.remove(call_id) {
                    return Err(ClientToolError::UnknownCall {
                        call_id: call_id.to_string(),
                    });
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The turns a tool loop has taken since the user last spoke: each assistant message after the
/// last user message is one.
fn turns_since_last_user(history: &[ChatMessage]) -> u32 {
    let start = history
        .iter()
        .rposition(|m| m.role == Role::User)
        .map_or(0, |i| i + 1);
    let turns = history[start..]
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .count();
    u32::try_from(turns).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ToolCall;
    use serde_json::json;

    fn assistant_calling(id: &str) -> ChatMessage {
        let mut message = ChatMessage::assistant("");
        message.tool_calls = vec![ToolCall {
            id: id.into(),
            name: "weather".into(),
            arguments: "{}".into(),
        }];
        message
    }

    fn result_of(id: &str) -> ChatMessage {
        let mut message = ChatMessage::new(Role::Tool, "sunny");
        message.tool_call_id = Some(id.into());
        message
    }

    #[test]
    fn a_client_tool_name_follows_the_providers_rule() {
        assert_eq!(check_name(&"a".repeat(64), 0), Ok(()));
        assert_eq!(check_name("get_weather-2", 0), Ok(()));
        assert_eq!(
            check_name(&"a".repeat(65), 3),
            Err(ClientToolError::NameTooLong {
                index: 3,
                length: 65
            })
        );
        for bad in ["get weather", "get.weather", "wetter_ä", "a/b", "tool\n"] {
            assert!(
                matches!(
                    check_name(bad, 1),
                    Err(ClientToolError::InvalidName { index: 1, .. })
                ),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn no_client_tool_may_take_an_internal_tools_name() {
        use crate::agent::output_handles::TOOL_OUTPUT_TOOL;
        use crate::agent::router::ROUTER_TOOL;
        for internal in [
            FINAL_REPORT_TOOL,
            TASK_STATUS_TOOL,
            BATCH_TOOL,
            TOOL_OUTPUT_TOOL,
            ROUTER_TOOL,
            "agent__helper",
        ] {
            assert!(
                matches!(
                    check_name(internal, 0),
                    Err(ClientToolError::ReservedName { .. })
                ),
                "{internal}"
            );
        }
    }

    #[test]
    fn a_tool_result_must_answer_an_earlier_call() {
        let good = vec![
            ChatMessage::user("q"),
            assistant_calling("c1"),
            result_of("c1"),
        ];
        assert_eq!(check_tool_results(&good), Ok(()));
        let twice = vec![
            ChatMessage::user("q"),
            assistant_calling("c1"),
            result_of("c1"),
            result_of("c1"),
        ];
        assert!(
            check_tool_results(&twice).is_err(),
            "a call is answered once"
        );
        let bad = vec![
            ChatMessage::user("q"),
            assistant_calling("c1"),
            result_of("c2"),
        ];
        assert_eq!(
            check_tool_results(&bad),
            Err(ClientToolError::UnknownCall {
                call_id: "c2".into()
            })
        );
    }

    #[test]
    fn turns_are_counted_from_the_last_user_message() {
        let history = vec![
            ChatMessage::user("earlier"),
            assistant_calling("a"),
            result_of("a"),
            ChatMessage::user("now"),
            assistant_calling("b"),
            result_of("b"),
            assistant_calling("c"),
            result_of("c"),
        ];
        assert_eq!(turns_since_last_user(&history), 2);
        assert_eq!(turns_since_last_user(&[]), 0);
    }

    #[test]
    fn a_schema_must_describe_an_object() {
        assert!(check_schema(&json!({"type": "object", "properties": {}})).is_ok());
        assert!(check_schema(&json!({})).is_ok());
        assert!(check_schema(&json!("object")).is_err());
        assert!(check_schema(&json!({"type": "string"})).is_err());
        assert!(
            check_schema(&json!({"type": "object", "properties": {"a": {"type": 7}}})).is_err()
        );
    }
}
