//! The public documents that tell clients how to sign in: the OAuth protected-resource
//! metadata (RFC 9728) MCP clients read after a 401 from `/mcp`, and the page's sign-in
//! settings (the issuer's endpoints and the page's public client id, never a secret).

use std::sync::Arc;

use axum::extract::Extension;
use axum::http::HeaderMap;
use serde::Serialize;
use utoipa::ToSchema;

use super::Authenticator;
use crate::http::error::{ApiError, ErrorBody};
use crate::identity::oidc::Issuers;

pub const PROTECTED_RESOURCE_PATH: &str = "/.well-known/oauth-protected-resource";
pub const SIGNIN_PATH: &str = "/v1/signin";

/// The scopes agentd understands, as the metadata lists them.
const SCOPES_SUPPORTED: [&str; 4] = ["agents:*:run", "runs:read", "keys:manage", "admin"];

/// `http(s)://HOST` of this server as the request reached it (`X-Forwarded-Proto` honoured).
pub fn base_url(headers: &HeaderMap) -> String {
    let text = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let scheme = text("x-forwarded-proto")
        .filter(|proto| matches!(*proto, "http" | "https"))
        .unwrap_or("http");
    let host = text("host")
        .filter(|host| {
            host.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '[' | ']'))
        })
        .unwrap_or("localhost");
    format!("{scheme}://{host}")
}

/// RFC 9728 metadata.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProtectedResource {
    /// This server's identifier: the audience its tokens must name (RFC 8707).
    pub resource: String,
    /// The issuers whose tokens it accepts.
    pub authorization_servers: Vec<String>,
    pub scopes_supported: Vec<String>,
    pub bearer_methods_supported: Vec<String>,
    pub resource_name: String,
}

#[utoipa::path(
    get,
    path = "/.well-known/oauth-protected-resource",
    tag = "identity",
    summary = "OAuth protected-resource metadata (RFC 9728): the issuers and scopes",
    responses(
        (status = 200, description = "The metadata", body = ProtectedResource),
        ErrorBody,
    ),
)]
pub async fn protected_resource(
    Extension(auth): Extension<Arc<Authenticator>>,
) -> Result<axum::Json<ProtectedResource>, ApiError> {
    let issuers = auth.issuers();
    let first = issuers.configs().next().ok_or_else(|| {
        ApiError::not_found("This server trusts no token issuer (auth.oidc is empty)")
    })?;
    let mut scopes: Vec<String> = SCOPES_SUPPORTED.iter().map(|s| s.to_string()).collect();
    scopes.extend(
        issuers
            .configs()
            .map(|c| c.admin_scope.clone())
            .filter(|s| s != "admin"),
    );
    scopes.dedup();
    Ok(axum::Json(ProtectedResource {
        resource: first.audience.clone(),
        authorization_servers: issuers.configs().map(|c| c.issuer.clone()).collect(),
        scopes_supported: scopes,
        bearer_methods_supported: vec!["header".into()],
        resource_name: "agentd".into(),
    }))
}

/// How the page signs in: authorization code with PKCE, in the browser.
#[derive(Debug, Serialize, ToSchema)]
pub struct PageSignIn {
    /// False when no issuer has a `pageClientId`: the page asks for a key.
    pub enabled: bool,
    #[schema(required)]
    pub issuer: Option<String>,
    #[schema(required)]
    pub client_id: Option<String>,
    #[schema(required)]
    pub authorization_endpoint: Option<String>,
    #[schema(required)]
    pub token_endpoint: Option<String>,
    #[schema(required)]
    pub end_session_endpoint: Option<String>,
    /// The scopes to ask for.
    pub scope: String,
    /// The audience to ask for (RFC 8707 `resource`).
    #[schema(required)]
    pub resource: Option<String>,
}

/// The sign-in the page uses: the first issuer with a `pageClientId`, once discovered.
pub fn page_sign_in(issuers: &Issuers) -> Result<PageSignIn, ApiError> {
    let disabled = PageSignIn {
        enabled: false,
        issuer: None,
        client_id: None,
        authorization_endpoint: None,
        token_endpoint: None,
        end_session_endpoint: None,
        scope: String::new(),
        resource: None,
    };
    let Some(config) = issuers.configs().find(|c| c.page_client_id.is_some()) else {
        return Ok(disabled);
    };
    let endpoints = issuers.endpoints(&config.issuer).ok_or_else(|| {
        ApiError::overloaded(
            "The issuer's discovery document is not loaded yet; retry in a moment",
            Some(1),
        )
    })?;
    Ok(PageSignIn {
        enabled: true,
        issuer: Some(config.issuer.clone()),
        client_id: config.page_client_id.clone(),
        authorization_endpoint: endpoints.authorization_endpoint.clone(),
        token_endpoint: endpoints.token_endpoint.clone(),
        end_session_endpoint: endpoints.end_session_endpoint.clone(),
        scope: format!(
            "openid agents:*:run runs:read keys:manage {}",
            config.admin_scope
        ),
        resource: Some(config.audience.clone()),
    })
}

#[utoipa::path(
    get,
    path = "/v1/signin",
    tag = "identity",
    summary = "How the page signs in (public): the issuer's endpoints and the page's client id",
    responses(
        (status = 200, description = "The sign-in settings", body = PageSignIn),
        ErrorBody,
    ),
)]
pub async fn signin(
    Extension(auth): Extension<Arc<Authenticator>>,
) -> Result<axum::Json<PageSignIn>, ApiError> {
    page_sign_in(auth.issuers()).map(axum::Json)
}

/// The origins the page may call besides its own: the issuers' token endpoints.
pub fn page_connect_origins(issuers: &Issuers) -> Vec<String> {
    issuers
        .configs()
        .filter(|c| c.page_client_id.is_some())
        .filter_map(|c| issuers.endpoints(&c.issuer))
        .filter_map(|e| e.token_endpoint.as_deref().and_then(origin_of))
        .collect()
}

/// `scheme://host[:port]` of a URL.
fn origin_of(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let host = rest.split(['/', '?', '#']).next()?;
    (!host.is_empty()).then(|| format!("{scheme}://{host}"))
}
