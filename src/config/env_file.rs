//! Owns parsing of `.ai-agent.env` files: `KEY=value` lines, scoped to a single config layer.

use std::collections::BTreeMap;

/// A line of an env file that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct EnvFileError {
    /// 1-based line number of the offending line.
    pub line: usize,
    /// What is wrong with the line.
    pub message: String,
}

impl EnvFileError {
    fn new(line: usize, message: impl Into<String>) -> Self {
        Self {
            line,
            message: message.into(),
        }
    }
}

/// Returns true when `name` matches `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Parses the text of an env file into a map of variables.
///
/// Accepted lines: `KEY=value`, `export KEY=value`, blank lines and `#` comments.
/// Whitespace around keys and values is trimmed; a value wrapped in matching single or
/// double quotes has the quotes removed (its content is kept verbatim). In an unquoted
/// value, whitespace followed by `#` starts a comment. Later definitions override earlier ones.
pub fn parse_env_file(text: &str) -> Result<BTreeMap<String, String>, EnvFileError> {
    let mut vars = BTreeMap::new();
    for (index, raw_line) in text.lines().enumerate() {
        let line_no = index + 1;
        let line = raw_line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = strip_export(line);
        let Some((key, raw_value)) = line.split_once('=') else {
            return Err(EnvFileError::new(line_no, "expected KEY=value"));
        };
        let key = key.trim();
        if !is_valid_name(key) {
            return Err(EnvFileError::new(
                line_no,
                format!("invalid variable name `{key}` (must match [A-Za-z_][A-Za-z0-9_]*)"),
            ));
        }
        let value = parse_value(raw_value).map_err(|msg| EnvFileError::new(line_no, msg))?;
        vars.insert(key.to_owned(), value);
    }
    Ok(vars)
}

/// Removes a leading `export` keyword (followed by whitespace), if present.
fn strip_export(line: &str) -> &str {
    if let Some(rest) = line.strip_prefix("export")
        && rest.starts_with(char::is_whitespace)
    {
        return rest.trim_start();
    }
    line
}

/// Parses the part of a line after `=`.
fn parse_value(raw: &str) -> Result<String, String> {
    let trimmed = raw.trim_start();
    let mut chars = trimmed.chars();
    if let Some(quote @ ('"' | '\'')) = chars.next() {
        let body = chars.as_str();
        let Some(end) = body.find(quote) else {
            return Err(format!("unterminated {quote} quote"));
        };
        let rest = body[end + quote.len_utf8()..].trim();
        if !rest.is_empty() && !rest.starts_with('#') {
            return Err(format!("unexpected text after closing quote: `{rest}`"));
        }
        return Ok(body[..end].to_owned());
    }
    Ok(strip_inline_comment(raw).trim().to_owned())
}

/// Cuts an unquoted value at the first whitespace character followed by `#`.
fn strip_inline_comment(raw: &str) -> &str {
    let mut prev_ws = false;
    for (i, c) in raw.char_indices() {
        if c == '#' && prev_ws {
            return &raw[..i];
        }
        prev_ws = c.is_whitespace();
    }
    raw
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> BTreeMap<String, String> {
        parse_env_file(text).unwrap()
    }

    #[test]
    fn plain_and_export_lines() {
        let vars = parse("A=1\nexport B=two\n  export   C = three  \n");
        assert_eq!(vars["A"], "1");
        assert_eq!(vars["B"], "two");
        assert_eq!(vars["C"], "three");
        assert_eq!(vars.len(), 3);
    }

    #[test]
    fn blank_and_comment_lines_ignored() {
        let vars = parse("# comment\n\n   \n  # indented comment\nA=1\n");
        assert_eq!(vars.len(), 1);
        assert_eq!(vars["A"], "1");
    }

    #[test]
    fn quotes_are_stripped() {
        let vars = parse("A=\"hello world\"\nB='single # not comment'\nC=\"\"\nD=\"it's\"\n");
        assert_eq!(vars["A"], "hello world");
        assert_eq!(vars["B"], "single # not comment");
        assert_eq!(vars["C"], "");
        assert_eq!(vars["D"], "it's");
    }

    #[test]
    fn quoted_value_may_have_trailing_comment() {
        let vars = parse("A=\"x y\"   # trailing\n");
        assert_eq!(vars["A"], "x y");
    }

    #[test]
    fn mismatched_quotes_are_kept() {
        let vars = parse("A=abc\"\n");
        assert_eq!(vars["A"], "abc\"");
    }

    #[test]
    fn inline_comment_after_unquoted_value() {
        let vars = parse("A=value # comment\nB=val#ue\nC= # only comment\nD=x\t# tab comment\n");
        assert_eq!(vars["A"], "value");
        assert_eq!(vars["B"], "val#ue");
        assert_eq!(vars["C"], "");
        assert_eq!(vars["D"], "x");
    }

    #[test]
    fn empty_value_and_equals_in_value() {
        let vars = parse("A=\nB=a=b=c\n");
        assert_eq!(vars["A"], "");
        assert_eq!(vars["B"], "a=b=c");
    }

    #[test]
    fn key_named_export_is_allowed() {
        let vars = parse("export=1\n");
        assert_eq!(vars["export"], "1");
    }

    #[test]
    fn later_definition_wins() {
        let vars = parse("A=1\nA=2\n");
        assert_eq!(vars["A"], "2");
    }

    #[test]
    fn bad_line_reports_line_number() {
        let err = parse_env_file("A=1\n# c\nnot a pair\n").unwrap_err();
        assert_eq!(err.line, 3);
        assert!(err.message.contains("KEY=value"), "{err}");
        assert!(err.to_string().starts_with("line 3:"), "{err}");
    }

    #[test]
    fn bad_key_is_error() {
        let err = parse_env_file("A=1\n1BAD=x\n").unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.message.contains("1BAD"), "{err}");

        let err = parse_env_file("MY-KEY=x\n").unwrap_err();
        assert_eq!(err.line, 1);

        let err = parse_env_file("=x\n").unwrap_err();
        assert_eq!(err.line, 1);
    }

    #[test]
    fn unterminated_quote_is_error() {
        let err = parse_env_file("\nA=\"abc\n").unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.message.contains("unterminated"), "{err}");
    }

    #[test]
    fn text_after_closing_quote_is_error() {
        let err = parse_env_file("A=\"abc\" def\n").unwrap_err();
        assert_eq!(err.line, 1);
    }

    #[test]
    fn valid_names() {
        assert!(is_valid_name("_"));
        assert!(is_valid_name("A_1"));
        assert!(!is_valid_name(""));
        assert!(!is_valid_name("1A"));
        assert!(!is_valid_name("A-B"));
        assert!(!is_valid_name("A.B"));
    }
}
