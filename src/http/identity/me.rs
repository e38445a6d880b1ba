//! `GET /v1/me` (SPEC §12): who the caller is (its user, the key or token it presented), its
//! scopes, the agents it may run, and what is left of its key's limits. The page asks it first.

use std::sync::Arc;

use axum::extract::{Extension, State};
use serde::Serialize;
use utoipa::ToSchema;

use crate::http::auth::{Caller, Credential};
use crate::http::error::ErrorBody;
use crate::limits::LimitsLeft;
use crate::runtime::Runtime;

/// The caller.
#[derive(Debug, Serialize, ToSchema)]
pub struct Me {
    pub admin: bool,
    /// The user it acts for; null for a key bound to no user (or a server without keys).
    #[schema(required)]
    pub user_id: Option<String>,
    /// What it presented: `token`, `key` (run-time), `config_key`, or `none`.
    pub credential: String,
    /// The issuer of its token.
    #[schema(required)]
    pub issuer: Option<String>,
    #[schema(required)]
    pub key_id: Option<String>,
    #[schema(required)]
    pub key_name: Option<String>,
    pub scopes: Vec<String>,
    /// The agents it may run, by name.
    pub agents: Vec<String>,
    /// Its key's limits and what is left of them today; null without limits.
    #[schema(value_type = Option<Object>, required)]
    pub limits: Option<LimitsLeft>,
}

#[utoipa::path(
    get,
    path = "/v1/me",
    tag = "identity",
    summary = "Who the caller is: user, key or token, scopes, agents, limits left",
    responses(
        (status = 200, description = "The caller", body = Me),
        ErrorBody,
    ),
)]
pub async fn whoami(
    State(runtime): State<Arc<Runtime>>,
    Extension(caller): Extension<Caller>,
) -> axum::Json<Me> {
    let limits = match &caller.limited_key {
        Some(key) => Some(runtime.key_limits().left(key).await),
        None => None,
    };
    let agents = runtime
        .agents()
        .iter()
        .filter(|agent| caller.may_use_agent(&agent.name))
        .map(|agent| agent.name.clone())
        .collect();
    let issuer = match &caller.credential {
        Credential::Token { issuer } => Some(issuer.clone()),
        _ => None,
    };
    axum::Json(Me {
        admin: caller.admin,
        credential: caller.credential.as_str().to_string(),
        issuer,
        key_id: caller.key_id.clone(),
        key_name: caller.key_name.clone(),
        scopes: caller
            .grants()
            .scopes()
            .iter()
            .map(ToString::to_string)
            .collect(),
        agents,
        user_id: caller.user_id,
        limits,
    })
}
