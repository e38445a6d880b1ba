//! The agents around an agent (reference §2.1): `advisors` run first, in parallel, and their
//! answers reach the agent as `<advisory>` blocks beside the `<original_user_request>`; a
//! `router.destinations` agent may call `router__handoff-to`, and the chosen agent then answers
//! in its place; a `handoff` agent runs after the agent (or its destination) succeeded and its
//! answer is the run's. Each is a child session linked to the run (lineage, `agent_started` /
//! `agent_finished` progress, accounting and cost rolled into the run's, and stored as a run of
//! its own); the answering child's output streams as the run's output and its final report is
//! the run's.

use std::sync::Arc;

use futures_util::future::join_all;
use tokio::task::JoinHandle;

use super::Runtime;
use crate::agent::approval::SessionEnd;
use crate::agent::router::{Route, Router};
use crate::agent::sub_agents::emit_agent_progress as emit_progress;
use crate::agent::{AgentEvent, AgentResult, EventSink, ExitReason, RunControl, SessionRequest};
use crate::config::AgentSpec;
use crate::llm::ChatMessage;
use crate::store::NewRun;
use crate::vocabulary::events::ProgressKind;
use crate::vocabulary::result::UsageTotals;

/// Events of a session whose answer is not the run's: its answer, report and end are left out.
fn keeps_progress(event: &AgentEvent) -> bool {
    !matches!(
        event,
        AgentEvent::Output(_) | AgentEvent::FinalReport(_) | AgentEvent::RunFinished(_)
    )
}

/// Events of a session that answers but does not end the run: its report and end are left out.
fn keeps_answer(event: &AgentEvent) -> bool {
    !matches!(
        event,
        AgentEvent::FinalReport(_) | AgentEvent::RunFinished(_)
    )
}

/// Events of a child that answers for the run: all but its own start and end.
fn keeps_child_answer(event: &AgentEvent) -> bool {
    keeps_answer(event) && !matches!(event, AgentEvent::RunStarted(_))
}

/// A sink passing the events `keep` accepts on to `target`, in order; the returned task ends
/// once the sink (and every clone) is dropped, so awaiting it flushes them.
fn filtered(target: &EventSink, keep: fn(&AgentEvent) -> bool) -> (EventSink, JoinHandle<()>) {
    let (sink, mut events) = EventSink::channel(256);
    let target = target.clone();
    let task = tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            if keep(&event) {
                target.emit(event).await;
            }
        }
    });
    (sink, task)
}

impl Runtime {
    /// Runs `request` with the agents its agent has around it (see the module comment).
    pub(super) async fn run_orchestrated(
        self: &Arc<Self>,
        agent: &Arc<AgentSpec>,
        mut request: SessionRequest,
        sink: EventSink,
        control: RunControl,
    ) -> SessionEnd {
        let plan = &agent.orchestration;
        let original = request.prompt.clone();
        let advice = self.run_advisors(agent, &request, &sink, &control).await;
        if !advice.is_empty() {
            request.prompt = advised_prompt(&original, &advice);
        }
        let router = (!plan.destinations.is_empty())
            .then(|| Router::new(self.agents_named(&plan.destinations)));
        let keep = if plan.handoff.is_some() {
            keeps_progress
        } else {
            keeps_answer
        };
        let (main_sink, forwarder) = filtered(&sink, keep);
        let mut session = self
            .session_for(agent, main_sink, control.clone())
            .waiting_for_approvals();
        if let Some(router) = &router {
            session = session.with_router(router.clone());
        }
        let end = session.run_or_wait(request.clone()).await;
        drop(session);
        let _ = forwarder.await;
        let mut result = match end {
            SessionEnd::Finished(result) => *result,
            waiting @ SessionEnd::Waiting(_) => return waiting,
        };
        roll_in(&mut result, advice.into_iter().map(|(_, advisor)| advisor));
        if let Some(route) = router.and_then(|router| router.chosen()) {
            let prompt = routed_prompt(&original, &agent.name, &route);
            let child = self
                .run_follower(&route.agent, prompt, &request, &sink, &control)
                .await;
            result = answered_by(result, child);
        }
        if let (true, Some(handoff)) = (result.success, &plan.handoff) {
            let prompt = handoff_prompt(&original, &agent.name, &result.answer_text());
            let child = self
                .run_follower(handoff, prompt, &request, &sink, &control)
                .await;
            result = answered_by(result, child);
        }
        if let Some(report) = &result.final_report {
            sink.emit(AgentEvent::FinalReport(Box::new(report.clone())))
                .await;
        }
        sink.emit(AgentEvent::RunFinished(Box::new(result.summary())))
            .await;
        SessionEnd::Finished(Box::new(result))
    }

    /// Runs the advisors at once with the user's request; each answer (or, for a failed
    /// advisor, what went wrong) is returned with the advisor's name, in the listed order.
    async fn run_advisors(
        self: &Arc<Self>,
        agent: &AgentSpec,
        request: &SessionRequest,
        sink: &EventSink,
        control: &RunControl,
    ) -> Vec<(String, AgentResult)> {
        let advisors = self.agents_named(&agent.orchestration.advisors);
        let runs = advisors.into_iter().map(|advisor| async move {
            let name = advisor.name.clone();
            let child = self.child_request(&advisor, request.prompt.clone(), request);
            let call_path = child_call_path(request, &name);
            emit_progress(sink, &name, &call_path, ProgressKind::AgentStarted, None).await;
            let created_at = chrono::Utc::now();
            let result = self
                .session_for(&advisor, EventSink::discard(), control.for_child())
                .run(child.clone())
                .await;
            self.record_child(&child, &result, created_at).await;
            let status = status_of(&result);
            emit_progress(
                sink,
                &name,
                &call_path,
                ProgressKind::AgentFinished,
                Some(status),
            )
            .await;
            (name, result)
        });
        join_all(runs).await
    }

    /// Runs `name` answering for the run: its output streams as the run's.
    async fn run_follower(
        self: &Arc<Self>,
        name: &str,
        prompt: String,
        request: &SessionRequest,
        sink: &EventSink,
        control: &RunControl,
    ) -> AgentResult {
        let Some(agent) = self.agents_named(&[name.to_string()]).pop() else {
            return AgentResult::ended_without_session(
                &request.run_id,
                ExitReason::ConfigError,
                format!("the agent {name:?} is no longer loaded"),
                0,
            );
        };
        let call_path = child_call_path(request, name);
        emit_progress(sink, name, &call_path, ProgressKind::AgentStarted, None).await;
        let (child_sink, forwarder) = filtered(sink, keeps_child_answer);
        let child = self.child_request(&agent, prompt, request);
        let created_at = chrono::Utc::now();
        let result = self
            .session_for(&agent, child_sink, control.for_child())
            .run(child.clone())
            .await;
        let _ = forwarder.await;
        self.record_child(&child, &result, created_at).await;
        emit_progress(
            sink,
            name,
            &call_path,
            ProgressKind::AgentFinished,
            Some(status_of(&result)),
        )
        .await;
        result
    }

    /// Stores a child as a finished run of its own (listed in `GET /v1/runs`, its result's
    /// accounting naming the parent as `parentTxnId`).
    async fn record_child(
        &self,
        child: &SessionRequest,
        result: &AgentResult,
        created_at: chrono::DateTime<chrono::Utc>,
    ) {
        let run = NewRun {
            id: child.run_id.clone(),
            agent: child.agent.name.clone(),
            user_id: child.user_id.clone(),
            conversation_id: None,
            created_at,
            owner: None,
            acted_by: None,
            key_id: None,
        };
        self.recorder.run_started(run.clone()).await;
        let _stored = self.recorder.run_finished(run, result.into()).await;
    }

    /// The loaded agents of these names (a name that is gone since loading is skipped).
    fn agents_named(&self, names: &[String]) -> Vec<Arc<AgentSpec>> {
        let agents = self.agents.load();
        names.iter().filter_map(|name| agents.get(name)).collect()
    }

    /// A child session's request: the run's user, output format and schema, linked to it.
    fn child_request(
        &self,
        agent: &Arc<AgentSpec>,
        prompt: String,
        parent: &SessionRequest,
    ) -> SessionRequest {
        SessionRequest {
            format: parent.format.clone(),
            schema: parent.schema.clone(),
            ..parent.child(&own_call_path(parent), Arc::clone(agent), prompt)
        }
    }
}

/// The run's call path: its parent's plus its agent, or its agent alone.
fn own_call_path(request: &SessionRequest) -> String {
    match &request.parent {
        Some(parent) => format!("{}:{}", parent.call_path, request.agent.name),
        None => request.agent.name.clone(),
    }
}

fn child_call_path(request: &SessionRequest, child: &str) -> String {
    format!("{}:{child}", own_call_path(request))
}

fn status_of(result: &AgentResult) -> String {
    if result.success {
        crate::vocabulary::RunStatus::Completed.as_str().into()
    } else {
        result.exit_reason.as_str().into()
    }
}

/// The children's work counts toward the run's totals.
fn roll_in(result: &mut AgentResult, children: impl IntoIterator<Item = AgentResult>) {
    for child in children {
        result.cost_usd += child.cost_usd;
        result.accounting.extend(child.accounting);
    }
    result.usage = UsageTotals::from_accounting(&result.accounting);
}

/// The run's result once `child` answered for it: the child's answer, report and outcome; the
/// run's id and conversation (ending with the child's answer), everybody's accounting.
fn answered_by(run: AgentResult, child: AgentResult) -> AgentResult {
    let mut conversation = run.conversation;
    let answer = child.answer_text();
    if !answer.is_empty() {
        conversation.push(ChatMessage::assistant(answer));
    }
    let mut combined = AgentResult {
        run_id: run.run_id,
        conversation,
        accounting: run.accounting,
        cost_usd: run.cost_usd,
        turns: run.turns + child.turns,
        duration_ms: run.duration_ms + child.duration_ms,
        ..child.clone()
    };
    roll_in(&mut combined, [child]);
    combined
}

/// The agent's prompt after its advisors: the request and each advisory in a tagged block.
fn advised_prompt(original: &str, advice: &[(String, AgentResult)]) -> String {
    let mut prompt = format!("<original_user_request>\n{original}\n</original_user_request>\n");
    for (advisor, result) in advice {
        let text = if result.success {
            result.answer_text()
        } else {
            format!(
                "(the advisor failed: {})",
                result
                    .error
                    .as_deref()
                    .unwrap_or(result.exit_reason.as_str())
            )
        };
        prompt.push_str(&format!(
            "<advisory agent=\"{advisor}\">\n{text}\n</advisory>\n"
        ));
    }
    prompt
}

/// What a router destination is asked: the request, and what the router told it.
fn routed_prompt(original: &str, router: &str, route: &Route) -> String {
    let mut prompt = format!("<original_user_request>\n{original}\n</original_user_request>\n");
    if let Some(message) = &route.message {
        prompt.push_str(&format!(
            "<advisory agent=\"{router}\">\n{message}\n</advisory>\n"
        ));
    }
    prompt
}

/// What the handoff agent is asked: the request and the answer it continues from.
fn handoff_prompt(original: &str, agent: &str, answer: &str) -> String {
    format!(
        "<original_user_request>\n{original}\n</original_user_request>\n\
         <response agent=\"{agent}\">\n{answer}\n</response>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_tag_the_request_the_advice_and_the_response() {
        assert_eq!(
            handoff_prompt("q", "lead", "a"),
            "<original_user_request>\nq\n</original_user_request>\n<response agent=\"lead\">\na\n</response>\n"
        );
        let route = Route {
            agent: "billing".into(),
            message: Some("invoice 7".into()),
        };
        assert!(
            routed_prompt("q", "front", &route).contains("<advisory agent=\"front\">\ninvoice 7\n")
        );
        let silent = Route {
            agent: "billing".into(),
            message: None,
        };
        assert!(!routed_prompt("q", "front", &silent).contains("advisory"));
    }
}
