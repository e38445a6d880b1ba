//! How agentd calls a tool beyond the call itself: how long its successful results are cached
//! (`cache`, `toolsCache`) and how often a call that never got an answer is tried again
//! (`retries`, with exponential backoff and full jitter). Providers say which policy each of
//! their tools has; the session applies it (`agent::tool_phase`).

use std::time::Duration;

/// The first retry waits up to this long; each further one up to twice as long as the last.
pub const RETRY_BASE_DELAY: Duration = Duration::from_millis(200);
/// No retry waits longer than this.
pub const RETRY_MAX_DELAY: Duration = Duration::from_secs(5);

/// The policy of one tool. The default caches nothing and never retries (the reference never
/// retries tools).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ToolPolicy {
    /// How long a successful, non-empty result is kept for identical calls.
    pub cache_ttl: Option<Duration>,
    /// Tries after the first for calls that fail in transport or time out.
    pub retries: u8,
    /// The tool's requests depend on the caller (`${caller.…}` in its URL or headers): its
    /// cached results are kept per user whatever the agent's `userScoped`, and never for a
    /// run without a user.
    pub per_user: bool,
}

impl ToolPolicy {
    /// How many tries a call gets in all.
    pub fn attempts(&self) -> u32 {
        u32::from(self.retries) + 1
    }

    /// The longest all retries of a call may sleep in all.
    pub fn max_total_backoff(&self) -> Duration {
        (1..=u32::from(self.retries))
            .map(backoff_ceiling)
            .fold(Duration::ZERO, |sum, ceiling| sum + ceiling)
    }
}

/// The ceiling of the wait before retry `retry` (1 for the first):
/// `min(RETRY_MAX_DELAY, RETRY_BASE_DELAY * 2^(retry-1))`.
pub fn backoff_ceiling(retry: u32) -> Duration {
    let factor = 2u32.saturating_pow(retry.saturating_sub(1));
    RETRY_BASE_DELAY.saturating_mul(factor).min(RETRY_MAX_DELAY)
}

/// Full jitter: a uniformly random wait between zero and the ceiling of retry `retry`.
pub fn backoff(retry: u32) -> Duration {
    let ceiling = backoff_ceiling(retry);
    let millis = u64::try_from(ceiling.as_millis()).unwrap_or(u64::MAX);
    Duration::from_millis(fastrand::u64(0..=millis))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceilings_double_from_the_base_and_stop_at_the_maximum() {
        assert_eq!(backoff_ceiling(1), Duration::from_millis(200));
        assert_eq!(backoff_ceiling(2), Duration::from_millis(400));
        assert_eq!(backoff_ceiling(3), Duration::from_millis(800));
        assert_eq!(backoff_ceiling(40), RETRY_MAX_DELAY);
    }

    #[test]
    fn waits_stay_within_their_ceiling() {
        for retry in 1..=3 {
            for _ in 0..200 {
                assert!(backoff(retry) <= backoff_ceiling(retry));
            }
        }
    }

    #[test]
    fn the_default_tries_once_and_never_waits() {
        let policy = ToolPolicy::default();
        assert_eq!(policy.attempts(), 1);
        assert_eq!(policy.max_total_backoff(), Duration::ZERO);
        let three = ToolPolicy {
            retries: 3,
            ..policy
        };
        assert_eq!(three.attempts(), 4);
        assert_eq!(three.max_total_backoff(), Duration::from_millis(1400));
    }
}
