//! Conversation titles, which the per-user chat (`PATCH …/conversations/{id}`, the `q`
//! search) and Responses conversations (`metadata.title`) both take: trimmed, 1 to
//! [`MAX_TITLE_CHARS`] characters, no NUL.

use crate::http::error::ApiError;

/// The longest title a conversation takes (and the longest title search), in characters.
pub const MAX_TITLE_CHARS: usize = 200;

/// A title or a search text found at `param`: trimmed, 1 to [`MAX_TITLE_CHARS`] characters,
/// no NUL.
pub fn checked_title<'a>(text: &'a str, param: &str) -> Result<&'a str, ApiError> {
    let trimmed = text.trim();
    if trimmed.contains('\0') {
        return Err(ApiError::nul_in(param));
    }
    let length = trimmed.chars().count();
    if (1..=MAX_TITLE_CHARS).contains(&length) {
        return Ok(trimmed);
    }
    Err(ApiError::invalid_request(format!(
        "`{param}` must be 1 to {MAX_TITLE_CHARS} characters (not only white space); it has {length}"
    ))
    .with_param(param))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_are_trimmed_and_bounded_at_and_past_the_limit() {
        assert_eq!(checked_title("  Trip  ", "title"), Ok("Trip"));
        let longest = "é".repeat(MAX_TITLE_CHARS);
        assert_eq!(checked_title(&longest, "title"), Ok(longest.as_str()));
        let too_long = "é".repeat(MAX_TITLE_CHARS + 1);
        let error = checked_title(&too_long, "title").expect_err("too long");
        assert_eq!(error.param.as_deref(), Some("title"));
        assert!(error.message.contains("201"), "{}", error.message);
        assert!(checked_title("   ", "q").is_err());
        assert!(checked_title("a\0b", "title").is_err());
    }
}
