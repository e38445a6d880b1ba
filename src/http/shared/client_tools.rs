//! What the three headends that take client tools (chat completions, Anthropic messages,
//! Responses) share at the HTTP edge: reading a `tool_choice` in any of their shapes, and
//! turning the runtime's [`ClientToolError`] into a 400 that names the family's own field.
//! The rules themselves live in `runtime::continuation`.

use serde_json::Value;

use crate::agent::client_tools::ClientToolChoice;
use crate::http::error::ApiError;
use crate::llm::ToolDefinition;
use crate::runtime::StartError;
use crate::runtime::continuation::ClientToolError;

/// Where a family keeps the parts of a client tool, for error `param`s.
pub struct ToolFields {
    /// The field holding the tools: `tools`.
    pub list: &'static str,
    /// A tool's name inside one tool: `function.name` or `name`.
    pub name: &'static str,
    /// A tool's schema inside one tool: `function.parameters`, `parameters`, `input_schema`.
    pub schema: &'static str,
}

/// A tool given flat as `{name, description?, parameters?}` (Responses `function` tools, AG-UI
/// tools): a missing name is a 400 naming `tools[index].name`; no parameters mean none.
pub fn flat_definition(tool: &Value, index: usize) -> Result<ToolDefinition, ApiError> {
    let name = tool.get("name").and_then(Value::as_str).unwrap_or_default();
    if name.trim().is_empty() {
        return Err(ApiError::invalid_request("a client tool needs a `name`")
            .with_param(format!("tools[{index}].name")));
    }
    Ok(ToolDefinition {
        name: name.to_string(),
        description: tool
            .get("description")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        parameters: tool
            .get("parameters")
            .filter(|p| !p.is_null())
            .cloned()
            .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}})),
    })
}

/// Reads `tool_choice`: `"auto"`, `"none"`, `"required"`/`"any"`, `{"type": "function",
/// "function": {"name"}}` (chat), `{"type": "function", "name"}` (Responses), `{"type":
/// "tool", "name"}` / `{"type": "auto"|"any"|"none"}` (Anthropic).
pub fn tool_choice(value: Option<&Value>) -> Result<ClientToolChoice, ApiError> {
    let Some(value) = value.filter(|v| !v.is_null()) else {
        return Ok(ClientToolChoice::Auto);
    };
    let keyword = value
        .as_str()
        .or_else(|| value.get("type").and_then(Value::as_str));
    let named = value
        .get("name")
        .or_else(|| value.pointer("/function/name"))
        .and_then(Value::as_str);
    match (keyword, named) {
        (Some("function" | "tool"), Some(name)) => Ok(ClientToolChoice::Function(name.into())),
        (Some("auto"), _) => Ok(ClientToolChoice::Auto),
        (Some("none"), _) => Ok(ClientToolChoice::None),
        (Some("required" | "any"), _) => Ok(ClientToolChoice::Required),
        _ => Err(ApiError::invalid_request(format!(
            "`tool_choice` {value} is not one of \"auto\", \"none\", \"required\" or a named function"
        ))
        .with_param("tool_choice")),
    }
}

/// A run that could not start, with a client tool problem pointed at `fields` (and a tool
/// result's call id at `result_param(call_id)`).
pub fn start_error(
    error: StartError,
    fields: &ToolFields,
    result_param: impl Fn(&str) -> String,
) -> ApiError {
    let StartError::ClientTools(problem) = error else {
        return error.into();
    };
    let param = match &problem {
        ClientToolError::Unnamed { index }
        | ClientToolError::NameTooLong { index, .. }
        | ClientToolError::InvalidName { index, .. }
        | ClientToolError::ReservedName { index, .. }
        | ClientToolError::ClashesWithAgentTool { index, .. }
        | ClientToolError::Duplicate { index, .. } => {
            format!("{}[{index}].{}", fields.list, fields.name)
        }
        ClientToolError::InvalidSchema { index, .. } => {
            format!("{}[{index}].{}", fields.list, fields.schema)
        }
        ClientToolError::UnknownCall { call_id } => result_param(call_id),
        ClientToolError::UnknownChoice { .. } => "tool_choice".into(),
    };
    ApiError::invalid_request(problem.to_string()).with_param(param)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_familys_tool_choice_is_read() {
        let read = |v: Value| tool_choice(Some(&v)).expect("valid");
        assert_eq!(read(json!("auto")), ClientToolChoice::Auto);
        assert_eq!(read(json!("none")), ClientToolChoice::None);
        assert_eq!(read(json!("required")), ClientToolChoice::Required);
        assert_eq!(read(json!({"type": "any"})), ClientToolChoice::Required);
        let named = ClientToolChoice::Function("f".into());
        assert_eq!(
            read(json!({"type": "function", "function": {"name": "f"}})),
            named
        );
        assert_eq!(read(json!({"type": "function", "name": "f"})), named);
        assert_eq!(read(json!({"type": "tool", "name": "f"})), named);
        assert_eq!(tool_choice(None).expect("absent"), ClientToolChoice::Auto);
        let bad = tool_choice(Some(&json!("sometimes"))).unwrap_err();
        assert_eq!(bad.param.as_deref(), Some("tool_choice"));
    }
}
