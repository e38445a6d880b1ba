//! `${parameters.x}` substitution for REST tools: URL-encoded in the URL, as text in headers,
//! and in the body as text inside strings or as the parameter's raw JSON value when a string
//! is exactly one placeholder. `x` may be a dotted path into nested objects. A placeholder
//! whose parameter is missing is an error. The URL and headers also take the caller's
//! placeholders (`${caller.userId}`, `${caller.secret.NAME}`), resolved beforehand
//! ([`crate::tools::caller`]) and substituted in the same pass, so a parameter's value is never
//! read as a placeholder. Nothing else (`${VAR}`) is touched here.

use serde_json::{Map, Value};

use crate::tools::caller::Resolved;

const OPEN: &str = "${parameters.";
const CALLER_OPEN: &str = "${caller.";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    #[error("missing parameter {0:?}")]
    Missing(String),
    #[error("unterminated placeholder in {0:?}")]
    Unterminated(String),
    #[error("the placeholder ${{caller.{0}}} is not resolved")]
    Caller(String),
}

/// The URL with every placeholder replaced by its URL-encoded value.
pub fn render_url(
    template: &str,
    parameters: &Map<String, Value>,
    caller: &Resolved,
) -> Result<String, TemplateError> {
    substitute(template, parameters, caller, percent_encode)
}

/// A header value with every placeholder replaced by its text.
pub fn render_header(
    template: &str,
    parameters: &Map<String, Value>,
    caller: &Resolved,
) -> Result<String, TemplateError> {
    substitute(template, parameters, caller, str::to_string)
}

/// The body: a string that is exactly one placeholder becomes the raw JSON value; other
/// strings get their placeholders replaced by text; objects and arrays are walked.
pub fn render_body(
    template: &Value,
    parameters: &Map<String, Value>,
) -> Result<Value, TemplateError> {
    Ok(match template {
        Value::String(text) => match sole_placeholder(text) {
            Some(path) => lookup(parameters, path)?.clone(),
            None => Value::String(substitute(
                text,
                parameters,
                &Resolved::default(),
                str::to_string,
            )?),
        },
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| render_body(item, parameters))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .map(|(key, value)| Ok((key.clone(), render_body(value, parameters)?)))
                .collect::<Result<_, TemplateError>>()?,
        ),
        other => other.clone(),
    })
}

fn substitute(
    template: &str,
    parameters: &Map<String, Value>,
    caller: &Resolved,
    encode: impl Fn(&str) -> String,
) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some((start, open)) = next_placeholder(rest) {
        out.push_str(&rest[..start]);
        let after = &rest[start + open.len()..];
        let Some(end) = after.find('}') else {
            return Err(TemplateError::Unterminated(template.to_string()));
        };
        let inner = &after[..end];
        if open == OPEN {
            out.push_str(&encode(&as_text(lookup(parameters, inner)?)));
        } else {
            let value = caller
                .get(inner)
                .ok_or_else(|| TemplateError::Caller(inner.to_string()))?;
            out.push_str(&encode(value));
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Where the next parameter or caller placeholder starts, and which it is.
fn next_placeholder(text: &str) -> Option<(usize, &'static str)> {
    [OPEN, CALLER_OPEN]
        .into_iter()
        .filter_map(|open| text.find(open).map(|at| (at, open)))
        .min_by_key(|(at, _)| *at)
}

/// `Some(path)` when the whole string is `${parameters.path}`.
fn sole_placeholder(text: &str) -> Option<&str> {
    let path = text.strip_prefix(OPEN)?.strip_suffix('}')?;
    (!path.contains('}')).then_some(path)
}

fn lookup<'a>(parameters: &'a Map<String, Value>, path: &str) -> Result<&'a Value, TemplateError> {
    let mut segments = path.split('.');
    let first = segments.next().unwrap_or_default();
    let mut value = parameters.get(first);
    for segment in segments {
        value = value.and_then(|v| v.get(segment));
    }
    value.ok_or_else(|| TemplateError::Missing(path.to_string()))
}

/// Strings as they are, everything else as JSON text.
pub(crate) fn as_text(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

/// RFC 3986: everything but unreserved characters is `%XX`-encoded.
pub(crate) fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn none() -> Resolved {
        Resolved::default()
    }

    fn params(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    #[test]
    fn url_values_are_percent_encoded() {
        let p = params(json!({"q": "a b&c/é", "n": 5, "f": {"x": "y z"}}));
        assert_eq!(
            render_url(
                "http://h/s?q=${parameters.q}&n=${parameters.n}&x=${parameters.f.x}",
                &p,
                &Resolved::default()
            ),
            Ok("http://h/s?q=a%20b%26c%2F%C3%A9&n=5&x=y%20z".into())
        );
    }

    #[test]
    fn headers_get_text() {
        let p = params(json!({"t": "tok", "n": 2}));
        assert_eq!(
            render_header("Bearer ${parameters.t}-${parameters.n}", &p, &none()),
            Ok("Bearer tok-2".into())
        );
    }

    #[test]
    fn a_sole_placeholder_body_is_raw_json() {
        let p = params(json!({"doc": {"a": [1, 2]}, "name": "x"}));
        assert_eq!(
            render_body(&json!("${parameters.doc}"), &p),
            Ok(json!({"a": [1, 2]}))
        );
        assert_eq!(
            render_body(
                &json!({"wrapped": "${parameters.doc}", "greeting": "hi ${parameters.name}", "k": 1}),
                &p
            ),
            Ok(json!({"wrapped": {"a": [1, 2]}, "greeting": "hi x", "k": 1}))
        );
    }

    #[test]
    fn missing_and_unterminated_placeholders_are_errors() {
        let p = params(json!({"a": 1}));
        assert_eq!(
            render_url("http://h/${parameters.b}", &p, &none()),
            Err(TemplateError::Missing("b".into()))
        );
        assert_eq!(
            render_body(&json!("${parameters.a.deep}"), &p),
            Err(TemplateError::Missing("a.deep".into()))
        );
        assert!(matches!(
            render_header("${parameters.a", &p, &none()),
            Err(TemplateError::Unterminated(_))
        ));
    }

    #[test]
    fn caller_placeholders_are_substituted_but_never_from_a_parameter() {
        let p = params(json!({"q": "${caller.secret.TOKEN}", "n": "x y"}));
        let caller = Resolved::of("al ice", &[("TOKEN", "s3cret")]);
        assert_eq!(
            render_header("Bearer ${caller.secret.TOKEN} ${parameters.q}", &p, &caller),
            Ok("Bearer s3cret ${caller.secret.TOKEN}".into())
        );
        assert_eq!(
            render_url("http://h/u/${caller.userId}?n=${parameters.n}", &p, &caller),
            Ok("http://h/u/al%20ice?n=x%20y".into())
        );
        assert_eq!(
            render_header("${caller.secret.OTHER}", &p, &caller),
            Err(TemplateError::Caller("secret.OTHER".into()))
        );
    }

    #[test]
    fn other_placeholders_are_left_alone() {
        let p = params(json!({}));
        assert_eq!(
            render_header("${HOME} $x", &p, &none()),
            Ok("${HOME} $x".into())
        );
    }
}
