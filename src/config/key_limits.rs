//! `auth.keys[].limits` (SPEC §7): how much one API key may ask of agentd. Only the shape and
//! its validation live here (every value optional, every value positive, unknown keys an error);
//! counting against them is `crate::limits`'s job.

use std::num::{NonZeroU32, NonZeroU64};

use serde::{Deserialize, Deserializer, Serialize};

#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KeyLimits {
    /// Run submissions per one-minute window.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::json_text::optional_whole_nonzero_u32"
    )]
    pub requests_per_minute: Option<NonZeroU32>,
    /// Runs of this key in progress at once, across every replica.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::json_text::optional_whole_nonzero_u32"
    )]
    pub concurrent_runs: Option<NonZeroU32>,
    /// Tokens (`total_tokens` of finished runs) per UTC day; checked when a run is admitted.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::json_text::optional_whole_nonzero_u64"
    )]
    pub tokens_per_day: Option<NonZeroU64>,
    /// US dollars (`cost_usd` of finished runs) per UTC day; checked when a run is admitted.
    #[serde(
        default,
        deserialize_with = "positive_amount",
        skip_serializing_if = "Option::is_none"
    )]
    pub cost_usd_per_day: Option<f64>,
    /// What each run of this key may spend (SPEC §14): the lower of this, the agent's and the
    /// request's budget applies, checked during the run.
    #[serde(
        default,
        deserialize_with = "checked_run_budget",
        skip_serializing_if = "Option::is_none"
    )]
    pub run_budget: Option<crate::vocabulary::budget::RunBudget>,
}

impl KeyLimits {
    /// Whether any limit is set (a key with none is never counted).
    pub fn is_empty(&self) -> bool {
        self.requests_per_minute.is_none()
            && self.concurrent_runs.is_none()
            && self.tokens_per_day.is_none()
            && self.cost_usd_per_day.is_none()
            && self.run_budget.is_none_or(|budget| budget.is_unlimited())
    }

    /// Whether a daily budget is set, so finished runs' usage must be added up.
    pub fn has_daily_budget(&self) -> bool {
        self.tokens_per_day.is_some() || self.cost_usd_per_day.is_some()
    }
}

/// A run budget whose every limit is above 0 and at most 10^12 (null: none).
fn checked_run_budget<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<crate::vocabulary::budget::RunBudget>, D::Error> {
    let budget = Option::<crate::vocabulary::budget::RunBudget>::deserialize(deserializer)?;
    if let Some(budget) = &budget {
        budget
            .check()
            .map_err(|(_, message)| serde::de::Error::custom(message))?;
    }
    Ok(budget)
}

/// A finite amount above zero (null: none); zero, negative and non-finite amounts are config
/// errors.
fn positive_amount<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<f64>, D::Error> {
    let Some(amount) = Option::<f64>::deserialize(deserializer)? else {
        return Ok(None); // null: no budget, as when the key is absent
    };
    if amount.is_finite() && amount > 0.0 {
        Ok(Some(amount))
    } else {
        Err(serde::de::Error::custom(format!(
            "{amount} is not a positive amount"
        )))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::config::parse_config;

    fn error_of(limits: serde_json::Value) -> String {
        parse_config(
            json!({"auth": {"keys": [{"key": "k"}, {"key": "k2", "limits": limits}]}}),
            "a.json",
        )
        .expect_err("invalid limits")
        .to_string()
    }

    #[test]
    fn every_limit_is_optional_and_camel_case() {
        let config = parse_config(
            json!({"auth": {"keys": [{"key": "k", "limits": {"requestsPerMinute": 2, "concurrentRuns": 1, "tokensPerDay": 1000, "costUsdPerDay": 0.5}}, {"key": "k2", "limits": {}}]}}),
            "a.json",
        )
        .expect("valid");
        let limits = config.auth.keys[0].limits.expect("limits");
        assert_eq!(limits.requests_per_minute.map(|n| n.get()), Some(2));
        assert_eq!(limits.concurrent_runs.map(|n| n.get()), Some(1));
        assert_eq!(limits.tokens_per_day.map(|n| n.get()), Some(1000));
        assert_eq!(limits.cost_usd_per_day, Some(0.5));
        assert!(limits.has_daily_budget() && !limits.is_empty());
        let budgeted = parse_config(
            json!({"auth": {"keys": [{"key": "k", "limits": {"runBudget": {"maxToolCalls": 3}}}]}}),
            "a.json",
        )
        .expect("valid");
        let limits = budgeted.auth.keys[0].limits.expect("limits");
        assert_eq!(limits.run_budget.and_then(|b| b.max_tool_calls), Some(3));
        assert!(!limits.is_empty() && !limits.has_daily_budget());
        assert!(config.auth.keys[1].limits.expect("empty limits").is_empty());
    }

    #[test]
    fn an_unknown_limit_is_named_with_its_path() {
        let error = error_of(json!({"requestsPerHour": 5}));
        assert!(
            error.contains("a.json: at auth.keys[1].limits.requestsPerHour: unknown field"),
            "{error}"
        );
    }

    #[test]
    fn non_positive_limits_are_errors_naming_their_path() {
        for (limits, path) in [
            (json!({"requestsPerMinute": 0}), "limits.requestsPerMinute"),
            (json!({"concurrentRuns": -1}), "limits.concurrentRuns"),
            (json!({"tokensPerDay": 0}), "limits.tokensPerDay"),
            (json!({"costUsdPerDay": 0.0}), "limits.costUsdPerDay"),
            (json!({"costUsdPerDay": -2.5}), "limits.costUsdPerDay"),
            (json!({"costUsdPerDay": "lots"}), "limits.costUsdPerDay"),
            (json!({"runBudget": {"maxTokens": 0}}), "limits.runBudget"),
            (json!({"runBudget": {"maxBananas": 1}}), "limits.runBudget"),
        ] {
            let error = error_of(limits.clone());
            assert!(
                error.contains(&format!("auth.keys[1].{path}")),
                "{limits}: {error}"
            );
        }
    }
}
