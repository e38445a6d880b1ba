//! The `Mcp-Param-{Name}` headers of MCP 2026-07-28 (SEP-2243): an agent's input schema may
//! mark a primitive property with `x-mcp-header: Name`, and a `tools/call` whose arguments
//! carry a value there must carry the same value in the header (so proxies can route on it).
//! This module owns finding the declarations and checking a call's headers against them.

use axum::http::HeaderMap;
use serde_json::Value;

/// The schema keyword naming a property's header.
const X_MCP_HEADER: &str = "x-mcp-header";
/// The prefix every such header carries.
const HEADER_PREFIX: &str = "mcp-param-";

/// One property mirrored into a header.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Declaration {
    /// The header's name without the prefix, as declared.
    name: String,
    /// The property's path from the arguments object, through `properties` only.
    path: Vec<String>,
    /// Compared as numbers (`42` and `42.0` are equal) rather than as text.
    numeric: bool,
}

/// The declarations of an input schema: properties reachable through `properties` alone.
pub(super) fn declarations(schema: &Value) -> Vec<Declaration> {
    let mut found = Vec::new();
    collect(schema, &mut Vec::new(), &mut found);
    found
}

fn collect(schema: &Value, path: &mut Vec<String>, found: &mut Vec<Declaration>) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (key, property) in properties {
        path.push(key.clone());
        if let Some(name) = property.get(X_MCP_HEADER).and_then(Value::as_str) {
            let kind = property.get("type").and_then(Value::as_str);
            found.push(Declaration {
                name: name.to_string(),
                path: path.clone(),
                numeric: matches!(kind, Some("integer" | "number")),
            });
        }
        collect(property, path, found);
        path.pop();
    }
}

/// Why a call's headers disagree with its arguments: the header and what the body holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Mismatch {
    pub header: String,
    pub message: String,
}

/// Checks each declared header against `arguments`: a value in the body needs the header,
/// decoding (plain, or `=?base64?…?=`) to the same value; an absent or null value needs none.
pub(super) fn check(
    declarations: &[Declaration],
    arguments: &Value,
    headers: &HeaderMap,
    decode: impl Fn(&str) -> Option<String>,
) -> Result<(), Mismatch> {
    for declaration in declarations {
        let Some(body) = value_at(arguments, &declaration.path).and_then(primitive_text) else {
            continue;
        };
        let header = format!("Mcp-Param-{}", declaration.name);
        let field = format!("arguments.{}", declaration.path.join("."));
        let lookup = format!("{HEADER_PREFIX}{}", declaration.name.to_ascii_lowercase());
        let mismatch = |message: String| Mismatch {
            header: header.clone(),
            message,
        };
        let Some(sent) = headers.get(lookup.as_str()).map(|v| v.to_str()) else {
            return Err(mismatch(format!(
                "the body carries {field}={body} but the {header} header is absent"
            )));
        };
        let decoded = sent.ok().and_then(&decode).ok_or_else(|| {
            mismatch(format!(
                "the {header} header is not valid text or base64 in its =?base64?…?= form"
            ))
        })?;
        if !same(declaration.numeric, &decoded, &body) {
            return Err(mismatch(format!(
                "the {header} header decodes to '{decoded}' but the body carries {field}={body}"
            )));
        }
    }
    Ok(())
}

fn value_at<'a>(root: &'a Value, path: &[String]) -> Option<&'a Value> {
    path.iter().try_fold(root, |node, key| node.get(key))
}

/// A primitive's text as a header carries it; null, arrays and objects carry none.
fn primitive_text(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        Value::Bool(flag) => Some(flag.to_string()),
        Value::Null | Value::Array(_) | Value::Object(_) => None,
    }
}

fn same(numeric: bool, sent: &str, body: &str) -> bool {
    if numeric && let (Ok(sent), Ok(body)) = (sent.trim().parse::<f64>(), body.parse::<f64>()) {
        return sent == body;
    }
    sent == body
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "limit": {"type": "integer", "x-mcp-header": "Limit"},
            "nested": {"type": "object", "properties": {"tenant": {"type": "string", "x-mcp-header": "Tenant"}}},
            "items": {"type": "array", "items": {"type": "string", "x-mcp-header": "Ignored"}}
        }})
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().expect("header value"));
        }
        map
    }

    fn plain(value: &str) -> Option<String> {
        Some(value.to_string())
    }

    #[test]
    fn declarations_are_found_through_properties_only() {
        let found = declarations(&schema());
        let names: Vec<&str> = found.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names.len(), 3, "{names:?}");
        assert!(names.contains(&"Tenant") && !names.contains(&"Ignored"));
    }

    #[test]
    fn matching_numeric_and_absent_values_pass_and_a_missing_or_different_header_fails() {
        let found = declarations(&schema());
        let args = json!({"region": "eu", "limit": 42});
        let ok = headers(&[("mcp-param-region", "eu"), ("mcp-param-limit", "42.0")]);
        assert_eq!(check(&found, &args, &ok, plain), Ok(()));
        // No value in the body: no header expected.
        assert_eq!(check(&found, &json!({}), &HeaderMap::new(), plain), Ok(()));
        let missing = check(&found, &args, &headers(&[("mcp-param-limit", "42")]), plain);
        assert_eq!(missing.expect_err("missing").header, "Mcp-Param-Region");
        let wrong = headers(&[("mcp-param-region", "us"), ("mcp-param-limit", "42")]);
        let error = check(&found, &args, &wrong, plain).expect_err("mismatch");
        assert!(error.message.contains("'us'"), "{}", error.message);
        let nested = json!({"nested": {"tenant": "acme"}});
        assert!(check(&found, &nested, &HeaderMap::new(), plain).is_err());
    }
}
