//! List cursors, as the runs list, the per-user chat's conversations and A2A's `ListTasks`
//! answer them and take them back: `<time in µs since the epoch>|<id>` — the newest-first
//! position after which the next page starts.

use chrono::{DateTime, Utc};

/// A position in a newest-first list: an item's time and id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageCursor {
    pub at: DateTime<Utc>,
    pub id: String,
}

impl PageCursor {
    /// The cursor a list answers with for its last item.
    pub fn encode(at: DateTime<Utc>, id: &str) -> String {
        format!("{}|{id}", at.timestamp_micros())
    }

    /// A cursor [`encode`](Self::encode) made; `None` for anything else (an empty id too).
    pub fn parse(text: &str) -> Option<Self> {
        let (micros, id) = text.split_once('|')?;
        let at = DateTime::from_timestamp_micros(micros.parse().ok()?)?;
        (!id.is_empty()).then(|| Self {
            at,
            id: id.to_string(),
        })
    }

    /// Like [`parse`](Self::parse), also taking an RFC 3339 time (the conversation list's
    /// earlier cursors) and an empty id.
    pub fn parse_with_rfc3339(text: &str) -> Option<Self> {
        let (time, id) = text.split_once('|')?;
        let at = match time.parse::<i64>() {
            Ok(micros) => DateTime::from_timestamp_micros(micros)?,
            Err(_) => DateTime::parse_from_rfc3339(time).ok()?.with_timezone(&Utc),
        };
        Some(Self {
            at,
            id: id.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_back_and_anything_else_is_refused() {
        let at = DateTime::from_timestamp_micros(1_700_000_000_123_456).expect("time");
        let text = PageCursor::encode(at, "run-1");
        assert_eq!(text, "1700000000123456|run-1");
        let parsed = PageCursor::parse(&text).expect("parses");
        assert_eq!((parsed.at, parsed.id.as_str()), (at, "run-1"));
        for refused in ["", "123", "x|run", "123|", &format!("{}|r", i64::MAX)] {
            assert_eq!(PageCursor::parse(refused), None, "{refused}");
        }
        let rfc = PageCursor::parse_with_rfc3339("2026-01-01T00:00:00Z|c").expect("rfc 3339");
        assert_eq!(rfc.id, "c");
        assert_eq!(PageCursor::parse("2026-01-01T00:00:00Z|c"), None);
    }
}
