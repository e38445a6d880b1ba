//! Authentication at the edge (SPEC §4, §12): who a request's `Authorization: Bearer …` (or
//! `x-api-key`) is: a JWT of a configured issuer, a config key, or a run-time key, in that
//! order; then the scopes its route needs (`runs:read`, `keys:manage`). Without keys or
//! issuers (agentd then listens on loopback only) or with `auth.disabled`, every caller is an
//! admin. A 401 names what was wrong and never echoes what was presented; a 401 from `/mcp`
//! points MCP clients at the protected-resource metadata (RFC 9728). Liveness, readiness,
//! metrics, the OpenAPI document, the page and its sign-in settings stay public.
//!
//! The routes that belong to identity live beside it: run-time keys ([`keys`]), `GET /v1/me`
//! ([`me`]), and the public discovery documents ([`well_known`]).

pub mod keys;
pub mod me;
pub mod well_known;

use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::auth::{ACT_FOR_HEADER, Caller, Credential, KeyTable};
use super::error::ApiError;
use crate::config::key_limits::KeyLimits;
use crate::identity::keys::{KEY_PREFIX, KeyCache, KeyRefusal};
use crate::identity::oidc::{self, Issuers};
use crate::identity::scopes::{self, Grants, Scope};
use crate::limits::LimitedKey;
use crate::runtime::Runtime;
use crate::store::StoredApiKey;

/// The routes anyone may call; the OpenAPI document marks them as needing no key. The web
/// page and its files are public: the page signs in (or asks for a key) and sends it with each
/// API call.
pub const PUBLIC_PATHS: [&str; 8] = [
    "/health",
    "/ready",
    "/metrics",
    "/openapi.json",
    "/",
    "/ui/{file}",
    well_known::PROTECTED_RESOURCE_PATH,
    well_known::SIGNIN_PATH,
];

fn is_public(path: &str) -> bool {
    PUBLIC_PATHS.contains(&path) || path.starts_with("/ui/")
}

/// Everything that tells callers apart: the config keys, the issuers, the run-time keys.
pub struct Authenticator {
    config_keys: KeyTable,
    issuers: Issuers,
    stored_keys: KeyCache,
    enforced: bool,
}

impl Authenticator {
    /// Reads the config's keys and issuers and starts loading the issuers' keys.
    pub fn new(runtime: &Runtime) -> Self {
        let auth = &runtime.config().auth;
        let issuers = Issuers::new(if auth.disabled { &[] } else { &auth.oidc });
        if tokio::runtime::Handle::try_current().is_ok() {
            issuers.load_in_background(runtime.background_token());
        }
        Self {
            config_keys: KeyTable::from_config(auth),
            issuers,
            stored_keys: runtime.api_keys().cache(),
            enforced: auth.is_enforced(),
        }
    }

    /// Whether requests need a key or token.
    pub fn is_enforced(&self) -> bool {
        self.enforced
    }

    pub fn issuers(&self) -> &Issuers {
        &self.issuers
    }

    /// This replica changed a run-time key: forget what was cached.
    pub fn keys_changed(&self) {
        self.stored_keys.forget_all();
    }

    /// The caller `presented` (a token or a key) is, or a 401 naming what is wrong.
    async fn caller_of(&self, presented: &str) -> Result<Caller, ApiError> {
        if !self.issuers.is_empty() && oidc::looks_like_jwt(presented) {
            return match self.issuers.verify(presented).await {
                Ok(identity) => Ok(Caller {
                    user_id: Some(identity.user),
                    credential: Credential::Token {
                        issuer: identity.issuer,
                    },
                    ..Caller::with_grants(&identity.grants)
                }),
                Err(refusal) => Err(ApiError::unauthorized(refusal.to_string())),
            };
        }
        if let Some((caller, key_id)) = self.config_keys.lookup_with_id(presented) {
            super::layers::record_key_id(key_id);
            return Ok(caller);
        }
        if presented.starts_with(KEY_PREFIX) {
            let found = self
                .stored_keys
                .find(presented, chrono::Utc::now())
                .await
                .map_err(ApiError::store)?;
            return match found {
                Ok(key) => {
                    super::layers::record_key_id(&key.id);
                    Ok(stored_key_caller(key))
                }
                Err(KeyRefusal::Revoked) => Err(ApiError::unauthorized("This API key was revoked")),
                Err(KeyRefusal::Expired) => Err(ApiError::unauthorized("This API key has expired")),
                Err(KeyRefusal::Unknown) => Err(ApiError::unauthorized("Invalid API key")),
            };
        }
        Err(ApiError::unauthorized("Invalid API key"))
    }
}

/// The caller a run-time key makes: its scopes, user, name and limits.
pub(crate) fn stored_key_caller(key: StoredApiKey) -> Caller {
    let scopes = scopes::known_scopes(key.scopes.split_whitespace());
    let limits = key
        .limits
        .as_deref()
        .and_then(|json| serde_json::from_str::<KeyLimits>(json).ok())
        .filter(|limits| !limits.is_empty());
    Caller {
        user_id: key.user_id,
        key_id: Some(key.id.clone()),
        key_name: Some(key.name),
        limited_key: limits.map(|limits| LimitedKey { id: key.id, limits }),
        credential: Credential::StoredKey,
        ..Caller::with_grants(&Grants::of(&scopes))
    }
}

/// The credential a request presents: `Authorization: Bearer …`, else `x-api-key`.
fn presented(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .or_else(|| headers.get("x-api-key").and_then(|v| v.to_str().ok()))
        .map(str::trim)
        .filter(|k| !k.is_empty())
}

/// Puts the [`Caller`] into the request's extensions, or answers 401 (403 when its route
/// needs a scope the caller lacks).
pub async fn authenticate(
    State(auth): State<Arc<Authenticator>>,
    mut request: Request,
    next: Next,
) -> Response {
    if is_public(request.uri().path()) {
        request.extensions_mut().insert(Caller::admin());
        return next.run(request).await;
    }
    if !auth.enforced {
        return with_caller(Caller::admin(), request, next).await;
    }
    let found = match presented(request.headers()) {
        None => Err(ApiError::unauthorized(if auth.issuers.is_empty() {
            "Missing API key: send `Authorization: Bearer KEY` or `x-api-key: KEY`"
        } else {
            "Missing API key or token: send `Authorization: Bearer KEY_OR_TOKEN`"
        })),
        Some(presented) => auth.caller_of(presented).await,
    };
    match found {
        Ok(caller) => with_caller(caller, request, next).await,
        Err(error) => unauthorized(&auth, &request, error),
    }
}

/// A 401, with `WWW-Authenticate` naming the protected-resource metadata on `/mcp` when
/// issuers are configured (RFC 9728 §5.1), so an MCP client can find where to sign in.
fn unauthorized(auth: &Authenticator, request: &Request, error: ApiError) -> Response {
    let mut response = error.into_response();
    if auth.issuers.is_empty() || !request.uri().path().starts_with("/mcp") {
        return response;
    }
    let metadata = format!(
        "{}{}",
        well_known::base_url(request.headers()),
        well_known::PROTECTED_RESOURCE_PATH
    );
    let challenge = if presented(request.headers()).is_some() {
        format!("Bearer error=\"invalid_token\", resource_metadata=\"{metadata}\"")
    } else {
        format!("Bearer resource_metadata=\"{metadata}\"")
    };
    if let Ok(value) = HeaderValue::from_str(&challenge) {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

/// Runs the request as `caller`, or as the user its [`ACT_FOR_HEADER`] names, once its
/// route's scope is checked.
async fn with_caller(caller: Caller, mut request: Request, next: Next) -> Response {
    let caller = match acting_caller(caller, request.headers()) {
        Ok(caller) => caller,
        Err(error) => return error.into_response(),
    };
    if let Err(error) = check_route_scope(&caller, &request) {
        return error.into_response();
    }
    if let (Some(by), Some(user)) = (&caller.acted_by, &caller.user_id) {
        tracing::info!(acted_by = %by, user = %user, "an admin acts for a user");
    }
    request.extensions_mut().insert(caller);
    next.run(request).await
}

fn acting_caller(caller: Caller, headers: &HeaderMap) -> Result<Caller, ApiError> {
    let Some(value) = headers.get(ACT_FOR_HEADER) else {
        return Ok(caller);
    };
    let user = value.to_str().map(str::trim).map_err(|_| {
        ApiError::invalid_request(format!("`{ACT_FOR_HEADER}` must be visible ASCII text"))
            .with_param(ACT_FOR_HEADER)
    })?;
    caller.act_for(user, ACT_FOR_HEADER)
}

/// The scope a route needs beyond being authenticated, if any.
pub fn route_scope(method: &Method, route: &str) -> Option<Scope> {
    match route {
        "/v1/runs"
        | "/v1/runs/{run_id}"
        | "/v1/runs/{run_id}/events"
        | "/v1/runs/{run_id}/approvals"
            if method == Method::GET =>
        {
            Some(Scope::RunsRead)
        }
        keys::KEYS_PATH | keys::KEY_PATH | keys::ROTATE_PATH => Some(Scope::KeysManage),
        _ => None,
    }
}

/// 403 naming the scope when the caller lacks the one its route needs.
fn check_route_scope(caller: &Caller, request: &Request) -> Result<(), ApiError> {
    let Some(route) = request.extensions().get::<MatchedPath>() else {
        return Ok(());
    };
    let Some(scope) = route_scope(request.method(), route.as_str()) else {
        return Ok(());
    };
    let grants = caller.grants();
    let held = match scope {
        Scope::RunsRead => grants.runs_read,
        Scope::KeysManage => grants.keys_manage,
        Scope::Admin => grants.admin,
        Scope::RunAgents(ref agent) => grants.may_run(agent),
    };
    if held {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!(
            "This caller lacks the scope `{scope}` this route needs"
        )))
    }
}
