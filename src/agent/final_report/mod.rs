//! The model's final report: what a session expects (format, compiled schema) and the
//! validation of a report — from the `agent__final_report` tool or an XML FINAL tag — into an
//! [`AcceptedReport`] (format normalisation, then the content: text in `text_content`, JSON with
//! its repair loop in `json_content`). The tool's definition is in `tool`, the XML payload's
//! conversion in `xml_payload`.
//!
//! Pure logic: no I/O, no logging, no session state. Error texts ([`FinalReportError`]) are
//! written to be shown to the model so it can fix its call and retry.

mod json_content;
mod text_content;
mod tool;
mod xml_payload;

use serde_json::{Map, Value};

use crate::agent::tool_args::json_kind;
use json_content::json_content;
use text_content::text_content;
use tool::content_schema;
pub(super) use tool::definition;
pub use tool::{FINAL_REPORT_TOOL, final_report_description, final_report_parameters};
pub(super) use xml_payload::arguments_from_xml_payload;

/// Formats whose report is a string in `report_content`.
pub const TEXT_FORMATS: &[&str] = &[
    "markdown",
    "markdown+mermaid",
    "slack-block-kit",
    "text",
    "tty",
    "pipe",
    "sub-agent",
];

/// The format whose report is a JSON value in `content_json`.
pub const JSON_FORMAT: &str = "json";

/// Keys the tool understands (canonical names and aliases).
const KNOWN_KEYS_TEXT: &[&str] = &[
    "report_format",
    "format",
    "metadata",
    "report_content",
    "content",
    "encoding",
];
const KNOWN_KEYS_JSON: &[&str] = &[
    "report_format",
    "format",
    "metadata",
    "content_json",
    "content",
];

/// The session's expected format cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    #[error(
        "unknown final report format `{0}`; expected one of: json, markdown, markdown+mermaid, \
         slack-block-kit, text, tty, pipe, sub-agent"
    )]
    UnknownFormat(String),
    #[error("the JSON schema for the final report does not compile: {message}")]
    InvalidSchema { message: String },
}

/// Why a final report call was rejected. Display texts are shown to the model.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FinalReportError {
    /// Text formats: `report_content` missing, not a string, or blank.
    #[error("final_report requires non-empty report_content.")]
    EmptyContent,
    #[error(
        "final_report: unknown encoding {0}; use \"raw\" (default) or \"base64\" for report_content."
    )]
    UnknownEncoding(String),
    #[error(
        "final_report: report_content is not valid base64 ({0}); send the report as raw text \
         (encoding \"raw\") or as standard base64."
    )]
    InvalidBase64(String),
    #[error(
        "final_report: report_content decoded from base64 is not valid UTF-8 ({0}); \
         base64-encode the UTF-8 text of the report."
    )]
    InvalidUtf8(String),
    /// json: no `content_json`.
    #[error(
        "final_report requires content_json: the report as a JSON value matching the schema \
         (a JSON value, not a string)."
    )]
    MissingContentJson,
    /// json: `content_json` was a string that does not parse as JSON.
    #[error(
        "final_report: content_json was a string that is not valid JSON ({0}); send content_json \
         as a JSON value matching the schema."
    )]
    UnparseableContentJson(String),
    /// json: `content_json` does not match the schema (after repair).
    #[error(
        "final_report: content_json does not match the required schema:\n{}\nFix these fields \
         and call {FINAL_REPORT_TOOL} again.",
        .errors.join("\n")
    )]
    SchemaMismatch {
        /// `<instance path>: <message>` lines (at most 10, plus a summary line
        /// when more were found).
        errors: Vec<String>,
    },
    #[error("final_report: metadata must be a JSON object, but it is {0}.")]
    MetadataNotObject(&'static str),
}

/// A validated final report.
#[derive(Debug, Clone, PartialEq)]
pub struct AcceptedReport {
    /// Always the expected format (normalised).
    pub format: String,
    /// Text formats: the report text (decoded when it was base64).
    pub content: Option<String>,
    /// json format: the report value, valid against the schema.
    pub content_json: Option<Value>,
    /// The optional `metadata` object.
    pub metadata: Option<Value>,
    /// Non-fatal corrections made while accepting the call.
    pub warnings: Vec<String>,
}

#[derive(Debug, Clone)]
enum Expected {
    Text,
    Json {
        schema: Value,
        validator: Box<jsonschema::Validator>,
    },
}

/// The expected final report for one session: format plus compiled schema.
/// Build once per session and reuse for every call.
#[derive(Debug, Clone)]
pub struct FinalReportSpec {
    format: String,
    expected: Expected,
}

impl FinalReportSpec {
    /// Compiles the expectation. `schema` is only used for the `json` format
    /// (`None` means any JSON object). Errors on an unknown format or when the
    /// schema itself does not compile (the message names the problem).
    pub fn new(format: &str, schema: Option<&Value>) -> Result<Self, SchemaError> {
        let format = normalise_format(format);
        let expected = if format == JSON_FORMAT {
            let schema = content_schema(schema);
            let validator =
                jsonschema::validator_for(&schema).map_err(|e| SchemaError::InvalidSchema {
                    message: e.to_string(),
                })?;
            Expected::Json {
                schema,
                validator: Box::new(validator),
            }
        } else if TEXT_FORMATS.contains(&format.as_str()) {
            Expected::Text
        } else {
            return Err(SchemaError::UnknownFormat(format));
        };
        Ok(Self { format, expected })
    }

    /// The expected (normalised) format.
    pub fn format(&self) -> &str {
        &self.format
    }

    /// The tool's `parameters` schema for this spec.
    pub fn parameters(&self) -> Value {
        match &self.expected {
            Expected::Json { schema, .. } => final_report_parameters(&self.format, Some(schema)),
            Expected::Text => final_report_parameters(&self.format, None),
        }
    }

    /// The tool's description for this spec.
    pub fn description(&self) -> String {
        final_report_description(&self.format)
    }

    /// Validates and decodes the model's arguments into the report parts.
    pub fn accept(
        &self,
        arguments: &Map<String, Value>,
    ) -> Result<AcceptedReport, FinalReportError> {
        let mut warnings = Vec::new();
        self.check_format(arguments, &mut warnings);

        let metadata = match arguments.get("metadata") {
            None | Some(Value::Null) => None,
            Some(value @ Value::Object(_)) => Some(value.clone()),
            Some(other) => return Err(FinalReportError::MetadataNotObject(json_kind(other))),
        };

        let (content, content_json) = match &self.expected {
            Expected::Text => {
                warn_unknown_keys(arguments, KNOWN_KEYS_TEXT, &mut warnings);
                (Some(text_content(arguments)?), None)
            }
            Expected::Json { validator, .. } => {
                warn_unknown_keys(arguments, KNOWN_KEYS_JSON, &mut warnings);
                (
                    None,
                    Some(json_content(arguments, validator, &mut warnings)?),
                )
            }
        };

        Ok(AcceptedReport {
            format: self.format.clone(),
            content,
            content_json,
            metadata,
            warnings,
        })
    }

    /// A plain-text answer taken as the report (the text fallback): text formats keep it as
    /// it is; the json format parses it (a fenced ```json block is unwrapped) and validates it
    /// against the schema like `content_json`, so a prose answer to a JSON run is refused.
    pub fn accept_text(&self, text: &str) -> Result<AcceptedReport, FinalReportError> {
        let mut arguments = Map::new();
        arguments.insert("report_format".into(), Value::String(self.format.clone()));
        let key = match self.expected {
            Expected::Text => "report_content",
            Expected::Json { .. } => "content_json",
        };
        arguments.insert(key.into(), Value::String(unfenced(text).to_owned()));
        self.accept(&arguments)
    }

    /// A missing or different format is normalised to the expected one, with a warning.
    fn check_format(&self, arguments: &Map<String, Value>, warnings: &mut Vec<String>) {
        let expected = &self.format;
        match first_present(arguments, &["report_format", "format"]) {
            None => warnings.push(format!(
                "report_format missing; normalised to the expected \"{expected}\""
            )),
            Some(Value::String(sent)) if normalise_format(sent) == *expected => {}
            Some(Value::String(sent)) => warnings.push(format!(
                "report_format \"{sent}\" does not match the expected \"{expected}\"; normalised"
            )),
            Some(other) => warnings.push(format!(
                "report_format was {}, not a string; normalised to the expected \"{expected}\"",
                json_kind(other)
            )),
        }
    }
}

fn normalise_format(format: &str) -> String {
    format.trim().to_ascii_lowercase()
}

/// The first of `keys` present with a non-null value.
fn first_present<'a>(arguments: &'a Map<String, Value>, keys: &[&str]) -> Option<&'a Value> {
    keys.iter()
        .filter_map(|key| arguments.get(*key))
        .find(|value| !value.is_null())
}

fn warn_unknown_keys(arguments: &Map<String, Value>, known: &[&str], warnings: &mut Vec<String>) {
    for key in arguments.keys() {
        if !known.contains(&key.as_str()) {
            warnings.push(format!("ignored unexpected field `{key}`"));
        }
    }
}

#[cfg(test)]
mod tests;

/// The text inside one fenced code block (```json … ```) when that is all there is.
fn unfenced(text: &str) -> &str {
    let trimmed = text.trim();
    let Some(inner) = trimmed.strip_prefix("```") else {
        return trimmed;
    };
    let Some(inner) = inner.strip_suffix("```") else {
        return trimmed;
    };
    // The info string (`json`) ends at the first line break.
    inner
        .split_once('\n')
        .map_or(inner, |(_, body)| body)
        .trim()
}
