//! The syntax of the caller placeholders tool settings may hold: `${caller.userId}` and
//! `${caller.secret.NAME}` (NAME 1 to 64 of `[A-Za-z0-9_-]`). Only their shape is known here, for
//! the load-time checks; resolving them at each call is `tools::caller`'s.

use super::secrets::is_valid_name;

const OPEN: &str = "${caller.";
const USER_ID: &str = "userId";
const SECRET: &str = "secret.";

/// One `${caller.…}` placeholder.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Placeholder {
    UserId,
    Secret(String),
}

/// `userId` or `secret.NAME` (the text after `caller.`).
pub fn parse(inner: &str) -> Result<Placeholder, String> {
    if inner == USER_ID {
        return Ok(Placeholder::UserId);
    }
    match inner.strip_prefix(SECRET) {
        Some(name) if is_valid_name(name) => Ok(Placeholder::Secret(name.to_string())),
        Some(name) => Err(format!(
            "`${{caller.secret.{name}}}`: a secret name is 1 to 64 letters, digits, `_` or `-`"
        )),
        None => Err(format!(
            "`${{caller.{inner}}}`: use `${{caller.userId}}` or `${{caller.secret.NAME}}`"
        )),
    }
}

/// Every caller placeholder of `template`, in order; an error for a malformed one.
pub fn placeholders(template: &str) -> Result<Vec<Placeholder>, String> {
    let mut found = Vec::new();
    let mut rest = template;
    while let Some(start) = rest.find(OPEN) {
        let after = &rest[start + OPEN.len()..];
        let end = after
            .find('}')
            .ok_or_else(|| format!("unterminated `{OPEN}` in a value"))?;
        found.push(parse(&after[..end])?);
        rest = &after[end + 1..];
    }
    Ok(found)
}

/// Whether `template` holds any caller placeholder.
pub fn uses_caller(template: &str) -> bool {
    template.contains(OPEN)
}

/// The load-time check of one configured value: every
/// caller placeholder well formed, and secrets only where `secrets_allowed`.
pub fn check_template(template: &str, secrets_allowed: bool) -> Result<(), String> {
    for placeholder in placeholders(template)? {
        if let Placeholder::Secret(name) = placeholder
            && !secrets_allowed
        {
            return Err(format!(
                "`${{caller.secret.{name}}}` may only be used in headers (a URL is shown in \
                 errors and logs)"
            ));
        }
    }
    Ok(())
}

/// Whether `template` holds a `${caller.secret.…}` placeholder.
pub fn uses_secret(template: &str) -> bool {
    template.contains("${caller.secret.")
}
