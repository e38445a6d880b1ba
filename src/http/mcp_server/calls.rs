//! The `tools/call` requests running in this process, so a `notifications/cancelled` naming one
//! aborts its run. rmcp's stateless mode answers every POST on its own and drops notifications,
//! so the cancellation is read here, before the message reaches rmcp. A call is known by the
//! caller who made it and its JSON-RPC id: one key cannot cancel another's call.

use std::collections::HashMap;
use std::sync::Mutex;

use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

use crate::http::auth::Caller;
use crate::http::error::ApiError;

/// Calls in flight by (caller, JSON-RPC request id).
#[derive(Default)]
pub struct InFlightCalls {
    calls: Mutex<HashMap<(String, String), CancellationToken>>,
}

/// A registered call; unregisters it when dropped.
pub struct RegisteredCall<'a> {
    calls: &'a InFlightCalls,
    key: (String, String),
}

impl Drop for RegisteredCall<'_> {
    fn drop(&mut self) {
        if let Ok(mut calls) = self.calls.calls.lock() {
            calls.remove(&self.key);
        }
    }
}

/// The part of a JSON-RPC message this module reads.
#[derive(Deserialize)]
struct Notification {
    method: Option<String>,
    /// Requests carry an id; notifications never do.
    id: Option<serde_json::Value>,
    params: Option<CancelledParams>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CancelledParams {
    request_id: Option<serde_json::Value>,
}

/// Who a call belongs to, as a key: its owner (the user, else the key), so one caller can
/// never cancel another's call that happens to use the same JSON-RPC id.
pub fn caller_identity(caller: &Caller) -> String {
    format!("{}|{:?}", caller.admin, caller.owner())
}

/// A JSON-RPC id as the key of the table (`7` and `"7"` are different ids).
pub fn request_key(id: &serde_json::Value) -> String {
    id.to_string()
}

impl InFlightCalls {
    /// Registers the call `request_id` of `caller`, cancelled through `abort`.
    pub fn register(
        &self,
        caller: &Caller,
        request_id: String,
        abort: CancellationToken,
    ) -> RegisteredCall<'_> {
        let key = (caller_identity(caller), request_id);
        if let Ok(mut calls) = self.calls.lock() {
            calls.insert(key.clone(), abort);
        }
        RegisteredCall { calls: self, key }
    }

    fn cancel(&self, caller: &Caller, request_id: &serde_json::Value) -> bool {
        let key = (caller_identity(caller), request_key(request_id));
        let token = self
            .calls
            .lock()
            .ok()
            .and_then(|calls| calls.get(&key).cloned());
        match token {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// Aborts the call a `notifications/cancelled` POST names, then hands the request on
    /// (rebuilt, since its body was read) for rmcp to acknowledge.
    pub async fn cancel_if_cancellation(
        &self,
        request: Request,
        body_limit: usize,
    ) -> Result<Request, Response> {
        if request.method() != axum::http::Method::POST {
            return Ok(request);
        }
        let (parts, body) = request.into_parts();
        let bytes = axum::body::to_bytes(body, body_limit)
            .await
            .map_err(|_| ApiError::payload_too_large(Some(body_limit)).into_response())?;
        if let Ok(message) = serde_json::from_slice::<Notification>(&bytes)
            && message.id.is_none()
            && message.method.as_deref() == Some("notifications/cancelled")
            && let Some(request_id) = message.params.and_then(|p| p.request_id)
            && let Some(caller) = parts.extensions.get::<Caller>()
        {
            let found = self.cancel(caller, &request_id);
            tracing::debug!(%request_id, found, "MCP call cancelled by the client");
        }
        Ok(Request::from_parts(parts, Body::from(bytes)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::parse_config;
    use crate::http::auth::KeyTable;

    fn callers() -> (Caller, Caller) {
        let config = parse_config(
            serde_json::json!({"auth": {"keys": [
                {"key": "first-key", "id": "first"},
                {"key": "second-key", "id": "second"}
            ]}}),
            "test",
        )
        .expect("config");
        let table = KeyTable::from_config(&config.auth);
        (
            table.caller_of("first-key").expect("first"),
            table.caller_of("second-key").expect("second"),
        )
    }

    #[test]
    fn a_key_bound_to_no_user_cannot_cancel_another_keys_call_with_the_same_id() {
        let (first, second) = callers();
        let calls = InFlightCalls::default();
        let token = CancellationToken::new();
        let _registered = calls.register(&first, request_key(&serde_json::json!(7)), token.clone());
        assert!(!calls.cancel(&second, &serde_json::json!(7)));
        assert!(
            !token.is_cancelled(),
            "another key's cancellation is ignored"
        );
        assert!(calls.cancel(&first, &serde_json::json!(7)));
        assert!(token.is_cancelled());
    }
}
