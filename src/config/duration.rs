//! Human durations used by config and agent files: a number of milliseconds or `<number><unit>`
//! with units `ms`, `s`, `m`, `h`, `d`, `w` (e.g. `500ms`, `1.5s`, `5m`).

use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// Parses `"5s"`, `"1.5m"`, `"250"` (milliseconds) into a duration.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("invalid duration {text:?}: expected e.g. 500, 500ms, 5s, 2m, 1h"))?;
    let unit_ms = match unit.trim() {
        "" | "ms" => 1.0,
        "s" => 1_000.0,
        "m" => 60_000.0,
        "h" => 3_600_000.0,
        "d" => 86_400_000.0,
        "w" => 604_800_000.0,
        other => {
            return Err(format!(
                "invalid duration unit {other:?} in {text:?}: use ms, s, m, h, d or w"
            ));
        }
    };
    let ms = value * unit_ms;
    if !ms.is_finite() || ms < 0.0 || ms > u64::MAX as f64 {
        return Err(format!("duration {text:?} is out of range"));
    }
    Ok(Duration::from_millis(ms.round() as u64))
}

/// A duration written as milliseconds (number) or a string with a unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HumanDuration(pub Duration);

/// How a duration may be written: a number of milliseconds or text.
#[derive(Deserialize)]
#[serde(untagged)]
enum Raw {
    Millis(u64),
    Text(String),
}

impl<'de> Deserialize<'de> for HumanDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        match Raw::deserialize(deserializer)? {
            Raw::Millis(ms) => Ok(Self(Duration::from_millis(ms))),
            Raw::Text(text) => parse_duration(&text)
                .map(Self)
                .map_err(serde::de::Error::custom),
        }
    }
}

/// The `cache` frontmatter of an agent: `off` (or 0), or how long a response stays cached,
/// as milliseconds or `<number><unit>` (`30s`, `5m`, `1h`, `1d`, `1w`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheTtl(pub Option<Duration>);

impl<'de> Deserialize<'de> for CacheTtl {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let ttl = match Raw::deserialize(deserializer)
            .map_err(|_| serde::de::Error::custom(CACHE_TTL_HINT))?
        {
            Raw::Millis(ms) => Duration::from_millis(ms),
            Raw::Text(text) if text.trim().eq_ignore_ascii_case("off") => Duration::ZERO,
            Raw::Text(text) => parse_duration(&text)
                .map_err(|e| serde::de::Error::custom(format!("{e}; {CACHE_TTL_HINT}")))?,
        };
        Ok(Self((!ttl.is_zero()).then_some(ttl)))
    }
}

const CACHE_TTL_HINT: &str =
    "cache must be off, milliseconds, or a duration like 30s, 5m, 1h, 1d, 1w";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_ttl_accepts_off_milliseconds_and_units() {
        let ttl = |yaml: &str| serde_yaml_ng::from_str::<CacheTtl>(yaml).map(|t| t.0);
        assert_eq!(ttl("off").ok(), Some(None));
        assert_eq!(ttl("0").ok(), Some(None));
        assert_eq!(ttl("1500").ok(), Some(Some(Duration::from_millis(1500))));
        assert_eq!(ttl("30s").ok(), Some(Some(Duration::from_secs(30))));
        assert_eq!(ttl("1w").ok(), Some(Some(Duration::from_secs(604_800))));
        let error = ttl("soon").unwrap_err().to_string();
        assert!(error.contains("cache must be off"), "{error}");
        assert!(
            ttl("[1]")
                .unwrap_err()
                .to_string()
                .contains("cache must be off")
        );
    }

    #[test]
    fn parses_units_and_plain_milliseconds() {
        assert_eq!(parse_duration("250"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86400)));
        assert_eq!(parse_duration("1w"), Ok(Duration::from_secs(604800)));
    }

    #[test]
    fn rejects_bad_units_and_numbers() {
        assert!(parse_duration("5 parsecs").unwrap_err().contains("unit"));
        assert!(parse_duration("abc").is_err());
        assert!(parse_duration("").is_err());
        assert!(parse_duration("-5s").is_err());
    }
}
