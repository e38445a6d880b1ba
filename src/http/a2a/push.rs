//! A2A push-notification configs (SPEC §13): `CreateTaskPushNotificationConfig`,
//! `GetTaskPushNotificationConfig`, `ListTaskPushNotificationConfigs`,
//! `DeleteTaskPushNotificationConfig` (0.3: `tasks/pushNotificationConfig/set|get|list|delete`)
//! and the config a message carries in its `configuration`. A config belongs to the task and to
//! the caller that set it: another caller, even one that may see the task, never reads, lists or
//! deletes it. The runtime delivers the notifications ([`Runtime::push_task_state`]); this
//! module only reads and spells configs, and spells the task a notification carries.

use serde::Deserialize;
use serde_json::{Value, json};

use super::wire::Dialect;
use super::{RpcError, code, tasks};
use crate::http::auth::Caller;
use crate::outbound::{GuardedClient, OutboundPolicy};
use crate::runtime::Runtime;
use crate::store::{PushConfig, RunRecord};

/// The most configs one caller may set on one task.
pub const MAX_CONFIGS_PER_TASK: usize = 10;
/// The longest URL, token or credentials a config takes.
const MAX_URL_CHARS: usize = 2048;
const MAX_SECRET_CHARS: usize = 1024;

/// Authentication of the receiver (v1.0: `{scheme, credentials}`; 0.3: `{schemes, credentials}`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Authentication {
    #[serde(default)]
    pub scheme: Option<String>,
    #[serde(default)]
    pub schemes: Vec<String>,
    #[serde(default)]
    pub credentials: Option<String>,
}

/// A push-notification config as a client sends it (v1.0 `TaskPushNotificationConfig` without
/// `taskId`, or 0.3 `PushNotificationConfig`).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct IncomingConfig {
    #[serde(default)]
    pub id: Option<String>,
    pub url: String,
    #[serde(default)]
    pub token: Option<String>,
    #[serde(default)]
    pub authentication: Option<Authentication>,
}

/// v1.0 `CreateTaskPushNotificationConfig` parameters: the config with its `taskId`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateParams {
    pub task_id: String,
    #[serde(flatten)]
    pub config: IncomingConfig,
}

/// 0.3 `tasks/pushNotificationConfig/set` parameters.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetParams {
    pub task_id: String,
    pub push_notification_config: IncomingConfig,
}

/// Get and delete: v1.0 `{taskId, id}`, 0.3 `{id, pushNotificationConfigId}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigRef {
    #[serde(default)]
    pub task_id: Option<String>,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub push_notification_config_id: Option<String>,
}

impl ConfigRef {
    /// The task and config named, in the request's revision; an absent config id is the task's
    /// own (the id a config set without one gets).
    pub(super) fn names(self, dialect: Dialect) -> Result<(String, String), RpcError> {
        let (task, config) = match dialect {
            Dialect::V1 => (self.task_id, self.id),
            Dialect::V03 => (self.id, self.push_notification_config_id),
        };
        let field = match dialect {
            Dialect::V1 => "params.taskId",
            Dialect::V03 => "params.id",
        };
        let task = task
            .filter(|t| !t.is_empty())
            .ok_or_else(|| RpcError::new(code::INVALID_PARAMS, format!("{field}: missing")))?;
        let config = config
            .filter(|c| !c.is_empty())
            .unwrap_or_else(|| task.clone());
        Ok((task, config))
    }
}

/// List: v1.0 `{taskId, pageSize?, pageToken?}`, 0.3 `{id}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListParams {
    #[serde(default)]
    pub task_id: Option<String>,
    #[serde(default)]
    pub id: Option<String>,
}

fn dialect_name(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::V1 => "1.0",
        Dialect::V03 => "0.3",
    }
}

/// Who owns the configs this caller sets.
pub fn owner(caller: &Caller) -> String {
    caller
        .owner()
        .unwrap_or_else(|| super::KEYLESS_A2A_USER.to_string())
}

fn too_long(field: &str, text: Option<&str>, max: usize) -> Result<(), RpcError> {
    match text {
        Some(text) if text.chars().count() > max => Err(RpcError::new(
            code::INVALID_PARAMS,
            format!("{field}: at most {max} characters"),
        )),
        _ => Ok(()),
    }
}

/// The config to store for `task_id`, once its URL passes the address guard; `field` names the
/// config in the request (`params`, `params.configuration.pushNotificationConfig`, …).
pub(super) fn checked(
    runtime: &Runtime,
    caller: &Caller,
    task_id: &str,
    config: IncomingConfig,
    dialect: Dialect,
    field: &str,
) -> Result<PushConfig, RpcError> {
    too_long(&format!("{field}.url"), Some(&config.url), MAX_URL_CHARS)?;
    too_long(
        &format!("{field}.token"),
        config.token.as_deref(),
        MAX_SECRET_CHARS,
    )?;
    let auth = config.authentication.unwrap_or_default();
    let scheme = auth.scheme.or_else(|| auth.schemes.first().cloned());
    too_long(
        &format!("{field}.authentication.credentials"),
        auth.credentials.as_deref(),
        MAX_SECRET_CHARS,
    )?;
    let delivery = &runtime.config().webhook_delivery;
    let policy = OutboundPolicy {
        allow_private: delivery.allow_private_addresses,
        timeout: std::time::Duration::from_secs(delivery.timeout_seconds),
        max_bytes: 0,
    };
    let guard = GuardedClient::new(policy)
        .map_err(|_| RpcError::new(code::INTERNAL, "no client to check the URL with"))?;
    guard
        .check_url(&config.url)
        .map_err(|error| RpcError::new(code::INVALID_PARAMS, format!("{field}.url: {error}")))?;
    let id = config
        .id
        .filter(|id| !id.is_empty())
        .unwrap_or_else(|| task_id.to_string());
    too_long(&format!("{field}.id"), Some(&id), MAX_URL_CHARS)?;
    Ok(PushConfig {
        task_id: task_id.to_string(),
        owner: owner(caller),
        id,
        url: config.url,
        token: config.token.filter(|t| !t.is_empty()),
        auth_scheme: scheme.filter(|s| !s.is_empty()),
        auth_credentials: auth.credentials.filter(|c| !c.is_empty()),
        dialect: dialect_name(dialect).to_string(),
        created_at: chrono::Utc::now(),
    })
}

/// A message's config, checked before its task starts.
pub struct PendingConfig {
    pub config: PushConfig,
    /// Whether the client named the config (else it takes the task's id).
    pub explicit_id: bool,
}

/// Stores the config (at most [`MAX_CONFIGS_PER_TASK`] per caller and task), then lets the
/// runtime announce the task at once if it has already ended or waits.
pub(super) async fn store(runtime: &Runtime, config: &PushConfig) -> Result<(), RpcError> {
    let unreadable = |_| {
        RpcError::new(
            code::INTERNAL,
            "the push-notification configs could not be read",
        )
    };
    let existing = runtime
        .push_configs(&config.task_id, &config.owner)
        .await
        .map_err(unreadable)?;
    let replaces = existing.iter().any(|c| c.id == config.id);
    if !replaces && existing.len() >= MAX_CONFIGS_PER_TASK {
        return Err(RpcError::new(
            code::INVALID_PARAMS,
            format!(
                "params: a task takes at most {MAX_CONFIGS_PER_TASK} push-notification configs per caller; delete one first"
            ),
        ));
    }
    runtime.save_push_config(config).await.map_err(|_| {
        RpcError::new(
            code::INTERNAL,
            "the push-notification config could not be stored",
        )
    })?;
    runtime.push_task_state(&config.task_id).await;
    Ok(())
}

/// A config as the revision spells it: v1.0 `TaskPushNotificationConfig`, 0.3
/// `{taskId, pushNotificationConfig}`. Credentials are never echoed.
pub fn to_json(config: &PushConfig, dialect: Dialect) -> Value {
    let mut inner = json!({"id": config.id, "url": config.url});
    if let Some(token) = &config.token {
        inner["token"] = json!(token);
    }
    if let Some(scheme) = &config.auth_scheme {
        inner["authentication"] = match dialect {
            Dialect::V1 => json!({"scheme": scheme}),
            Dialect::V03 => json!({"schemes": [scheme]}),
        };
    }
    match dialect {
        Dialect::V1 => {
            inner["taskId"] = json!(config.task_id);
            inner
        }
        Dialect::V03 => json!({"taskId": config.task_id, "pushNotificationConfig": inner}),
    }
}

/// The caller's config the reference names, or "not found" naming it.
pub(super) async fn find(
    runtime: &Runtime,
    caller: &Caller,
    task_id: &str,
    id: &str,
) -> Result<PushConfig, RpcError> {
    runtime
        .push_config(task_id, &owner(caller), id)
        .await
        .map_err(|_| {
            RpcError::new(
                code::INTERNAL,
                "the push-notification config could not be read",
            )
        })?
        .ok_or_else(|| not_found(task_id, id))
}

/// A config the caller does not have: A2A names no error of its own for it, and the a2a-sdk's
/// server answers `TaskNotFoundError`, so agentd does too (404 on the HTTP+JSON binding).
pub(super) fn not_found(task_id: &str, id: &str) -> RpcError {
    RpcError::new(
        code::TASK_NOT_FOUND,
        format!("no push-notification config `{id}` of yours on task `{task_id}`"),
    )
}

impl ListParams {
    pub(super) fn task(self, dialect: Dialect) -> Result<String, RpcError> {
        let (task, field) = match dialect {
            Dialect::V1 => (self.task_id, "params.taskId"),
            Dialect::V03 => (self.id, "params.id"),
        };
        task.filter(|t| !t.is_empty())
            .ok_or_else(|| RpcError::new(code::INVALID_PARAMS, format!("{field}: missing")))
    }
}

/// The body of a notification: the task as it is now, as a v1.0 `StreamResponse`
/// (`{"task": …}`) or a 0.3 `Task`, per the config's revision.
pub fn notification_body(run: &RunRecord, dialect: &str) -> String {
    let dialect = if dialect == "0.3" {
        Dialect::V03
    } else {
        Dialect::V1
    };
    let task = tasks::task_of_run(run, Some(0), dialect).to_json(dialect);
    match dialect {
        Dialect::V1 => json!({"task": task}),
        Dialect::V03 => task,
    }
    .to_string()
}
