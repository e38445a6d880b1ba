//! The content of a report in a text format: `report_content` (alias `content`), raw or
//! base64-encoded per `encoding`.
//!
//! Only decoding and the emptiness check; the format and metadata are checked by the parent.

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use serde_json::{Map, Value};

use super::{FinalReportError, first_present};

/// Standard alphabet, padding optional.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Text formats: `report_content` (alias `content`), decoded per `encoding`.
pub(super) fn text_content(arguments: &Map<String, Value>) -> Result<String, FinalReportError> {
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
