//! Tools a client brings with its request (SPEC §9.2): offered to the model beside the agent's
//! own, never executed by agentd. A turn that calls one ends the run (`client_tool_calls`) with
//! the calls left unanswered in the conversation; the client's next request carries their
//! results as `tool` messages and the session continues from there.
//!
//! Owns only what a session needs to know about them; checking a client's tools against the
//! agent's and rebuilding a continued conversation is the runtime's (`runtime::continuation`).

use crate::llm::{ChatMessage, Role, ToolChoice, ToolDefinition};

pub use crate::vocabulary::result::unanswered_calls;

/// The client's tools of one request, and how the model is asked to use them.
#[derive(Debug, Clone, Default)]
pub struct ClientTools {
    /// Offered to the model on every turn but the final one.
    pub definitions: Vec<ToolDefinition>,
    /// The client's `tool_choice`.
    pub choice: ClientToolChoice,
    /// Turns already taken by the earlier requests of this tool loop: the turn budget spans
    /// the requests (SPEC §9.2).
    pub turns_used: u32,
    /// Where each definition sat in the request's own list of tools, when that list also holds
    /// tools that are not client tools (Anthropic's server tools, Responses' built-in ones), so
    /// an error about a tool names the client's field; empty when the two lists are the same.
    pub request_indexes: Vec<usize>,
}

/// A client's `tool_choice`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ClientToolChoice {
    #[default]
    Auto,
    /// `none`: the client's tools are not offered.
    None,
    /// `required`: the first turn must call a tool.
    Required,
    /// The first turn must call this tool.
    Function(String),
}

impl ClientTools {
    /// The index in the request's list of tools of the definition at `position`.
    pub fn request_index(&self, position: usize) -> usize {
        self.request_indexes
            .get(position)
            .copied()
            .unwrap_or(position)
    }

    /// Whether `name` is one of the client's tools (a call to it ends the run).
    pub fn contains(&self, name: &str) -> bool {
        self.definitions.iter().any(|tool| tool.name == name)
    }

    /// The tools offered to the model: none when the client chose `none`.
    pub fn offered(&self) -> &[ToolDefinition] {
        match self.choice {
            ClientToolChoice::None => &[],
            _ => &self.definitions,
        }
    }

    /// What the provider is told on `turn` (of this request) given the tools offered: a forced
    /// choice applies to the first turn only, so an agent tool it names cannot loop, and only
    /// when what it names is offered.
    pub fn provider_choice(&self, turn: u32, offered: &[ToolDefinition]) -> Option<ToolChoice> {
        if turn != 1 || offered.is_empty() {
            return None;
        }
        match &self.choice {
            ClientToolChoice::Required => Some(ToolChoice::Required),
            ClientToolChoice::Function(name) if offered.iter().any(|t| &t.name == name) => {
                Some(ToolChoice::Function(name.clone()))
            }
            _ => None,
        }
    }
}

/// Whether a conversation ends with tool results the model has not seen yet: a request that
/// answers client tool calls and continues the session without a new user message.
pub fn continues_tool_calls(history: &[ChatMessage]) -> bool {
    history.last().is_some_and(|m| m.role == Role::Tool)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ToolCall;
    use serde_json::json;

    fn tool(name: &str) -> ToolDefinition {
        ToolDefinition {
            name: name.into(),
            description: String::new(),
            parameters: json!({"type": "object"}),
        }
    }

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: "{}".into(),
        }
    }

    #[test]
    fn a_forced_choice_applies_to_the_first_turn_and_an_offered_tool_only() {
        let tools = ClientTools {
            definitions: vec![tool("weather")],
            choice: ClientToolChoice::Function("weather".into()),
            ..ClientTools::default()
        };
        let offered = [tool("weather")];
        assert_eq!(
            tools.provider_choice(1, &offered),
            Some(ToolChoice::Function("weather".into()))
        );
        assert_eq!(tools.provider_choice(2, &offered), None);
        assert_eq!(tools.provider_choice(1, &[tool("other")]), None);
        let none = ClientTools {
            choice: ClientToolChoice::None,
            ..tools
        };
        assert!(none.offered().is_empty());
    }

    #[test]
    fn unanswered_calls_are_the_last_assistant_calls_without_a_tool_reply() {
        let mut assistant = ChatMessage::assistant("");
        assistant.tool_calls = vec![call("a"), call("b")];
        let mut reply = ChatMessage::new(Role::Tool, "done");
        reply.tool_call_id = Some("a".into());
        let conversation = vec![ChatMessage::user("q"), assistant, reply];
        let pending: Vec<String> = unanswered_calls(&conversation)
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(pending, vec!["b"]);
        assert!(continues_tool_calls(&conversation));
        assert!(!continues_tool_calls(&conversation[..2]));
    }
}
