//! One Redis connection guarded so that a Redis that is down or slow costs callers little: every
//! call is bounded by [`CALL_TIMEOUT`] (waiting for a reconnect included), and a circuit breaker
//! skips Redis for [`OPEN_FOR`] after a failure, then lets one call probe it again. Used by the
//! response cache and the key limits; both carry on without Redis when a call fails or is
//! skipped (fail open).
//!
//! The breaker logs a warning when it opens and a line when Redis answers again, never per
//! call; callers leave [`RedisCallError::Skipped`] unlogged.

use std::future::Future;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Cmd, FromRedisValue, Pipeline, RedisError, RedisResult, ScriptInvocation};

/// How long one call (connecting included) may take before it counts as a failure. Redis
/// answers in well under a millisecond; a call this slow means it is down or overloaded.
pub const CALL_TIMEOUT: Duration = Duration::from_millis(500);
/// How long Redis is skipped after a failure before one call probes it again.
pub const OPEN_FOR: Duration = Duration::from_secs(5);
/// Reconnect attempts the connection makes in the background after losing Redis; the breaker
/// decides when callers try again.
const RECONNECT_ATTEMPTS: usize = 2;

/// Why a guarded call gave no answer.
#[derive(Debug, thiserror::Error)]
pub enum RedisCallError {
    #[error(transparent)]
    Failed(#[from] RedisError),
    #[error("Redis did not answer within {} ms", .0.as_millis())]
    TimedOut(Duration),
    #[error("Redis is skipped for a few seconds after a failure (the failure was logged)")]
    Skipped,
}

impl RedisCallError {
    /// The call was not made because the breaker is open: already logged once.
    pub fn is_skipped(&self) -> bool {
        matches!(self, Self::Skipped)
    }
}

/// A connection that keeps reconnecting, with bounded connect and response timeouts. Its first
/// connection must succeed (a Redis that cannot be reached at start is a configuration error).
pub(crate) async fn connect_with_timeouts(url: &str) -> Result<ConnectionManager, RedisError> {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(CALL_TIMEOUT))
        .set_response_timeout(Some(CALL_TIMEOUT))
        .set_number_of_retries(RECONNECT_ATTEMPTS);
    redis::Client::open(url)?
        .get_connection_manager_with_config(config)
        .await
}

/// A Redis connection behind a timeout and a circuit breaker; `what` names its user in logs.
pub struct RedisLink {
    connection: ConnectionManager,
    breaker: Breaker,
}

impl RedisLink {
    pub async fn connect(url: &str, what: &'static str) -> Result<Self, RedisError> {
        Ok(Self {
            connection: connect_with_timeouts(url).await?,
            breaker: Breaker::new(what, OPEN_FOR),
        })
    }

    /// Runs a script (see [`Self::call`]).
    pub async fn invoke<T: FromRedisValue>(
        &self,
        invocation: ScriptInvocation<'_>,
    ) -> Result<T, RedisCallError> {
        let mut connection = self.connection.clone();
        self.call(async move { invocation.invoke_async(&mut connection).await })
            .await
    }

    /// Runs a command (see [`Self::call`]).
    pub async fn query<T: FromRedisValue>(&self, command: Cmd) -> Result<T, RedisCallError> {
        let mut connection = self.connection.clone();
        self.call(async move { command.query_async(&mut connection).await })
            .await
    }

    /// Runs a pipeline (see [`Self::call`]).
    pub async fn query_pipeline<T: FromRedisValue>(
        &self,
        pipeline: Pipeline,
    ) -> Result<T, RedisCallError> {
        let mut connection = self.connection.clone();
        self.call(async move { pipeline.query_async(&mut connection).await })
            .await
    }

    /// Runs `call` unless the breaker is open, within [`CALL_TIMEOUT`]; a failure that says
    /// Redis is unreachable (or the timeout) opens the breaker.
    async fn call<T>(
        &self,
        call: impl Future<Output = RedisResult<T>>,
    ) -> Result<T, RedisCallError> {
        if !self.breaker.admits(Instant::now()) {
            return Err(RedisCallError::Skipped);
        }
        let error = match tokio::time::timeout(CALL_TIMEOUT, call).await {
            Ok(Ok(value)) => {
                self.breaker.succeeded();
                return Ok(value);
            }
            Ok(Err(error)) if !is_unreachable(&error) => {
                // Redis answered (a script error, a wrong type): it is up.
                self.breaker.succeeded();
                return Err(error.into());
            }
            Ok(Err(error)) => RedisCallError::Failed(error),
            Err(_) => RedisCallError::TimedOut(CALL_TIMEOUT),
        };
        self.breaker.failed(&error, Instant::now());
        Err(error)
    }
}

/// Whether `error` means Redis could not be reached (as opposed to an answer it gave).
fn is_unreachable(error: &RedisError) -> bool {
    error.is_io_error() || error.is_timeout() || error.is_unrecoverable_error()
}

/// The breaker's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Circuit {
    /// Calls go to Redis.
    Closed,
    /// Calls are skipped until `until`; then one call probes.
    Open { until: Instant },
    /// One call is probing; the others are skipped until it ends, or until `until` (a probe
    /// whose caller went away never reports).
    Probing { until: Instant },
}

/// A circuit breaker: after a failure, skip for `open_for`, then let one call probe.
struct Breaker {
    what: &'static str,
    open_for: Duration,
    circuit: Mutex<Circuit>,
}

impl Breaker {
    fn new(what: &'static str, open_for: Duration) -> Self {
        Self {
            what,
            open_for,
            circuit: Mutex::new(Circuit::Closed),
        }
    }

    fn circuit(&self) -> std::sync::MutexGuard<'_, Circuit> {
        self.circuit.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether a call may go to Redis at `now` (the first one after the open time probes).
    fn admits(&self, now: Instant) -> bool {
        let mut circuit = self.circuit();
        match *circuit {
            Circuit::Closed => true,
            Circuit::Open { until } | Circuit::Probing { until } if now >= until => {
                *circuit = Circuit::Probing {
                    until: now + CALL_TIMEOUT,
                };
                true
            }
            Circuit::Open { .. } | Circuit::Probing { .. } => false,
        }
    }

    fn succeeded(&self) {
        let previous = std::mem::replace(&mut *self.circuit(), Circuit::Closed);
        if previous != Circuit::Closed {
            tracing::info!(what = self.what, "Redis answers again: it is used again");
        }
    }

    /// Opens the breaker; only an opening from closed is logged (a failed probe keeps it open).
    fn failed(&self, error: &RedisCallError, now: Instant) {
        let previous = std::mem::replace(
            &mut *self.circuit(),
            Circuit::Open {
                until: now + self.open_for,
            },
        );
        if previous == Circuit::Closed {
            tracing::warn!(
                what = self.what,
                %error,
                skipped_for_ms = self.open_for.as_millis() as u64,
                "Redis failed: it is skipped (the cache misses, key limits let requests through) and probed again every few seconds until it answers"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure() -> RedisCallError {
        RedisCallError::TimedOut(CALL_TIMEOUT)
    }

    #[test]
    fn a_failure_skips_calls_until_the_open_time_then_one_probe_goes_through() {
        let breaker = Breaker::new("test", Duration::from_secs(5));
        let start = Instant::now();
        assert!(breaker.admits(start), "closed");
        breaker.failed(&failure(), start);
        assert!(!breaker.admits(start + Duration::from_secs(1)), "open");
        assert!(
            !breaker.admits(start + Duration::from_millis(4999)),
            "open until 5 s"
        );
        let probe_time = start + Duration::from_secs(5);
        assert!(breaker.admits(probe_time), "the probe");
        assert!(!breaker.admits(probe_time), "one probe at a time");
        assert!(
            breaker.admits(probe_time + CALL_TIMEOUT),
            "a probe that never reported is replaced"
        );
        breaker.failed(&failure(), probe_time);
        assert!(
            !breaker.admits(probe_time + Duration::from_secs(4)),
            "a failed probe opens it again"
        );
        assert!(breaker.admits(probe_time + Duration::from_secs(5)));
        breaker.succeeded();
        assert!(
            breaker.admits(probe_time + Duration::from_secs(5)),
            "closed"
        );
        assert!(breaker.admits(probe_time + Duration::from_secs(5)));
    }

    #[test]
    fn only_unreachable_errors_count_as_failures() {
        let refused = RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(is_unreachable(&refused));
        let answered = RedisError::from((redis::ErrorKind::Client, "a script error"));
        assert!(!is_unreachable(&answered));
    }
}
