//! Reads a `POST /v1/responses` body into agentd's terms: `input` (a string or items) into
//! history messages and a prompt, `tools` into client tools, `text.format` into the run's
//! output format and schema. Every refusal is a 400 naming the field (`input[3].call_id`).
//! Items stateless clients replay that carry nothing for the model (`reasoning`, agentd's own
//! `mcp_call`s, hosted tool calls) are skipped. `mcp_approval_response` items are read into
//! [`ApprovalAnswer`]s: a request holding them continues the run that waits for them.

use serde_json::{Value, json};

use super::wire::{CreateResponse, TextFormat};
use crate::agent::client_tools::ClientTools;
use crate::http::error::ApiError;
use crate::http::shared::approvals::MAX_REASON_CHARS;
use crate::http::shared::client_tools;
use crate::llm::{ChatMessage, Role, ToolCall};

/// Input item types that are replayed output and carry nothing the model needs again.
const SKIPPED_ITEMS: &[&str] = &[
    "reasoning",
    "mcp_call",
    "mcp_list_tools",
    "mcp_approval_request",
    "item_reference",
    "web_search_call",
    "file_search_call",
    "code_interpreter_call",
    "image_generation_call",
];

/// What the input says: earlier messages, and the prompt (empty when the input ends with tool
/// results, which the run continues from).
#[derive(Debug, Default)]
pub struct ReadInput {
    pub history: Vec<ChatMessage>,
    pub prompt: String,
    /// The items as given, each with an `id`, for `input_items`.
    pub items: Vec<Value>,
    /// The `mcp_approval_response` items, in order.
    pub approvals: Vec<ApprovalAnswer>,
    /// The index of the input item each message of `history` was read from.
    pub origins: Vec<usize>,
    /// The index of the item the prompt was read from, when the input ends with one.
    pub prompt_item: Option<usize>,
}

/// One `mcp_approval_response` item.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalAnswer {
    /// The item's position in `input`, for errors naming it.
    pub index: usize,
    /// The `id` of the `mcp_approval_request` item it answers.
    pub request_id: String,
    pub approve: bool,
    pub reason: Option<String>,
}

impl ApprovalAnswer {
    /// `input[N].approval_request_id`.
    pub fn param(&self) -> String {
        format!("input[{}].approval_request_id", self.index)
    }
}

/// Reads `input`; its items get their ids later ([`with_ids`]), once the response has one.
pub fn read_input(input: Option<&Value>) -> Result<ReadInput, ApiError> {
    let items: Vec<Value> = match input {
        None | Some(Value::Null) => {
            return Err(ApiError::invalid_request("`input` is required").with_param("input"));
        }
        Some(Value::String(text)) => {
            vec![json!({"type": "message", "role": "user", "content": text})]
        }
        Some(Value::Array(items)) => items.clone(),
        Some(_) => {
            return Err(
                ApiError::invalid_request("`input` must be a string or a list of items")
                    .with_param("input"),
            );
        }
    };
    if items.is_empty() {
        return Err(ApiError::invalid_request("`input` must not be empty").with_param("input"));
    }
    let mut read = ReadInput::default();
    for (index, item) in items.iter().enumerate() {
        if item.get("type").and_then(Value::as_str) == Some("mcp_approval_response") {
            read.approvals.push(approval_answer(item, index)?);
            continue;
        }
        if let Some(first) = read.approvals.first()
            && !is_replayed_output(item)
        {
            return Err(ApiError::invalid_request(format!(
                "items after an mcp_approval_response (input[{}]) may only be more of them: \
                 the response continues the waiting run; send new messages in the next request",
                first.index
            ))
            .with_param(format!("input[{index}]")));
        }
        read_item(item, index, &mut read.history)?;
        read.origins.resize(read.history.len(), index);
    }
    read.items = items;
    if !read.approvals.is_empty() {
        // The run that waits keeps its own conversation: replayed items are not needed.
        read.history.clear();
        return Ok(read);
    }
    let ends_with_prompt = read.history.last().is_some_and(|m| m.role == Role::User);
    let ends_with_results = read.history.last().is_some_and(|m| m.role == Role::Tool);
    if ends_with_prompt {
        let last = read
            .history
            .pop()
            .and_then(|m| m.content)
            .unwrap_or_default();
        let origin = read.origins.pop().unwrap_or(read.items.len() - 1);
        if last.trim().is_empty() && !carries_files(&read.items[origin]) {
            return Err(ApiError::invalid_request(
                "the last user message is empty: send text or files",
            )
            .with_param(format!("input[{origin}]")));
        }
        read.prompt = last;
        read.prompt_item = Some(origin);
    } else if !ends_with_results {
        return Err(ApiError::invalid_request(
            "`input` must end with a user message or a function_call_output",
        )
        .with_param(format!("input[{}]", read.items.len() - 1)));
    }
    Ok(read)
}

/// The content part types that carry files.
pub const FILE_PARTS: [&str; 2] = ["input_image", "input_file"];

/// Whether an item's content has `input_image` or `input_file` parts: files alone make a prompt.
fn carries_files(item: &Value) -> bool {
    item.get("content")
        .and_then(Value::as_array)
        .is_some_and(|parts| {
            parts.iter().any(|part| {
                part.get("type")
                    .and_then(Value::as_str)
                    .is_some_and(|kind| FILE_PARTS.contains(&kind))
            })
        })
}

/// Items read as messages in order, whatever they end with (a conversation's new items, the
/// input of a compaction or a token count); errors name `list[N]…`.
pub fn read_history(items: &[Value], list: &str) -> Result<Vec<ChatMessage>, ApiError> {
    let mut history = Vec::new();
    for (index, item) in items.iter().enumerate() {
        if item.get("type").and_then(Value::as_str) == Some("mcp_approval_response") {
            return Err(ApiError::invalid_request(
                "an mcp_approval_response answers a waiting response: send it to POST /v1/responses",
            )
            .with_param(format!("{list}[{index}].type")));
        }
        read_item(item, index, &mut history).map_err(|mut error| {
            error.param = error.param.map(|param| param.replacen("input", list, 1));
            error
        })?;
    }
    Ok(history)
}

/// `input` as a list of items: a string is one user message.
pub fn input_items(input: Option<&Value>) -> Result<Vec<Value>, ApiError> {
    match input {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(text)) => Ok(vec![
            json!({"type": "message", "role": "user", "content": text}),
        ]),
        Some(Value::Array(items)) => Ok(items.clone()),
        Some(_) => Err(
            ApiError::invalid_request("`input` must be a string or a list of items")
                .with_param("input"),
        ),
    }
}

/// The items as `input_items` lists them: each with its `type` and an `id`.
pub fn with_ids(items: Vec<Value>, response_id: &str) -> Vec<Value> {
    items
        .into_iter()
        .enumerate()
        .map(|(index, item)| with_id(item, response_id, index))
        .collect()
}

fn with_id(mut item: Value, response_id: &str, index: usize) -> Value {
    if let Value::Object(fields) = &mut item {
        if !fields.contains_key("type") {
            fields.insert("type".into(), json!("message"));
        }
        if !fields.contains_key("id") {
            let id = format!("in_{}_{index}", response_id.trim_start_matches("resp_"));
            fields.insert("id".into(), json!(id));
        }
    }
    item
}

fn read_item(item: &Value, index: usize, history: &mut Vec<ChatMessage>) -> Result<(), ApiError> {
    let param = |field: &str| format!("input[{index}]{field}");
    let kind = item
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("message");
    match kind {
        "message" => history.push(message_item(item, index)?),
        "function_call" => {
            let call = ToolCall {
                id: required_str(item, "call_id", &param(".call_id"))?,
                name: required_str(item, "name", &param(".name"))?,
                arguments: item
                    .get("arguments")
                    .and_then(Value::as_str)
                    .unwrap_or("{}")
                    .to_string(),
            };
            // Calls of one turn are one assistant message.
            match history.last_mut() {
                Some(last) if last.role == Role::Assistant && !last.tool_calls.is_empty() => {
                    last.tool_calls.push(call)
                }
                _ => {
                    let mut message = ChatMessage::assistant("");
                    message.content = None;
                    message.tool_calls = vec![call];
                    history.push(message);
                }
            }
        }
        "function_call_output" => {
            let call_id = required_str(item, "call_id", &param(".call_id"))?;
            let output = match item.get("output") {
                Some(Value::String(text)) => text.clone(),
                Some(Value::Array(parts)) => text_parts(parts, &param(".output"))?,
                _ => {
                    return Err(ApiError::invalid_request(
                        "a function_call_output needs `output` (text)",
                    )
                    .with_param(param(".output")));
                }
            };
            let mut message = ChatMessage::new(Role::Tool, output);
            message.tool_call_id = Some(call_id);
            history.push(message);
        }
        // agentd's own compaction item expands to what it kept; another server's is opaque.
        "compaction" => history.extend(super::compaction::expand(item)),
        skipped if SKIPPED_ITEMS.contains(&skipped) => {}
        other => {
            return Err(ApiError::invalid_request(format!(
                "input item type {other:?} is not supported; send message, function_call, function_call_output or mcp_approval_response items"
            ))
            .with_param(param(".type")));
        }
    }
    Ok(())
}

/// Whether `item` is replayed output that carries nothing for the model.
fn is_replayed_output(item: &Value) -> bool {
    item.get("type")
        .and_then(Value::as_str)
        .is_some_and(|kind| kind == "compaction" || SKIPPED_ITEMS.contains(&kind))
}

fn approval_answer(item: &Value, index: usize) -> Result<ApprovalAnswer, ApiError> {
    let param = |field: &str| format!("input[{index}].{field}");
    let request_id = required_str(item, "approval_request_id", &param("approval_request_id"))?;
    let approve = item
        .get("approve")
        .and_then(Value::as_bool)
        .ok_or_else(|| {
            ApiError::invalid_request("an mcp_approval_response needs `approve` (true or false)")
                .with_param(param("approve"))
        })?;
    let reason = match item.get("reason") {
        None | Some(Value::Null) => None,
        Some(Value::String(reason)) if reason.chars().count() <= MAX_REASON_CHARS => {
            Some(reason.clone())
        }
        Some(Value::String(_)) => {
            return Err(ApiError::invalid_request(format!(
                "`reason` is at most {MAX_REASON_CHARS} characters"
            ))
            .with_param(param("reason")));
        }
        Some(_) => {
            return Err(
                ApiError::invalid_request("`reason` must be a string").with_param(param("reason"))
            );
        }
    };
    Ok(ApprovalAnswer {
        index,
        request_id,
        approve,
        reason,
    })
}

fn required_str(item: &Value, field: &str, param: &str) -> Result<String, ApiError> {
    item.get(field)
        .and_then(Value::as_str)
        .filter(|text| !text.is_empty())
        .map(str::to_string)
        .ok_or_else(|| {
            ApiError::invalid_request(format!("`{field}` is required on this item"))
                .with_param(param)
        })
}

fn message_item(item: &Value, index: usize) -> Result<ChatMessage, ApiError> {
    let role = match item.get("role").and_then(Value::as_str) {
        Some("user") => Role::User,
        Some("assistant") => Role::Assistant,
        Some("system" | "developer") => Role::System,
        other => {
            return Err(ApiError::invalid_request(format!(
                "message role {other:?} is not one of user, assistant, system, developer"
            ))
            .with_param(format!("input[{index}].role")));
        }
    };
    let param = format!("input[{index}].content");
    let text = match item.get("content") {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => text_parts(parts, &param)?,
        _ => {
            return Err(ApiError::invalid_request("a message needs `content`").with_param(param));
        }
    };
    Ok(ChatMessage::new(role, text))
}

/// The text of `input_text` / `output_text` / `text` parts; files are read elsewhere, other
/// parts are refused.
fn text_parts(parts: &[Value], param: &str) -> Result<String, ApiError> {
    let mut texts = Vec::new();
    for (index, part) in parts.iter().enumerate() {
        let kind = part.get("type").and_then(Value::as_str).unwrap_or_default();
        match (kind, part.get("text").and_then(Value::as_str)) {
            ("input_text" | "output_text" | "text" | "summary_text", Some(text)) => {
                texts.push(text)
            }
            // Files: read by `attachments::of_input`.
            ("refusal" | "input_image" | "input_file", _) => {}
            _ => {
                return Err(ApiError::invalid_request(format!(
                    "content part type {kind:?} is not supported; send text"
                ))
                .with_param(format!("{param}[{index}]")));
            }
        }
    }
    Ok(texts.join("\n"))
}

/// Where Responses keeps a client tool's parts.
pub const RESPONSE_TOOL_FIELDS: client_tools::ToolFields = client_tools::ToolFields {
    list: "tools",
    name: "name",
    schema: "parameters",
};

/// `function` tools become client tools; other tool types are tolerated and not offered.
pub fn client_tools_of(body: &CreateResponse) -> Result<ClientTools, ApiError> {
    let mut definitions = Vec::new();
    let mut request_indexes = Vec::new();
    for (index, tool) in body.tools.iter().flatten().enumerate() {
        if tool.get("type").and_then(Value::as_str) != Some("function") {
            continue;
        }
        definitions.push(client_tools::flat_definition(tool, index)?);
        request_indexes.push(index);
    }
    Ok(ClientTools {
        definitions,
        choice: client_tools::tool_choice(body.tool_choice.as_ref())?,
        turns_used: 0,
        request_indexes,
    })
}

/// The run's output format and schema from `text.format`.
pub fn output_of(format: Option<&TextFormat>) -> Result<(Option<String>, Option<Value>), ApiError> {
    let Some(format) = format else {
        return Ok((None, None));
    };
    match format.kind.as_str() {
        "text" => Ok((None, None)),
        "json_object" => Ok((Some("json".into()), Some(json!({"type": "object"})))),
        "json_schema" => {
            let schema = format.schema.clone().ok_or_else(|| {
                ApiError::invalid_request("`text.format.schema` is required for json_schema")
                    .with_param("text.format.schema")
            })?;
            Ok((Some("json".into()), Some(schema)))
        }
        other => Err(ApiError::invalid_request(format!(
            "text.format type {other:?} is not one of text, json_object, json_schema"
        ))
        .with_param("text.format.type")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_string_is_the_prompt() {
        let read = read_input(Some(&json!("hi"))).expect("valid");
        assert_eq!(read.prompt, "hi");
        assert!(read.history.is_empty());
        assert_eq!(with_ids(read.items, "resp_1")[0]["type"], "message");
    }

    #[test]
    fn a_replayed_tool_loop_is_history_that_ends_with_results() {
        let input = json!([
            {"role": "developer", "content": "be brief"},
            {"role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
            {"type": "reasoning", "summary": []},
            {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        ]);
        let read = read_input(Some(&input)).expect("valid");
        assert_eq!(read.prompt, "");
        let roles: Vec<Role> = read.history.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            vec![Role::System, Role::User, Role::Assistant, Role::Tool]
        );
        assert_eq!(read.items.len(), 5);
    }

    #[test]
    fn approval_responses_are_read_and_replayed_history_is_left_to_the_run() {
        let input = json!([
            {"role": "user", "content": "echo hi"},
            {"type": "mcp_approval_request", "id": "mcpr_x_c1", "name": "t", "server_label": "s", "arguments": "{}"},
            {"type": "mcp_approval_response", "approval_request_id": "mcpr_x_c1", "approve": false, "reason": "no"},
        ]);
        let read = read_input(Some(&input)).expect("valid");
        assert!(read.history.is_empty());
        assert_eq!(read.prompt, "");
        assert_eq!(
            read.approvals,
            vec![ApprovalAnswer {
                index: 2,
                request_id: "mcpr_x_c1".into(),
                approve: false,
                reason: Some("no".into()),
            }]
        );
        let param = |input: Value| {
            read_input(Some(&input))
                .unwrap_err()
                .param
                .unwrap_or_default()
        };
        assert_eq!(
            param(json!([{"type": "mcp_approval_response", "approve": true}])),
            "input[0].approval_request_id"
        );
        assert_eq!(
            param(json!([{"type": "mcp_approval_response", "approval_request_id": "a"}])),
            "input[0].approve"
        );
        assert_eq!(
            param(json!([
                {"type": "mcp_approval_response", "approval_request_id": "a", "approve": true},
                {"role": "user", "content": "and then?"}
            ])),
            "input[1]"
        );
    }

    #[test]
    fn bad_items_name_their_field() {
        let param = |input: Value| {
            read_input(Some(&input))
                .unwrap_err()
                .param
                .unwrap_or_default()
        };
        assert_eq!(param(json!([])), "input");
        assert_eq!(
            param(json!([{"type": "function_call_output", "output": "x"}])),
            "input[0].call_id"
        );
        assert_eq!(param(json!([{"type": "telepathy"}])), "input[0].type");
        assert_eq!(
            param(json!([{"role": "user", "content": [{"type": "input_audio"}]}])),
            "input[0].content[0]"
        );
        assert_eq!(
            param(json!([{"role": "assistant", "content": "hi"}])),
            "input[0]"
        );
    }
}
