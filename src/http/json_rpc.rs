//! What the two JSON-RPC headends (MCP at `/mcp`, A2A at `/a2a/{agent}`) answer when a run
//! cannot start *now* but may later: agentd's own error codes in JSON-RPC's
//! implementation-defined server range (-32000 to -32099), never `-32603` (internal error), with
//! the seconds to wait and agentd's error code in `error.data`:
//!
//! | code | when | `error.data.code` |
//! |---|---|---|
//! | `-32029` | the key is past one of its limits (HTTP's 429) | `rate_limited`, `budget_exceeded` |
//! | `-32053` | the server cannot take the run now (HTTP's 503) | `overloaded`, `shutting_down`, `store_unavailable` |
//!
//! These codes are part of the API (README, "agentd for other agents"): never renumber them.
//! Neither collides with a code MCP or A2A define (A2A's -32001 to -32009, MCP's -32002 and
//! -32020 to -32022, -32042). Only the classification lives here; each headend puts the code,
//! message and data into its own JSON-RPC error type.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::error::ApiError;
use crate::runtime::StartError;

/// The key is past a limit (`requestsPerMinute`, `concurrentRuns`, a daily budget).
pub const RATE_LIMITED: i32 = -32029;
/// The server is overloaded, shutting down, or cannot reach its store.
pub const UNAVAILABLE: i32 = -32053;

/// A refusal the client should retry after `error.data.retry_after_seconds`.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryLater {
    /// [`RATE_LIMITED`] or [`UNAVAILABLE`].
    pub code: i32,
    pub message: String,
    /// `{"code": agentd's error code, "retry_after_seconds": N}`.
    pub data: Value,
}

impl RetryLater {
    /// The refusal `error` is when it is one of the temporary kinds; otherwise `error` back.
    pub fn of_start_error(error: StartError) -> Result<Self, StartError> {
        let temporary = match &error {
            StartError::ShuttingDown | StartError::Overloaded(_) | StartError::Limited(_) => true,
            StartError::Store(store) => store.is_unavailable(),
            _ => false,
        };
        if !temporary {
            return Err(error);
        }
        Ok(Self::of_api_error(ApiError::from(error)))
    }

    /// The HTTP answer the same refusal gets elsewhere (429 or 503 with `Retry-After`), as a
    /// JSON-RPC error.
    fn of_api_error(error: ApiError) -> Self {
        let code = if error.status == StatusCode::TOO_MANY_REQUESTS {
            RATE_LIMITED
        } else {
            UNAVAILABLE
        };
        Self {
            code,
            data: json!({
                "code": error.code,
                "retry_after_seconds": error.retry_after_secs.unwrap_or(1),
            }),
            message: error.message,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::LimitRefusal;
    use crate::runtime::Overloaded;

    #[test]
    fn limits_and_overload_have_their_own_codes_with_the_wait() {
        let limited =
            RetryLater::of_start_error(StartError::Limited(LimitRefusal::RequestsPerMinute {
                limit: 1,
                retry_after_secs: 42,
            }))
            .expect("temporary");
        assert_eq!(limited.code, RATE_LIMITED);
        assert_eq!(
            limited.data,
            json!({"code": "rate_limited", "retry_after_seconds": 42})
        );
        let busy = RetryLater::of_start_error(StartError::Overloaded(Overloaded {
            running: 4,
            queued: 8,
        }))
        .expect("temporary");
        assert_eq!(busy.code, UNAVAILABLE);
        assert_eq!(busy.data["code"], "overloaded");
        let stopping = RetryLater::of_start_error(StartError::ShuttingDown).expect("temporary");
        assert_eq!(stopping.data["code"], "shutting_down");
        assert!(RetryLater::of_start_error(StartError::InvalidOutput("x".into())).is_err());
    }

    #[test]
    fn the_codes_are_in_the_server_range_and_stable() {
        for code in [RATE_LIMITED, UNAVAILABLE] {
            assert!((-32099..=-32000).contains(&code), "{code}");
        }
        assert_eq!((RATE_LIMITED, UNAVAILABLE), (-32029, -32053));
    }
}
