//! Who a tool call is made for, and the placeholders that depend on it: `${caller.userId}` (the
//! run's user) and `${caller.secret.NAME}` (a secret that user stored with
//! `PUT /api/{user_id}/secrets/NAME`). They may stand in REST tool and OpenAPI `headers`, the
//! REST tool `url` (the user id only: a URL ends up in error messages) and the `headers` of MCP
//! servers over HTTP. A call is resolved before anything is sent: without a user, with secrets
//! not configured or with a secret the user has not set, the call fails naming what is missing
//! and the tool is never called.
//!
//! This module never decrypts or stores anything: the [`SecretSource`] it is given does.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use secrecy::{ExposeSecret, SecretString};

pub use crate::config::caller::{
    Placeholder, check_template, parse, placeholders, uses_caller, uses_secret,
};

const OPEN: &str = "${caller.";

/// Reads a user's secrets in the clear for one tool call.
#[async_trait]
pub trait SecretSource: Send + Sync {
    /// The user's secret `name`; `None` when the user has not set it.
    async fn secret(&self, user_id: &str, name: &str) -> Result<Option<SecretString>, String>;
}

/// The caller of one tool call: the run's user, and where that user's secrets are read.
#[derive(Clone, Default)]
pub struct ToolCaller {
    pub user_id: Option<String>,
    /// `None` when this server has no `secrets.key`.
    pub secrets: Option<Arc<dyn SecretSource>>,
}

impl std::fmt::Debug for ToolCaller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolCaller")
            .field("user_id", &self.user_id)
            .field("secrets", &self.secrets.is_some())
            .finish()
    }
}

/// Why a call's caller placeholders could not be resolved; the message is what the model sees
/// as `(tool failed: …)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallerError {
    #[error(
        "this tool is called on behalf of a user (it uses {placeholder}), and this run has no user: run it for a user (POST /api/{{user_id}}/chat, a key bound to the user, or an admin key with the header `x-agentd-user: USER` or, on the OpenAI endpoints, the `user` field)"
    )]
    NoUser { placeholder: String },
    #[error(
        "the secret {name} cannot be read: user secrets are not configured on this server (`secrets.key`)"
    )]
    NotConfigured { name: String },
    #[error("the secret {name} is not set for this user: PUT /api/{user_id}/secrets/{name}")]
    Missing { name: String, user_id: String },
    #[error("the secret {name} could not be read: {detail}")]
    Unreadable { name: String, detail: String },
    #[error("malformed caller placeholder: {0}")]
    Malformed(String),
}

/// The caller placeholders of a call, resolved: values by placeholder.
#[derive(Default)]
pub struct Resolved(BTreeMap<Placeholder, SecretString>);

impl Resolved {
    /// The value of `${caller.<inner>}` (`inner` without the `caller.` prefix).
    pub(crate) fn get(&self, inner: &str) -> Option<&str> {
        let placeholder = parse(inner).ok()?;
        self.0.get(&placeholder).map(|v| v.expose_secret())
    }

    /// Whether any secret was resolved (such a header is marked sensitive).
    pub fn has_secrets(&self) -> bool {
        self.0.keys().any(|p| matches!(p, Placeholder::Secret(_)))
    }

    /// Values given directly, for tests of the renderers.
    #[cfg(test)]
    pub(crate) fn of(user_id: &str, secrets: &[(&str, &str)]) -> Self {
        let mut values = BTreeMap::new();
        values.insert(Placeholder::UserId, SecretString::from(user_id.to_string()));
        for (name, value) in secrets {
            values.insert(
                Placeholder::Secret((*name).to_string()),
                SecretString::from((*value).to_string()),
            );
        }
        Self(values)
    }
}

impl ToolCaller {
    /// A caller with neither user nor secrets (the CLI's tool calls, the MCP headend).
    pub fn anonymous() -> Self {
        Self::default()
    }

    /// Resolves every caller placeholder of `templates`; the first one that cannot be
    /// resolved is the error.
    pub async fn resolve<'a>(
        &self,
        templates: impl IntoIterator<Item = &'a str>,
    ) -> Result<Resolved, CallerError> {
        let mut wanted = Vec::new();
        for template in templates {
            wanted.extend(placeholders(template).map_err(CallerError::Malformed)?);
        }
        wanted.sort();
        wanted.dedup();
        let mut resolved = Resolved::default();
        for placeholder in wanted {
            let value = self.value_of(&placeholder).await?;
            resolved.0.insert(placeholder, value);
        }
        Ok(resolved)
    }

    async fn value_of(&self, placeholder: &Placeholder) -> Result<SecretString, CallerError> {
        let user_id = self.user_id.as_deref().ok_or_else(|| CallerError::NoUser {
            placeholder: match placeholder {
                Placeholder::UserId => "${caller.userId}".to_string(),
                Placeholder::Secret(name) => format!("${{caller.secret.{name}}}"),
            },
        })?;
        let name = match placeholder {
            Placeholder::UserId => return Ok(SecretString::from(user_id.to_string())),
            Placeholder::Secret(name) => name,
        };
        let secrets = self
            .secrets
            .as_ref()
            .ok_or_else(|| CallerError::NotConfigured { name: name.clone() })?;
        match secrets.secret(user_id, name).await {
            Ok(Some(value)) => Ok(value),
            Ok(None) => Err(CallerError::Missing {
                name: name.clone(),
                user_id: user_id.to_string(),
            }),
            Err(detail) => Err(CallerError::Unreadable {
                name: name.clone(),
                detail,
            }),
        }
    }
}

/// `template` with its caller placeholders replaced by their resolved values, each passed
/// through `encode` (the identity in headers, percent-encoding in a URL). Other `${…}` text is
/// left as it is.
pub fn render(
    template: &str,
    resolved: &Resolved,
    encode: impl Fn(&str) -> String,
) -> Result<String, CallerError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find(OPEN) {
        out.push_str(&rest[..start]);
        let after = &rest[start + OPEN.len()..];
        let end = after
            .find('}')
            .ok_or_else(|| CallerError::Malformed(format!("unterminated `{OPEN}`")))?;
        let value = resolved
            .get(&after[..end])
            .ok_or_else(|| CallerError::Malformed(format!("`{OPEN}{}}}`", &after[..end])))?;
        out.push_str(&encode(value));
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;

    /// Secrets of `alice` only; counts reads.
    #[derive(Default)]
    struct AliceSecrets(Mutex<u32>);

    #[async_trait]
    impl SecretSource for AliceSecrets {
        async fn secret(&self, user_id: &str, name: &str) -> Result<Option<SecretString>, String> {
            *self.0.lock().map_err(|e| e.to_string())? += 1;
            Ok((user_id == "alice" && name == "TOKEN").then(|| SecretString::from("s3cret")))
        }
    }

    fn caller(user: Option<&str>, secrets: Option<Arc<dyn SecretSource>>) -> ToolCaller {
        ToolCaller {
            user_id: user.map(str::to_string),
            secrets,
        }
    }

    #[tokio::test]
    async fn user_and_secret_placeholders_are_resolved_once_each() {
        let source = Arc::new(AliceSecrets::default());
        let alice = caller(Some("alice"), Some(source.clone()));
        let templates = [
            "Bearer ${caller.secret.TOKEN}",
            "${caller.secret.TOKEN}/${caller.userId}",
        ];
        let resolved = alice.resolve(templates).await.expect("resolved");
        assert!(resolved.has_secrets());
        assert_eq!(*source.0.lock().expect("count"), 1, "one read per secret");
        assert_eq!(
            render(templates[0], &resolved, str::to_string).expect("rendered"),
            "Bearer s3cret"
        );
        assert_eq!(
            render(
                "${caller.secret.TOKEN}/${caller.userId} ${HOME}",
                &resolved,
                str::to_string
            )
            .expect("rendered"),
            "s3cret/alice ${HOME}"
        );
    }

    #[tokio::test]
    async fn what_is_missing_is_named() {
        let source: Arc<dyn SecretSource> = Arc::new(AliceSecrets::default());
        let bob = caller(Some("bob"), Some(source.clone()));
        let error = bob
            .resolve(["Bearer ${caller.secret.TOKEN}"])
            .await
            .err()
            .expect("missing");
        assert_eq!(
            error.to_string(),
            "the secret TOKEN is not set for this user: PUT /api/bob/secrets/TOKEN"
        );
        let nobody = caller(None, Some(source));
        let error = nobody
            .resolve(["${caller.userId}"])
            .await
            .err()
            .expect("no user");
        assert!(error.to_string().contains("${caller.userId}"), "{error}");
        let unconfigured = caller(Some("alice"), None);
        let error = unconfigured
            .resolve(["${caller.secret.TOKEN}"])
            .await
            .err()
            .expect("not configured");
        assert!(error.to_string().contains("secrets.key"), "{error}");
        assert!(
            unconfigured.resolve(["${caller.userId}"]).await.is_ok(),
            "the user id needs no key"
        );
    }

    #[test]
    fn templates_are_checked_at_load() {
        // The syntax lives in `config::caller`; checked here through the re-exports.
        assert!(check_template("Bearer ${caller.secret.GITHUB_TOKEN}", true).is_ok());
        assert!(check_template("x ${caller.userId} ${parameters.q}", false).is_ok());
        let error = check_template("${caller.secret.T}", false).expect_err("not in a url");
        assert!(error.contains("headers"), "{error}");
        assert!(check_template("${caller.email}", true).is_err());
        assert!(check_template("${caller.secret.bad name}", true).is_err());
        assert!(check_template(&format!("${{caller.secret.{}}}", "a".repeat(65)), true).is_err());
        assert!(check_template("${caller.userId", true).is_err());
        assert!(uses_caller("a ${caller.userId}") && !uses_caller("${parameters.x}"));
    }
}
