//! Owns `${VAR}` placeholder expansion over the string values of one config layer's JSON.
//!
//! Supported forms, as in the shell: `${NAME}`, `${NAME:-default}` (default used when NAME is
//! unset or empty) and `${NAME:+alternate}` (alternate used when NAME is set and not empty,
//! else nothing); the words may themselves contain placeholders, nested to any depth. As in
//! zsh, the subject may be a placeholder instead of a name, so `${${A:+then}:-else}` chooses
//! between two words by whether `A` is set. `$$` is not special and a `$` not followed by `{`
//! is literal. Left untouched: `${parameters.*}`
//! (runtime REST-tool parameters), `${caller.*}` (the calling user and their secrets, resolved
//! at each tool call by `tools::caller`), the whole subtrees `mcpServers.<name>.env` and
//! `mcpServers.<name>.headers` and the value `mcpServers.<name>.bearerToken` (expanded when the
//! server connects, so an optional server's unset variable never stops agentd).

use std::fmt::Write as _;

use serde_json::Value;

use super::env_file::is_valid_name;

/// Prefix of placeholders that are resolved at tool-call time, never at load time.
const PARAMETERS_PREFIX: &str = "parameters.";
/// Prefix of the caller's placeholders (`${caller.userId}`, `${caller.secret.NAME}`), also
/// resolved at tool-call time.
const CALLER_PREFIX: &str = "caller.";

/// A `${NAME}` placeholder that had no value and no default.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("missing variable ${{{variable}}} at {key_path} in layer {layer}")]
pub struct MissingVariableError {
    /// The layer (config file path) being expanded.
    pub layer: String,
    /// Where the string sits, e.g. `providers.openai.apiKey` or `agents[1]`.
    pub key_path: String,
    /// The variable name, without `${}`.
    pub variable: String,
}

/// Why expanding a layer failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpandError {
    /// A placeholder referred to a variable that is not set.
    #[error(transparent)]
    MissingVariable(#[from] MissingVariableError),
    /// A placeholder is unterminated or names an invalid variable.
    #[error("malformed placeholder at {key_path} in layer {layer}: {detail}")]
    Malformed {
        /// The layer (config file path) being expanded.
        layer: String,
        /// Where the string sits.
        key_path: String,
        /// What is wrong.
        detail: String,
    },
}

/// Failure inside one string, before the layer and key path are attached.
enum StrError {
    Missing(String),
    Malformed(String),
}

/// One step of a key path.
enum Segment<'a> {
    Key(&'a str),
    Index(usize),
}

/// Expands every `${...}` placeholder in the string values of `value` (object keys are
/// never touched). `layer` names the layer in errors; `lookup` resolves variable names.
pub fn expand_layer(
    value: &mut Value,
    layer: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(), ExpandError> {
    let mut path = Vec::new();
    walk(value, &mut path, layer, lookup)
}

fn walk<'a>(
    value: &'a mut Value,
    path: &mut Vec<Segment<'a>>,
    layer: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<(), ExpandError> {
    match value {
        Value::String(s) => {
            if s.contains("${") {
                let expanded =
                    expand_str(s, lookup).map_err(|e| attach(e, layer, &key_path(path)))?;
                *s = expanded;
            }
            Ok(())
        }
        Value::Array(items) => {
            for (i, item) in items.iter_mut().enumerate() {
                path.push(Segment::Index(i));
                let result = walk(item, path, layer, lookup);
                path.pop();
                result?;
            }
            Ok(())
        }
        Value::Object(map) => {
            for (key, item) in map {
                path.push(Segment::Key(key.as_str()));
                let result = if is_protected(path) {
                    Ok(())
                } else {
                    walk(item, path, layer, lookup)
                };
                path.pop();
                result?;
            }
            Ok(())
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => Ok(()),
    }
}

/// `mcpServers.<any>.env`, `.headers` and `.bearerToken` are passed through untouched.
fn is_protected(path: &[Segment<'_>]) -> bool {
    matches!(
        path,
        [
            Segment::Key("mcpServers"),
            Segment::Key(_),
            Segment::Key("env" | "headers" | "bearerToken")
        ]
    )
}

fn key_path(path: &[Segment<'_>]) -> String {
    let mut out = String::new();
    for segment in path {
        match segment {
            Segment::Key(key) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Index(i) => {
                // Writing to a String cannot fail.
                let _ = write!(out, "[{i}]");
            }
        }
    }
    if out.is_empty() {
        out.push_str("<root>");
    }
    out
}

fn attach(err: StrError, layer: &str, key_path: &str) -> ExpandError {
    match err {
        StrError::Missing(variable) => ExpandError::MissingVariable(MissingVariableError {
            layer: layer.to_owned(),
            key_path: key_path.to_owned(),
            variable,
        }),
        StrError::Malformed(detail) => ExpandError::Malformed {
            layer: layer.to_owned(),
            key_path: key_path.to_owned(),
            detail,
        },
    }
}

/// Expands the placeholders of one string.
fn expand_str(s: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, StrError> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after_open = &rest[start + 2..];
        let Some(close) = matching_brace(after_open) else {
            return Err(StrError::Malformed(format!(
                "unterminated `${{` in `{}`",
                &rest[start..]
            )));
        };
        let inner = &after_open[..close];
        expand_placeholder(inner, lookup, &mut out)?;
        rest = &after_open[close + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Index of the `}` closing a placeholder whose `${` has just been consumed.
fn matching_brace(s: &str) -> Option<usize> {
    let mut depth = 1usize;
    for (i, b) in s.bytes().enumerate() {
        match b {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// What a placeholder's operator does with its subject's value.
#[derive(Clone, Copy)]
enum Operator<'a> {
    /// `${X}`: the value; unset is an error.
    Plain,
    /// `${X:-word}`: the value, else `word` when unset or empty.
    Default(&'a str),
    /// `${X:+word}`: `word` when the value is set and not empty, else nothing.
    Alternate(&'a str),
}

/// What a placeholder's operator applies to.
enum Subject<'a> {
    /// A variable name.
    Variable(&'a str),
    /// A whole nested placeholder, `${...}` included (`${${A:+x}:-y}`).
    Nested(&'a str),
}

/// Expands the text between `${` and its matching `}`, appending the result to `out`.
fn expand_placeholder(
    inner: &str,
    lookup: &dyn Fn(&str) -> Option<String>,
    out: &mut String,
) -> Result<(), StrError> {
    if inner.starts_with(PARAMETERS_PREFIX) || inner.starts_with(CALLER_PREFIX) {
        out.push_str("${");
        out.push_str(inner);
        out.push('}');
        return Ok(());
    }
    let (subject, operator) = split_placeholder(inner)?;
    // `Err(name)`: the variable is not set.
    let value = match subject {
        Subject::Variable(name) => lookup(name).ok_or(name),
        Subject::Nested(text) => Ok(expand_str(text, lookup)?),
    };
    let set = value.as_ref().is_ok_and(|v| !v.is_empty());
    let word = match operator {
        Operator::Plain => {
            let value = value.map_err(|name| StrError::Missing(name.to_owned()))?;
            out.push_str(&value);
            return Ok(());
        }
        Operator::Default(word) if !set => Some(word),
        Operator::Alternate(word) if set => Some(word),
        Operator::Default(word) | Operator::Alternate(word) => {
            // The word is not used, but a malformed one is still an error: check its syntax
            // with a lookup that sends every placeholder down its default path.
            expand_str(word, &|_| Some(String::new()))?;
            None
        }
    };
    match (word, operator) {
        (Some(word), _) => out.push_str(&expand_str(word, lookup)?),
        (None, Operator::Default(_)) => out.push_str(value.as_deref().unwrap_or_default()),
        (None, _) => {}
    }
    Ok(())
}

/// Splits a placeholder's inside into its subject and operator.
fn split_placeholder(inner: &str) -> Result<(Subject<'_>, Operator<'_>), StrError> {
    let (subject, rest) = match inner.strip_prefix("${") {
        Some(after_open) => {
            let close = matching_brace(after_open).ok_or_else(|| {
                StrError::Malformed(format!("unterminated `${{` in `${{{inner}}}`"))
            })?;
            let end = close + 3;
            (Subject::Nested(&inner[..end]), &inner[end..])
        }
        None => {
            let end = inner.find(':').unwrap_or(inner.len());
            let name = &inner[..end];
            if !is_valid_name(name) {
                return Err(StrError::Malformed(format!(
                    "invalid variable name in `${{{inner}}}` (must match [A-Za-z_][A-Za-z0-9_]*)"
                )));
            }
            (Subject::Variable(name), &inner[end..])
        }
    };
    let operator = if rest.is_empty() {
        Operator::Plain
    } else if let Some(word) = rest.strip_prefix(":-") {
        Operator::Default(word)
    } else if let Some(word) = rest.strip_prefix(":+") {
        Operator::Alternate(word)
    } else {
        return Err(StrError::Malformed(format!(
            "unknown operator `{rest}` in `${{{inner}}}` (use `:-default` or `:+alternate`)"
        )));
    };
    Ok((subject, operator))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::HashMap;

    const LAYER: &str = "/cfg/.ai-agent.json";

    fn vars() -> HashMap<&'static str, &'static str> {
        HashMap::from([
            ("A", "alpha"),
            ("B", "beta"),
            ("EMPTY", ""),
            ("KEY", "sk-123"),
        ])
    }

    fn expand(mut value: Value) -> Result<Value, ExpandError> {
        let vars = vars();
        let lookup = move |name: &str| vars.get(name).map(|v| (*v).to_owned());
        expand_layer(&mut value, LAYER, &lookup)?;
        Ok(value)
    }

    fn expand_s(s: &str) -> Result<String, ExpandError> {
        match expand(json!(s))? {
            Value::String(s) => Ok(s),
            other => panic!("not a string: {other}"),
        }
    }

    #[test]
    fn simple() {
        assert_eq!(expand_s("${A}").unwrap(), "alpha");
        assert_eq!(expand_s("no placeholders").unwrap(), "no placeholders");
    }

    #[test]
    fn multiple_in_one_string() {
        assert_eq!(expand_s("x-${A}-${B}${A}!").unwrap(), "x-alpha-betaalpha!");
    }

    #[test]
    fn dollar_without_brace_is_literal() {
        assert_eq!(expand_s("$A $$ $${A} $").unwrap(), "$A $$ $alpha $");
    }

    #[test]
    fn default_when_unset() {
        assert_eq!(expand_s("${UNSET:-fallback}").unwrap(), "fallback");
        assert_eq!(expand_s("${UNSET:-}").unwrap(), "");
    }

    #[test]
    fn default_when_empty() {
        assert_eq!(expand_s("${EMPTY:-fallback}").unwrap(), "fallback");
    }

    #[test]
    fn empty_without_default_is_empty() {
        assert_eq!(expand_s("[${EMPTY}]").unwrap(), "[]");
    }

    #[test]
    fn set_var_ignores_default() {
        assert_eq!(expand_s("${A:-fallback}").unwrap(), "alpha");
        // The unused default is not expanded, so a missing variable inside it is fine.
        assert_eq!(expand_s("${A:-${NOPE}}").unwrap(), "alpha");
        assert_eq!(expand_s("${A:-${U:-${NOPE}}}").unwrap(), "alpha");
    }

    #[test]
    fn malformed_unused_default_is_still_an_error() {
        assert_malformed("${A:-${bad name}}", "invalid variable name");
        assert_malformed("${A:-${U:-${B-x}}}", "invalid variable name");
    }

    #[test]
    fn nested_defaults() {
        assert_eq!(expand_s("${U1:-${U2:-x}}").unwrap(), "x");
        assert_eq!(
            expand_s("${U1:-${U2:-${U3:-deep}}}/end").unwrap(),
            "deep/end"
        );
        assert_eq!(expand_s("${U1:-${EMPTY:-y}}").unwrap(), "y");
    }

    #[test]
    fn default_containing_set_var() {
        assert_eq!(expand_s("${U1:-${B}}").unwrap(), "beta");
        assert_eq!(expand_s("${U1:-pre-${A}-post}").unwrap(), "pre-alpha-post");
    }

    #[test]
    fn default_with_braces_and_colon_dash() {
        assert_eq!(expand_s("${U1:-{}}").unwrap(), "{}");
        assert_eq!(expand_s("${U1:-a:-b}").unwrap(), "a:-b");
    }

    #[test]
    fn alternate_when_set_and_not_empty() {
        assert_eq!(expand_s("${A:+set}").unwrap(), "set");
        assert_eq!(expand_s("[${UNSET:+set}]").unwrap(), "[]");
        assert_eq!(expand_s("[${EMPTY:+set}]").unwrap(), "[]");
        assert_eq!(expand_s("${A:+x-${B}-${U:-d}}").unwrap(), "x-beta-d");
        assert_eq!(expand_s("${A:+}").unwrap(), "");
    }

    #[test]
    fn unused_alternate_is_only_checked() {
        // Not expanded, so a missing variable inside it is fine; a malformed one is not.
        assert_eq!(expand_s("[${UNSET:+${NOPE}}]").unwrap(), "[]");
        assert_malformed("${UNSET:+${bad name}}", "invalid variable name");
        assert_malformed("${A:-${U:+${B-x}}}", "invalid variable name");
    }

    #[test]
    fn a_placeholder_as_the_subject_chooses_between_two_words() {
        let pick = "${${A:+llm/${U:-gpt}}:-scripted/tools}";
        assert_eq!(expand_s(pick).unwrap(), "llm/gpt");
        let pick = "${${UNSET:+llm/${U:-gpt}}:-scripted/tools}";
        assert_eq!(expand_s(pick).unwrap(), "scripted/tools");
        assert_eq!(expand_s("${${EMPTY:+x}:-y}").unwrap(), "y");
        assert_eq!(expand_s("${${A}}").unwrap(), "alpha");
        assert_eq!(expand_s("${${A}:+b-${B}}").unwrap(), "b-beta");
        assert_eq!(expand_s("${${U:-${A}}:-z}").unwrap(), "alpha");
    }

    #[test]
    fn a_missing_variable_in_a_nested_subject_is_named() {
        let err = expand(json!({"k": "${${NOPE}:-x}"})).unwrap_err();
        let ExpandError::MissingVariable(m) = err else {
            panic!("unexpected {err:?}");
        };
        assert_eq!(m.variable, "NOPE");
    }

    #[test]
    fn unknown_operators_are_named() {
        assert_malformed("${A:?required}", "unknown operator `:?required`");
        assert_malformed("${A:x}", "unknown operator `:x`");
        assert_malformed("${${A}x}", "unknown operator `x`");
        assert_malformed("${${A}-x}", "unknown operator `-x`");
    }

    #[test]
    fn values_are_not_re_expanded() {
        let lookup = |name: &str| (name == "X").then(|| "${Y}".to_owned());
        let mut v = json!("${X}");
        expand_layer(&mut v, LAYER, &lookup).unwrap();
        assert_eq!(v, json!("${Y}"));
    }

    #[test]
    fn missing_variable_error() {
        let err = expand(json!({
            "providers": {"openai": {"apiKey": "${OPENAI_API_KEY}"}}
        }))
        .unwrap_err();
        let expected = MissingVariableError {
            layer: LAYER.to_owned(),
            key_path: "providers.openai.apiKey".to_owned(),
            variable: "OPENAI_API_KEY".to_owned(),
        };
        assert_eq!(err, ExpandError::MissingVariable(expected.clone()));
        let text = "missing variable ${OPENAI_API_KEY} at providers.openai.apiKey in layer /cfg/.ai-agent.json";
        assert_eq!(expected.to_string(), text);
        assert_eq!(err.to_string(), text);
        let as_std: &dyn std::error::Error = &expected;
        assert_eq!(as_std.to_string(), text);
    }

    #[test]
    fn missing_variable_inside_nested_default() {
        let err = expand(json!({"a": "${U1:-${U2}}"})).unwrap_err();
        match err {
            ExpandError::MissingVariable(m) => {
                assert_eq!(m.variable, "U2");
                assert_eq!(m.key_path, "a");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn array_index_in_key_path() {
        let err = expand(json!({
            "agents": ["ok", "${NOPE}"],
        }))
        .unwrap_err();
        match err {
            ExpandError::MissingVariable(m) => assert_eq!(m.key_path, "agents[1]"),
            other => panic!("unexpected {other:?}"),
        }

        let err = expand(json!({
            "providers": {"openai": {"models": {"gpt-4o": {"overrides": {
                "temperature": "${TEMP}"
            }}}}},
            "list": [[1, {"x": ["${A}", "${MISSING}"]}]],
        }))
        .unwrap_err();
        let ExpandError::MissingVariable(m) = err else {
            panic!("unexpected {err:?}");
        };
        // serde_json maps are sorted, so `list` is walked first.
        assert_eq!(m.key_path, "list[0][1].x[1]");
        assert_eq!(m.variable, "MISSING");

        let err = expand(json!({
            "providers": {"openai": {"models": {"gpt-4o": {"overrides": {
                "temperature": "${TEMP}"
            }}}}},
        }))
        .unwrap_err();
        let ExpandError::MissingVariable(m) = err else {
            panic!("unexpected {err:?}");
        };
        assert_eq!(
            m.key_path,
            "providers.openai.models.gpt-4o.overrides.temperature"
        );
    }

    #[test]
    fn root_string_key_path() {
        let err = expand(json!("${NOPE}")).unwrap_err();
        let ExpandError::MissingVariable(m) = err else {
            panic!("unexpected {err:?}");
        };
        assert_eq!(m.key_path, "<root>");
    }

    fn assert_malformed(s: &str, needle: &str) {
        match expand(json!({"k": [s]})) {
            Err(ExpandError::Malformed {
                layer,
                key_path,
                detail,
            }) => {
                assert_eq!(layer, LAYER);
                assert_eq!(key_path, "k[0]");
                assert!(detail.contains(needle), "{s}: {detail}");
            }
            other => panic!("{s}: unexpected {other:?}"),
        }
    }

    #[test]
    fn malformed_unterminated() {
        assert_malformed("${A", "unterminated");
        assert_malformed("x ${A:-${B}", "unterminated");
        assert_malformed("${", "unterminated");
    }

    #[test]
    fn malformed_bad_name() {
        assert_malformed("${}", "invalid variable name");
        assert_malformed("${1A}", "invalid variable name");
        assert_malformed("${A-default}", "invalid variable name");
        assert_malformed("${A B}", "invalid variable name");
        assert_malformed("${U:-${bad name}}", "invalid variable name");
    }

    #[test]
    fn malformed_display_names_layer() {
        let err = expand(json!({"k": "${A"})).unwrap_err();
        let text = err.to_string();
        assert!(text.contains(LAYER), "{text}");
        assert!(text.contains("at k "), "{text}");
    }

    #[test]
    fn parameters_untouched() {
        assert_eq!(expand_s("${parameters.x}").unwrap(), "${parameters.x}");
        assert_eq!(
            expand_s("/items/${parameters.id}?k=${KEY}&q=${parameters.q.sub}").unwrap(),
            "/items/${parameters.id}?k=sk-123&q=${parameters.q.sub}"
        );
        assert_eq!(
            expand_s("${U:-${parameters.fallback}}").unwrap(),
            "${parameters.fallback}"
        );
    }

    #[test]
    fn caller_placeholders_untouched() {
        assert_eq!(
            expand_s("Bearer ${caller.secret.TOKEN} for ${caller.userId}, key ${KEY}").unwrap(),
            "Bearer ${caller.secret.TOKEN} for ${caller.userId}, key sk-123"
        );
    }

    #[test]
    fn mcp_env_and_headers_untouched_command_expanded() {
        let value = expand(json!({
            "mcpServers": {
                "fs": {
                    "command": "${A}/bin/server",
                    "args": ["--key", "${KEY}"],
                    "env": {"TOKEN": "${UNSET_TOKEN}", "BAD": "${"},
                    "headers": {"Authorization": "Bearer ${UNSET_TOKEN}"},
                    "bearerToken": "${UNSET_TOKEN}"
                }
            },
            "other": {"env": {"X": "${A}"}}
        }))
        .unwrap();
        assert_eq!(
            value,
            json!({
                "mcpServers": {
                    "fs": {
                        "command": "alpha/bin/server",
                        "args": ["--key", "sk-123"],
                        "env": {"TOKEN": "${UNSET_TOKEN}", "BAD": "${"},
                        "headers": {"Authorization": "Bearer ${UNSET_TOKEN}"},
                        "bearerToken": "${UNSET_TOKEN}"
                    }
                },
                "other": {"env": {"X": "alpha"}}
            })
        );
    }

    #[test]
    fn object_keys_and_non_strings_untouched() {
        let input = json!({
            "${A}": 1,
            "n": 2.5,
            "b": true,
            "z": null,
            "arr": [1, false, null, {"${B}": "${B}"}]
        });
        let value = expand(input).unwrap();
        assert_eq!(
            value,
            json!({
                "${A}": 1,
                "n": 2.5,
                "b": true,
                "z": null,
                "arr": [1, false, null, {"${B}": "beta"}]
            })
        );
    }

    #[test]
    fn unicode_around_placeholders() {
        assert_eq!(
            expand_s("héllo ${A} wörld ✓").unwrap(),
            "héllo alpha wörld ✓"
        );
    }
}
