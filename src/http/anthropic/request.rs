//! A Messages request as a run's input: the system prompt (`system` and the `role: "system"`
//! messages that lead `messages`), the history (later system messages at their place, tool
//! calls and results as chat messages) and the prompt, plus the client tools it offers.
//! Everything a client like Claude Code sends is read the way Anthropic reads it; what agentd
//! cannot pass on is a 400 naming the field.

use serde_json::{Value, json};

use super::wire::{AnthropicMessage, MessagesRequest, RequestContentBlock, TextOrBlocks};
use crate::agent::client_tools::ClientTools;
use crate::http::error::ApiError;
use crate::http::shared::client_tools;
use crate::llm::{ChatMessage, Role, ToolCall, ToolDefinition};
use crate::vocabulary::Attachment;

/// Claude Code's billing line, sent as the first `system` block: Anthropic's API reads it
/// and keeps it from the model; so does agentd.
const BILLING_HEADER: &str = "x-anthropic-billing-header:";

/// Who speaks a message of `messages`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Speaker {
    User,
    Assistant,
    /// A system turn (Anthropic's mid-conversation system messages).
    System,
}

impl Speaker {
    fn of(message: &AnthropicMessage, index: usize) -> Result<Self, ApiError> {
        match message.role.as_str() {
            "user" => Ok(Self::User),
            "assistant" => Ok(Self::Assistant),
            "system" => Ok(Self::System),
            other => Err(ApiError::invalid_request(format!(
                "Unknown role {other:?}: use user, assistant or system"
            ))
            .with_param(format!("messages[{index}].role"))),
        }
    }

    fn role(self) -> Role {
        match self {
            Self::User => Role::User,
            Self::Assistant => Role::Assistant,
            Self::System => Role::System,
        }
    }
}

/// The history and the prompt of a run. System messages before the first user or assistant
/// message join the system prompt; later ones stay in the history where they were, except
/// those after the last user or assistant message, which go just before it (agentd's prompt
/// is always the conversation's last message) — or, when that message answers tool calls,
/// just before the assistant message that made them.
pub(super) fn split_messages(
    body: &MessagesRequest,
    attachments: &mut Attachments,
) -> Result<(Vec<ChatMessage>, String), ApiError> {
    if body.messages.is_empty() {
        return Err(
            ApiError::invalid_request("`messages` must not be empty").with_param("messages")
        );
    }
    let speakers = body
        .messages
        .iter()
        .enumerate()
        .map(|(index, message)| Speaker::of(message, index))
        .collect::<Result<Vec<_>, _>>()?;
    let Some(last) = speakers.iter().rposition(|s| *s != Speaker::System) else {
        return Err(ApiError::invalid_request(
            "`messages` holds only system messages: end it with a user message",
        )
        .with_param("messages"));
    };
    let first = speakers
        .iter()
        .position(|s| *s != Speaker::System)
        .unwrap_or(last);
    let mut history = Vec::new();
    let system = system_prompt(body, first)?;
    if !system.trim().is_empty() {
        history.push(ChatMessage::system(system));
    }
    let middle = body.messages.iter().zip(&speakers).enumerate();
    for (index, (message, speaker)) in middle.take(last).skip(first) {
        let mut messages = chat_messages(
            speaker.role(),
            &message.content,
            &format!("messages[{index}].content"),
        )?;
        attach(&mut messages, attachments.remove(&index));
        history.extend(messages);
    }
    let trailing = system_messages(body, last + 1..body.messages.len())?;
    let (mut history, prompt) = final_message(body, speakers[last], last, history)?;
    let at = if prompt.is_empty() && !carries_files(&body.messages[last].content) {
        history
            .iter()
            .rposition(|m| m.role == Role::Assistant)
            .unwrap_or(history.len())
    } else {
        history.len()
    };
    history.splice(at..at, trailing);
    Ok((history, prompt))
}

/// The stored attachments of each message of a request, by the message's index (SPEC §11).
pub(super) type Attachments = std::collections::BTreeMap<usize, Vec<Attachment>>;

/// A message's attachments go on the chat message holding its text.
fn attach(messages: &mut [ChatMessage], attachments: Option<Vec<Attachment>>) {
    let Some(attachments) = attachments else {
        return;
    };
    if let Some(message) = messages.iter_mut().rev().find(|m| m.role != Role::Tool) {
        message.attachments = attachments;
    }
}

/// `system` and the system messages leading `messages` (the first `leading` ones), joined.
fn system_prompt(body: &MessagesRequest, leading: usize) -> Result<String, ApiError> {
    let mut parts = Vec::new();
    if let Some(system) = &body.system {
        parts.push(text_of(system, "system")?);
    }
    parts.extend(
        system_messages(body, 0..leading)?
            .into_iter()
            .filter_map(|message| message.content),
    );
    parts.retain(|part| !part.trim().is_empty());
    Ok(parts.join("\n\n"))
}

/// The system messages in `range` of `messages`, each as a system chat message.
fn system_messages(
    body: &MessagesRequest,
    range: std::ops::Range<usize>,
) -> Result<Vec<ChatMessage>, ApiError> {
    let mut messages = Vec::new();
    for index in range {
        let param = format!("messages[{index}].content");
        let text = text_of(&body.messages[index].content, &param)?;
        if !text.trim().is_empty() {
            messages.push(ChatMessage::system(text));
        }
    }
    Ok(messages)
}

/// The last user or assistant message: tool results continue the run from them, otherwise
/// it must be a user message with text, the prompt.
fn final_message(
    body: &MessagesRequest,
    speaker: Speaker,
    index: usize,
    mut history: Vec<ChatMessage>,
) -> Result<(Vec<ChatMessage>, String), ApiError> {
    let content = &body.messages[index].content;
    let param = format!("messages[{index}].content");
    if speaker == Speaker::User && has_tool_results(content) {
        // The client answers tool calls: the run continues from their results.
        history.extend(chat_messages(Role::User, content, &param)?);
        if history.last().is_some_and(|m| m.role == Role::User) {
            // Text sent beside the results is the prompt of the continued turn.
            let prompt = history.pop().and_then(|m| m.content).unwrap_or_default();
            return Ok((history, prompt));
        }
        return Ok((history, String::new()));
    }
    let prompt = text_of(content, &param)?;
    if speaker != Speaker::User || (prompt.trim().is_empty() && !carries_files(content)) {
        return Err(ApiError::invalid_request(
            "The last message must be a user message with text or files",
        )
        .with_param(format!("messages[{index}]")));
    }
    Ok((history, prompt))
}

/// One message as chat messages: `tool_use` blocks become the assistant's tool calls,
/// `tool_result` blocks `tool` messages (before the user's text of the same message).
fn chat_messages(
    role: Role,
    content: &TextOrBlocks,
    param: &str,
) -> Result<Vec<ChatMessage>, ApiError> {
    let TextOrBlocks::Blocks(blocks) = content else {
        return Ok(vec![ChatMessage::new(role, text_of(content, param)?)]);
    };
    let mut calls = Vec::new();
    let mut results = Vec::new();
    for (index, block) in blocks.iter().enumerate() {
        let block_param = || format!("{param}[{index}]");
        match block.kind.as_str() {
            "tool_use" if role == Role::Assistant => calls.push(ToolCall {
                id: block.id.clone().ok_or_else(|| {
                    ApiError::invalid_request("a tool_use block needs `id`")
                        .with_param(format!("{}.id", block_param()))
                })?,
                name: block.name.clone().unwrap_or_default(),
                arguments: block
                    .input
                    .as_ref()
                    .map_or_else(|| "{}".to_string(), Value::to_string),
            }),
            "tool_result" if role == Role::User => {
                let call_id = block.tool_use_id.clone().ok_or_else(|| {
                    ApiError::invalid_request("a tool_result block needs `tool_use_id`")
                        .with_param(format!("{}.tool_use_id", block_param()))
                })?;
                let mut message =
                    ChatMessage::new(Role::Tool, tool_result_text(block, &block_param())?);
                message.tool_call_id = Some(call_id);
                results.push(message);
            }
            _ => {}
        }
    }
    let text = text_of(content, param)?;
    let mut messages = results;
    if !calls.is_empty() {
        let mut message = ChatMessage::new(Role::Assistant, text);
        if message.content.as_deref() == Some("") {
            message.content = None;
        }
        message.tool_calls = calls;
        messages.push(message);
    } else if !text.is_empty() || messages.is_empty() {
        messages.push(ChatMessage::new(role, text));
    }
    Ok(messages)
}

/// A `tool_result`'s content as text: a string, or its blocks — text as it is, a
/// `tool_reference` (a deferred tool the client loaded) and an image or document (which
/// agentd does not pass to models) as a line saying so.
fn tool_result_text(block: &RequestContentBlock, param: &str) -> Result<String, ApiError> {
    let not_text = || {
        ApiError::invalid_request("a tool_result holds text or content blocks")
            .with_param(format!("{param}.content"))
    };
    match &block.content {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(text)) => Ok(text.clone()),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::new();
            for (index, part) in parts.iter().enumerate() {
                texts.push(result_part_text(part).ok_or_else(|| {
                    ApiError::invalid_request(format!(
                        "a tool_result block holds text, tool_reference, image or document blocks, not {}",
                        part.get("type").unwrap_or(&Value::Null)
                    ))
                    .with_param(format!("{param}.content[{index}]"))
                })?);
            }
            Ok(texts.join("\n"))
        }
        Some(_) => Err(not_text()),
    }
}

/// One block of a `tool_result` as text; `None` for a block of an unknown type.
fn result_part_text(part: &Value) -> Option<String> {
    let field = |name: &str| part.get(name).and_then(Value::as_str);
    match field("type")? {
        "text" => field("text").map(str::to_string),
        "tool_reference" => field("tool_name").map(|name| format!("Tool loaded: {name}")),
        kind @ ("image" | "document") => Some(format!("[{kind} not shown: agentd passes text]")),
        _ => None,
    }
}

/// Whether a message carries `image` or `document` blocks: files alone make a prompt.
fn carries_files(content: &TextOrBlocks) -> bool {
    matches!(content, TextOrBlocks::Blocks(blocks)
        if blocks.iter().any(|b| matches!(b.kind.as_str(), "image" | "document")))
}

/// Whether a message carries `tool_result` blocks (a client answering tool calls).
fn has_tool_results(content: &TextOrBlocks) -> bool {
    matches!(content, TextOrBlocks::Blocks(blocks) if blocks.iter().any(|b| b.kind == "tool_result"))
}

/// Text of a string or of text blocks; thinking and tool blocks are skipped (tool blocks are
/// read by [`chat_messages`]), Claude Code's billing line dropped, other blocks refused.
fn text_of(content: &TextOrBlocks, param: &str) -> Result<String, ApiError> {
    let blocks = match content {
        TextOrBlocks::Text(text) => return Ok(text.clone()),
        TextOrBlocks::Blocks(blocks) => blocks,
    };
    let mut parts = Vec::new();
    for (index, block) in blocks.iter().enumerate() {
        match (block.kind.as_str(), &block.text) {
            ("text", Some(text)) if text.starts_with(BILLING_HEADER) => {}
            ("text", Some(text)) => parts.push(text.as_str()),
            ("thinking" | "redacted_thinking" | "tool_use" | "tool_result", _) => {}
            // Attachments: stored by `attachments::of_messages`.
            ("image" | "document", _) => {}
            (kind, _) => {
                return Err(ApiError::invalid_request(format!(
                    "Content block type {kind:?} is not supported; send text, image or document"
                ))
                .with_param(format!("{param}[{index}]")));
            }
        }
    }
    Ok(parts.join("\n"))
}

/// Custom tools become client tools; server tools (with another `type`) are not offered, nor
/// are deferred tools (`defer_loading: true`) until a `tool_reference` in a tool result loaded
/// them, as Anthropic's tool search does.
pub(super) fn client_tools_of(body: &MessagesRequest) -> Result<ClientTools, ApiError> {
    let loaded = loaded_tools(body);
    let mut definitions = Vec::new();
    let mut request_indexes = Vec::new();
    for (index, tool) in body.tools.iter().flatten().enumerate() {
        let kind = tool.get("type").and_then(Value::as_str).unwrap_or("custom");
        let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
        let deferred = tool.get("defer_loading").and_then(Value::as_bool) == Some(true);
        if kind != "custom" || (deferred && !loaded.contains(&name)) {
            continue;
        }
        request_indexes.push(index);
        definitions.push(ToolDefinition {
            name: name.to_string(),
            description: tool
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            parameters: tool
                .get("input_schema")
                .cloned()
                .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
        });
    }
    Ok(ClientTools {
        definitions,
        choice: client_tools::tool_choice(body.tool_choice.as_ref())?,
        turns_used: 0,
        request_indexes,
    })
}

/// The tools `tool_reference` blocks of the request's tool results name.
fn loaded_tools(body: &MessagesRequest) -> Vec<&str> {
    let blocks = body.messages.iter().filter_map(|m| match &m.content {
        TextOrBlocks::Blocks(blocks) => Some(blocks),
        TextOrBlocks::Text(_) => None,
    });
    blocks
        .flatten()
        .filter(|block| block.kind == "tool_result")
        .filter_map(|block| block.content.as_ref()?.as_array())
        .flatten()
        .filter(|part| part.get("type").and_then(Value::as_str) == Some("tool_reference"))
        .filter_map(|part| part.get("tool_name").and_then(Value::as_str))
        .collect()
}

/// The `tool_result` block answering `call_id`, for a 400 about it.
pub(super) fn tool_result_param(body: &MessagesRequest, call_id: &str) -> String {
    for (index, message) in body.messages.iter().enumerate() {
        if let TextOrBlocks::Blocks(blocks) = &message.content
            && let Some(block) = blocks
                .iter()
                .position(|b| b.tool_use_id.as_deref() == Some(call_id))
        {
            return format!("messages[{index}].content[{block}].tool_use_id");
        }
    }
    "messages".into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(body: Value) -> MessagesRequest {
        serde_json::from_value(body).expect("a request")
    }

    fn roles_and_texts(history: &[ChatMessage]) -> Vec<(Role, String)> {
        history
            .iter()
            .map(|m| (m.role, m.content.clone().unwrap_or_default()))
            .collect()
    }

    #[test]
    fn leading_system_messages_join_the_system_prompt_and_later_ones_keep_their_place() {
        let body = request(json!({"model": "m", "system": [
                {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1;"},
                {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
            "messages": [
                {"role": "system", "content": "Lead."},
                {"role": "user", "content": "one"},
                {"role": "system", "content": [{"type": "text", "text": "Middle."}]},
                {"role": "assistant", "content": "two"},
                {"role": "user", "content": [{"type": "text", "text": "three", "cache_control": {"type": "ephemeral"}}]},
                {"role": "system", "content": "Trailing."}]}));
        let (history, prompt) = split_messages(&body, &mut Default::default()).expect("valid");
        assert_eq!(prompt, "three");
        assert_eq!(
            roles_and_texts(&history),
            vec![
                (Role::System, "Be brief.\n\nLead.".into()),
                (Role::User, "one".into()),
                (Role::System, "Middle.".into()),
                (Role::Assistant, "two".into()),
                (Role::System, "Trailing.".into()),
            ]
        );
    }

    #[test]
    fn trailing_system_messages_precede_the_calls_tool_results_answer() {
        let body = request(json!({"model": "m", "messages": [
            {"role": "user", "content": "run it"},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "a.txt"}]}]},
            {"role": "system", "content": "Reminder."}]}));
        let (history, prompt) = split_messages(&body, &mut Default::default()).expect("valid");
        assert_eq!(prompt, "");
        let roles: Vec<Role> = history.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [Role::User, Role::System, Role::Assistant, Role::Tool]
        );
        assert_eq!(history[3].content.as_deref(), Some("a.txt"));
    }

    #[test]
    fn only_system_messages_or_an_unknown_role_are_refused_by_name() {
        let only = request(json!({"model": "m", "messages": [{"role": "system", "content": "x"}]}));
        let error = split_messages(&only, &mut Default::default()).unwrap_err();
        assert_eq!(error.param.as_deref(), Some("messages"));
        let odd = request(
            json!({"model": "m", "messages": [{"role": "user", "content": "x"}, {"role": "tool", "content": "y"}]}),
        );
        let error = split_messages(&odd, &mut Default::default()).unwrap_err();
        assert_eq!(error.param.as_deref(), Some("messages[1].role"));
        assert!(error.message.contains("system"), "{}", error.message);
    }

    #[test]
    fn tool_results_read_text_references_and_images_and_refuse_other_blocks() {
        let result = |content: Value| {
            let body = request(json!({"model": "m", "messages": [
                {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": content}]}]}));
            split_messages(&body, &mut Default::default())
                .map(|(history, _)| history[1].content.clone().unwrap_or_default())
        };
        let text = result(json!([
            {"type": "text", "text": "line"},
            {"type": "tool_reference", "tool_name": "WebFetch"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]))
        .expect("valid");
        assert_eq!(
            text,
            "line\nTool loaded: WebFetch\n[image not shown: agentd passes text]"
        );
        let error = result(json!([{"type": "text", "text": "ok"}, {"type": "video"}])).unwrap_err();
        assert_eq!(
            error.param.as_deref(),
            Some("messages[1].content[0].content[1]")
        );
        let error = result(json!(7)).unwrap_err();
        assert_eq!(
            error.param.as_deref(),
            Some("messages[1].content[0].content")
        );
    }

    #[test]
    fn deferred_tools_are_offered_once_a_tool_reference_loaded_them() {
        let tools = json!([
            {"name": "Bash", "input_schema": {"type": "object"}},
            {"name": "WebFetch", "input_schema": {"type": "object"}, "defer_loading": true},
            {"type": "web_search_20250305", "name": "web_search"}]);
        let first = request(
            json!({"model": "m", "tools": tools, "messages": [{"role": "user", "content": "x"}]}),
        );
        let offered = client_tools_of(&first).expect("valid");
        let names: Vec<&str> = offered
            .definitions
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(names, ["Bash"]);
        let loaded = request(json!({"model": "m", "tools": tools, "messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "ToolSearch", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                "content": [{"type": "tool_reference", "tool_name": "WebFetch"}]}]}]}));
        let offered = client_tools_of(&loaded).expect("valid");
        let names: Vec<&str> = offered
            .definitions
            .iter()
            .map(|t| t.name.as_str())
            .collect();
        assert_eq!(names, ["Bash", "WebFetch"]);
        assert_eq!(offered.request_index(1), 1);
    }
}
