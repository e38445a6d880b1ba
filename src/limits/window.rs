//! The clock arithmetic of the limits, kept pure so it is tested without a clock: the fixed
//! one-minute request window, the UTC day budgets are counted in, and the `Retry-After` seconds
//! until either frees up.

use chrono::{DateTime, NaiveDate, TimeDelta, Timelike, Utc};

use crate::config::key_limits::KeyLimits;
use crate::store::DailyUsage;

/// The length of a `requestsPerMinute` window.
pub const WINDOW: TimeDelta = TimeDelta::minutes(1);

/// The start of the fixed one-minute window `now` falls in (the whole UTC minute).
pub fn window_start(now: DateTime<Utc>) -> DateTime<Utc> {
    now.with_nanosecond(0)
        .and_then(|t| t.with_second(0))
        .unwrap_or(now)
}

/// Whole seconds until the window `now` falls in ends: a refused request retried after that
/// many seconds lands in the next window. At least 1.
pub fn seconds_until_window_ends(now: DateTime<Utc>) -> u64 {
    whole_seconds_until(now, window_start(now) + WINDOW)
}

/// The UTC day budgets count `now` in.
pub fn utc_day(now: DateTime<Utc>) -> NaiveDate {
    now.date_naive()
}

/// Whole seconds until the next UTC midnight, when daily budgets start over. At least 1.
pub fn seconds_until_next_utc_day(now: DateTime<Utc>) -> u64 {
    let next_midnight = utc_day(now)
        .succ_opt()
        .and_then(|day| day.and_hms_opt(0, 0, 0))
        .map(|midnight| midnight.and_utc());
    match next_midnight {
        Some(midnight) => whole_seconds_until(now, midnight),
        None => 1,
    }
}

/// Which daily budget `usage` has already reached, if any.
pub fn exhausted_budget(limits: &KeyLimits, usage: DailyUsage) -> Option<Budget> {
    if limits
        .tokens_per_day
        .is_some_and(|limit| usage.tokens >= limit.get())
    {
        return Some(Budget::Tokens);
    }
    if limits
        .cost_usd_per_day
        .is_some_and(|limit| usage.cost_usd >= limit)
    {
        return Some(Budget::CostUsd);
    }
    None
}

/// A daily budget of a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    Tokens,
    CostUsd,
}

impl Budget {
    /// Its config key, as the error message names it.
    pub fn config_key(self) -> &'static str {
        match self {
            Self::Tokens => "tokensPerDay",
            Self::CostUsd => "costUsdPerDay",
        }
    }
}

/// `end - now` rounded up to whole seconds, at least 1 (a `Retry-After: 0` invites a busy loop).
fn whole_seconds_until(now: DateTime<Utc>, end: DateTime<Utc>) -> u64 {
    let millis = u64::try_from((end - now).num_milliseconds()).unwrap_or(0);
    millis.div_ceil(1000).max(1)
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU64;

    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text)
            .expect("timestamp")
            .with_timezone(&Utc)
    }

    #[test]
    fn a_window_is_the_whole_utc_minute() {
        assert_eq!(
            window_start(at("2026-11-24T07:06:59.999Z")),
            at("2026-11-24T07:06:00Z")
        );
        assert_eq!(
            window_start(at("2026-11-24T07:07:00Z")),
            at("2026-11-24T07:07:00Z")
        );
    }

    #[test]
    fn retry_after_counts_whole_seconds_to_the_next_window() {
        assert_eq!(seconds_until_window_ends(at("2026-11-24T07:06:00Z")), 60);
        assert_eq!(seconds_until_window_ends(at("2026-11-24T07:06:15.2Z")), 45);
        assert_eq!(seconds_until_window_ends(at("2026-11-24T07:06:59Z")), 1);
        assert_eq!(
            seconds_until_window_ends(at("2026-11-24T07:06:59.999Z")),
            1,
            "never 0"
        );
    }

    #[test]
    fn budgets_retry_at_the_next_utc_midnight() {
        assert_eq!(seconds_until_next_utc_day(at("2026-11-24T23:59:59Z")), 1);
        assert_eq!(
            seconds_until_next_utc_day(at("2026-11-24T00:00:00Z")),
            86_400
        );
        assert_eq!(
            seconds_until_next_utc_day(at("2026-11-24T12:00:00.5Z")),
            43_200
        );
        assert_eq!(
            seconds_until_next_utc_day(at("2026-12-31T23:00:00Z")),
            3_600,
            "across a year"
        );
        assert_eq!(
            utc_day(at("2026-11-24T23:59:59+00:00")),
            NaiveDate::from_ymd_opt(2026, 11, 24).expect("date")
        );
    }

    #[test]
    fn a_budget_is_exhausted_once_reached_not_before() {
        let limits = KeyLimits {
            tokens_per_day: NonZeroU64::new(100),
            cost_usd_per_day: Some(0.5),
            ..KeyLimits::default()
        };
        let usage = |tokens, cost_usd| DailyUsage { tokens, cost_usd };
        assert_eq!(exhausted_budget(&limits, usage(99, 0.49)), None);
        assert_eq!(
            exhausted_budget(&limits, usage(100, 0.0)),
            Some(Budget::Tokens)
        );
        assert_eq!(
            exhausted_budget(&limits, usage(0, 0.5)),
            Some(Budget::CostUsd)
        );
        assert_eq!(
            exhausted_budget(&KeyLimits::default(), usage(u64::MAX, 1e9)),
            None,
            "no budget, nothing exhausted"
        );
    }
}
