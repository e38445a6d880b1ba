//! JWT bearer tokens from OpenID Connect issuers (SPEC §12, `auth.oidc`). Each issuer's
//! discovery document and JWKS are fetched in the background at start and kept in memory; a
//! token is checked against them with no network call. A token signed with a key id the cached
//! set lacks makes one refetch, at most once a minute per issuer (a key rotation), before it is
//! refused. Signatures: RS256, ES256 and EdDSA only, each only with a key of its own family, so
//! `none` and HMAC signed with a public key (algorithm confusion) are refused before any check;
//! `jsonwebtoken` (with ring) does the JOSE work. `iss`, `aud`, `exp` and `nbf` are checked with
//! 60 s of leeway. A refusal says what was wrong (expired, wrong audience, unknown issuer…) and
//! never which part of a signature failed, nor the token.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk};
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use serde_json::{Map, Value};

use super::scopes::{self, Grants, Scope};
use crate::config::identity::OidcIssuerConfig;
use crate::config::owner;

/// Seconds of clock difference allowed on `exp` and `nbf`.
pub const LEEWAY_SECS: u64 = 60;
/// The least time between two fetches of an issuer's keys caused by an unknown key id.
pub const REFETCH_EVERY: Duration = Duration::from_secs(60);
/// How long one fetch of a discovery document or JWKS may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
/// How often a background load that failed is tried again.
const RETRY_LOAD_EVERY: Duration = Duration::from_secs(5);
/// How often the keys are fetched again anyway (issuers add keys before using them).
const RELOAD_EVERY: Duration = Duration::from_secs(3600);

/// Why a token was refused: each is a 401 naming it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenRefusal {
    #[error("The bearer token is not a well-formed JWT")]
    Malformed,
    #[error("Bearer tokens signed with `none` are refused")]
    Unsigned,
    #[error(
        "The bearer token is signed with {0}: only RS256, ES256 and EdDSA tokens verified against the issuer's published keys are accepted"
    )]
    UnsupportedAlgorithm(String),
    #[error("The bearer token's issuer is not one this server trusts (auth.oidc)")]
    UnknownIssuer,
    #[error("The bearer token's issuer cannot be reached to load its signing keys; try again")]
    IssuerUnavailable,
    #[error("The bearer token is signed with a key its issuer does not publish")]
    UnknownKey,
    #[error("The bearer token's signature does not verify")]
    BadSignature,
    #[error("The bearer token has expired")]
    Expired,
    #[error("The bearer token is not valid yet (nbf)")]
    NotYetValid,
    #[error("The bearer token's audience is not this server: it must name `{0}`")]
    WrongAudience(String),
    #[error("The bearer token has no `{0}` claim")]
    MissingClaim(String),
    #[error("The bearer token's `{claim}` claim is not a usable user id: {message}")]
    BadUser { claim: String, message: String },
}

/// Who a verified token says the caller is.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenIdentity {
    pub issuer: String,
    pub user: String,
    pub grants: Grants,
    /// agentd's scopes among the token's (others, such as `openid`, left out).
    pub scopes: Vec<Scope>,
}

/// The issuers, their cached keys, and the verification of tokens against them.
pub struct Issuers {
    issuers: Vec<Arc<Issuer>>,
}

impl Issuers {
    /// The configured issuers, keys not loaded yet ([`Issuers::load_in_background`]).
    pub fn new(configs: &[OidcIssuerConfig]) -> Self {
        let http = reqwest::Client::builder()
            .timeout(FETCH_TIMEOUT)
            .build()
            .unwrap_or_default();
        Self {
            issuers: configs
                .iter()
                .map(|config| Arc::new(Issuer::new(config.clone(), http.clone())))
                .collect(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.issuers.is_empty()
    }

    /// Loads every issuer's discovery document and keys now and then every hour, retrying a
    /// failed load every few seconds, until `stop`.
    pub fn load_in_background(&self, stop: tokio_util::sync::CancellationToken) {
        for issuer in &self.issuers {
            let issuer = Arc::clone(issuer);
            let stop = stop.clone();
            tokio::spawn(async move {
                loop {
                    let wait = match issuer.refresh().await {
                        Ok(()) => RELOAD_EVERY,
                        Err(()) => RETRY_LOAD_EVERY,
                    };
                    tokio::select! {
                        () = stop.cancelled() => return,
                        () = tokio::time::sleep(wait) => {}
                    }
                }
            });
        }
    }

    /// The issuers' configurations, in order.
    pub fn configs(&self) -> impl Iterator<Item = &OidcIssuerConfig> {
        self.issuers.iter().map(|issuer| &issuer.config)
    }

    /// The discovered endpoints of an issuer, once loaded.
    pub fn endpoints(&self, issuer: &str) -> Option<Arc<Endpoints>> {
        self.issuers
            .iter()
            .find(|i| i.config.issuer == issuer)
            .and_then(|i| i.state.load().endpoints.clone())
    }

    /// Verifies `token` and says who it names.
    pub async fn verify(&self, token: &str) -> Result<TokenIdentity, TokenRefusal> {
        let unverified = Unverified::parse(token)?;
        let issuer = self
            .issuers
            .iter()
            .find(|issuer| Some(issuer.config.issuer.as_str()) == unverified.issuer.as_deref())
            .ok_or(TokenRefusal::UnknownIssuer)?;
        let key = issuer.key_for(&unverified).await?;
        let claims = check_claims(token, &key, &issuer.config)?;
        identity_of(&issuer.config, &claims)
    }
}

/// Whether `presented` looks like a JWT (three base64url parts) rather than an API key.
pub fn looks_like_jwt(presented: &str) -> bool {
    presented.starts_with("eyJ") && presented.split('.').count() == 3
}

/// What a token says before it is verified: only used to pick the issuer and key.
struct Unverified {
    algorithm: Algorithm,
    kid: Option<String>,
    issuer: Option<String>,
}

#[derive(Deserialize)]
struct RawHeader {
    alg: Option<String>,
    kid: Option<String>,
}

#[derive(Deserialize)]
struct RawIssuer {
    iss: Option<String>,
}

impl Unverified {
    fn parse(token: &str) -> Result<Self, TokenRefusal> {
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(_), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(TokenRefusal::Malformed);
        };
        let header: RawHeader = decode_part(header)?;
        let algorithm = match header.alg.as_deref() {
            Some("RS256") => Algorithm::RS256,
            Some("ES256") => Algorithm::ES256,
            Some("EdDSA") => Algorithm::EdDSA,
            Some(none) if none.eq_ignore_ascii_case("none") => return Err(TokenRefusal::Unsigned),
            Some(other) => {
                return Err(TokenRefusal::UnsupportedAlgorithm(
                    other.chars().take(16).collect(),
                ));
            }
            None => return Err(TokenRefusal::Malformed),
        };
        let payload: RawIssuer = decode_part(payload)?;
        Ok(Self {
            algorithm,
            kid: header.kid,
            issuer: payload.iss,
        })
    }
}

fn decode_part<T: serde::de::DeserializeOwned>(part: &str) -> Result<T, TokenRefusal> {
    let bytes = URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| TokenRefusal::Malformed)?;
    serde_json::from_slice(&bytes).map_err(|_| TokenRefusal::Malformed)
}

/// Checks the signature with `key` and the registered claims; the claims on success.
fn check_claims(
    token: &str,
    key: &VerifyingKey,
    config: &OidcIssuerConfig,
) -> Result<Map<String, Value>, TokenRefusal> {
    let mut validation = Validation::new(key.algorithm);
    validation.algorithms = vec![key.algorithm];
    validation.leeway = LEEWAY_SECS;
    validation.validate_nbf = true;
    validation.set_issuer(&[&config.issuer]);
    validation.set_audience(&[&config.audience]);
    validation.set_required_spec_claims(&["exp", "iss", "aud"]);
    jsonwebtoken::decode::<Map<String, Value>>(token, &key.key, &validation)
        .map(|data| data.claims)
        .map_err(|error| refusal_of(&error, config))
}

fn refusal_of(error: &jsonwebtoken::errors::Error, config: &OidcIssuerConfig) -> TokenRefusal {
    use jsonwebtoken::errors::ErrorKind;
    match error.kind() {
        ErrorKind::ExpiredSignature => TokenRefusal::Expired,
        ErrorKind::ImmatureSignature => TokenRefusal::NotYetValid,
        ErrorKind::InvalidAudience => TokenRefusal::WrongAudience(config.audience.clone()),
        ErrorKind::InvalidIssuer => TokenRefusal::UnknownIssuer,
        ErrorKind::MissingRequiredClaim(claim) => TokenRefusal::MissingClaim(claim.clone()),
        ErrorKind::InvalidToken
        | ErrorKind::Base64(_)
        | ErrorKind::Json(_)
        | ErrorKind::Utf8(_) => TokenRefusal::Malformed,
        _ => TokenRefusal::BadSignature,
    }
}

/// The caller a verified token's claims name.
fn identity_of(
    config: &OidcIssuerConfig,
    claims: &Map<String, Value>,
) -> Result<TokenIdentity, TokenRefusal> {
    let user = claims
        .get(&config.user_claim)
        .and_then(Value::as_str)
        .ok_or_else(|| TokenRefusal::MissingClaim(config.user_claim.clone()))?;
    owner::check_user_id(user).map_err(|message| TokenRefusal::BadUser {
        claim: config.user_claim.clone(),
        message,
    })?;
    let texts: Vec<&str> = match claims.get(&config.scopes_claim) {
        Some(Value::String(text)) => text.split_whitespace().collect(),
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let admin = texts.iter().any(|scope| *scope == config.admin_scope);
    let mut scopes = scopes::known_scopes(texts);
    if admin && !scopes.contains(&Scope::Admin) {
        scopes.push(Scope::Admin);
    }
    Ok(TokenIdentity {
        issuer: config.issuer.clone(),
        user: user.to_string(),
        grants: Grants::of(&scopes),
        scopes,
    })
}

/// An issuer's endpoints from its discovery document.
#[derive(Debug, Clone, Deserialize)]
pub struct Endpoints {
    pub issuer: String,
    pub jwks_uri: String,
    pub authorization_endpoint: Option<String>,
    pub token_endpoint: Option<String>,
    pub end_session_endpoint: Option<String>,
}

/// One public key of an issuer and the one algorithm it verifies.
#[derive(Clone)]
struct VerifyingKey {
    algorithm: Algorithm,
    key: DecodingKey,
}

/// What is known of an issuer: swapped whole when its keys are fetched.
#[derive(Default)]
struct IssuerState {
    endpoints: Option<Arc<Endpoints>>,
    keys: HashMap<String, VerifyingKey>,
    /// A key without `kid`, used by tokens without one.
    unnamed: Vec<VerifyingKey>,
}

struct Issuer {
    config: OidcIssuerConfig,
    http: reqwest::Client,
    state: ArcSwap<IssuerState>,
    /// When the keys were last fetched successfully.
    fetched_at: Mutex<Option<Instant>>,
    /// One fetch at a time.
    fetching: tokio::sync::Mutex<()>,
}

impl Issuer {
    fn new(config: OidcIssuerConfig, http: reqwest::Client) -> Self {
        Self {
            config,
            http,
            state: ArcSwap::from_pointee(IssuerState::default()),
            fetched_at: Mutex::new(None),
            fetching: tokio::sync::Mutex::new(()),
        }
    }

    /// The key that verifies `token`: from the cache, or after one refetch (when the cache has
    /// none yet, or at most once a minute for an unknown key id).
    async fn key_for(&self, token: &Unverified) -> Result<VerifyingKey, TokenRefusal> {
        if let Some(key) = self.cached_key(token)? {
            return Ok(key);
        }
        let _one_fetch = self.fetching.lock().await;
        if let Some(key) = self.cached_key(token)? {
            return Ok(key); // Another request fetched them meanwhile.
        }
        let last = *self
            .fetched_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if last.is_some_and(|at| at.elapsed() < REFETCH_EVERY) {
            return Err(TokenRefusal::UnknownKey);
        }
        self.fetch()
            .await
            .map_err(|()| TokenRefusal::IssuerUnavailable)?;
        self.cached_key(token)?.ok_or(TokenRefusal::UnknownKey)
    }

    /// The cached key for the token's `kid`; 401 when that key is of another algorithm.
    fn cached_key(&self, token: &Unverified) -> Result<Option<VerifyingKey>, TokenRefusal> {
        let state = self.state.load();
        let candidates: Vec<&VerifyingKey> = match &token.kid {
            Some(kid) => state.keys.get(kid).into_iter().collect(),
            None => state.unnamed.iter().chain(state.keys.values()).collect(),
        };
        if candidates.is_empty() {
            return Ok(None);
        }
        candidates
            .into_iter()
            .find(|key| key.algorithm == token.algorithm)
            .cloned()
            .map(Some)
            .ok_or(TokenRefusal::UnsupportedAlgorithm(format!(
                "{:?} with a key of another type",
                token.algorithm
            )))
    }

    /// A background refresh, serialized with the refetches of requests.
    async fn refresh(&self) -> Result<(), ()> {
        let _one_fetch = self.fetching.lock().await;
        self.fetch().await
    }

    /// Fetches the discovery document (once) and the keys; logs a failure (never a token).
    async fn fetch(&self) -> Result<(), ()> {
        match self.fetch_state().await {
            Ok(state) => {
                tracing::info!(issuer = %self.config.issuer, keys = state.keys.len() + state.unnamed.len(), "loaded the issuer's signing keys");
                self.state.store(Arc::new(state));
                *self
                    .fetched_at
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
                Ok(())
            }
            Err(error) => {
                tracing::warn!(issuer = %self.config.issuer, %error, "cannot load the issuer's signing keys");
                Err(())
            }
        }
    }

    async fn fetch_state(&self) -> Result<IssuerState, String> {
        let endpoints = match self.state.load().endpoints.clone() {
            Some(endpoints) => endpoints,
            None => Arc::new(self.discover().await?),
        };
        let jwks: Value = self.get_json(&endpoints.jwks_uri).await?;
        let mut state = IssuerState {
            endpoints: Some(endpoints),
            ..IssuerState::default()
        };
        let listed = jwks.get("keys").and_then(Value::as_array);
        for jwk in listed.into_iter().flatten() {
            let Some((kid, key)) = verifying_key(jwk) else {
                continue;
            };
            match kid {
                Some(kid) => {
                    state.keys.insert(kid, key);
                }
                None => state.unnamed.push(key),
            }
        }
        Ok(state)
    }

    async fn discover(&self) -> Result<Endpoints, String> {
        let url = format!(
            "{}/.well-known/openid-configuration",
            self.config.issuer.trim_end_matches('/')
        );
        let endpoints: Endpoints = serde_json::from_value(self.get_json(&url).await?)
            .map_err(|error| format!("{url}: not a discovery document: {error}"))?;
        if endpoints.issuer != self.config.issuer {
            return Err(format!(
                "{url} names the issuer `{}`, not `{}`",
                endpoints.issuer, self.config.issuer
            ));
        }
        Ok(endpoints)
    }

    async fn get_json(&self, url: &str) -> Result<Value, String> {
        let response = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|error| format!("{url}: {error}"))?;
        if !response.status().is_success() {
            return Err(format!("{url}: HTTP {}", response.status()));
        }
        response
            .json()
            .await
            .map_err(|error| format!("{url}: not JSON: {error}"))
    }
}

/// A signing key of a JWKS and its algorithm, from its type and curve (never from the token):
/// RSA → RS256, EC P-256 → ES256, OKP Ed25519 → EdDSA. Other keys (encryption keys, HMAC
/// secrets, other curves) are skipped.
fn verifying_key(jwk: &Value) -> Option<(Option<String>, VerifyingKey)> {
    if jwk
        .get("use")
        .and_then(Value::as_str)
        .is_some_and(|u| u != "sig")
    {
        return None;
    }
    let jwk: Jwk = serde_json::from_value(jwk.clone()).ok()?;
    let algorithm = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => Algorithm::RS256,
        AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256 => {
            Algorithm::ES256
        }
        AlgorithmParameters::OctetKeyPair(okp) if okp.curve == EllipticCurve::Ed25519 => {
            Algorithm::EdDSA
        }
        _ => return None,
    };
    let key = DecodingKey::from_jwk(&jwk).ok()?;
    Some((jwk.common.key_id.clone(), VerifyingKey { algorithm, key }))
}

#[cfg(test)]
#[path = "oidc_tests.rs"]
mod tests;
