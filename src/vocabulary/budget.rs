//! Run budgets (SPEC §14): how much one run may spend (cost, tokens, tool calls, time), set on
//! the agent (`budget:` frontmatter), on the key and on the request, the lowest of each
//! applying; what a run has spent so far (from its accounting); and the first limit it crossed.
//! The session checks after each turn's model call and tool calls ([`RunBudget::crossed`]).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::vocabulary::result::AccountingEntry;

/// The limits of one run; a `None` limit is no limit.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RunBudget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(exclusive_minimum = 0.0, maximum = 1e12)]
    pub max_cost_usd: Option<f64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::json_text::optional_whole_u64"
    )]
    #[schema(minimum = 1, maximum = 1_000_000_000_000_u64)]
    pub max_tokens: Option<u64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::json_text::optional_whole_u64"
    )]
    #[schema(minimum = 1, maximum = 1_000_000_000_000_u64)]
    pub max_tool_calls: Option<u64>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::json_text::optional_whole_u64"
    )]
    #[schema(minimum = 1, maximum = 1_000_000_000_000_u64)]
    pub max_duration_seconds: Option<u64>,
}

/// What a run does when it crosses its budget (`onBudget`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnBudget {
    /// Park the run `waiting_budget` (checkpointed like an approval wait) until its user or an
    /// admin raises the budget (`POST /v1/runs/{id}/budget`), on any replica. A run that cannot
    /// wait (the library's `run`, a sub-agent) ends as with `fail`.
    #[default]
    #[serde(alias = "park")]
    Wait,
    /// End with the contract's synthetic failure report (`exit_reason: budget_exceeded`).
    Fail,
}

/// Which limit a run crossed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum BudgetLimit {
    MaxCostUsd,
    MaxTokens,
    MaxToolCalls,
    MaxDurationSeconds,
    /// The daily token budget of the run's key, shared by every run of the key.
    KeyTokensPerDay,
    /// The daily dollar budget of the run's key, shared by every run of the key.
    KeyCostUsdPerDay,
}

/// What a run has spent so far.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spent {
    pub cost_usd: f64,
    pub tokens: u64,
    pub tool_calls: u64,
    pub duration: Duration,
}

impl Spent {
    /// The sums of `accounting` after `elapsed` of running.
    pub fn of(accounting: &[AccountingEntry], elapsed: Duration) -> Self {
        let mut spent = Self {
            duration: elapsed,
            ..Self::default()
        };
        for entry in accounting {
            match entry {
                AccountingEntry::Llm(llm) => {
                    spent.tokens += llm.tokens.total_tokens;
                    spent.cost_usd += llm.cost_usd.unwrap_or(0.0);
                }
                AccountingEntry::Tool(_) => spent.tool_calls += 1,
            }
        }
        spent
    }
}

/// A budget shared with other runs (a key's daily tokens and dollars, SPEC §14), which the
/// session charges with what each model call spent and asks before the next: concurrent runs of
/// one key see each other's spending call by call, so together they pass the budget by at most
/// one call each.
#[async_trait::async_trait]
pub trait SpendMeter: Send + Sync {
    /// Adds spending the meter has not been charged with yet.
    async fn charge(&self, spent: Spent);
    /// The shared budget this run may no longer spend from, if it is used up.
    async fn exhausted(&self) -> Option<BudgetExceeded>;
}

/// The `run.budget_exceeded` event: the limit crossed, what it allows and what the run used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BudgetExceeded {
    pub limit: BudgetLimit,
    pub allowed: f64,
    pub used: f64,
    /// The budget that applied (the lowest of agent, key and request).
    pub budget: RunBudget,
}

/// The most a limit may be: 10^12 (tokens, calls, seconds, dollars alike), so no sum overflows.
pub const MAX_LIMIT: f64 = 1e12;

impl RunBudget {
    /// Each limit the lower of the two.
    pub fn lowest(self, other: Self) -> Self {
        fn min<T: PartialOrd>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(if b < a { b } else { a }),
                (a, b) => a.or(b),
            }
        }
        Self {
            max_cost_usd: min(self.max_cost_usd, other.max_cost_usd),
            max_tokens: min(self.max_tokens, other.max_tokens),
            max_tool_calls: min(self.max_tool_calls, other.max_tool_calls),
            max_duration_seconds: min(self.max_duration_seconds, other.max_duration_seconds),
        }
    }

    /// This budget with every limit `raise` sets put in its place (a raise may also lower a
    /// limit the run has not reached).
    pub fn raised_by(self, raise: Self) -> Self {
        Self {
            max_cost_usd: raise.max_cost_usd.or(self.max_cost_usd),
            max_tokens: raise.max_tokens.or(self.max_tokens),
            max_tool_calls: raise.max_tool_calls.or(self.max_tool_calls),
            max_duration_seconds: raise.max_duration_seconds.or(self.max_duration_seconds),
        }
    }

    pub fn is_unlimited(&self) -> bool {
        *self == Self::default()
    }

    /// Every limit positive (a cost above 0) and at most [`MAX_LIMIT`]; the error names the
    /// limit (camelCase, as written).
    pub fn check(&self) -> Result<(), (&'static str, String)> {
        let limits = [
            ("maxCostUsd", self.max_cost_usd),
            ("maxTokens", self.max_tokens.map(|n| n as f64)),
            ("maxToolCalls", self.max_tool_calls.map(|n| n as f64)),
            (
                "maxDurationSeconds",
                self.max_duration_seconds.map(|n| n as f64),
            ),
        ];
        for (name, value) in limits {
            if let Some(value) = value
                && !(value > 0.0 && value <= MAX_LIMIT)
            {
                return Err((
                    name,
                    format!("{name} must be above 0 and at most 1e12; got {value}"),
                ));
            }
        }
        Ok(())
    }

    /// The first limit `spent` has reached or passed.
    pub fn crossed(&self, spent: &Spent) -> Option<BudgetExceeded> {
        let checks = [
            (BudgetLimit::MaxCostUsd, self.max_cost_usd, spent.cost_usd),
            (
                BudgetLimit::MaxTokens,
                self.max_tokens.map(|n| n as f64),
                spent.tokens as f64,
            ),
            (
                BudgetLimit::MaxToolCalls,
                self.max_tool_calls.map(|n| n as f64),
                spent.tool_calls as f64,
            ),
            (
                BudgetLimit::MaxDurationSeconds,
                self.max_duration_seconds.map(|n| n as f64),
                spent.duration.as_secs_f64(),
            ),
        ];
        checks.into_iter().find_map(|(limit, allowed, used)| {
            let allowed = allowed?;
            (used >= allowed).then_some(BudgetExceeded {
                limit,
                allowed,
                used,
                budget: *self,
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lowest_of_each_limit_applies() {
        let agent = RunBudget {
            max_tokens: Some(1000),
            max_tool_calls: Some(5),
            ..RunBudget::default()
        };
        let request = RunBudget {
            max_tokens: Some(400),
            max_cost_usd: Some(0.5),
            ..RunBudget::default()
        };
        assert_eq!(
            agent.lowest(request),
            RunBudget {
                max_cost_usd: Some(0.5),
                max_tokens: Some(400),
                max_tool_calls: Some(5),
                max_duration_seconds: None,
            }
        );
    }

    #[test]
    fn a_limit_is_crossed_at_it_and_past_it() {
        let budget = RunBudget {
            max_tool_calls: Some(2),
            ..RunBudget::default()
        };
        let spent = |tool_calls| Spent {
            tool_calls,
            ..Spent::default()
        };
        assert_eq!(budget.crossed(&spent(1)), None);
        assert_eq!(
            budget.crossed(&spent(2)).map(|c| c.limit),
            Some(BudgetLimit::MaxToolCalls)
        );
        assert!(budget.crossed(&spent(3)).is_some());
        assert_eq!(RunBudget::default().crossed(&spent(1_000)), None);
    }

    #[test]
    fn limits_must_be_positive_and_bounded() {
        assert!(RunBudget::default().check().is_ok());
        let zero = RunBudget {
            max_tokens: Some(0),
            ..RunBudget::default()
        };
        assert_eq!(zero.check().err().map(|e| e.0), Some("maxTokens"));
        let huge = RunBudget {
            max_cost_usd: Some(1e13),
            ..RunBudget::default()
        };
        assert_eq!(huge.check().err().map(|e| e.0), Some("maxCostUsd"));
    }
}
