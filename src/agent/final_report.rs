//! The `agent__final_report` tool: its JSON schema and description for the
//! session's expected output format, and validation/decoding of the model's
//! call into an [`AcceptedReport`] (format normalisation, base64 decoding,
//! JSON-schema validation with a bounded repair loop for stringified JSON).
//!
//! Pure logic: no I/O, no logging. Error texts ([`FinalReportError`]) are
//! written to be shown to the model so it can fix its call and retry.

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use serde_json::{Map, Value, json};

/// Name of the tool that ends the session.
pub const FINAL_REPORT_TOOL: &str = "agent__final_report";

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

/// Most rounds of the stringified-JSON repair loop.
const MAX_REPAIR_ROUNDS: usize = 5;
/// Most candidate fields tried per repair round.
const MAX_REPAIR_CANDIDATES: usize = 64;
/// Most validation errors listed in [`FinalReportError::SchemaMismatch`].
const MAX_LISTED_ERRORS: usize = 10;

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

/// Standard alphabet, padding optional.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

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

fn normalise_format(format: &str) -> String {
    format.trim().to_ascii_lowercase()
}

fn content_schema(schema: Option<&Value>) -> Value {
    schema.cloned().unwrap_or_else(|| json!({"type": "object"}))
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

/// Text formats: `report_content` (alias `content`), decoded per `encoding`.
fn text_content(arguments: &Map<String, Value>) -> Result<String, FinalReportError> {
    let Some(Value::String(content)) = first_present(arguments, &["report_content", "content"])
    else {
        return Err(FinalReportError::EmptyContent);
    };
    if content.trim().is_empty() {
        return Err(FinalReportError::EmptyContent);
    }
    let encoding = match arguments.get("encoding") {
        None | Some(Value::Null) => "raw".to_owned(),
        Some(Value::String(encoding)) => encoding.trim().to_ascii_lowercase(),
        Some(other) => return Err(FinalReportError::UnknownEncoding(other.to_string())),
    };
    match encoding.as_str() {
        "raw" | "" => Ok(content.clone()),
        "base64" => {
            let compact: String = content
                .chars()
                .filter(|c| !c.is_ascii_whitespace())
                .collect();
            let bytes = BASE64
                .decode(compact.as_bytes())
                .map_err(|e| FinalReportError::InvalidBase64(e.to_string()))?;
            let text = String::from_utf8(bytes)
                .map_err(|e| FinalReportError::InvalidUtf8(e.to_string()))?;
            if text.trim().is_empty() {
                return Err(FinalReportError::EmptyContent);
            }
            Ok(text)
        }
        _ => Err(FinalReportError::UnknownEncoding(format!("\"{encoding}\""))),
    }
}

/// json format: `content_json` (alias `content`), parsed if stringified,
/// validated, and repaired when fields hold stringified JSON.
fn json_content(
    arguments: &Map<String, Value>,
    validator: &jsonschema::Validator,
    warnings: &mut Vec<String>,
) -> Result<Value, FinalReportError> {
    let Some(raw) = first_present(arguments, &["content_json", "content"]) else {
        return Err(FinalReportError::MissingContentJson);
    };

    let mut value = match raw {
        // A string the schema accepts as-is stays a string.
        Value::String(text) if !validator.is_valid(raw) => {
            let parsed = parse_stringified(text)?;
            warnings.push("content_json was sent as a JSON string; parsed it".to_owned());
            if let Some(steps) = parsed.1 {
                warnings.push(format!("content_json repaired: {}", steps.join(", ")));
            }
            parsed.0
        }
        other => other.clone(),
    };

    for _ in 0..MAX_REPAIR_ROUNDS {
        let errors = error_paths(validator, &value);
        if errors.is_empty() {
            return Ok(value);
        }
        if !repair_round(validator, &mut value, &errors, warnings) {
            break;
        }
    }

    let mut lines = Vec::new();
    let mut total = 0usize;
    for error in validator.iter_errors(&value) {
        total += 1;
        if lines.len() < MAX_LISTED_ERRORS {
            lines.push(format!(
                "{}: {error}",
                display_path(error.instance_path().as_str())
            ));
        }
    }
    if total == 0 {
        return Ok(value);
    }
    if total > lines.len() {
        lines.push(format!("(and {} more)", total - lines.len()));
    }
    Err(FinalReportError::SchemaMismatch { errors: lines })
}

/// Parses a stringified `content_json`: plain JSON first, then the tool-args
/// repair pipeline (objects only). Returns the value and the repair steps.
fn parse_stringified(text: &str) -> Result<(Value, Option<Vec<String>>), FinalReportError> {
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        return Ok((value, None));
    }
    match super::tool_args::parse_tool_arguments(text) {
        Ok(super::tool_args::ParsedArguments::Clean(map)) => Ok((Value::Object(map), None)),
        Ok(super::tool_args::ParsedArguments::Repaired {
            arguments, steps, ..
        }) => Ok((Value::Object(arguments), Some(steps))),
        Err(error) => Err(FinalReportError::UnparseableContentJson(
            match serde_json::from_str::<Value>(text) {
                Err(parse_error) => parse_error.to_string(),
                Ok(_) => error.to_string(),
            },
        )),
    }
}

/// Instance paths (JSON pointers) of the current validation errors.
fn error_paths(validator: &jsonschema::Validator, value: &Value) -> Vec<String> {
    let mut paths: Vec<String> = validator
        .iter_errors(value)
        .map(|error| error.instance_path().as_str().to_owned())
        .collect();
    paths.sort();
    paths.dedup();
    paths
}

/// One repair round: every string at or under an error path that parses as a
/// JSON object/array is replaced by the parsed value, unless the replacement
/// itself is rejected at that path (then the string is kept). Returns whether
/// anything changed.
fn repair_round(
    validator: &jsonschema::Validator,
    value: &mut Value,
    error_paths: &[String],
    warnings: &mut Vec<String>,
) -> bool {
    let mut candidates: Vec<(String, Value)> = Vec::new();
    for path in error_paths {
        if let Some(node) = value.pointer(path) {
            collect_stringified(node, path.clone(), &mut candidates);
        }
    }
    candidates.sort_by(|a, b| a.0.cmp(&b.0));
    candidates.dedup_by(|a, b| a.0 == b.0);
    candidates.truncate(MAX_REPAIR_CANDIDATES);

    let mut changed = false;
    for (path, parsed) in candidates {
        if path.is_empty() {
            continue;
        }
        let Some(slot) = value.pointer_mut(&path) else {
            continue;
        };
        let original = std::mem::replace(slot, parsed);
        let rejected_here = validator
            .iter_errors(value)
            .any(|error| error.instance_path().as_str() == path);
        if rejected_here {
            if let Some(slot) = value.pointer_mut(&path) {
                *slot = original;
            }
        } else {
            warnings.push(format!(
                "content_json repaired: field `{}` was a JSON string",
                path.trim_start_matches('/')
            ));
            changed = true;
        }
    }
    changed
}

/// Strings at or under `node` that parse (strictly) as a JSON object/array.
fn collect_stringified(node: &Value, path: String, out: &mut Vec<(String, Value)>) {
    match node {
        Value::String(text) => {
            let trimmed = text.trim_start();
            if (trimmed.starts_with('{') || trimmed.starts_with('['))
                && let Ok(parsed @ (Value::Object(_) | Value::Array(_))) =
                    serde_json::from_str::<Value>(text)
            {
                out.push((path, parsed));
            }
        }
        Value::Array(items) => {
            for (index, item) in items.iter().enumerate() {
                collect_stringified(item, format!("{path}/{index}"), out);
            }
        }
        Value::Object(map) => {
            for (key, item) in map {
                let escaped = key.replace('~', "~0").replace('/', "~1");
                collect_stringified(item, format!("{path}/{escaped}"), out);
            }
        }
        _ => {}
    }
}

fn display_path(path: &str) -> &str {
    if path.is_empty() { "(root)" } else { path }
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};

    fn args(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            other => panic!("not an object: {other}"),
        }
    }

    fn spec(format: &str, schema: Option<Value>) -> FinalReportSpec {
        match FinalReportSpec::new(format, schema.as_ref()) {
            Ok(spec) => spec,
            Err(e) => panic!("spec: {e}"),
        }
    }

    fn accept(spec: &FinalReportSpec, value: Value) -> AcceptedReport {
        match spec.accept(&args(value)) {
            Ok(report) => report,
            Err(e) => panic!("accept failed: {e}"),
        }
    }

    fn reject(spec: &FinalReportSpec, value: Value) -> FinalReportError {
        match spec.accept(&args(value)) {
            Ok(report) => panic!("unexpectedly accepted: {report:?}"),
            Err(e) => e,
        }
    }

    fn items_schema() -> Value {
        json!({
            "type": "object",
            "required": ["title", "items"],
            "properties": {
                "title": {"type": "string"},
                "items": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "required": ["name"],
                        "properties": {
                            "name": {"type": "string"},
                            "tags": {"type": "array", "items": {"type": "string"}}
                        }
                    }
                }
            }
        })
    }

    #[test]
    fn text_schema_shape() {
        for format in TEXT_FORMATS {
            let params = final_report_parameters(format, None);
            assert_eq!(params["type"], "object");
            assert_eq!(params["additionalProperties"], false);
            assert_eq!(
                params["required"],
                json!(["report_format", "report_content"])
            );
            assert_eq!(params["properties"]["report_format"]["type"], "string");
            assert_eq!(params["properties"]["report_format"]["const"], *format);
            assert_eq!(params["properties"]["report_content"]["type"], "string");
            assert_eq!(params["properties"]["report_content"]["minLength"], 1);
            assert_eq!(
                params["properties"]["encoding"]["enum"],
                json!(["raw", "base64"])
            );
            assert_eq!(params["properties"]["encoding"]["default"], "raw");
            assert_eq!(params["properties"]["metadata"]["type"], "object");
            assert!(params["properties"].get("content_json").is_none());
            // The schema itself compiles.
            assert!(jsonschema::validator_for(&params).is_ok());
        }
    }

    #[test]
    fn json_schema_shape() {
        let schema = items_schema();
        let params = final_report_parameters("json", Some(&schema));
        assert_eq!(params["type"], "object");
        assert_eq!(params["additionalProperties"], false);
        assert_eq!(params["required"], json!(["report_format", "content_json"]));
        assert_eq!(params["properties"]["report_format"]["const"], "json");
        assert_eq!(params["properties"]["content_json"], schema);
        assert!(params["properties"].get("report_content").is_none());
        assert!(params["properties"].get("encoding").is_none());
        assert_eq!(params["properties"]["metadata"]["type"], "object");

        let default = final_report_parameters("json", None);
        assert_eq!(
            default["properties"]["content_json"],
            json!({"type": "object"})
        );
        assert_eq!(spec("json", Some(schema)).parameters(), params);
    }

    #[test]
    fn descriptions_name_the_fields() {
        let text = final_report_description("markdown");
        assert!(text.contains("end the session"));
        assert!(text.contains("report_content"));
        assert!(text.contains("\"markdown\""));
        let json_text = final_report_description("json");
        assert!(json_text.contains("content_json"));
        assert!(!json_text.contains("report_content"));
    }

    #[test]
    fn markdown_ok() {
        let spec = spec("markdown", None);
        let report = accept(
            &spec,
            json!({"report_format": "markdown", "report_content": "# Title\n\nBody", "metadata": {"k": 1}}),
        );
        assert_eq!(
            report,
            AcceptedReport {
                format: "markdown".to_owned(),
                content: Some("# Title\n\nBody".to_owned()),
                content_json: None,
                metadata: Some(json!({"k": 1})),
                warnings: vec![],
            }
        );
    }

    #[test]
    fn empty_content_exact_message() {
        let spec = spec("markdown", None);
        for value in [
            json!({"report_format": "markdown", "report_content": ""}),
            json!({"report_format": "markdown", "report_content": "  \n\t "}),
            json!({"report_format": "markdown"}),
            json!({"report_format": "markdown", "report_content": null}),
            json!({"report_format": "markdown", "report_content": 42}),
        ] {
            let err = reject(&spec, value);
            assert_eq!(err, FinalReportError::EmptyContent);
            assert_eq!(
                err.to_string(),
                "final_report requires non-empty report_content."
            );
        }
    }

    #[test]
    fn base64_with_and_without_padding() {
        let spec = spec("text", None);
        let text = "héllo, wörld — 日本 ✓"; // length chosen to need padding
        let padded = STANDARD.encode(text);
        let unpadded = STANDARD_NO_PAD.encode(text);
        assert!(padded.ends_with('='));
        assert_ne!(padded, unpadded);
        for encoded in [padded.clone(), unpadded, format!("  \n{padded}\n  ")] {
            let report = accept(
                &spec,
                json!({"report_format": "text", "report_content": encoded, "encoding": "base64"}),
            );
            assert_eq!(report.content.as_deref(), Some(text));
        }
    }

    #[test]
    fn bad_base64_and_bad_utf8() {
        let spec = spec("text", None);
        let err = reject(
            &spec,
            json!({"report_format": "text", "report_content": "not*base64!", "encoding": "base64"}),
        );
        assert!(matches!(err, FinalReportError::InvalidBase64(_)), "{err:?}");
        assert!(err.to_string().contains("not valid base64"));

        let invalid_utf8 = STANDARD.encode([0xff_u8, 0xfe, 0x41]);
        let err = reject(
            &spec,
            json!({"report_format": "text", "report_content": invalid_utf8, "encoding": "base64"}),
        );
        assert!(matches!(err, FinalReportError::InvalidUtf8(_)), "{err:?}");
        assert!(err.to_string().contains("not valid UTF-8"));

        let blank = STANDARD.encode("   ");
        let err = reject(
            &spec,
            json!({"report_format": "text", "report_content": blank, "encoding": "base64"}),
        );
        assert_eq!(err, FinalReportError::EmptyContent);
    }

    #[test]
    fn unknown_encoding() {
        let spec = spec("text", None);
        let err = reject(
            &spec,
            json!({"report_format": "text", "report_content": "x", "encoding": "hex"}),
        );
        assert_eq!(err, FinalReportError::UnknownEncoding("\"hex\"".to_owned()));
        let report = accept(
            &spec,
            json!({"report_format": "text", "report_content": "x", "encoding": "RAW"}),
        );
        assert_eq!(report.content.as_deref(), Some("x"));
    }

    #[test]
    fn format_mismatch_normalised_with_warning() {
        let spec = spec("json", None);
        let report = accept(
            &spec,
            json!({"report_format": "markdown", "content_json": {"a": 1}}),
        );
        assert_eq!(report.format, "json");
        assert_eq!(
            report.warnings,
            vec!["report_format \"markdown\" does not match the expected \"json\"; normalised"]
        );
        // Case/whitespace differences are not a mismatch.
        let report = accept(
            &spec,
            json!({"report_format": " JSON ", "content_json": {}}),
        );
        assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    }

    #[test]
    fn missing_format_normalised() {
        let spec = spec("Markdown", None);
        let report = accept(&spec, json!({"report_content": "hi"}));
        assert_eq!(report.format, "markdown");
        assert_eq!(
            report.warnings,
            vec!["report_format missing; normalised to the expected \"markdown\""]
        );
    }

    #[test]
    fn json_valid() {
        let spec = spec("json", Some(items_schema()));
        let content = json!({"title": "t", "items": [{"name": "a", "tags": ["x"]}]});
        let report = accept(
            &spec,
            json!({"report_format": "json", "content_json": content.clone()}),
        );
        assert_eq!(report.content_json, Some(content));
        assert_eq!(report.content, None);
        assert!(report.warnings.is_empty());
    }

    #[test]
    fn json_sent_as_a_string() {
        let spec = spec("json", Some(items_schema()));
        let report = accept(
            &spec,
            json!({"report_format": "json", "content_json": "{\"title\": \"t\", \"items\": []}"}),
        );
        assert_eq!(
            report.content_json,
            Some(json!({"title": "t", "items": []}))
        );
        assert_eq!(
            report.warnings,
            vec!["content_json was sent as a JSON string; parsed it"]
        );

        // Broken JSON in the string goes through the tool-args repair pipeline.
        let report = accept(
            &spec,
            json!({"report_format": "json", "content_json": "{'title': 't', 'items': [],}"}),
        );
        assert_eq!(
            report.content_json,
            Some(json!({"title": "t", "items": []}))
        );
        assert_eq!(report.warnings.len(), 2, "{:?}", report.warnings);
        assert!(report.warnings[1].starts_with("content_json repaired: "));

        let err = reject(
            &spec,
            json!({"report_format": "json", "content_json": "hello world"}),
        );
        assert!(
            matches!(err, FinalReportError::UnparseableContentJson(_)),
            "{err:?}"
        );
    }

    #[test]
    fn json_string_kept_when_schema_wants_a_string() {
        let spec = spec("json", Some(json!({"type": "string"})));
        let report = accept(
            &spec,
            json!({"report_format": "json", "content_json": "{\"a\": 1}"}),
        );
        assert_eq!(report.content_json, Some(json!("{\"a\": 1}")));
        assert!(report.warnings.is_empty());
    }

    #[test]
    fn json_nested_stringified_array_repaired() {
        let spec = spec("json", Some(items_schema()));
        let report = accept(
            &spec,
            json!({
                "report_format": "json",
                "content_json": {"title": "t", "items": "[{\"name\": \"a\", \"tags\": \"[\\\"x\\\"]\"}]"}
            }),
        );
        assert_eq!(
            report.content_json,
            Some(json!({"title": "t", "items": [{"name": "a", "tags": ["x"]}]}))
        );
        assert_eq!(
            report.warnings,
            vec![
                "content_json repaired: field `items` was a JSON string",
                "content_json repaired: field `items/0/tags` was a JSON string",
            ]
        );
    }

    #[test]
    fn legit_json_text_field_is_not_repaired() {
        let schema = json!({
            "type": "object",
            "required": ["raw", "n"],
            "properties": {"raw": {"type": "string"}, "n": {"type": "integer"}}
        });
        let spec = spec("json", Some(schema));
        let err = reject(
            &spec,
            json!({"report_format": "json", "content_json": {"raw": "[1, 2]"}}),
        );
        let FinalReportError::SchemaMismatch { errors } = err else {
            panic!("expected SchemaMismatch");
        };
        assert_eq!(errors, vec!["(root): \"n\" is a required property"]);
    }

    #[test]
    fn json_invalid_reports_paths() {
        let spec = spec("json", Some(items_schema()));
        let err = reject(
            &spec,
            json!({"report_format": "json", "content_json": {"title": "t", "items": [{"name": 5}]}}),
        );
        assert_eq!(
            err,
            FinalReportError::SchemaMismatch {
                errors: vec!["/items/0/name: 5 is not of type \"string\"".to_owned()]
            }
        );
        let text = err.to_string();
        assert!(
            text.contains("/items/0/name: 5 is not of type \"string\""),
            "{text}"
        );
        assert!(text.contains(FINAL_REPORT_TOOL));

        let err = reject(&spec, json!({"report_format": "json", "content_json": {}}));
        let FinalReportError::SchemaMismatch { errors } = err else {
            panic!("expected SchemaMismatch");
        };
        assert!(
            errors.iter().all(|e| e.starts_with("(root): ")),
            "{errors:?}"
        );
    }

    #[test]
    fn json_error_list_is_capped() {
        let schema = json!({"type": "array", "items": {"type": "string"}});
        let spec = spec("json", Some(schema));
        let err = reject(
            &spec,
            json!({"report_format": "json", "content_json": (0..15).collect::<Vec<i32>>()}),
        );
        let FinalReportError::SchemaMismatch { errors } = err else {
            panic!("expected SchemaMismatch");
        };
        assert_eq!(errors.len(), MAX_LISTED_ERRORS + 1);
        assert_eq!(errors[0], "/0: 0 is not of type \"string\"");
        assert_eq!(errors[MAX_LISTED_ERRORS], "(and 5 more)");
    }

    #[test]
    fn json_missing_content() {
        let spec = spec("json", None);
        assert_eq!(
            reject(&spec, json!({"report_format": "json"})),
            FinalReportError::MissingContentJson
        );
    }

    #[test]
    fn no_schema_accepts_any_object() {
        let spec = spec("json", None);
        let report = accept(
            &spec,
            json!({"report_format": "json", "content_json": {"anything": [1, {"x": null}]}}),
        );
        assert_eq!(
            report.content_json,
            Some(json!({"anything": [1, {"x": null}]}))
        );
        let err = reject(&spec, json!({"report_format": "json", "content_json": 5}));
        assert!(matches!(err, FinalReportError::SchemaMismatch { .. }));
    }

    #[test]
    fn schema_that_does_not_compile() {
        let bad = json!({"type": "not-a-type"});
        let err = FinalReportSpec::new("json", Some(&bad)).err();
        let Some(SchemaError::InvalidSchema { message }) = err else {
            panic!("expected InvalidSchema, got {err:?}");
        };
        assert!(message.contains("not-a-type"), "{message}");

        let bad_pattern = json!({"type": "string", "pattern": "(unclosed"});
        assert!(matches!(
            FinalReportSpec::new("json", Some(&bad_pattern)),
            Err(SchemaError::InvalidSchema { .. })
        ));
    }

    #[test]
    fn unknown_format() {
        assert_eq!(
            FinalReportSpec::new("pdf", None).err(),
            Some(SchemaError::UnknownFormat("pdf".to_owned()))
        );
        for format in TEXT_FORMATS.iter().chain([&JSON_FORMAT]) {
            assert!(FinalReportSpec::new(format, None).is_ok(), "{format}");
        }
    }

    #[test]
    fn metadata_must_be_an_object() {
        let spec = spec("markdown", None);
        let err = reject(
            &spec,
            json!({"report_format": "markdown", "report_content": "x", "metadata": "note"}),
        );
        assert_eq!(err, FinalReportError::MetadataNotObject("a string"));
        assert_eq!(
            err.to_string(),
            "final_report: metadata must be a JSON object, but it is a string."
        );
        let report = accept(
            &spec,
            json!({"report_format": "markdown", "report_content": "x", "metadata": null}),
        );
        assert_eq!(report.metadata, None);
    }

    #[test]
    fn aliases_content_and_format() {
        let text = spec("markdown", None);
        let report = accept(&text, json!({"format": "markdown", "content": "body"}));
        assert_eq!(report.content.as_deref(), Some("body"));
        assert!(report.warnings.is_empty(), "{:?}", report.warnings);

        let json_spec = spec("json", None);
        let report = accept(&json_spec, json!({"format": "json", "content": {"a": 1}}));
        assert_eq!(report.content_json, Some(json!({"a": 1})));
        assert!(report.warnings.is_empty(), "{:?}", report.warnings);

        let report = accept(
            &json_spec,
            json!({"format": "text", "content": "{\"a\": 1}"}),
        );
        assert_eq!(report.content_json, Some(json!({"a": 1})));
        assert_eq!(report.warnings.len(), 2, "{:?}", report.warnings);
    }

    #[test]
    fn unexpected_fields_are_warned_not_rejected() {
        let spec = spec("text", None);
        let report = accept(
            &spec,
            json!({"report_format": "text", "report_content": "x", "extra": 1}),
        );
        assert_eq!(report.warnings, vec!["ignored unexpected field `extra`"]);
    }
}
