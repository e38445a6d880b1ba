//! The one error type at the HTTP edge (SPEC §4): `{"error": {"message", "type", "code", "param"}}`
//! with the matching status ([`ErrorBody`] is that wire shape), and the JSON body extractor whose
//! rejections use that format. Internal details never reach the client; they are logged instead.

use std::collections::BTreeMap;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, RawPathParams, Request};
use axum::http::request::Parts;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde::de::DeserializeOwned;
use utoipa::openapi::{self, ContentBuilder, Ref, RefOr, ResponseBuilder};
use utoipa::{IntoResponses, ToSchema};

use crate::agent::ExitReason;
use crate::vocabulary::result::RunSummary;

/// The `Retry-After` of a 503 `store_unavailable`.
const STORE_RETRY_AFTER_SECS: u64 = 2;

#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    /// SPEC §4 code: `invalid_request`, `not_found`, `unknown_model`, …
    pub code: &'static str,
    pub message: String,
    pub param: Option<String>,
    pub retry_after_secs: Option<u64>,
}

impl ApiError {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            param: None,
            retry_after_secs: None,
        }
    }

    pub fn with_param(mut self, param: impl Into<String>) -> Self {
        self.param = Some(param.into());
        self
    }

    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_request", message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    pub fn conflict(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conflict", message)
    }

    /// 409 `conversation_busy`: the conversation is answering another message (SPEC §13).
    pub fn conversation_busy(message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, "conversation_busy", message)
    }

    /// A store failure: logged, never shown. An unreachable store is 503 `store_unavailable`
    /// with `Retry-After` (the client may retry); anything else is 500.
    pub fn store(error: crate::store::StoreError) -> Self {
        if error.is_unavailable() {
            tracing::warn!(%error, "the store is unreachable");
            return Self::store_unavailable();
        }
        tracing::error!(%error, "store failure");
        Self::internal()
    }

    /// 503 `store_unavailable`: the store cannot be reached now.
    pub fn store_unavailable() -> Self {
        let mut error = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "store_unavailable",
            "The store is not reachable; retry shortly",
        );
        error.retry_after_secs = Some(STORE_RETRY_AFTER_SECS);
        error
    }

    /// 400 for a NUL character in the request field `param` (see [`crate::nul_text`]).
    pub fn nul_in(param: &str) -> Self {
        Self::invalid_request(format!(
            "`{param}` contains a NUL character (\\u0000), which agentd does not accept"
        ))
        .with_param(param)
    }

    /// 414 for a request target (path and query) longer than `limit` bytes.
    pub fn uri_too_long(length: usize, limit: usize) -> Self {
        Self::new(
            StatusCode::URI_TOO_LONG,
            "uri_too_long",
            format!("The request's path and query are {length} bytes; the limit is {limit}"),
        )
    }

    /// 414 for a request target hyper refused unread, past its own `parser_limit` bytes.
    pub fn uri_longer_than(parser_limit: usize, limit: usize) -> Self {
        Self::new(
            StatusCode::URI_TOO_LONG,
            "uri_too_long",
            format!(
                "The request's path and query are longer than {parser_limit} bytes; the limit is {limit}"
            ),
        )
    }

    /// 431 for a request head (request line and headers) past the `limit` bytes hyper reads.
    pub fn request_head_too_large(limit: usize, uri_limit: usize) -> Self {
        Self::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "request_head_too_large",
            format!(
                "The request line and headers are larger than {limit} bytes; the path and query \
                 may have {uri_limit} bytes at most"
            ),
        )
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn unknown_model(model: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "unknown_model",
            format!(
                "The model `{model}` does not exist: models are agent names, see GET /v1/models"
            ),
        )
        .with_param("model")
    }

    pub fn payload_too_large(limit: Option<usize>) -> Self {
        let message = match limit {
            Some(limit) => format!("The request body is larger than the limit of {limit} bytes"),
            None => "The request body is too large".to_string(),
        };
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", message)
    }

    pub fn upstream(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_GATEWAY, "upstream_error", message)
    }

    pub fn internal() -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            "Internal error; the server log has the details",
        )
    }

    /// The client-facing error for a run that ended without an answer; internals are logged,
    /// not returned.
    pub fn from_run(summary: &RunSummary) -> Self {
        let exit_reason = summary.exit_reason;
        let detail = summary.error.as_deref().unwrap_or("no details");
        match exit_reason {
            ExitReason::EmptyInput => {
                Self::invalid_request("The prompt is empty").with_param("messages")
            }
            ExitReason::RateLimited => Self::rate_limited(
                format!("The model provider is rate limiting agentd; retry later ({detail})"),
                summary.retry_after_secs.unwrap_or(1),
            ),
            ExitReason::AuthFailure => Self::upstream(
                "The model provider refused the API key agentd sent it: check the provider's \
                 `apiKey` in the config (the server log names the provider)",
            ),
            ExitReason::QuotaExceeded
            | ExitReason::LlmError
            | ExitReason::NoLlmResponse
            | ExitReason::OutputTooLarge => {
                Self::upstream(format!("The model provider failed: {detail}"))
            }
            ExitReason::SchemaValidationFailed => Self::new(
                StatusCode::BAD_GATEWAY,
                "schema_validation_failed",
                format!("The model did not answer in the requested format ({detail})"),
            ),
            ExitReason::Cancelled => Self::overloaded("The run was cancelled", None),
            ExitReason::ShuttingDown => Self::shutting_down(),
            _ => {
                tracing::warn!(exit_reason = exit_reason.as_str(), detail, "run failed");
                Self::internal()
            }
        }
    }

    /// 503 while the server shuts down (new requests, and runs the drain deadline cut off).
    pub fn shutting_down() -> Self {
        let mut error = Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "The server is shutting down; retry on another instance",
        );
        error.retry_after_secs = Some(1);
        error
    }

    /// 429 `rate_limited`: too many requests (or runs at once) for the caller's key.
    pub fn rate_limited(message: impl Into<String>, retry_after_secs: u64) -> Self {
        let mut error = Self::new(StatusCode::TOO_MANY_REQUESTS, "rate_limited", message);
        error.retry_after_secs = Some(retry_after_secs);
        error
    }

    /// 429 `budget_exceeded`: the caller's key used up a daily budget.
    pub fn budget_exceeded(message: impl Into<String>, retry_after_secs: u64) -> Self {
        let mut error = Self::new(StatusCode::TOO_MANY_REQUESTS, "budget_exceeded", message);
        error.retry_after_secs = Some(retry_after_secs);
        error
    }

    /// 503 `not_configured`: the route needs a setting this server does not have (`param`
    /// names it).
    pub fn not_configured(message: impl Into<String>) -> Self {
        Self::new(StatusCode::SERVICE_UNAVAILABLE, "not_configured", message)
    }

    /// 503: the server cannot take the request now.
    pub fn overloaded(message: impl Into<String>, retry_after_secs: Option<u64>) -> Self {
        let mut error = Self::new(StatusCode::SERVICE_UNAVAILABLE, "overloaded", message);
        error.retry_after_secs = retry_after_secs;
        error
    }

    /// The OpenAI-style error family for `type`, so SDKs map errors to their exception classes.
    fn error_type(&self) -> &'static str {
        match self.status.as_u16() {
            401 => "authentication_error",
            403 => "permission_error",
            429 => "rate_limit_error",
            // Every other 4xx (405, 406, 415, 422, …) is the caller's request, not the server.
            400..=499 => "invalid_request_error",
            _ => "server_error",
        }
    }

    /// The wire body; also sent as an SSE error frame once a stream has started.
    pub fn body(&self) -> ErrorBody<'_> {
        ErrorBody {
            error: self.detail(),
        }
    }

    pub fn detail(&self) -> ErrorDetail<'_> {
        ErrorDetail {
            message: &self.message,
            kind: self.error_type(),
            code: self.code,
            param: self.param.as_deref(),
        }
    }

    /// [`ApiError::body`] as JSON text, for an SSE `data:` line.
    pub fn body_text(&self) -> String {
        // Borrowed strings only: serialisation cannot fail.
        serde_json::to_string(&self.body()).unwrap_or_default()
    }
}

/// Every error answer: `{"error": {"message", "type", "code", "param"}}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody<'a> {
    pub error: ErrorDetail<'a>,
}

/// In a handler's `responses(…, ErrorBody)`: every error status, as `default`.
impl IntoResponses for ErrorBody<'_> {
    fn responses() -> BTreeMap<String, RefOr<openapi::Response>> {
        error_responses::<Self>("An error")
    }
}

/// The `default` response with the JSON body `Body`, referenced by its schema name (the schema
/// itself is listed in the document's components by [`super::openapi::ApiDoc`]).
pub fn error_responses<Body: ToSchema>(
    description: &str,
) -> BTreeMap<String, RefOr<openapi::Response>> {
    let content = ContentBuilder::new()
        .schema(Some(Ref::from_schema_name(Body::name())))
        .build();
    let response = ResponseBuilder::new()
        .description(description)
        .content("application/json", content)
        .build();
    BTreeMap::from([("default".to_string(), RefOr::T(response))])
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail<'a> {
    /// What went wrong, for a person to read.
    pub message: &'a str,
    /// OpenAI's error family, so SDKs raise their matching exception: `invalid_request_error`,
    /// `authentication_error`, `permission_error`, `rate_limit_error`, `server_error`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// agentd's code: `invalid_request`, `unauthorized`, `forbidden`, `not_found`,
    /// `unknown_model`, `conflict`, `payload_too_large`, `uri_too_long`,
    /// `request_head_too_large`, `rate_limited`, `budget_exceeded`, `overloaded`,
    /// `shutting_down`, `store_unavailable`, `not_configured`, `upstream_error`,
    /// `internal_error`.
    pub code: &'static str,
    /// The request field at fault (`messages[1].role`), or null.
    #[schema(required)]
    pub param: Option<&'a str>,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, axum::Json(self.body())).into_response();
        if let Some(secs) = self.retry_after_secs {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        // Kept beside the body, so a layer can render it in another API family's shape.
        response.extensions_mut().insert(self);
        response
    }
}

/// A JSON request body parsed with the error path named (`messages[0].role: …`); accepts a
/// missing `Content-Type` because curl users forget it.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = read_body(request, state).await?;
        parse_json_body(&bytes).map(ApiJson)
    }
}

/// A request's whole body, within the body limit (413 past it).
pub async fn read_body<S: Send + Sync>(request: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(request, state)
        .await
        .map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::payload_too_large(None)
            } else {
                ApiError::invalid_request(format!("Could not read the request body: {rejection}"))
            }
        })
}

/// A JSON body as `T`, with what [`ApiJson`] promises: 400 naming the path of a bad field, a NUL,
/// an empty body or bad JSON.
pub fn parse_json_body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if bytes.is_empty() {
        return Err(ApiError::invalid_request(
            "The request body is empty; send a JSON object",
        ));
    }
    if let Some(path) = crate::nul_text::find_in_body(bytes) {
        return Err(ApiError::nul_in(&path));
    }
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            // A syntax error has no meaningful path (serde reports "?").
            return ApiError::invalid_request(format!(
                "The request body is not valid JSON: {inner}"
            ));
        }
        let message = inner.to_string();
        // A missing field's param is the field itself, under the object that lacks it.
        let param = match (missing_field(&message), path.as_str()) {
            (Some(field), ".") => field.to_string(),
            (Some(field), parent) => format!("{parent}.{field}"),
            (None, ".") => return ApiError::invalid_request(format!("Invalid request: {message}")),
            (None, _) => path.clone(),
        };
        let at = if path == "." {
            String::new()
        } else {
            format!(" at `{path}`")
        };
        ApiError::invalid_request(format!("Invalid request{at}: {message}")).with_param(param)
    })
}

/// The field named by serde's "missing field `NAME`" message.
fn missing_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("missing field `")?;
    rest.split_once('`').map(|(field, _)| field)
}

/// Path parameters (`{user_id}`, `{id}`, `{run_id}`, `{agent}`), percent-decoded; a parameter
/// holding a NUL (`%00`) is refused with 400 naming it, like a NUL in a body.
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        if let Ok(params) = RawPathParams::from_request_parts(parts, state).await
            && let Some((name, _)) = params.iter().find(|(_, value)| value.contains('\0'))
        {
            return Err(ApiError::nul_in(name));
        }
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|Path(params)| ApiPath(params))
            .map_err(|rejection| ApiError::invalid_request(rejection.body_text()))
    }
}

impl From<crate::runtime::Overloaded> for ApiError {
    fn from(overloaded: crate::runtime::Overloaded) -> Self {
        Self::overloaded(format!("Too busy: {overloaded}; retry shortly"), Some(1))
    }
}

impl From<crate::runtime::StartError> for ApiError {
    fn from(error: crate::runtime::StartError) -> Self {
        use crate::limits::LimitRefusal;
        use crate::runtime::StartError;
        match error {
            StartError::ShuttingDown => Self::shutting_down(),
            StartError::Overloaded(overloaded) => overloaded.into(),
            StartError::ConversationNotFound(_) => {
                Self::not_found("I couldn't find that conversation. It may have been deleted.")
                    .with_param("conversation_id")
            }
            StartError::ConversationBusy => Self::conversation_busy(
                "This conversation is still answering another message: wait, or send with `busy` set to enqueue, interrupt or steer",
            ),
            StartError::ConversationWithoutUser => {
                tracing::error!("a conversation run was submitted without a user");
                Self::internal()
            }
            StartError::Store(error) => Self::store(error),
            StartError::Limited(refusal) => {
                let retry_after_secs = refusal.retry_after_secs();
                let message = refusal.to_string();
                match refusal {
                    LimitRefusal::BudgetExceeded { .. } => {
                        Self::budget_exceeded(message, retry_after_secs)
                    }
                    LimitRefusal::RequestsPerMinute { .. }
                    | LimitRefusal::ConcurrentRuns { .. } => {
                        Self::rate_limited(message, retry_after_secs)
                    }
                }
            }
            StartError::AlreadySubmitted { run_id } => {
                Self::conflict(format!("This request id already started run `{run_id}`"))
                    .with_param("requestId")
            }
            error @ StartError::InvalidOutput(_) => {
                Self::invalid_request(error.to_string()).with_param("schema")
            }
            StartError::ClientTools(error) => {
                Self::invalid_request(error.to_string()).with_param("tools")
            }
            error @ StartError::InvalidRequestId { .. } => {
                Self::invalid_request(format!("`requestId`: {error}")).with_param("requestId")
            }
        }
    }
}

impl From<crate::runtime::FollowError> for ApiError {
    fn from(error: crate::runtime::FollowError) -> Self {
        use crate::runtime::FollowError;
        match error {
            FollowError::Store(error) => Self::store(error),
            error @ FollowError::NeverRecorded(_) => Self::not_found(error.to_string()),
            FollowError::ShuttingDown => Self::shutting_down(),
        }
    }
}

/// A query string parsed into `T`; a bad one is a 400 in the JSON error shape naming the
/// parameter, like every other error (axum's own `Query` answers plain text).
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> axum::extract::FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Self, Self::Rejection> {
        let query = parts.uri.query().unwrap_or_default();
        let deserializer =
            serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
        serde_path_to_error::deserialize(deserializer)
            .map(ApiQuery)
            .map_err(|error| {
                let path = error.path().to_string();
                let inner = error.into_inner();
                if path == "." {
                    ApiError::invalid_request(format!("Invalid query string: {inner}"))
                } else {
                    ApiError::invalid_request(format!("Invalid query parameter `{path}`: {inner}"))
                        .with_param(path)
                }
            })
    }
}
