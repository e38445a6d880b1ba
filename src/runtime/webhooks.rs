//! Webhooks (SPEC §13): when a run ends, fails, waits for approval or reaches its budget, a
//! message per subscribed receiver (`webhooks` in the config, and the run's own `webhook`) goes
//! into the store's outbox in the Standard Webhooks format; every replica's delivery loop takes
//! due messages under a lease and sends them signed (`webhook-id`, `webhook-timestamp`,
//! `webhook-signature: v1,…`, HMAC-SHA256) through the address guard, retrying with backoff
//! for 24 hours under the same `webhook-id`. A run's messages go into the outbox in the same
//! transaction as its end (or its wait), so a replica that dies in between loses none. The
//! outbox keeps no secret: each message names its [`Signer`], looked up in the config when it
//! is sent.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use chrono::{DateTime, Utc};
use serde_json::json;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use super::Runtime;
use crate::agent::AgentResult;
use crate::config::webhooks::{WebhookConfig, WebhookDelivery, secret_key};
use crate::outbound::{GuardedClient, OutboundPolicy};
use crate::store::{
    AttemptOutcome, Delivery, DeliveryStatus, NewDelivery, NewRun, Signer, StoreError,
};
use crate::vocabulary::{ExitReason, RunStatus};

/// The longest a replica goes without looking for due messages. Messages this replica adds wake
/// it at once and retries are slept to; this bounds how long a message another replica added and
/// left (it died) waits.
const DELIVERY_POLL: Duration = Duration::from_secs(1);
/// Messages one look takes.
const DELIVERY_BATCH: u32 = 20;
/// How long a replica holds a message it is sending before another may take it.
const DELIVERY_LEASE: Duration = Duration::from_secs(120);
/// The waits before each retry (Standard Webhooks' schedule), within [`RETRY_WINDOW_HOURS`].
const RETRY_DELAYS_SECONDS: [i64; 8] = [5, 300, 1800, 7200, 18_000, 36_000, 36_000, 36_000];
/// How long a message is retried before it counts as failed.
const RETRY_WINDOW_HOURS: i64 = 24;
/// The most bytes of a receiver's answer read.
const RECEIVER_ANSWER_BYTES: u64 = 64 * 1024;

/// A webhook event about a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunWebhookEvent {
    Finished,
    Failed,
    WaitingApproval,
    BudgetExceeded,
}

impl RunWebhookEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Finished => "run.finished",
            Self::Failed => "run.failed",
            Self::WaitingApproval => "run.waiting_approval",
            Self::BudgetExceeded => "run.budget_exceeded",
        }
    }

    /// The event a run's end is: a budget reached, a failure, or an end (completed, cancelled).
    pub fn of_end(result: &AgentResult) -> Self {
        match (result.exit_reason, result.status()) {
            (ExitReason::BudgetExceeded, _) => Self::BudgetExceeded,
            (_, RunStatus::Failed) => Self::Failed,
            _ => Self::Finished,
        }
    }
}

/// The id of the Responses API response run `run_id` answers.
pub fn response_id(run_id: &str) -> String {
    format!("resp_{run_id}")
}

/// The `webhook-signature` of a message: `v1,` and base64 of HMAC-SHA256 over
/// `{id}.{timestamp}.{body}` with the secret's key.
pub fn signature(key: &[u8], id: &str, timestamp: i64, body: &str) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, key);
    let signed = format!("{id}.{timestamp}.{body}");
    let tag = ring::hmac::sign(&key, signed.as_bytes());
    format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(tag.as_ref())
    )
}

/// When to try a message again after `attempts` failed ones, or `None` once its window is over.
fn next_attempt(
    created_at: DateTime<Utc>,
    attempts: i64,
    now: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let index = usize::try_from(attempts.saturating_sub(1)).unwrap_or(0);
    let delay = *RETRY_DELAYS_SECONDS.get(index)?;
    let next = now + chrono::Duration::seconds(delay);
    (next <= created_at + chrono::Duration::hours(RETRY_WINDOW_HOURS)).then_some(next)
}

impl Runtime {
    /// The messages about the run for every receiver that takes `event`, and for the run's own
    /// `webhook` URL: stored with the run's end (or its wait), in the same transaction.
    pub(super) fn run_notices(
        &self,
        event: RunWebhookEvent,
        run: &NewRun,
        result: Option<&AgentResult>,
        run_webhook: Option<&str>,
    ) -> Vec<NewDelivery> {
        let body = || {
            json!({
                "type": event.as_str(),
                "timestamp": Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                "data": {
                    "run_id": run.id,
                    "agent": run.agent,
                    "user_id": run.user_id,
                    "conversation_id": run.conversation_id,
                    "status": result.map_or(RunStatus::WaitingApproval.as_str(), |r| r.status().as_str()),
                    "exit_reason": result.map(|r| r.exit_reason.as_str()),
                    "error": result.and_then(|r| r.error.clone()),
                },
            })
            .to_string()
        };
        let about = Subject {
            user_id: run.user_id.as_ref(),
            run_id: Some(&run.id),
        };
        self.deliveries(event.as_str(), body, about, run_webhook)
    }

    /// The message `body` builds addressed to every configured receiver of `event` and to
    /// `own_url` (signed with `webhookDelivery.secret`, which a request's own URL needs); no
    /// secret is kept with them ([`Signer`]). Without a receiver (most runs on most servers)
    /// the message is not built.
    fn deliveries(
        &self,
        event: &str,
        body: impl FnOnce() -> String,
        about: Subject<'_>,
        own_url: Option<&str>,
    ) -> Vec<NewDelivery> {
        let mut receivers: Vec<(String, Signer)> = self
            .config
            .webhooks
            .iter()
            .filter(|w| w.subscribes_to(event))
            .map(|w| (w.url.clone(), Signer::Receiver))
            .collect();
        if let (Some(url), Some(_)) = (own_url, &self.config.webhook_delivery.secret) {
            receivers.push((url.to_string(), Signer::Server));
        }
        if receivers.is_empty() {
            return Vec::new();
        }
        let body = body();
        let now = Utc::now();
        receivers
            .into_iter()
            .map(|(url, signer)| NewDelivery {
                id: format!("msg_{}", uuid::Uuid::now_v7().simple()),
                url,
                signer,
                event: event.to_string(),
                payload: body.clone(),
                user_id: about.user_id.cloned(),
                run_id: about.run_id.cloned(),
                headers: None,
                created_at: now,
            })
            .collect()
    }

    /// Puts messages in the outbox now (those not stored with a run's end or wait).
    async fn enqueue(&self, event: &str, deliveries: &[NewDelivery]) {
        if deliveries.is_empty() {
            return;
        }
        if let Err(error) = self.store.enqueue_deliveries(deliveries).await {
            tracing::error!(%error, %event, "could not put webhook messages in the outbox");
        }
    }

    /// OpenAI's `response.completed` / `response.failed` / `response.cancelled` about a
    /// background response that ended: `{object: "event", id, type, created_at, data: {id}}`,
    /// for the receivers that take it and the response's own `webhook`.
    pub(super) fn response_notices(
        &self,
        run: &NewRun,
        result: &AgentResult,
        own_url: Option<&str>,
    ) -> Vec<NewDelivery> {
        let event = match result.status() {
            RunStatus::Failed => "response.failed",
            RunStatus::Cancelled => "response.cancelled",
            _ => "response.completed",
        };
        let body = || {
            json!({
                "object": "event",
                "id": format!("evt_{}", uuid::Uuid::now_v7().simple()),
                "type": event,
                "created_at": Utc::now().timestamp(),
                "data": {"id": response_id(&run.id)},
            })
            .to_string()
        };
        let about = Subject {
            user_id: run.user_id.as_ref(),
            run_id: Some(&run.id),
        };
        self.deliveries(event, body, about, own_url)
    }

    /// `schedule.failed` about schedule `schedule_id` (its run could not start).
    pub(super) async fn notify_schedule(
        &self,
        schedule_id: &str,
        run: &NewRun,
        error: &str,
        schedule_webhook: Option<&str>,
    ) {
        let event = "schedule.failed";
        let body = || {
            json!({
                "type": event,
                "timestamp": Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                "data": {"schedule_id": schedule_id, "agent": run.agent, "user_id": run.user_id, "error": error},
            })
            .to_string()
        };
        let about = Subject {
            user_id: run.user_id.as_ref(),
            run_id: None,
        };
        let deliveries = self.deliveries(event, body, about, schedule_webhook);
        self.enqueue(event, &deliveries).await;
    }

    /// The signing key of a message, looked up in the config as it is sent.
    fn signing_key(&self, delivery: &Delivery) -> Result<Option<Vec<u8>>, String> {
        let config = &self.config;
        let secret = signing_secret(&config.webhooks, &config.webhook_delivery, delivery)?;
        secret.map(|secret| secret_key(&secret)).transpose()
    }

    /// The client webhooks are sent with: the address guard with `webhookDelivery`'s settings.
    fn webhook_client(&self) -> Option<GuardedClient> {
        let delivery = &self.config.webhook_delivery;
        let policy = OutboundPolicy {
            allow_private: delivery.allow_private_addresses,
            timeout: Duration::from_secs(delivery.timeout_seconds),
            max_bytes: RECEIVER_ANSWER_BYTES,
        };
        match GuardedClient::new(policy) {
            Ok(client) => Some(client),
            Err(error) => {
                warn!(%error, "no webhook client: webhooks are not delivered");
                None
            }
        }
    }

    /// Sends every due message once (those this replica could lease).
    pub(super) async fn deliver_due(&self, client: &GuardedClient) -> Result<usize, StoreError> {
        let now = Utc::now();
        let until = now + chrono::Duration::from_std(DELIVERY_LEASE).unwrap_or_default();
        let due = self
            .store
            .lease_due_deliveries(&self.replica.id, now, until, DELIVERY_BATCH)
            .await?;
        for delivery in &due {
            let outcome = attempt(client, delivery, self.signing_key(delivery)).await;
            self.store
                .record_attempt(&delivery.id, &self.replica.id, &outcome)
                .await?;
        }
        Ok(due.len())
    }
}

/// The secret a message is signed with as it is sent: its [`Signer`]'s, as configured now (a row
/// from before signers were kept carries its own); `None`: sent unsigned.
fn signing_secret(
    webhooks: &[WebhookConfig],
    delivery_config: &WebhookDelivery,
    delivery: &Delivery,
) -> Result<Option<String>, String> {
    Ok(Some(match delivery.signer {
        None if delivery.legacy_secret.is_empty() => return Ok(None),
        None => delivery.legacy_secret.clone(),
        Some(Signer::Unsigned) => return Ok(None),
        Some(Signer::Server) => delivery_config
            .secret
            .clone()
            .ok_or("this server no longer has a `webhookDelivery.secret` to sign with")?,
        Some(Signer::Receiver) => webhooks
            .iter()
            .filter(|w| w.url == delivery.url)
            .max_by_key(|w| w.subscribes_to(&delivery.event))
            .map(|w| w.secret.clone())
            .ok_or("no `webhooks` entry has this URL any more: nothing to sign with")?,
    }))
}

/// Whom a message is about (it is listed to that user, erased with that run).
#[derive(Clone, Copy)]
struct Subject<'a> {
    user_id: Option<&'a String>,
    run_id: Option<&'a String>,
}

/// One attempt at a message signed with `key`, and what comes of it.
async fn attempt(
    client: &GuardedClient,
    delivery: &Delivery,
    key: Result<Option<Vec<u8>>, String>,
) -> AttemptOutcome {
    let now = Utc::now();
    let sent = match key {
        Ok(key) => send(client, delivery, key.as_deref(), now).await,
        Err(error) => Err(error),
    };
    let attempts = delivery.attempts + 1;
    let (http_status, error) = match sent {
        Ok(status) if (200..300).contains(&status) => {
            return AttemptOutcome {
                status: DeliveryStatus::Delivered,
                next_attempt_at: now,
                http_status: Some(i64::from(status)),
                error: None,
                at: now,
            };
        }
        Ok(status) => (
            Some(i64::from(status)),
            Some(format!("the receiver answered {status}")),
        ),
        Err(error) => (None, Some(error)),
    };
    let next = next_attempt(delivery.created_at, attempts, now);
    AttemptOutcome {
        status: if next.is_some() {
            DeliveryStatus::Pending
        } else {
            DeliveryStatus::Failed
        },
        next_attempt_at: next.unwrap_or(now),
        http_status,
        error,
        at: now,
    }
}

/// POSTs the message, signed with `key` when there is one, with its own extra headers; the
/// receiver's HTTP status, or why none came.
async fn send(
    client: &GuardedClient,
    delivery: &Delivery,
    key: Option<&[u8]>,
    now: DateTime<Utc>,
) -> Result<u16, String> {
    let timestamp = now.timestamp();
    let mut request = client
        .request(reqwest::Method::POST, &delivery.url)
        .map_err(|e| e.to_string())?
        .header("content-type", "application/json")
        .header("webhook-id", &delivery.id)
        .header("webhook-timestamp", timestamp.to_string());
    if let Some(key) = key {
        request = request.header(
            "webhook-signature",
            signature(key, &delivery.id, timestamp, &delivery.payload),
        );
    }
    for (name, value) in extra_headers(delivery.headers.as_deref())? {
        request = request.header(name, value);
    }
    let response = client
        .send(request.body(delivery.payload.clone()))
        .await
        .map_err(|e| e.to_string())?;
    Ok(response.status().as_u16())
}

/// A message's stored extra headers (a JSON object of strings).
fn extra_headers(stored: Option<&str>) -> Result<Vec<(String, String)>, String> {
    let Some(stored) = stored else {
        return Ok(Vec::new());
    };
    let headers: std::collections::BTreeMap<String, String> = serde_json::from_str(stored)
        .map_err(|error| format!("the message's stored headers are unreadable: {error}"))?;
    Ok(headers.into_iter().collect())
}

/// Delivers due messages until `stop`: sleeps until the next is due (looking again at least
/// every [`DELIVERY_POLL`]) or this replica adds one, then sends what it can lease. Nothing is
/// leased (a write) while nothing is due.
pub(super) async fn deliver_forever(runtime: Arc<Runtime>, stop: CancellationToken) {
    let Some(client) = runtime.webhook_client() else {
        return;
    };
    loop {
        let wait = runtime.until_next_delivery().await;
        if !wait.is_zero() {
            tokio::select! {
                _ = stop.cancelled() => return,
                _ = runtime.store.delivery_wakeup().notified() => {}
                // Due now, or another look: a message may have come from another replica.
                _ = tokio::time::sleep(wait) => continue,
            }
        }
        match runtime.deliver_due(&client).await {
            // A full batch: more may be due, look again at once.
            Ok(sent) if sent == DELIVERY_BATCH as usize => continue,
            // Due, yet none to lease (another replica took them): no second look at once.
            Ok(0) => {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = runtime.store.delivery_wakeup().notified() => {}
                    _ = tokio::time::sleep(DELIVERY_POLL) => {}
                }
            }
            Ok(_) => {}
            Err(error) => {
                warn!(%error, "webhook delivery failed; trying again shortly");
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(DELIVERY_POLL) => {}
                }
            }
        }
    }
}

impl Runtime {
    /// How long until the next message is due, at most [`DELIVERY_POLL`] (also when the store
    /// cannot say).
    async fn until_next_delivery(&self) -> Duration {
        match self.store.next_delivery_due().await {
            Ok(Some(due)) => (due - Utc::now())
                .to_std()
                .unwrap_or(Duration::ZERO)
                .min(DELIVERY_POLL),
            Ok(None) => DELIVERY_POLL,
            Err(error) => {
                warn!(%error, "could not read when the next webhook is due");
                DELIVERY_POLL
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Standard Webhooks specification's own example.
    #[test]
    fn signatures_match_the_standard_webhooks_example() {
        let key = secret_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").expect("key");
        let signed = signature(
            &key,
            "msg_p5jXN8AQM9LWM0D4loKWxJek",
            1_614_265_330,
            r#"{"test": 2432232314}"#,
        );
        assert_eq!(signed, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
    }

    fn row(signer: Option<Signer>, legacy_secret: &str) -> Delivery {
        let now = Utc::now();
        Delivery {
            id: "msg_1".into(),
            url: "https://example.com/b".into(),
            signer,
            legacy_secret: legacy_secret.into(),
            event: "run.failed".into(),
            payload: "{}".into(),
            user_id: None,
            run_id: None,
            headers: None,
            status: DeliveryStatus::Pending,
            attempts: 0,
            next_attempt_at: now,
            last_status: None,
            last_error: None,
            created_at: now,
            delivered_at: None,
        }
    }

    /// The outbox keeps no secret: a message is signed with the one configured when it is sent
    /// (a rotated secret signs the retries), and a row from before keeps its own.
    #[test]
    fn messages_are_signed_with_the_secret_configured_when_they_are_sent() {
        let receiver = |url: &str, events: &[&str], secret: &str| WebhookConfig {
            url: url.into(),
            events: events.iter().map(|e| e.to_string()).collect(),
            secret: secret.into(),
        };
        let webhooks = [
            receiver("https://example.com/a", &[], "whsec_a"),
            receiver("https://example.com/b", &["run.finished"], "whsec_b1"),
            receiver("https://example.com/b", &["run.failed"], "whsec_b2"),
        ];
        let delivery = WebhookDelivery {
            secret: Some("whsec_server".into()),
            ..WebhookDelivery::default()
        };
        let secret = |row: &Delivery| signing_secret(&webhooks, &delivery, row);
        assert_eq!(
            secret(&row(Some(Signer::Receiver), "")),
            Ok(Some("whsec_b2".into())),
            "the entry of its URL that takes its event"
        );
        assert_eq!(
            secret(&row(Some(Signer::Server), "")),
            Ok(Some("whsec_server".into()))
        );
        assert_eq!(secret(&row(Some(Signer::Unsigned), "")), Ok(None));
        assert_eq!(
            secret(&row(None, "whsec_legacy")),
            Ok(Some("whsec_legacy".into())),
            "a row from before signers keeps its secret"
        );
        assert_eq!(secret(&row(None, "")), Ok(None));
        let gone = signing_secret(
            &[],
            &WebhookDelivery::default(),
            &row(Some(Signer::Server), ""),
        );
        assert!(gone.is_err(), "{gone:?}");
    }

    #[test]
    fn retries_back_off_and_stop_after_a_day() {
        let created = Utc::now();
        let first = next_attempt(created, 1, created).expect("retried");
        assert_eq!((first - created).num_seconds(), 5);
        let late = created + chrono::Duration::hours(20);
        assert_eq!(next_attempt(created, 6, late), None, "past the day");
        assert_eq!(next_attempt(created, 9, created), None, "out of retries");
    }
}
