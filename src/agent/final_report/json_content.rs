//! The content of a `json` report: `content_json` (alias `content`), parsed when the model sent
//! it as a string, validated against the schema, and repaired in bounded rounds when fields hold
//! stringified JSON.
//!
//! Only the content value; the format and metadata are checked by the parent. Repairs are
//! reported as warnings, never silently.

use serde_json::Value;

use super::{FinalReportError, first_present};
use crate::agent::tool_args::{ParsedArguments, parse_tool_arguments};

/// Most rounds of the stringified-JSON repair loop.
const MAX_REPAIR_ROUNDS: usize = 5;
/// Most candidate fields tried per repair round.
const MAX_REPAIR_CANDIDATES: usize = 64;
/// Most validation errors listed in [`FinalReportError::SchemaMismatch`].
pub(super) const MAX_LISTED_ERRORS: usize = 10;

/// json format: `content_json` (alias `content`), parsed if stringified,
/// validated, and repaired when fields hold stringified JSON.
pub(super) fn json_content(
    arguments: &serde_json::Map<String, Value>,
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
    match parse_tool_arguments(text) {
        Ok(ParsedArguments::Clean(map)) => Ok((Value::Object(map), None)),
        Ok(ParsedArguments::Repaired {
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
