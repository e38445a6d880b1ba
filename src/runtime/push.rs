//! A2A push notifications (SPEC §13): when a task (a run) that has push-notification configs
//! ends or starts waiting for a person, one message per config goes into the webhook outbox,
//! with the config's token as `X-A2A-Notification-Token` (and its `Authorization`), so any
//! replica delivers it through the address guard and retries it like every webhook. The body
//! is the task as the A2A headend spells it: the headend registers that translation
//! ([`TaskRenderer`]) and the runtime only decides when and to whom.
//!
//! A message's id is derived from the task, the config and the state, so the run's end and a
//! config set a moment later (each looks at the other) put in one message, never two.

use std::collections::BTreeMap;

use chrono::Utc;
use sha2::{Digest, Sha256};

use super::Runtime;
use crate::store::{NewDelivery, PushConfig, RunRecord, Signer};
use crate::vocabulary::RunStatus;

/// The event name push notifications are listed under in `GET /v1/webhooks/deliveries`.
pub const PUSH_EVENT: &str = "a2a.task";

/// Renders a task's notification body in a config's revision (`1.0`, `0.3`).
pub type TaskRenderer = fn(&RunRecord, &str) -> String;

/// Whether a task in `status` is announced: ended, or waiting for a person.
fn announced(status: RunStatus) -> bool {
    !matches!(status, RunStatus::Queued | RunStatus::Running)
}

/// The message id of `config`'s notice of the run as it is now. `wait` tells the waits of one
/// run apart (the calls it waits for): a waiting run's stored row does not count its turns yet,
/// so without it a second wait would share the first one's id and its notice be dropped.
fn message_id(config: &PushConfig, run: &RunRecord, wait: &str) -> String {
    let mut hash = Sha256::new();
    for part in [
        run.id.as_str(),
        config.owner.as_str(),
        config.id.as_str(),
        run.status.as_str(),
        &run.turns.to_string(),
        wait,
    ] {
        hash.update(part.as_bytes());
        hash.update([0]);
    }
    let digest = hash.finalize();
    let hex: String = digest[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("msg_{hex}")
}

/// The extra headers of `config`'s notices, as stored with each message.
fn headers(config: &PushConfig) -> Option<String> {
    let mut headers = BTreeMap::new();
    if let Some(token) = config.token.as_deref().filter(|t| !t.is_empty()) {
        headers.insert("X-A2A-Notification-Token", token.to_string());
    }
    if let (Some(scheme), Some(credentials)) = (&config.auth_scheme, &config.auth_credentials) {
        headers.insert("Authorization", format!("{scheme} {credentials}"));
    }
    (!headers.is_empty()).then(|| serde_json::to_string(&headers).unwrap_or_default())
}

/// The calls a task waits for, as one part of its notice's id: sorted, comma-separated.
pub(super) fn wait_name(calls: impl IntoIterator<Item = String>) -> String {
    let mut calls: Vec<String> = calls.into_iter().collect();
    calls.sort();
    calls.join(",")
}

impl Runtime {
    /// Registers how tasks are spelled in push notifications (the A2A headend does, once).
    pub fn set_task_renderer(&self, renderer: TaskRenderer) {
        let _ = self.task_renderer.set(renderer);
    }

    /// Puts a notice of the task's state in the outbox for each of its push-notification
    /// configs, if the task has ended or waits for a person; at most once per config and state.
    pub async fn push_task_state(&self, run_id: &str) {
        let run = match self.store.get_run(run_id).await {
            Ok(Some(run)) => run,
            Ok(None) => return,
            Err(error) => {
                tracing::error!(%error, %run_id, "could not read the task to announce it");
                return;
            }
        };
        let deliveries = self.push_notices(&run).await;
        if deliveries.is_empty() {
            return;
        }
        if let Err(error) = self.store.enqueue_deliveries(&deliveries).await {
            tracing::error!(%error, %run_id, "could not put push notifications in the outbox");
        }
    }

    /// The notices of `run` as it is (or, at its end, is about to be stored) for each of its
    /// push-notification configs: none unless it has ended or waits for a person. A run's end
    /// puts them in the outbox in the transaction that stores it.
    pub(super) async fn push_notices(&self, run: &RunRecord) -> Vec<NewDelivery> {
        if self.task_renderer.get().is_none() || !announced(run.status) {
            return Vec::new();
        }
        let wait = match self.wait_of(run).await {
            Ok(wait) => wait,
            Err(error) => {
                let run_id = &run.id;
                tracing::error!(%error, %run_id, "could not read the calls the task waits for");
                return Vec::new();
            }
        };
        self.push_notices_of_wait(run, &wait).await
    }

    /// The notices of `run` as it is about to be stored (`wait`: the calls it waits for, as
    /// [`wait_name`] spells them), for the transaction that stores it.
    pub(super) async fn push_notices_of_wait(
        &self,
        run: &RunRecord,
        wait: &str,
    ) -> Vec<NewDelivery> {
        let Some(render) = self.task_renderer.get().copied() else {
            return Vec::new();
        };
        if !announced(run.status) {
            return Vec::new();
        }
        let configs = match self.store.list_push_configs(&run.id, None).await {
            Ok(configs) => configs,
            Err(error) => {
                let run_id = &run.id;
                tracing::error!(%error, %run_id, "could not read the task's push-notification configs");
                return Vec::new();
            }
        };
        let signer = if self.config.webhook_delivery.secret.is_some() {
            Signer::Server
        } else {
            Signer::Unsigned
        };
        let now = Utc::now();
        configs
            .iter()
            .map(|config| NewDelivery {
                id: message_id(config, run, wait),
                url: config.url.clone(),
                signer,
                event: PUSH_EVENT.to_string(),
                payload: render(run, &config.dialect),
                user_id: Some(config.owner.clone()),
                run_id: Some(run.id.clone()),
                headers: headers(config),
                created_at: now,
            })
            .collect()
    }

    /// What tells this wait of `run` from its others: the calls it waits for, in order; empty
    /// for a run that does not wait for approvals.
    async fn wait_of(&self, run: &RunRecord) -> Result<String, crate::store::StoreError> {
        if run.status != RunStatus::WaitingApproval {
            return Ok(String::new());
        }
        let calls = self
            .pending_approvals(&run.id)
            .await?
            .into_iter()
            .map(|approval| approval.call_id);
        Ok(wait_name(calls))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn waiting_run() -> RunRecord {
        RunRecord {
            user_id: Some("alice".into()),
            ..RunRecord::new("run-1", "approver", RunStatus::WaitingApproval)
        }
    }

    fn config() -> PushConfig {
        PushConfig {
            id: "c1".into(),
            task_id: "run-1".into(),
            owner: "user:alice".into(),
            url: "https://hooks.example.com/a2a".into(),
            token: None,
            auth_scheme: None,
            auth_credentials: None,
            dialect: "1.0".into(),
            created_at: Utc::now(),
        }
    }

    #[test]
    fn two_waits_of_one_run_are_two_messages_and_one_wait_is_one() {
        let (run, config) = (waiting_run(), config());
        let first = message_id(&config, &run, "call-1");
        assert_eq!(
            first,
            message_id(&config, &run, "call-1"),
            "the same wait: one message"
        );
        assert_ne!(
            first,
            message_id(&config, &run, "call-2"),
            "a later wait: its own message"
        );
    }
}
