//! Validation of tool arguments against the JSON schema a tool declares (MCP `inputSchema`,
//! REST `parametersSchema`), compiled once when the tool list is built. jsonschema is built
//! without its resolver features, so a `$ref` to a URL or a file is a compile error and never a
//! fetch: schemas from MCP servers are untrusted.

use serde_json::{Map, Value};

/// How many validation errors the model is shown; the rest are counted.
const MAX_LISTED_ERRORS: usize = 5;

/// A compiled argument schema.
pub struct ArgumentSchema {
    validator: jsonschema::Validator,
}

/// Why a schema did not compile.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct SchemaCompileError(pub String);

impl ArgumentSchema {
    pub fn compile(schema: &Value) -> Result<Self, SchemaCompileError> {
        jsonschema::validator_for(schema)
            .map(|validator| Self { validator })
            .map_err(|e| SchemaCompileError(e.to_string()))
    }

    /// `Err` lists what is wrong, one `path: message` per error (the first few).
    pub fn check(&self, arguments: &Value) -> Result<(), String> {
        let mut listed = Vec::new();
        let mut total = 0usize;
        for error in self.validator.iter_errors(arguments) {
            total += 1;
            if listed.len() < MAX_LISTED_ERRORS {
                let path = error.instance_path().as_str().to_string();
                let path = if path.is_empty() {
                    "/".to_string()
                } else {
                    path
                };
                listed.push(format!("{path}: {error}"));
            }
        }
        if total == 0 {
            return Ok(());
        }
        if total > listed.len() {
            listed.push(format!("(and {} more)", total - listed.len()));
        }
        Err(listed.join("; "))
    }
}

/// The arguments of a call as an object (`null` counts as `{}`), checked against `schema`;
/// `Err` is the reason the model is told.
pub fn checked_arguments(
    arguments: Value,
    schema: Option<&ArgumentSchema>,
) -> Result<Map<String, Value>, String> {
    let arguments = match arguments {
        Value::Null => Value::Object(Map::new()),
        object @ Value::Object(_) => object,
        other => return Err(format!("arguments must be a JSON object, not {other}")),
    };
    if let Some(schema) = schema {
        schema
            .check(&arguments)
            .map_err(|errors| format!("invalid arguments: {errors}"))?;
    }
    match arguments {
        Value::Object(map) => Ok(map),
        _ => Err("arguments must be a JSON object".into()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> ArgumentSchema {
        ArgumentSchema::compile(&json!({
            "type": "object",
            "properties": {"n": {"type": "integer"}, "s": {"type": "string"}},
            "required": ["n"],
        }))
        .expect("compiles")
    }

    #[test]
    fn valid_arguments_pass_and_invalid_ones_are_explained() {
        assert_eq!(schema().check(&json!({"n": 1})), Ok(()));
        let err = schema().check(&json!({"s": 5})).unwrap_err();
        assert!(err.contains("\"n\" is a required property"), "{err}");
        assert!(err.contains("/s: 5 is not of type \"string\""), "{err}");
    }

    #[test]
    fn error_list_is_capped_at_five() {
        let schema = ArgumentSchema::compile(&json!({
            "type": "object",
            "additionalProperties": {"type": "string"},
        }))
        .expect("compiles");
        let five: serde_json::Map<String, Value> =
            (0..5).map(|i| (format!("k{i}"), json!(i))).collect();
        let err = schema.check(&Value::Object(five)).unwrap_err();
        assert_eq!(err.matches("is not of type").count(), 5);
        assert!(!err.contains("more"), "{err}");
        let seven: serde_json::Map<String, Value> =
            (0..7).map(|i| (format!("k{i}"), json!(i))).collect();
        let err = schema.check(&Value::Object(seven)).unwrap_err();
        assert_eq!(err.matches("is not of type").count(), 5);
        assert!(err.ends_with("(and 2 more)"), "{err}");
    }

    #[test]
    fn remote_references_are_not_fetched() {
        let err = ArgumentSchema::compile(&json!({
            "$ref": "http://127.0.0.1:9/schema.json",
        }))
        .err()
        .expect("a remote $ref does not compile");
        assert!(!err.0.is_empty());
        let err = ArgumentSchema::compile(&json!({"$ref": "file:///etc/passwd"}))
            .err()
            .expect("a file $ref does not compile");
        assert!(!err.0.is_empty());
    }

    #[test]
    fn arguments_must_be_an_object_or_null() {
        assert_eq!(checked_arguments(Value::Null, None), Ok(Map::new()));
        let err = checked_arguments(json!([1]), None).unwrap_err();
        assert_eq!(err, "arguments must be a JSON object, not [1]");
        let err = checked_arguments(json!({"s": 1}), Some(&schema())).unwrap_err();
        assert!(err.starts_with("invalid arguments: "), "{err}");
    }

    #[test]
    fn a_broken_schema_is_a_compile_error() {
        assert!(ArgumentSchema::compile(&json!({"type": "no-such-type"})).is_err());
    }
}
