//! One tool call, from `tool.started` to its accounting: answered from the tool result cache
//! when the tool has a `cache` TTL and an identical call is cached; otherwise the tool runs in
//! its own task (a panic is contained) bounded by the tool timeout, and a try that got no
//! answer (transport failure, timeout) is tried again up to the tool's `retries` after a
//! jittered exponential backoff. Every try has its accounting entry; progress lines the tool
//! reports become `progress` events.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use tokio_util::task::AbortOnDropHandle;
use tracing::{Instrument, error, info, warn};

use super::events::{AgentEvent, Progress, ToolFinished, ToolStarted};
use super::output_handles;
use super::tool_files::keep_all;
use super::tool_phase::{ToolContext, ToolRunner, failed, server_of, truncate_output};
use crate::llm::ToolCall;
use crate::tools::caller::ToolCaller;
use crate::tools::policy::{self, ToolPolicy};
use crate::tools::result_cache::ToolResultCache;
use crate::tools::{ToolFile, ToolOutcome, ToolReport};
use crate::vocabulary::events::SourceLink;
use crate::vocabulary::result::{AccountingEntry, EntryStatus, ToolAccounting};

/// Progress lines of one tool call buffered before further ones are dropped.
const PROGRESS_LINES: usize = 32;
/// How long a finished call's last progress lines may take to become events.
const PROGRESS_DRAIN: Duration = Duration::from_secs(1);

/// The result of one executed tool call.
pub(super) struct Executed {
    pub index: usize,
    pub call_id: String,
    pub message: String,
    /// The files the result carried, kept (they ride on the call's `tool` message).
    pub attachments: Vec<crate::vocabulary::Attachment>,
    /// The entry of the try that counts (the last one).
    pub entry: AccountingEntry,
    /// Entries of earlier tries that got no answer, oldest first (recorded before `entry`).
    pub failed_tries: Vec<AccountingEntry>,
}

/// An output within `toolResponseMaxBytes` as it is; a longer one kept as a handle when the
/// agent keeps handles (and the run has room), else truncated.
fn shorten_output(tool: &str, text: String, context: &ToolContext) -> String {
    if text.len() <= context.max_bytes {
        return text;
    }
    match context
        .output_handles
        .as_ref()
        .and_then(|handles| handles.keep(tool, &text))
    {
        Some(handle) => output_handles::handle_message(&handle, &text, context.max_bytes),
        None => truncate_output(tool, text, context.max_bytes),
    }
}

/// What the tries of a call came to.
struct Tried {
    outcome: ToolOutcome,
    /// Details the tool reported for its accounting entry.
    details: Option<Map<String, Value>>,
    /// How long the last try took.
    latency_ms: u64,
    /// The tries before the last: how long each took and why it got no answer.
    failed: Vec<(u64, String)>,
    cached: bool,
    /// The files the last try's result carried.
    files: Vec<ToolFile>,
    /// The web pages the last try's result named.
    sources: Vec<SourceLink>,
}

impl ToolRunner<'_> {
    /// Runs one tool call under its policy (cache, retries); emits its events.
    pub(super) async fn execute_tool(
        &self,
        index: usize,
        call: &ToolCall,
        arguments: Map<String, Value>,
        context: &ToolContext,
    ) -> Executed {
        let server = server_of(&call.name);
        let arguments = Value::Object(arguments);
        let chars_in = arguments.to_string().chars().count();
        self.events
            .emit(AgentEvent::ToolStarted(Box::new(ToolStarted {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                server: server.clone(),
                arguments: arguments.clone(),
            })))
            .await;
        let policy = self.registry.policy(&call.name);
        // A tool that acts as the caller is cached per user, and not at all without one.
        let cache_user = if policy.per_user {
            context.user_id.as_deref()
        } else {
            context.cache_user.as_deref()
        };
        let cacheable = !policy.per_user || cache_user.is_some();
        let cache = self
            .tool_cache
            .zip(policy.cache_ttl)
            .filter(|_| cacheable)
            .map(|(cache, ttl)| {
                let key = ToolResultCache::key(&call.name, &arguments, cache_user);
                (cache, key, ttl)
            });
        let hit = match &cache {
            Some((cache, key, _)) => cache.get(key).await,
            None => None,
        };
        let tried = match hit {
            Some(hit) => {
                info!(tool = %call.name, cache_age_ms = hit.age_ms, "tool answered from the cache");
                Tried {
                    outcome: ToolOutcome::Ok(hit.output),
                    details: None,
                    latency_ms: 0,
                    failed: Vec::new(),
                    cached: true,
                    files: Vec::new(),
                    sources: Vec::new(),
                }
            }
            None => {
                let tried = self
                    .call_with_retries(call, arguments, context, policy)
                    .await;
                if let (Some((cache, key, ttl)), ToolOutcome::Ok(output)) = (&cache, &tried.outcome)
                {
                    cache.put(key, &call.name, output, *ttl).await;
                }
                tried
            }
        };
        let attempts = u32::try_from(tried.failed.len()).unwrap_or(u32::MAX) + 1;
        let numbered = policy.retries > 0;
        let failed_tries = tried
            .failed
            .iter()
            .enumerate()
            .map(|(number, (latency_ms, reason))| {
                AccountingEntry::Tool(ToolAccounting {
                    source: context.source.map(str::to_string),
                    attempt: Some(u32::try_from(number).unwrap_or(u32::MAX) + 1),
                    cost_usd: self.catalog.tool_cost(&server, &call.name, chars_in),
                    ..ToolAccounting::finished(
                        server.clone(),
                        call.name.clone(),
                        *latency_ms,
                        chars_in,
                        0,
                        Some(reason.clone()),
                        context.lineage.clone(),
                    )
                })
            })
            .collect();
        let sources = if matches!(tried.outcome, ToolOutcome::Ok(_)) {
            tried.sources
        } else {
            Vec::new()
        };
        let (message, error, attachments) = match tried.outcome {
            ToolOutcome::Ok(text) => {
                let (attachments, notes) =
                    keep_all(self.file_keeper, context.user_id.as_deref(), tried.files).await;
                let mut message = shorten_output(&call.name, text, context);
                for note in notes {
                    message.push('\n');
                    message.push_str(&note);
                }
                (message, None, attachments)
            }
            ToolOutcome::Failed(reason) | ToolOutcome::Unreachable(reason) => {
                (failed(&reason), Some(reason), Vec::new())
            }
        };
        let chars_out = message.chars().count();
        let status = if error.is_some() {
            EntryStatus::Failed
        } else {
            EntryStatus::Ok
        };
        let (output, output_truncated) = ToolFinished::bounded_output(&message);
        self.events
            .emit(AgentEvent::ToolFinished(Box::new(ToolFinished {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                server: server.clone(),
                status,
                latency_ms: tried.latency_ms,
                chars_in,
                chars_out,
                error: error.clone(),
                output,
                output_truncated,
                cached: tried.cached,
                attempts: (attempts > 1).then_some(attempts),
                attachments: attachments.clone(),
                sources,
            })))
            .await;
        // A cached answer cost nothing: the tool was not called.
        let cost_usd = (!tried.cached)
            .then(|| {
                self.catalog
                    .tool_cost(&server, &call.name, chars_in + chars_out)
            })
            .flatten();
        let entry = AccountingEntry::Tool(ToolAccounting {
            source: context.source.map(str::to_string),
            details: tried.details,
            cost_usd,
            cached: tried.cached,
            attempt: numbered.then_some(attempts),
            ..ToolAccounting::finished(
                server,
                call.name.clone(),
                tried.latency_ms,
                chars_in,
                chars_out,
                error,
                context.lineage.clone(),
            )
        });
        Executed {
            index,
            call_id: call.id.clone(),
            message,
            attachments,
            entry,
            failed_tries,
        }
    }

    /// Calls the tool up to `policy.attempts()` times: a try that got no answer is followed by
    /// another after a jittered backoff; a tool's own error ends the tries at once.
    async fn call_with_retries(
        &self,
        call: &ToolCall,
        arguments: Value,
        context: &ToolContext,
        policy: ToolPolicy,
    ) -> Tried {
        let (report, forwarder) = self.progress_forwarder(&call.name, context);
        let mut failed = Vec::new();
        let (outcome, latency_ms) = loop {
            let started = Instant::now();
            let outcome = self
                .try_once(call, arguments.clone(), context, &report)
                .await;
            let latency_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            let tries = u32::try_from(failed.len()).unwrap_or(u32::MAX) + 1;
            match outcome {
                ToolOutcome::Unreachable(reason) if tries < policy.attempts() => {
                    let wait = policy::backoff(tries);
                    warn!(
                        tool = %call.name, attempt = tries, %reason,
                        wait_ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                        "tool call got no answer; trying again"
                    );
                    failed.push((latency_ms, reason));
                    tokio::time::sleep(wait).await;
                }
                outcome => break (outcome, latency_ms),
            }
        };
        let details = report.take_details();
        let files = report.take_files();
        let sources = report.take_sources();
        // The last progress lines are events before `tool.finished`.
        drop(report);
        let _ = tokio::time::timeout(PROGRESS_DRAIN, forwarder).await;
        Tried {
            outcome,
            details,
            latency_ms,
            failed,
            cached: false,
            files,
            sources,
        }
    }

    /// One try in its own task, bounded by `timeout`.
    async fn try_once(
        &self,
        call: &ToolCall,
        arguments: Value,
        context: &ToolContext,
        report: &Arc<ToolReport>,
    ) -> ToolOutcome {
        let timeout = context.timeout;
        let user_id = context.user_id.as_deref();
        let registry = self.registry.clone();
        let caller = ToolCaller {
            user_id: user_id.map(str::to_string),
            secrets: self.secrets.cloned(),
        };
        let name = call.name.clone();
        let server = server_of(&call.name);
        let span = crate::telemetry::genai::tool_span(&call.name, &server, &call.id);
        let call_report = Arc::clone(report);
        let task = tokio::spawn(
            async move {
                registry
                    .call_reporting(&name, arguments, timeout, call_report, &caller)
                    .await
            }
            .instrument(span),
        );
        let abort_task = task.abort_handle();
        match tokio::time::timeout(timeout, task).await {
            Err(_) => {
                abort_task.abort();
                ToolOutcome::Unreachable("timeout".into())
            }
            Ok(Err(join)) if join.is_panic() => {
                error!(tool = %call.name, "tool panicked");
                ToolOutcome::Failed("the tool crashed".into())
            }
            Ok(Err(_)) => ToolOutcome::Failed("the tool was cancelled".into()),
            Ok(Ok(outcome)) => outcome,
        }
    }

    /// A report for one tool call whose progress lines become `progress` events
    /// (`task_status`, the tool as `agent`) while the call runs; the task ends once the report
    /// and every clone of it are dropped.
    fn progress_forwarder(
        &self,
        tool: &str,
        context: &ToolContext,
    ) -> (Arc<ToolReport>, AbortOnDropHandle<()>) {
        let (sender, mut lines) = tokio::sync::mpsc::channel::<String>(PROGRESS_LINES);
        let events = self.events.clone();
        let tool = tool.to_string();
        let call_path = context.lineage.call_path.clone().unwrap_or_default();
        let forwarder = tokio::spawn(async move {
            while let Some(line) = lines.recv().await {
                events
                    .emit(AgentEvent::Progress(Box::new(Progress {
                        kind: crate::vocabulary::events::ProgressKind::TaskStatus,
                        agent: tool.clone(),
                        call_path: call_path.clone(),
                        message: Some(line),
                        done: None,
                        pending: None,
                        now: None,
                        call_id: None,
                        joined_run_id: None,
                        attachments: Vec::new(),
                    })))
                    .await;
            }
        });
        // Aborted with the call: a call the run gave up (abort) may still hold the report in
        // its detached task, and the forwarder must not keep the run's event sink open.
        (
            Arc::new(ToolReport::new(sender)),
            AbortOnDropHandle::new(forwarder),
        )
    }
}
