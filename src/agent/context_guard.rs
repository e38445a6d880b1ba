//! The context guard (contract §2, "Context Management Contract"): the token counters of one
//! session and the projection `current + pending + new + schema` against each target's
//! `contextWindow - contextWindowBufferTokens - maxOutputTokens`, evaluated before a tool output
//! is committed (`tool_preflight`) and before every LLM request (`turn_preflight`).
//!
//! Pure arithmetic: the session decides what to do when a projection does not fit.

/// What the model sees in place of a tool output that would overflow the context.
pub const BUDGET_EXCEEDED_STUB: &str = "(tool failed: context window budget exceeded)";

/// One target's capacity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub context_window: u64,
    pub buffer_tokens: u64,
    /// Space reserved for the model's reply.
    pub max_output_tokens: u64,
}

impl Budget {
    /// The most prompt tokens a request may carry.
    pub fn limit(&self) -> u64 {
        self.context_window
            .saturating_sub(self.buffer_tokens)
            .saturating_sub(self.max_output_tokens)
    }
}

/// A projection and the limit it was checked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Projection {
    pub projected: u64,
    pub limit: u64,
}

impl Projection {
    pub fn fits(&self) -> bool {
        self.projected <= self.limit
    }

    /// Tokens left under the limit (negative when over).
    pub fn remaining(&self) -> i64 {
        self.limit as i64 - self.projected as i64
    }
}

/// The counters of one session.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ContextGuard {
    /// Tokens the previous response committed (provider-reported); 0 before the first request.
    current: u64,
    /// Estimated tokens appended since the last request.
    pending: u64,
    /// Tool outputs of this turn not yet folded into `pending`.
    new: u64,
    /// The tool definitions of the upcoming request.
    schema: u64,
    /// Set once an output was dropped: no new tools may start.
    tool_budget_exceeded: bool,
}

impl ContextGuard {
    /// A guard for a conversation whose initial messages estimate to `initial_tokens`.
    pub fn new(initial_tokens: u64) -> Self {
        Self {
            pending: initial_tokens,
            ..Self::default()
        }
    }

    pub fn current(&self) -> u64 {
        self.current
    }

    pub fn pending(&self) -> u64 {
        self.pending
    }

    pub fn schema(&self) -> u64 {
        self.schema
    }

    pub fn tool_budget_exceeded(&self) -> bool {
        self.tool_budget_exceeded
    }

    /// Tools offered on the next request changed (e.g. shrunk to the final report).
    pub fn set_schema(&mut self, tokens: u64) {
        self.schema = tokens;
    }

    fn flush_new(&mut self) {
        self.pending += self.new;
        self.new = 0;
    }

    /// `turn_preflight`: the next request, plus `ephemeral` tokens sent with it only.
    pub fn turn_preflight(&mut self, limit: u64, ephemeral: u64) -> Projection {
        self.flush_new();
        Projection {
            projected: self.current + self.pending + self.schema + ephemeral,
            limit,
        }
    }

    /// `tool_preflight`: commits an output of `tokens` if it fits; otherwise refuses it and
    /// forbids new tools from then on.
    pub fn reserve_tool_output(
        &mut self,
        tokens: u64,
        limit: u64,
    ) -> Result<Projection, Projection> {
        self.flush_new();
        let projection = Projection {
            projected: self.current + self.pending + self.schema + tokens,
            limit,
        };
        if projection.fits() {
            self.new += tokens;
            Ok(projection)
        } else {
            self.tool_budget_exceeded = true;
            Err(projection)
        }
    }

    /// Adds a message the model must see that is not subject to the guard (a failure notice).
    pub fn add_new(&mut self, tokens: u64) {
        self.new += tokens;
    }

    /// After a successful response: the provider's count (prompt + completion) replaces the
    /// estimate; when the provider reported nothing, `estimated` stands in.
    pub fn commit_response(&mut self, reported: Option<u64>, estimated: u64) {
        self.current = reported.filter(|r| *r > 0).unwrap_or(estimated);
        self.pending = 0;
        self.new = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_subtracts_buffer_and_reserved_output() {
        let budget = Budget {
            context_window: 10_000,
            buffer_tokens: 256,
            max_output_tokens: 1_000,
        };
        assert_eq!(budget.limit(), 8_744);
        assert_eq!(
            Budget {
                context_window: 100,
                buffer_tokens: 256,
                max_output_tokens: 0
            }
            .limit(),
            0
        );
    }

    #[test]
    fn turn_one_has_no_current_tokens_and_counts_the_initial_messages_as_pending() {
        let mut guard = ContextGuard::new(120);
        guard.set_schema(30);
        let projection = guard.turn_preflight(1_000, 10);
        assert_eq!((guard.current(), guard.pending()), (0, 120));
        assert_eq!(projection.projected, 160);
        assert!(projection.fits());
    }

    #[test]
    fn exactly_at_the_limit_fits_and_one_token_over_does_not() {
        let mut guard = ContextGuard::new(90);
        guard.set_schema(10);
        assert!(guard.reserve_tool_output(0, 100).is_ok());
        let at_limit = guard.turn_preflight(100, 0);
        assert_eq!(
            (at_limit.projected, at_limit.fits(), at_limit.remaining()),
            (100, true, 0)
        );
        let over = guard.turn_preflight(99, 0);
        assert_eq!((over.fits(), over.remaining()), (false, -1));
    }

    #[test]
    fn an_overflowing_tool_output_is_refused_and_blocks_new_tools() {
        let mut guard = ContextGuard::new(50);
        assert!(guard.reserve_tool_output(40, 100).is_ok());
        let refused = guard.reserve_tool_output(11, 100).unwrap_err();
        assert_eq!((refused.projected, refused.limit), (101, 100));
        assert!(guard.tool_budget_exceeded());
        assert!(
            guard.reserve_tool_output(10, 100).is_ok(),
            "a smaller output still fits"
        );
        assert_eq!(
            guard.turn_preflight(1_000, 0).projected,
            100,
            "new outputs fold into pending"
        );
    }

    #[test]
    fn a_response_replaces_the_estimates_with_the_reported_count() {
        let mut guard = ContextGuard::new(500);
        guard.reserve_tool_output(100, 10_000).expect("fits");
        guard.commit_response(Some(700), 9_999);
        assert_eq!((guard.current(), guard.pending()), (700, 0));
        guard.commit_response(None, 900);
        assert_eq!(
            guard.current(),
            900,
            "without a reported count the estimate stands in"
        );
        guard.commit_response(Some(0), 950);
        assert_eq!(
            guard.current(),
            950,
            "a zero report means the provider did not report"
        );
    }
}
