//! The payload of an XML FINAL tag as final-report arguments, so it is accepted by the same
//! validation as the tool (the format layer of contract §11: json parsed, text formats raw).
//!
//! Only the conversion: the transport layer (tag closed, stop reason, the tag's `format`
//! attribute) is checked by the session's XML phase before this runs.

use serde_json::{Map, Value, json};

use super::JSON_FORMAT;
use crate::agent::tool_args::{ParsedArguments, parse_tool_arguments};

/// The arguments a final-report call would carry for `payload` in the expected `format`; `Err`
/// is the reason the model will be told.
pub(in crate::agent) fn arguments_from_xml_payload(
    format: &str,
    payload: &str,
) -> Result<Map<String, Value>, String> {
    let mut arguments = Map::new();
    arguments.insert("report_format".into(), json!(format));
    if format != JSON_FORMAT {
        arguments.insert("report_content".into(), json!(payload));
        return Ok(arguments);
    }
    let parsed = match parse_tool_arguments(payload) {
        Ok(
            ParsedArguments::Clean(object)
            | ParsedArguments::Repaired {
                arguments: object, ..
            },
        ) => object,
        Err(error) => return Err(format!("the final report must be one JSON object: {error}")),
    };
    arguments.insert("content_json".into(), Value::Object(parsed));
    Ok(arguments)
}
