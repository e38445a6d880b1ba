//! Remote A2A agents as tools (`a2aAgents.<name>` → `a2a__<name>`): each agent's card is read
//! once at start for its description and JSON-RPC address; a call sends the model's prompt with
//! `SendStreamingMessage`, passes the task's working notes on as progress, and answers with the
//! task's artifacts once it completes. A failed, rejected or cancelled task, a task that needs
//! input, a broken stream or a timeout is a failure the model sees; a call given up (timeout,
//! the run ending) cancels the remote task. The remote's cost, when its final status carries
//! it, goes into the call's accounting details. This module never talks to an LLM.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::StreamExt;
use serde_json::{Map, Value, json};
use sse_stream::SseStream;

use super::policy::ToolPolicy;
use super::{ToolOutcome, ToolProvider, ToolReport};
use crate::config::A2aAgentConfig;
use crate::llm::ToolDefinition;

/// The namespace of every remote A2A agent.
pub const A2A_NAMESPACE: &str = "a2a";
/// How long reading a card may take at start.
const CARD_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the cancellation of an abandoned remote task may take.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(5);
/// Largest answer kept from a remote agent.
const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;

/// One remote agent, as its card describes it.
struct RemoteAgent {
    description: String,
    /// Where its JSON-RPC interface answers.
    rpc_url: String,
    headers: BTreeMap<String, String>,
    timeout: Option<Duration>,
    /// Tries after the first for a call that got no answer.
    retries: u8,
}

/// The remote agents behind the `a2a` namespace.
#[derive(Clone, Default)]
pub struct RemoteAgents {
    client: reqwest::Client,
    agents: BTreeMap<String, Arc<RemoteAgent>>,
}

impl RemoteAgents {
    /// Reads the cards of the configured agents `wanted` says some agent uses. An unreadable
    /// card is logged and the agent still offered at its configured URL: it may come up later.
    pub async fn connect(
        config: &BTreeMap<String, A2aAgentConfig>,
        wanted: impl Fn(&str) -> bool,
    ) -> Self {
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .unwrap_or_default();
        let reads = config
            .iter()
            .filter(|(name, agent)| agent.is_enabled() && wanted(name))
            .map(|(name, agent)| {
                let client = client.clone();
                async move { (name.clone(), read_card(&client, name, agent).await) }
            });
        let agents = futures_util::future::join_all(reads)
            .await
            .into_iter()
            .map(|(name, agent)| (name, Arc::new(agent)))
            .collect();
        Self { client, agents }
    }

    pub fn contains(&self, name: &str) -> bool {
        self.agents.contains_key(name)
    }

    /// The agents named (without `a2a__`), sharing this set's HTTP client.
    pub fn subset<'a>(&self, names: impl IntoIterator<Item = &'a str>) -> Self {
        let agents = names
            .into_iter()
            .filter_map(|name| Some((name.to_string(), Arc::clone(self.agents.get(name)?))))
            .collect();
        Self {
            client: self.client.clone(),
            agents,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.agents.is_empty()
    }
}

/// The agent as its card describes it, or as configured when the card cannot be read.
async fn read_card(client: &reqwest::Client, name: &str, config: &A2aAgentConfig) -> RemoteAgent {
    let base = config.url.clone().unwrap_or_default();
    let base = base.trim_end_matches('/').to_string();
    let mut agent = RemoteAgent {
        description: format!("The remote A2A agent `{name}`."),
        rpc_url: base.clone(),
        headers: config.headers.clone(),
        timeout: config.timeout.map(|t| t.0),
        retries: config.retries,
    };
    let url = format!("{base}/.well-known/agent-card.json");
    let mut request = client.get(&url).timeout(CARD_TIMEOUT);
    for (header, value) in &config.headers {
        request = request.header(header, value);
    }
    let card = match request.send().await {
        Ok(response) if response.status().is_success() => response.json::<Value>().await,
        Ok(response) => {
            tracing::warn!(agent = name, %url, status = %response.status(), "cannot read the A2A agent card; the agent is offered at its configured URL");
            return agent;
        }
        Err(error) => Err(error),
    };
    match card {
        Ok(card) => {
            agent.description = card_description(name, &card);
            if let Some(rpc_url) = jsonrpc_url(&card) {
                agent.rpc_url = rpc_url;
            }
        }
        Err(error) => {
            tracing::warn!(agent = name, %url, %error, "cannot read the A2A agent card; the agent is offered at its configured URL");
        }
    }
    agent
}

/// The card's description followed by its skills.
fn card_description(name: &str, card: &Value) -> String {
    let text = |value: &Value, key: &str| {
        value
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let mut description = text(card, "description");
    if description.is_empty() {
        description = format!("The remote A2A agent `{name}`.");
    }
    let skills: Vec<String> = card
        .get("skills")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|skill| {
            let name = text(skill, "name");
            match text(skill, "description") {
                d if d.is_empty() => name,
                d => format!("{name}: {d}"),
            }
        })
        .filter(|s| !s.is_empty())
        .collect();
    if !skills.is_empty() {
        description.push_str("\nSkills:\n- ");
        description.push_str(&skills.join("\n- "));
    }
    description
}

/// The card's JSON-RPC interface (v1.0 `supportedInterfaces`, else 0.3 `url`).
fn jsonrpc_url(card: &Value) -> Option<String> {
    let interfaces = card.get("supportedInterfaces").and_then(Value::as_array);
    let from_interfaces = interfaces.into_iter().flatten().find_map(|interface| {
        (interface.get("protocolBinding").and_then(Value::as_str) == Some("JSONRPC"))
            .then(|| interface.get("url").and_then(Value::as_str))
            .flatten()
    });
    from_interfaces
        .or_else(|| card.get("url").and_then(Value::as_str))
        .filter(|url| url.starts_with("http://") || url.starts_with("https://"))
        .map(str::to_string)
}

/// What the stream of one task has told so far.
#[derive(Default)]
struct TaskProgress {
    task_id: Option<String>,
    context_id: Option<String>,
    answer: Vec<String>,
    answer_bytes: usize,
    /// The text of the last status message.
    last_note: Option<String>,
    /// How the task ended, once it has.
    ended: Option<Result<(), String>>,
    metadata: Option<Map<String, Value>>,
}

/// The text of a message's or artifact's parts (data parts as JSON text).
fn parts_text(parts: Option<&Value>) -> String {
    parts
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|part| match (part.get("text"), part.get("data")) {
            (Some(Value::String(text)), _) => Some(text.clone()),
            (_, Some(data)) => Some(data.to_string()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A state in either protocol revision's spelling, as v1.0 names it.
fn state_name(state: &str) -> String {
    match state {
        "submitted" => "TASK_STATE_SUBMITTED".into(),
        "working" => "TASK_STATE_WORKING".into(),
        "input-required" => "TASK_STATE_INPUT_REQUIRED".into(),
        "auth-required" => "TASK_STATE_AUTH_REQUIRED".into(),
        "completed" => "TASK_STATE_COMPLETED".into(),
        "failed" => "TASK_STATE_FAILED".into(),
        "canceled" => "TASK_STATE_CANCELED".into(),
        "rejected" => "TASK_STATE_REJECTED".into(),
        other => other.to_string(),
    }
}

impl TaskProgress {
    /// Takes in one `result` of the stream (a task, a status or artifact update, a message).
    fn absorb(&mut self, result: &Value, report: &ToolReport) -> Result<(), String> {
        let kind = result.get("kind").and_then(Value::as_str);
        if let Some(task) = result
            .get("task")
            .or((kind == Some("task")).then_some(result))
        {
            self.note_ids(task.get("id"), task.get("contextId"));
            if let Some(artifacts) = task.get("artifacts").and_then(Value::as_array) {
                for artifact in artifacts {
                    self.add_answer(parts_text(artifact.get("parts")))?;
                }
            }
            if let Some(status) = task.get("status") {
                self.status(status, task.get("metadata"), report);
            }
        } else if let Some(update) = result
            .get("statusUpdate")
            .or((kind == Some("status-update")).then_some(result))
        {
            self.note_ids(update.get("taskId"), update.get("contextId"));
            if let Some(status) = update.get("status") {
                self.status(status, update.get("metadata"), report);
            }
        } else if let Some(update) = result
            .get("artifactUpdate")
            .or((kind == Some("artifact-update")).then_some(result))
        {
            self.add_answer(parts_text(
                update.get("artifact").and_then(|a| a.get("parts")),
            ))?;
        } else if let Some(message) = result
            .get("message")
            .or((kind == Some("message")).then_some(result))
        {
            // A direct answer without a task.
            self.add_answer(parts_text(message.get("parts")))?;
            self.ended = Some(Ok(()));
        }
        Ok(())
    }

    fn note_ids(&mut self, task_id: Option<&Value>, context_id: Option<&Value>) {
        if let Some(id) = task_id.and_then(Value::as_str) {
            self.task_id = Some(id.to_string());
        }
        if let Some(id) = context_id.and_then(Value::as_str) {
            self.context_id = Some(id.to_string());
        }
    }

    fn add_answer(&mut self, text: String) -> Result<(), String> {
        if text.is_empty() {
            return Ok(());
        }
        self.answer_bytes += text.len();
        if self.answer_bytes > MAX_ANSWER_BYTES {
            return Err(format!(
                "the remote agent's answer is larger than {MAX_ANSWER_BYTES} bytes"
            ));
        }
        self.answer.push(text);
        Ok(())
    }

    fn status(&mut self, status: &Value, metadata: Option<&Value>, report: &ToolReport) {
        let note = status
            .get("message")
            .map(|m| parts_text(m.get("parts")))
            .filter(|n| !n.is_empty());
        if let Some(Value::Object(metadata)) = metadata {
            self.metadata = Some(metadata.clone());
        }
        let state = state_name(
            status
                .get("state")
                .and_then(Value::as_str)
                .unwrap_or_default(),
        );
        let why = |fallback: &str| note.clone().unwrap_or_else(|| fallback.to_string());
        self.ended = match state.as_str() {
            "TASK_STATE_COMPLETED" => Some(Ok(())),
            "TASK_STATE_FAILED" => Some(Err(format!(
                "the remote task failed: {}",
                why("no reason given")
            ))),
            "TASK_STATE_REJECTED" => Some(Err(format!(
                "the remote agent rejected the task: {}",
                why("no reason given")
            ))),
            "TASK_STATE_CANCELED" => Some(Err(format!(
                "the remote task was cancelled: {}",
                why("no reason given")
            ))),
            "TASK_STATE_INPUT_REQUIRED" | "TASK_STATE_AUTH_REQUIRED" => Some(Err(format!(
                "the remote agent needs input this call cannot give: {}",
                why("no question given")
            ))),
            _ => {
                if let Some(note) = &note {
                    report.progress(note.clone());
                }
                None
            }
        };
        if note.is_some() {
            self.last_note = note;
        }
    }

    /// The details for the call's accounting entry.
    fn details(&self) -> Map<String, Value> {
        let mut details = Map::new();
        if let Some(id) = &self.task_id {
            details.insert("remoteTaskId".into(), json!(id));
        }
        if let Some(id) = &self.context_id {
            details.insert("remoteContextId".into(), json!(id));
        }
        if let Some(metadata) = &self.metadata {
            for key in ["costUsd", "usage", "exitReason", "agent"] {
                if let Some(value) = metadata.get(key) {
                    details.insert(format!("remote{}", capitalized(key)), value.clone());
                }
            }
        }
        details
    }

    fn outcome(&self) -> ToolOutcome {
        match &self.ended {
            Some(Ok(())) if self.answer.is_empty() => {
                ToolOutcome::Ok(self.last_note.clone().unwrap_or_default())
            }
            Some(Ok(())) => ToolOutcome::Ok(self.answer.join("\n")),
            Some(Err(reason)) => ToolOutcome::Failed(reason.clone()),
            None => {
                ToolOutcome::Failed("the remote agent's stream ended before its task did".into())
            }
        }
    }
}

fn capitalized(key: &str) -> String {
    let mut chars = key.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// Cancels the remote task when a call is given up before it ended (dropped by a timeout or
/// the run's end).
struct CancelOnDrop {
    client: reqwest::Client,
    agent: Arc<RemoteAgent>,
    task_id: Option<String>,
    armed: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(task_id) = self.task_id.take().filter(|_| self.armed) else {
            return;
        };
        let request = rpc_request(
            &self.client,
            &self.agent,
            "CancelTask",
            json!({"id": task_id}),
        )
        .timeout(CANCEL_TIMEOUT);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(error) = request.send().await {
                    tracing::warn!(%error, "could not cancel an abandoned remote A2A task");
                }
            });
        }
    }
}

fn rpc_request(
    client: &reqwest::Client,
    agent: &RemoteAgent,
    method: &str,
    params: Value,
) -> reqwest::RequestBuilder {
    let body = json!({"jsonrpc": "2.0", "id": uuid::Uuid::new_v4().to_string(), "method": method, "params": params});
    let mut request = client
        .post(&agent.rpc_url)
        .header("A2A-Version", "1.0")
        .json(&body);
    for (header, value) in &agent.headers {
        request = request.header(header, value);
    }
    request
}

impl RemoteAgents {
    async fn send(
        &self,
        agent: Arc<RemoteAgent>,
        prompt: &str,
        report: &ToolReport,
    ) -> ToolOutcome {
        let message = json!({
            "messageId": uuid::Uuid::new_v4().to_string(),
            "role": "ROLE_USER",
            "parts": [{"text": prompt}],
        });
        let request = rpc_request(
            &self.client,
            &agent,
            "SendStreamingMessage",
            json!({"message": message}),
        )
        .header(reqwest::header::ACCEPT, "text/event-stream");
        let response = match request.send().await {
            Ok(response) => response,
            Err(error) => {
                return ToolOutcome::Unreachable(format!(
                    "the remote agent cannot be reached: {error}"
                ));
            }
        };
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            let excerpt: String = body.chars().take(500).collect();
            return ToolOutcome::Failed(format!(
                "the remote agent answered HTTP {status}: {excerpt}"
            ));
        }
        let mut guard = CancelOnDrop {
            client: self.client.clone(),
            agent,
            task_id: None,
            armed: true,
        };
        let mut progress = TaskProgress::default();
        let is_json = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        let read = if is_json {
            match response.json::<Value>().await {
                Ok(answer) => absorb_response(&answer, &mut progress, report),
                Err(error) => Err(format!("the remote agent's answer is not JSON: {error}")),
            }
        } else {
            read_stream(response, &mut progress, report, &mut guard).await
        };
        guard.task_id = progress.task_id.clone();
        guard.armed = progress.ended.is_none();
        report.set_details(progress.details());
        match read {
            Ok(()) => progress.outcome(),
            Err(reason) => ToolOutcome::Failed(reason),
        }
    }
}

/// One JSON-RPC response: an error fails the call, a result is taken in.
fn absorb_response(
    answer: &Value,
    progress: &mut TaskProgress,
    report: &ToolReport,
) -> Result<(), String> {
    if let Some(error) = answer.get("error") {
        let message = error
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("no message");
        let code = error
            .get("code")
            .and_then(Value::as_i64)
            .unwrap_or_default();
        return Err(format!(
            "the remote agent refused the task ({code}): {message}"
        ));
    }
    match answer.get("result") {
        Some(result) => progress.absorb(result, report),
        None => Err("the remote agent's answer has neither result nor error".into()),
    }
}

async fn read_stream(
    response: reqwest::Response,
    progress: &mut TaskProgress,
    report: &ToolReport,
    guard: &mut CancelOnDrop,
) -> Result<(), String> {
    let mut frames = SseStream::from_bytes_stream(response.bytes_stream());
    while let Some(frame) = frames.next().await {
        let frame = frame.map_err(|e| format!("the remote agent's stream broke: {e}"))?;
        let Some(data) = frame.data.filter(|d| !d.trim().is_empty()) else {
            continue;
        };
        let answer: Value = serde_json::from_str(&data)
            .map_err(|e| format!("the remote agent sent a frame that is not JSON: {e}"))?;
        absorb_response(&answer, progress, report)?;
        // Known as soon as the task is, so a call given up now cancels it.
        guard.task_id = progress.task_id.clone();
        if progress.ended.is_some() {
            break;
        }
    }
    Ok(())
}

#[async_trait]
impl ToolProvider for RemoteAgents {
    fn namespace(&self) -> &str {
        A2A_NAMESPACE
    }

    /// Remote agents are retried when configured, never cached: each call is a new task.
    fn policy(&self, name: &str) -> ToolPolicy {
        ToolPolicy {
            cache_ttl: None,
            retries: self.agents.get(name).map_or(0, |agent| agent.retries),
            per_user: false,
        }
    }

    async fn list_tools(&self) -> Vec<ToolDefinition> {
        self.agents
            .iter()
            .map(|(name, agent)| ToolDefinition {
                name: format!("{A2A_NAMESPACE}__{name}"),
                description: agent.description.clone(),
                parameters: json!({
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["prompt"],
                    "properties": {"prompt": {"type": "string", "description": "The task for this agent, self-contained."}}
                }),
            })
            .collect()
    }

    async fn call_reporting(
        &self,
        name: &str,
        arguments: Value,
        timeout: Duration,
        report: Arc<ToolReport>,
        _caller: &super::caller::ToolCaller,
    ) -> ToolOutcome {
        let Some(agent) = self.agents.get(name) else {
            return ToolOutcome::Failed(format!("unknown tool \"{A2A_NAMESPACE}__{name}\""));
        };
        let Some(prompt) = arguments
            .get("prompt")
            .and_then(Value::as_str)
            .filter(|p| !p.trim().is_empty())
        else {
            return ToolOutcome::Failed("`prompt` (a non-empty string) is required".into());
        };
        let limit = agent.timeout.map_or(timeout, |cap| cap.min(timeout));
        tokio::time::timeout(limit, self.send(Arc::clone(agent), prompt, &report))
            .await
            .unwrap_or_else(|_| ToolOutcome::Unreachable("timeout".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_card_gives_the_description_skills_and_jsonrpc_url() {
        let card = json!({
            "description": "Answers questions",
            "skills": [{"name": "qa", "description": "questions"}],
            "supportedInterfaces": [
                {"url": "http://h/grpc", "protocolBinding": "GRPC"},
                {"url": "http://h/a2a/qa", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ]
        });
        assert_eq!(
            card_description("x", &card),
            "Answers questions\nSkills:\n- qa: questions"
        );
        assert_eq!(jsonrpc_url(&card).as_deref(), Some("http://h/a2a/qa"));
        assert_eq!(
            jsonrpc_url(&json!({"url": "http://old/rpc"})).as_deref(),
            Some("http://old/rpc")
        );
        assert_eq!(jsonrpc_url(&json!({"url": "file:///x"})), None);
    }

    #[test]
    fn a_stream_of_either_revision_ends_in_the_answer_or_a_failure() {
        let report = ToolReport::default();
        let mut v1 = TaskProgress::default();
        for frame in [
            json!({"task": {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_SUBMITTED"}}}),
            json!({"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_WORKING", "message": {"parts": [{"text": "turn 1"}]}}}}),
            json!({"artifactUpdate": {"taskId": "t", "artifact": {"parts": [{"text": "42"}]}}}),
            json!({"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_COMPLETED"}, "metadata": {"costUsd": 0.5}}}),
        ] {
            v1.absorb(&frame, &report).expect("absorbed");
        }
        assert_eq!(v1.outcome(), ToolOutcome::Ok("42".into()));
        assert_eq!(v1.details()["remoteCostUsd"], json!(0.5));
        assert_eq!(v1.details()["remoteTaskId"], json!("t"));

        let mut old = TaskProgress::default();
        old.absorb(
            &json!({"kind": "status-update", "taskId": "t", "status": {"state": "failed", "message": {"parts": [{"kind": "text", "text": "no model"}]}}}),
            &report,
        )
        .expect("absorbed");
        assert_eq!(
            old.outcome(),
            ToolOutcome::Failed("the remote task failed: no model".into())
        );
        assert!(matches!(
            TaskProgress::default().outcome(),
            ToolOutcome::Failed(_)
        ));
    }
}
