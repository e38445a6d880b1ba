//! API keys managed at run time (SPEC §12): `POST /v1/keys` creates one and shows it once,
//! `GET /v1/keys` lists them (never a secret; admins also see the config's keys, read-only),
//! `POST /v1/keys/{key_id}/rotate` gives a key a new secret, `DELETE /v1/keys/{key_id}` revokes
//! it. A user's token or key manages that user's keys, an admin anyone's; a key is never given
//! more than its creator holds. Every change goes through the audit hook.

use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::Authenticator;
use crate::config::key_limits::KeyLimits;
use crate::config::owner;
use crate::http::auth::Caller;
use crate::http::error::{ApiError, ApiJson, ApiPath, ApiQuery, ErrorBody};
use crate::http::wire::ListObject;
use crate::identity::keys::{self as minting, MintedKey};
use crate::identity::scopes::{self, Grants, Scope};
use crate::runtime::Runtime;
use crate::store::{Rotation, StoredApiKey};

pub const KEYS_PATH: &str = "/v1/keys";
pub const KEY_PATH: &str = "/v1/keys/{key_id}";
pub const ROTATE_PATH: &str = "/v1/keys/{key_id}/rotate";

/// The longest key name.
pub const MAX_NAME_CHARS: usize = 100;

/// `POST /v1/keys`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateKey {
    /// What the key is for, 1 to 100 characters.
    #[schema(min_length = 1, max_length = 100, pattern = r"\S")]
    pub name: String,
    /// The user it acts for: the caller's own user (the default), or any user for an admin;
    /// an admin's key with no user owns what it starts as `key:ID`.
    #[schema(pattern = r"^(?!\.{1,2}$)(?!key:)[A-Za-z0-9._@+:-]{1,128}$")]
    pub user: Option<String>,
    /// Agents it may run (`*` wildcards): shorthand for `agents:NAME:run` scopes.
    pub agents: Option<Vec<AgentPattern>>,
    /// Its scopes; with neither `agents` nor `scopes`, the creator's agents and `runs:read`.
    pub scopes: Option<Vec<ScopeText>>,
    /// Its limits, as `auth.keys[].limits`.
    #[schema(value_type = Option<KeyLimitsSchema>)]
    pub limits: Option<KeyLimits>,
    /// RFC 3339: when it stops working; a time already past is a 409.
    pub expires_at: Option<DateTime<Utc>>,
}

/// An agent name or pattern (`*` matches any run of characters).
#[derive(Debug, Deserialize)]
#[serde(transparent)]
pub struct AgentPattern(pub String);

/// One scope.
#[derive(Debug, Deserialize)]
#[serde(transparent)]
pub struct ScopeText(pub String);

/// A string schema with this pattern.
fn text_matching(pattern: &str) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .pattern(Some(pattern))
        .into()
}

impl utoipa::PartialSchema for AgentPattern {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        text_matching(r"^[A-Za-z0-9._/*-]{1,200}$")
    }
}

impl ToSchema for AgentPattern {}

impl utoipa::PartialSchema for ScopeText {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        text_matching(r"^(agents:[A-Za-z0-9._/*-]{1,200}:run|runs:read|keys:manage|admin)$")
    }
}

impl ToSchema for ScopeText {}

/// A key's limits (as `auth.keys[].limits`); every value optional and positive.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[expect(dead_code, reason = "documents KeyLimits's JSON shape")]
pub struct KeyLimitsSchema {
    #[schema(rename = "requestsPerMinute", minimum = 1, maximum = 4294967295_u64)]
    requests_per_minute: Option<u32>,
    #[schema(rename = "concurrentRuns", minimum = 1, maximum = 4294967295_u64)]
    concurrent_runs: Option<u32>,
    #[schema(rename = "tokensPerDay", minimum = 1)]
    tokens_per_day: Option<u64>,
    #[schema(rename = "costUsdPerDay", exclusive_minimum = 0)]
    cost_usd_per_day: Option<f64>,
}

/// One key, as listed: never its secret.
#[derive(Debug, Serialize, ToSchema)]
pub struct KeyView {
    pub id: String,
    pub object: KeyObject,
    pub name: String,
    /// Its first characters, to recognise it by.
    #[schema(required)]
    pub prefix: Option<String>,
    #[schema(required)]
    pub user_id: Option<String>,
    pub scopes: Vec<String>,
    #[schema(value_type = Option<KeyLimitsSchema>, required)]
    pub limits: Option<KeyLimits>,
    /// RFC 3339; null for a config key.
    #[schema(required)]
    pub created_at: Option<String>,
    #[schema(required)]
    pub expires_at: Option<String>,
    /// Who created it (an owner id); null for a config key.
    #[schema(required)]
    pub created_by: Option<String>,
    /// A key of the config file: not changed through the API.
    pub read_only: bool,
}

#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum KeyObject {
    ApiKey,
}

/// A key just created or rotated: the only answer that holds its secret.
#[derive(Debug, Serialize, ToSchema)]
pub struct IssuedKey {
    /// The key: shown this once, stored only as a digest.
    pub key: String,
    #[serde(flatten)]
    pub view: KeyView,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct KeyList {
    pub object: ListObject,
    pub data: Vec<KeyView>,
}

/// `GET /v1/keys` query.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct KeyListQuery {
    /// An admin's filter: this user's keys only.
    pub user: Option<String>,
}

/// The `{key_id}` of a key's route.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct KeyPath {
    /// A key id, `key_` and 16 hex digits.
    #[param(pattern = r"^[A-Za-z0-9_.\[\]:-]{1,128}$")]
    pub key_id: String,
}

fn view_of(key: &StoredApiKey) -> KeyView {
    KeyView {
        id: key.id.clone(),
        object: KeyObject::ApiKey,
        name: key.name.clone(),
        prefix: Some(key.prefix.clone()),
        user_id: key.user_id.clone(),
        scopes: key.scopes.split_whitespace().map(str::to_string).collect(),
        limits: key
            .limits
            .as_deref()
            .and_then(|json| serde_json::from_str(json).ok()),
        created_at: Some(key.created_at.to_rfc3339()),
        expires_at: key.expires_at.map(|at| at.to_rfc3339()),
        created_by: Some(key.created_by.clone()),
        read_only: false,
    }
}

/// The user whose keys `caller` manages by default: its own; an admin's is none (every user).
fn managed_user(caller: &Caller) -> Result<Option<String>, ApiError> {
    if caller.admin {
        return Ok(None);
    }
    caller.user_id.clone().map(Some).ok_or_else(|| {
        ApiError::forbidden(
            "Only a user's token or key, or an admin, manages keys: this key is bound to no user",
        )
    })
}

/// The grants a new key asks for: its scopes and agents, or by default the creator's agents
/// and `runs:read`.
fn requested_grants(request: &CreateKey, creator: &Grants) -> Result<Grants, ApiError> {
    let mut wanted: Vec<Scope> = Vec::new();
    if let Some(list) = &request.scopes {
        wanted = scopes::parse_all(list.iter().map(|scope| scope.0.as_str()))
            .map_err(|error| ApiError::invalid_request(error.to_string()).with_param("scopes"))?;
    }
    for AgentPattern(agent) in request.agents.iter().flatten() {
        let scope: Scope = format!("agents:{agent}:run").parse().map_err(|_| {
            ApiError::invalid_request(format!(
                "`{agent}` is not an agent name or pattern: letters, digits, `-`, `_`, `.`, `/` and `*`"
            ))
            .with_param("agents")
        })?;
        wanted.push(scope);
    }
    if request.scopes.is_none() && request.agents.is_none() {
        let mut default = Grants {
            admin: false,
            keys_manage: false,
            ..creator.clone()
        };
        default.runs_read = creator.runs_read;
        return Ok(default);
    }
    Ok(Grants::of(&wanted))
}

fn check_name(name: &str) -> Result<(), ApiError> {
    let length = name.trim().chars().count();
    if (1..=MAX_NAME_CHARS).contains(&length) {
        Ok(())
    } else {
        Err(
            ApiError::invalid_request(format!("`name` is 1 to {MAX_NAME_CHARS} characters"))
                .with_param("name"),
        )
    }
}

/// The user a new key acts for: the request's `user` (an admin's choice, or the caller's own),
/// else the caller's.
fn key_user(caller: &Caller, request: &CreateKey) -> Result<Option<String>, ApiError> {
    let own = managed_user(caller)?;
    match (&request.user, own) {
        (Some(user), _) => {
            owner::check_user_id(user)
                .map_err(|message| ApiError::invalid_request(message).with_param("user"))?;
            if caller.admin || caller.user_id.as_deref() == Some(user) {
                Ok(Some(user.clone()))
            } else {
                Err(ApiError::forbidden(
                    "`user` names another user: only an admin creates keys for other users",
                )
                .with_param("user"))
            }
        }
        (None, own) => Ok(own),
    }
}

fn minted() -> Result<MintedKey, ApiError> {
    minting::mint().map_err(|_| {
        tracing::error!("the system's random source failed: no key minted");
        ApiError::internal()
    })
}

#[utoipa::path(
    post,
    path = "/v1/keys",
    tag = "keys",
    summary = "Create an API key (shown once; stored only as a digest)",
    request_body = CreateKey,
    responses(
        (status = 201, description = "The key, with its secret this once", body = IssuedKey),
        ErrorBody,
    ),
)]
pub async fn create_key(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    headers: axum::http::HeaderMap,
    Extension(auth): Extension<Arc<Authenticator>>,
    ApiJson(request): ApiJson<CreateKey>,
) -> Result<Response, ApiError> {
    check_name(&request.name)?;
    let user = key_user(&caller, &request)?;
    let creator = caller.grants();
    let grants = requested_grants(&request, &creator)?;
    if !creator.covers(&grants) {
        return Err(ApiError::forbidden(
            "A key may not be given more than its creator holds: drop the scopes or agents the caller lacks",
        )
        .with_param("scopes"));
    }
    let now = Utc::now();
    if request.expires_at.is_some_and(|at| at <= now) {
        // 409, not 400: the value is well-formed, only the clock has passed it.
        return Err(ApiError::conflict(
            "`expires_at` is in the past: a key must expire after it is made",
        )
        .with_param("expires_at"));
    }
    let minted = minted()?;
    let limits = request.limits.filter(|limits| !limits.is_empty());
    let key = StoredApiKey {
        id: minting::new_id(),
        name: request.name.trim().to_string(),
        user_id: user,
        created_by: caller.decider(),
        secret_hash: minted.secret_hash,
        prefix: minted.prefix,
        scopes: grants
            .scopes()
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(" "),
        limits: limits.and_then(|limits| serde_json::to_string(&limits).ok()),
        created_at: now,
        expires_at: request.expires_at,
        rotated_at: None,
        revoked_at: None,
    };
    runtime
        .api_keys()
        .create(&key, crate::http::audit::actor_of(&caller, &headers))
        .await
        .map_err(ApiError::store)?;
    auth.keys_changed();
    let issued = IssuedKey {
        key: minted.secret,
        view: view_of(&key),
    };
    Ok((StatusCode::CREATED, axum::Json(issued)).into_response())
}

#[utoipa::path(
    get,
    path = "/v1/keys",
    tag = "keys",
    summary = "The caller's keys (an admin's: everyone's and the config's), never a secret",
    params(KeyListQuery),
    responses(
        (status = 200, description = "The keys, newest first", body = KeyList),
        ErrorBody,
    ),
)]
pub async fn list_keys(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    ApiQuery(query): ApiQuery<KeyListQuery>,
) -> Result<axum::Json<KeyList>, ApiError> {
    let user = match (managed_user(&caller)?, query.user) {
        (Some(own), Some(asked)) if own != asked => {
            return Err(ApiError::forbidden(
                "`user` names another user: only an admin lists other users' keys",
            )
            .with_param("user"));
        }
        (own, asked) => asked.or(own),
    };
    let stored = runtime
        .api_keys()
        .list(user.as_deref())
        .await
        .map_err(ApiError::store)?;
    let mut data: Vec<KeyView> = stored.iter().map(view_of).collect();
    if caller.admin {
        data.extend(config_keys(&runtime, user.as_deref()));
    }
    Ok(axum::Json(KeyList {
        object: ListObject::List,
        data,
    }))
}

/// The config's keys as an admin sees them: read-only, ids and scopes only.
fn config_keys(runtime: &Runtime, user: Option<&str>) -> Vec<KeyView> {
    let table = crate::http::auth::KeyTable::from_config(&runtime.config().auth);
    table
        .callers()
        .filter(|(caller, _)| user.is_none() || caller.user_id.as_deref() == user)
        .map(|(caller, id)| KeyView {
            id: id.to_string(),
            object: KeyObject::ApiKey,
            name: id.to_string(),
            prefix: None,
            user_id: caller.user_id.clone(),
            scopes: caller
                .grants()
                .scopes()
                .iter()
                .map(ToString::to_string)
                .collect(),
            limits: caller.limited_key.as_ref().map(|key| key.limits),
            created_at: None,
            expires_at: None,
            created_by: None,
            read_only: true,
        })
        .collect()
}

/// The run-time key `key_id` if `caller` may change it: 403 for a config key, 404 for a key
/// that is not there (or not the caller's).
async fn manageable_key(
    runtime: &Runtime,
    caller: &Caller,
    key_id: &str,
) -> Result<StoredApiKey, ApiError> {
    let own = managed_user(caller)?;
    let configured = runtime
        .config()
        .auth
        .keys_with_ids()
        .any(|(_, id)| id == key_id);
    if configured {
        return Err(ApiError::forbidden(format!(
            "`{key_id}` is a key of the config file: change auth.keys there"
        )));
    }
    let key = runtime
        .api_keys()
        .live(key_id, own.as_deref())
        .await
        .map_err(ApiError::store)?;
    key.ok_or_else(|| ApiError::not_found(format!("No key `{key_id}`; GET /v1/keys lists them")))
}

#[utoipa::path(
    post,
    path = "/v1/keys/{key_id}/rotate",
    tag = "keys",
    summary = "Give a key a new secret (shown once); the old one stops working",
    params(KeyPath),
    responses(
        (status = 200, description = "The key with its new secret", body = IssuedKey),
        ErrorBody,
    ),
)]
pub async fn rotate_key(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    headers: axum::http::HeaderMap,
    Extension(auth): Extension<Arc<Authenticator>>,
    ApiPath(KeyPath { key_id }): ApiPath<KeyPath>,
) -> Result<axum::Json<IssuedKey>, ApiError> {
    let mut key = manageable_key(&runtime, &caller, &key_id).await?;
    let minted = minted()?;
    let now = Utc::now();
    let rotation = Rotation {
        id: &key.id,
        secret_hash: &minted.secret_hash,
        prefix: &minted.prefix,
        at: now,
    };
    let rotated = runtime
        .api_keys()
        .rotate(&rotation, crate::http::audit::actor_of(&caller, &headers))
        .await
        .map_err(ApiError::store)?;
    if !rotated {
        return Err(ApiError::not_found(format!(
            "No key `{key_id}`; GET /v1/keys lists them"
        )));
    }
    auth.keys_changed();
    key.prefix = minted.prefix;
    key.rotated_at = Some(now);
    Ok(axum::Json(IssuedKey {
        key: minted.secret,
        view: view_of(&key),
    }))
}

#[utoipa::path(
    delete,
    path = "/v1/keys/{key_id}",
    tag = "keys",
    summary = "Revoke a key: refused on every replica within 5 s",
    params(KeyPath),
    responses(
        (status = 204, description = "Revoked"),
        ErrorBody,
    ),
)]
pub async fn revoke_key(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
    headers: axum::http::HeaderMap,
    Extension(auth): Extension<Arc<Authenticator>>,
    ApiPath(KeyPath { key_id }): ApiPath<KeyPath>,
) -> Result<Response, ApiError> {
    let key = manageable_key(&runtime, &caller, &key_id).await?;
    let revoked = runtime
        .api_keys()
        .revoke(
            &key.id,
            Utc::now(),
            crate::http::audit::actor_of(&caller, &headers),
        )
        .await
        .map_err(ApiError::store)?;
    if !revoked {
        return Err(ApiError::not_found(format!(
            "No key `{key_id}`; GET /v1/keys lists them"
        )));
    }
    auth.keys_changed();
    Ok(StatusCode::NO_CONTENT.into_response())
}
