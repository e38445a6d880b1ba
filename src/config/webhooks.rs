//! `webhooks` (SPEC §13): receivers told when runs finish, fail, wait for approval or reach
//! their budget, each with the events it subscribes to and the `whsec_…` secret its messages are
//! signed with (Standard Webhooks); and `webhookDelivery`: how they are reached.

use base64::Engine;
use serde::Deserialize;

/// The events a receiver may subscribe to.
pub const WEBHOOK_EVENTS: [&str; 8] = [
    "run.finished",
    "run.failed",
    "run.waiting_approval",
    "run.budget_exceeded",
    "schedule.failed",
    // A background response's end, named as OpenAI's webhooks name it.
    "response.completed",
    "response.failed",
    "response.cancelled",
];

/// The prefix of a Standard Webhooks secret.
pub const SECRET_PREFIX: &str = "whsec_";

/// One `webhooks[]` entry.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WebhookConfig {
    pub url: String,
    /// The events sent to it; every event when empty.
    #[serde(default)]
    pub events: Vec<String>,
    /// `whsec_` and base64 of the signing key.
    pub secret: String,
}

impl WebhookConfig {
    /// Whether this receiver takes `event`.
    pub fn subscribes_to(&self, event: &str) -> bool {
        self.events.is_empty() || self.events.iter().any(|e| e == event)
    }
}

/// `webhookDelivery`: how receivers are reached.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct WebhookDelivery {
    /// Let receivers be on loopback, private or link-local addresses (tests, trusted nets).
    pub allow_private_addresses: bool,
    /// One attempt's limit, in seconds.
    pub timeout_seconds: u64,
    /// The secret per-run, response and schedule webhooks (`webhook: {url}`) are signed with;
    /// without it such webhooks are refused (400 naming `webhook`).
    pub secret: Option<String>,
}

impl Default for WebhookDelivery {
    fn default() -> Self {
        Self {
            allow_private_addresses: false,
            timeout_seconds: 10,
            secret: None,
        }
    }
}

/// The signing key a `whsec_…` secret holds, or why it holds none.
pub fn secret_key(secret: &str) -> Result<Vec<u8>, String> {
    let encoded = secret
        .strip_prefix(SECRET_PREFIX)
        .ok_or_else(|| format!("must start with `{SECRET_PREFIX}`"))?;
    let key = base64::engine::general_purpose::STANDARD
        .decode(encoded)
        .map_err(|_| format!("must be `{SECRET_PREFIX}` followed by base64"))?;
    if key.len() < 24 {
        return Err("its key must be at least 24 bytes (Standard Webhooks)".into());
    }
    Ok(key)
}

/// Checks every receiver: a URL, known events, a usable secret; `(path, message)` of the first
/// problem.
pub fn check(
    webhooks: &[WebhookConfig],
    delivery: &WebhookDelivery,
) -> Result<(), (String, String)> {
    for (index, webhook) in webhooks.iter().enumerate() {
        if reqwest::Url::parse(&webhook.url).is_err() {
            return Err((format!("webhooks[{index}].url"), "is not a URL".into()));
        }
        if let Some(unknown) = webhook
            .events
            .iter()
            .find(|e| !WEBHOOK_EVENTS.contains(&e.as_str()))
        {
            return Err((
                format!("webhooks[{index}].events"),
                format!("{unknown:?} is not one of {}", WEBHOOK_EVENTS.join(", ")),
            ));
        }
        secret_key(&webhook.secret).map_err(|m| (format!("webhooks[{index}].secret"), m))?;
    }
    if let Some(secret) = &delivery.secret {
        secret_key(secret).map_err(|m| ("webhookDelivery.secret".to_string(), m))?;
    }
    if delivery.timeout_seconds == 0 {
        return Err((
            "webhookDelivery.timeoutSeconds".into(),
            "must be at least 1".into(),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receiver(events: &[&str], secret: &str) -> WebhookConfig {
        WebhookConfig {
            url: "https://example.com/hook".into(),
            events: events.iter().map(|e| e.to_string()).collect(),
            secret: secret.into(),
        }
    }

    const GOOD: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

    #[test]
    fn receivers_are_checked_naming_the_field() {
        let delivery = WebhookDelivery::default();
        assert_eq!(
            check(&[receiver(&["run.finished"], GOOD)], &delivery),
            Ok(())
        );
        let bad_event = check(&[receiver(&["run.done"], GOOD)], &delivery).expect_err("event");
        assert_eq!(bad_event.0, "webhooks[0].events");
        let bad_secret =
            check(&[receiver(&[], "MfKQ9r8GKYqrTwjU")], &delivery).expect_err("secret");
        assert_eq!(bad_secret.0, "webhooks[0].secret");
        let short = check(&[receiver(&[], "whsec_c2hvcnQ=")], &delivery).expect_err("short");
        assert!(short.1.contains("24 bytes"), "{short:?}");
    }

    #[test]
    fn an_empty_event_list_takes_every_event() {
        assert!(receiver(&[], GOOD).subscribes_to("run.failed"));
        assert!(!receiver(&["run.finished"], GOOD).subscribes_to("run.failed"));
    }
}
