//! `auth.oidc` (SPEC §12): the OpenID Connect issuers whose JWT bearer tokens agentd accepts,
//! and the checks of `auth.keys[].scopes`. Only the shape and its validation live here;
//! discovery and verification are `crate::identity::oidc`'s.

use serde::Deserialize;

use super::ConfigError;
use crate::identity::scopes;

/// One trusted issuer.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OidcIssuerConfig {
    /// The issuer URL exactly as tokens name it in `iss`; its discovery document is
    /// `ISSUER/.well-known/openid-configuration`.
    pub issuer: String,
    /// The audience a token must name in `aud`: this server (RFC 8707), e.g. its public URL.
    pub audience: String,
    /// The claim naming the caller's user.
    #[serde(default = "default_user_claim")]
    pub user_claim: String,
    /// The claim holding the token's scopes (a space-separated string or a list).
    #[serde(default = "default_scopes_claim")]
    pub scopes_claim: String,
    /// The scope that makes the caller an admin (beside `admin`).
    #[serde(default = "default_admin_scope")]
    pub admin_scope: String,
    /// The public client (no secret) the web page signs in with: authorization code + PKCE.
    pub page_client_id: Option<String>,
}

fn default_user_claim() -> String {
    "sub".into()
}

fn default_scopes_claim() -> String {
    "scope".into()
}

fn default_admin_scope() -> String {
    "agentd:admin".into()
}

impl OidcIssuerConfig {
    fn check(&self, file: &str, index: usize) -> Result<(), ConfigError> {
        let invalid = |field: &str, message: String| ConfigError::Invalid {
            file: file.to_string(),
            path: format!("auth.oidc[{index}].{field}"),
            message,
        };
        let url = self.issuer.trim_end_matches('/');
        if !(url.starts_with("https://") || url.starts_with("http://")) || url.len() < 10 {
            return Err(invalid(
                "issuer",
                format!("`{}` is not an http(s) URL", self.issuer),
            ));
        }
        if self.audience.trim().is_empty() {
            return Err(invalid("audience", "must name this server".into()));
        }
        for (field, value) in [
            ("userClaim", &self.user_claim),
            ("scopesClaim", &self.scopes_claim),
        ] {
            if value.trim().is_empty() {
                return Err(invalid(field, "must name a claim".into()));
            }
        }
        Ok(())
    }
}

/// Checks every issuer (no two the same) and every key's `scopes`.
pub(super) fn check(auth: &super::AuthConfig, file: &str) -> Result<(), ConfigError> {
    for (index, issuer) in auth.oidc.iter().enumerate() {
        issuer.check(file, index)?;
        if auth.oidc[..index]
            .iter()
            .any(|other| other.issuer == issuer.issuer)
        {
            return Err(ConfigError::Invalid {
                file: file.to_string(),
                path: format!("auth.oidc[{index}].issuer"),
                message: format!("`{}` is listed twice", issuer.issuer),
            });
        }
    }
    for (index, key) in auth.keys.iter().enumerate() {
        if let Some(list) = &key.scopes {
            scopes::parse_all(list.iter().map(String::as_str)).map_err(|error| {
                ConfigError::Invalid {
                    file: file.to_string(),
                    path: format!("auth.keys[{index}].scopes"),
                    message: error.to_string(),
                }
            })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::config::parse_config;

    fn error_of(auth: serde_json::Value) -> String {
        parse_config(json!({"auth": auth}), "a.json")
            .expect_err("invalid")
            .to_string()
    }

    #[test]
    fn issuers_take_defaults_and_bad_ones_are_named_by_path() {
        let config = parse_config(
            json!({"auth": {"oidc": [{"issuer": "https://login.example.com", "audience": "https://agentd.example.com"}]}}),
            "a.json",
        )
        .expect("valid");
        let issuer = &config.auth.oidc[0];
        assert_eq!(
            (issuer.user_claim.as_str(), issuer.scopes_claim.as_str()),
            ("sub", "scope")
        );
        assert_eq!(issuer.admin_scope, "agentd:admin");
        assert!(
            config.auth.is_enforced(),
            "an issuer alone means callers authenticate"
        );
        let bad_url = error_of(json!({"oidc": [{"issuer": "login", "audience": "x"}]}));
        assert!(bad_url.contains("auth.oidc[0].issuer"), "{bad_url}");
        let no_audience =
            error_of(json!({"oidc": [{"issuer": "https://a.example", "audience": " "}]}));
        assert!(
            no_audience.contains("auth.oidc[0].audience"),
            "{no_audience}"
        );
        let twice = error_of(json!({"oidc": [
            {"issuer": "https://a.example", "audience": "x"},
            {"issuer": "https://a.example", "audience": "y"}
        ]}));
        assert!(
            twice.contains("auth.oidc[1].issuer") && twice.contains("twice"),
            "{twice}"
        );
        let scope = error_of(json!({"keys": [{"key": "k", "scopes": ["runs:write"]}]}));
        assert!(
            scope.contains("auth.keys[0].scopes") && scope.contains("runs:write"),
            "{scope}"
        );
    }
}
