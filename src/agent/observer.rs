//! A hook for what a session does that is not part of its result but that operators watch
//! (context-guard trips). The runtime implements it to update metrics; the session itself
//! performs no I/O.

/// A context-guard evaluation that did not fit.
#[derive(Debug, Clone, PartialEq)]
pub struct GuardEvent {
    pub agent: String,
    pub provider: String,
    pub model: String,
    /// `tool_preflight` or `turn_preflight`.
    pub trigger: &'static str,
    /// `forced_final` (the guard made the next turn final) or `over_after_shrink` (still over
    /// with only the final report offered; the request goes out best-effort).
    pub outcome: &'static str,
    pub projected_tokens: u64,
    pub limit_tokens: u64,
    pub remaining_tokens: i64,
}

pub trait SessionObserver: Send + Sync {
    fn context_guard(&self, event: &GuardEvent);
}
