//! The `agent__final_report` tool as the model sees it: its name, its JSON schema and its
//! description for the session's expected format.
//!
//! Only the definition: accepting a call is the parent module's job, and nothing here may
//! depend on the session.

use serde_json::{Map, Value, json};

use super::{JSON_FORMAT, normalise_format};
use crate::llm::ToolDefinition;

/// Name of the tool that ends the session.
pub const FINAL_REPORT_TOOL: &str = "agent__final_report";

/// The tool offered to a session expecting `format` (and, for `json`, `schema`).
pub(in crate::agent) fn definition(format: &str, schema: Option<&Value>) -> ToolDefinition {
    ToolDefinition {
        name: FINAL_REPORT_TOOL.to_string(),
        description: final_report_description(format),
        parameters: final_report_parameters(format, schema),
    }
}

/// The tool's JSON schema (function `parameters`) for the expected format.
///
/// - always: `report_format` `{"type":"string","const":<format>}` (required),
///   `metadata` `{"type":"object"}` (optional);
/// - json: `content_json` = the agent's schema (or `{"type":"object"}`), required;
/// - other formats: `report_content` `{"type":"string","minLength":1}` required,
///   `encoding` `{"type":"string","enum":["raw","base64"],"default":"raw"}` optional.
pub fn final_report_parameters(format: &str, schema: Option<&Value>) -> Value {
    let format = normalise_format(format);
    let mut properties = Map::new();
    properties.insert(
        "report_format".to_owned(),
        json!({
            "type": "string",
            "const": format,
            "description": "The report format; must be exactly this value."
        }),
    );
    let required = if format == JSON_FORMAT {
        properties.insert("content_json".to_owned(), content_schema(schema));
        json!(["report_format", "content_json"])
    } else {
        properties.insert(
            "report_content".to_owned(),
            json!({
                "type": "string",
                "minLength": 1,
                "description": format!("The complete final report, as {}.", format_hint(&format))
            }),
        );
        properties.insert(
            "encoding".to_owned(),
            json!({
                "type": "string",
                "enum": ["raw", "base64"],
                "default": "raw",
                "description": "How report_content is encoded: raw text (default) or standard base64 of UTF-8 text."
            }),
        );
        json!(["report_format", "report_content"])
    };
    properties.insert(
        "metadata".to_owned(),
        json!({
            "type": "object",
            "description": "Optional extra information about the report."
        }),
    );
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false
    })
}

/// A short tool description: calling it ends the session, and what goes where.
pub fn final_report_description(format: &str) -> String {
    let format = normalise_format(format);
    if format == JSON_FORMAT {
        format!(
            "Deliver the final report and end the session. Call this exactly once, when the work \
             is complete; nothing runs after it. Set report_format to \"{format}\" and put the \
             report in content_json as a JSON value (not a string) matching its schema. \
             Optional metadata is a JSON object."
        )
    } else {
        format!(
            "Deliver the final report and end the session. Call this exactly once, when the work \
             is complete; nothing runs after it. Set report_format to \"{format}\" and put the \
             complete report in report_content as {}. If the text is hard to escape, send it as \
             standard base64 and set encoding to \"base64\". Optional metadata is a JSON object.",
            format_hint(&format)
        )
    }
}

fn format_hint(format: &str) -> &'static str {
    match format {
        "markdown" => "Markdown",
        "markdown+mermaid" => "Markdown (diagrams allowed as ```mermaid code blocks)",
        "slack-block-kit" => "Slack Block Kit content",
        "tty" => "plain text for a terminal",
        "pipe" => "plain text for another program (no decoration)",
        "sub-agent" => "text for the calling agent",
        _ => "plain text",
    }
}

pub(super) fn content_schema(schema: Option<&Value>) -> Value {
    schema.cloned().unwrap_or_else(|| json!({"type": "object"}))
}
