//! The state of one run in progress, split by who changes it so each phase of a turn takes only
//! the pieces it needs: [`RunFacts`] (fixed once the run is set up), [`TurnPlan`] (how many turns
//! are left and why the last one was forced), the [`Transcript`](super::ending::Transcript), the
//! context account and the XML transport's state. [`Run::new`] builds them from a request.
//!
//! Holds and derives state only: no I/O, no events, no provider or tool calls.

use std::sync::Arc;

use super::SessionRequest;
use super::approval::{Checkpoint, KeptSampling, WaitingTurn, XmlCheckpoint};
use super::context_guard::ContextGuard;
use super::ending::{Ending, Transcript};
use super::final_report::{FinalReportSpec, JSON_FORMAT};
use super::guard_phase::{ContextAccount, TargetLimits};
use super::observer::SessionObserver;
use super::xml::{XmlMode, XmlState};
use super::xml_phase::XmlTransport;
use crate::config::agent_file::{Finalization, Transport};
use crate::config::models::ModelCatalog;
use crate::config::{AgentSpec, Target};
use crate::llm::tokens::{ImageBilling, Tokenizer};
use crate::llm::{ChatMessage, SamplingParams, ToolDefinition};
use crate::vocabulary::result::{ExitReason, Lineage};

/// Why a turn before the last was made the final one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ForcedFinal {
    UserStop,
    RetryExhaustion,
    /// The context guard tripped.
    Context,
    /// `agent__task_status` said the task is complete.
    TaskCompleted,
}

impl ForcedFinal {
    /// The reason as [`ForcedFinal::as_str`] wrote it (a checkpoint keeps it as text).
    pub fn parse(text: &str) -> Option<Self> {
        [
            Self::UserStop,
            Self::RetryExhaustion,
            Self::Context,
            Self::TaskCompleted,
        ]
        .into_iter()
        .find(|reason| reason.as_str() == text)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::UserStop => "user_stop",
            Self::RetryExhaustion => "retry_exhaustion",
            Self::Context => "context",
            Self::TaskCompleted => "task_status_completed",
        }
    }
}

/// The final-report tool a `finalization: report` run offers, and the validator of its calls.
pub(super) struct ReportExpectation {
    pub spec: FinalReportSpec,
    pub definition: ToolDefinition,
}

/// What a run is about, fixed once it is set up.
pub(super) struct RunFacts {
    pub request: SessionRequest,
    /// The output format of this run (the request's, else the agent's).
    pub format: String,
    /// The agent's sampling with the request's overrides put over it.
    pub sampling: SamplingParams,
    /// `Some` from the start of the loop in `finalization: report` runs.
    pub report: Option<ReportExpectation>,
    /// Agent names from the root session down to this one.
    pub call_path: String,
    /// The tracing fields every accounting entry of this run carries.
    pub lineage: Lineage,
    /// Tool outputs kept whole (`toolOutput: handles`); they die with the run.
    pub output_handles: std::sync::Arc<super::output_handles::OutputHandles>,
}

impl RunFacts {
    fn new(request: SessionRequest) -> Self {
        let format = request
            .format
            .clone()
            .unwrap_or_else(|| request.agent.output_format.clone());
        let sampling = request.agent.sampling.overridden_by(&request.overrides);
        let call_path = match &request.parent {
            Some(parent) => format!("{}:{}", parent.call_path, request.agent.name),
            None => request.agent.name.clone(),
        };
        let lineage = Lineage {
            agent_id: Some(request.agent.name.clone()),
            txn_id: Some(request.run_id.clone()),
            call_path: Some(call_path.clone()),
            parent_txn_id: request.parent.as_ref().map(|p| p.txn_id.clone()),
            origin_txn_id: Some(
                request
                    .parent
                    .as_ref()
                    .map_or_else(|| request.run_id.clone(), |p| p.origin_txn_id.clone()),
            ),
        };
        Self {
            request,
            format,
            sampling,
            report: None,
            call_path,
            lineage,
            output_handles: Default::default(),
        }
    }

    /// Whether `agent__tool_output` is offered: the agent keeps handles and has kept one.
    pub fn offers_tool_output(&self) -> bool {
        self.request.agent.tool_output == crate::config::agent_file::ToolOutputMode::Handles
            && !self.output_handles.is_empty()
    }

    /// `finalization: text`: the model's text is the answer and streams as it is generated.
    pub fn streams_text(&self) -> bool {
        self.request.agent.finalization == Finalization::Text
    }

    /// The JSON schema of this run's `json` output (the request's, else the agent's).
    pub fn schema(&self) -> Option<&serde_json::Value> {
        self.request
            .schema
            .as_ref()
            .or(self.request.agent.output_schema.as_ref())
    }

    /// The target of the `attempt`-th attempt of a turn: attempts cycle through the targets.
    pub fn target_for(&self, attempt: u32) -> Target {
        let targets = &self.request.agent.targets;
        let index = (attempt as usize - 1) % targets.len().max(1);
        targets.get(index).cloned().unwrap_or(Target {
            provider: String::new(),
            model: String::new(),
        })
    }

    /// Slots advertised per turn in the `xml` transport: one per allowed tool call.
    pub fn slot_count(&self) -> u32 {
        self.request.agent.limits.max_tool_calls_per_turn.max(1)
    }
}

/// How many turns the run may still take, and why its final turn came early.
pub(super) struct TurnPlan {
    /// Shrinks when a failing final report collapses the remaining turns or a turn is forced
    /// to be the last.
    pub max_turns: u32,
    pub forced_final: Option<ForcedFinal>,
}

impl TurnPlan {
    /// Makes the next turn final for `reason`, unless an earlier reason already did.
    pub fn force_final(&mut self, reason: ForcedFinal) {
        if self.forced_final.is_none() {
            self.forced_final = Some(reason);
        }
    }

    /// The exit reason of an answer: a requested stop wins over the natural reason.
    pub fn answer_reason(&self, natural: ExitReason) -> ExitReason {
        if self.forced_final == Some(ForcedFinal::UserStop) {
            ExitReason::UserStop
        } else {
            natural
        }
    }
}

/// The state of a run in progress.
pub(super) struct Run {
    pub facts: RunFacts,
    pub plan: TurnPlan,
    pub transcript: Transcript,
    pub context: ContextAccount,
    /// The XML transport's state (`xml-final` or `xml` with a final report); `None` is native.
    pub xml: Option<XmlTransport>,
    /// Set by the tool phase when calls of the turn wait for a person: the run stops here.
    pub waiting: Option<WaitingTurn>,
    /// Set with `waiting` when the run stops for a raise of its budget: the limit it crossed.
    pub budget_wait: Option<crate::vocabulary::budget::BudgetExceeded>,
    /// How many accounting entries the spend meter has been charged with (a resumed run's
    /// earlier entries were charged before it waited).
    pub charged: usize,
    /// When the run started (before a wait: as long ago as it had run), for its budget.
    pub started: std::time::Instant,
    /// Files this turn's tool calls carried, until their `tool` messages are added.
    pub tool_files: super::tool_files::TurnFiles,
}

impl Run {
    /// The model's plain text taken as the answer. In a json run it must parse and fit the
    /// schema like a reported `content_json`, else the run fails visibly with
    /// `schema_validation_failed` instead of passing prose off as the JSON that was asked for.
    pub fn text_answer(&self, natural: ExitReason, text: String) -> Ending {
        let reason = self.plan.answer_reason(natural);
        let json_expectation = self
            .facts
            .report
            .as_ref()
            .filter(|expectation| expectation.spec.format() == JSON_FORMAT);
        let Some(expectation) = json_expectation else {
            return Ending::answer(reason, &self.facts.format, Some(text), None, None);
        };
        match expectation.spec.accept_text(&text) {
            Ok(report) => Ending::answer(reason, &report.format, None, report.content_json, None),
            Err(error) => Ending::synthetic_failure(
                ExitReason::SchemaValidationFailed,
                &self.facts.format,
                "schema_validation",
                &format!("the answer is not the JSON this run asked for: {error}"),
            ),
        }
    }

    /// Sets up a run: the conversation so far, the context account sized for its targets, and
    /// the transport it speaks.
    pub fn new(
        request: SessionRequest,
        catalog: &ModelCatalog,
        instructions: &[(String, String)],
        observer: Option<Arc<dyn SessionObserver>>,
    ) -> Self {
        let conversation = opening_conversation(&request, instructions);
        let tokenizer = tokenizer_of(&request.agent, catalog);
        let guard = ContextGuard::new(tokenizer.messages(&conversation));
        let transport = request.transport.unwrap_or(request.agent.transport);
        let xml = xml_state(&transport, request.agent.finalization).map(XmlTransport::new);
        let plan = TurnPlan {
            // A client tool loop's earlier requests spent part of the budget (SPEC §9.2).
            max_turns: request
                .agent
                .limits
                .max_turns
                .saturating_sub(request.client_tools.turns_used)
                .max(1),
            forced_final: None,
        };
        let facts = RunFacts::new(request);
        let limits = TargetLimits::new(catalog, &facts);
        Self {
            context: ContextAccount::new(guard, tokenizer, limits, observer, &facts),
            facts,
            plan,
            transcript: Transcript {
                conversation,
                accounting: Vec::new(),
                turns: 0,
            },
            xml,
            waiting: None,
            budget_wait: None,
            charged: 0,
            tool_files: Default::default(),
            started: std::time::Instant::now(),
        }
    }

    /// The run as it was when it stopped to wait (see [`Checkpoint`]).
    pub fn restore(
        request: SessionRequest,
        checkpoint: &Checkpoint,
        catalog: &ModelCatalog,
        observer: Option<Arc<dyn SessionObserver>>,
    ) -> Self {
        let tokenizer = tokenizer_of(&request.agent, catalog);
        let xml = checkpoint.xml.as_ref().map(|xml| {
            XmlTransport::new(XmlState {
                nonce: xml.nonce.clone(),
                mode: if xml.full {
                    XmlMode::Full
                } else {
                    XmlMode::FinalOnly
                },
                next_slot: xml.next_slot,
            })
        });
        let plan = TurnPlan {
            max_turns: checkpoint.max_turns,
            forced_final: checkpoint
                .forced_final
                .as_deref()
                .and_then(ForcedFinal::parse),
        };
        let facts = RunFacts::new(request);
        let limits = TargetLimits::new(catalog, &facts);
        Self {
            context: ContextAccount::new(
                checkpoint.guard.clone(),
                tokenizer,
                limits,
                observer,
                &facts,
            ),
            facts,
            plan,
            transcript: Transcript {
                conversation: checkpoint.conversation.clone(),
                accounting: checkpoint.accounting.clone(),
                turns: checkpoint.turns,
            },
            xml,
            waiting: None,
            budget_wait: None,
            charged: checkpoint.accounting.len(),
            tool_files: Default::default(),
            started: std::time::Instant::now()
                .checked_sub(std::time::Duration::from_millis(checkpoint.elapsed_ms))
                .unwrap_or_else(std::time::Instant::now),
        }
    }

    /// The checkpoint of a run whose turn has calls waiting; `None` when none wait.
    pub fn checkpoint(&mut self, elapsed_ms: u64) -> Option<Checkpoint> {
        let waiting = self.waiting.take()?;
        let request = &self.facts.request;
        Some(Checkpoint {
            run_id: request.run_id.clone(),
            agent: request.agent.name.clone(),
            prompt: request.prompt.clone(),
            conversation_id: request.conversation_id.clone(),
            format: request.format.clone(),
            schema: request.schema.clone(),
            user_id: request.user_id.clone(),
            transport: request.transport,
            overrides: KeptSampling::from(&request.overrides),
            conversation: std::mem::take(&mut self.transcript.conversation),
            accounting: std::mem::take(&mut self.transcript.accounting),
            turns: self.transcript.turns,
            max_turns: self.plan.max_turns,
            forced_final: self.plan.forced_final.map(|f| f.as_str().to_string()),
            guard: self.context.guard.clone(),
            xml: self.xml.as_ref().map(|xml| XmlCheckpoint {
                nonce: xml.state.nonce.clone(),
                next_slot: xml.state.next_slot,
                full: xml.state.mode == XmlMode::Full,
            }),
            waiting,
            elapsed_ms,
            limited_key: None,
            webhook: None,
            announced_response: false,
            budget: self.facts.request.budget,
            budget_raise: self.facts.request.budget_raise,
            budget_wait: self.budget_wait.take(),
        })
    }
}

/// The agent's prompt, plus the isolation rule of `userScoped` agents (seeds/001).
/// What the model is sent on the first turn: the system prompt (with the MCP servers'
/// instructions), the history, the prompt.
pub fn opening_conversation(
    request: &SessionRequest,
    instructions: &[(String, String)],
) -> Vec<ChatMessage> {
    let mut conversation = vec![ChatMessage::system(system_prompt(request, instructions))];
    conversation.extend(request.history.iter().cloned());
    if !request.continues_tool_calls() {
        let mut prompt = ChatMessage::user(request.prompt.clone());
        prompt.attachments = request.attachments.clone();
        conversation.push(prompt);
    }
    conversation
}

/// The tokenizer of the agent's first model target (configured, else guessed from the id),
/// counting images as the vendor of all its targets bills them (the highest bill when they are
/// of several vendors, or one is unknown).
pub fn tokenizer_of(agent: &AgentSpec, catalog: &ModelCatalog) -> Tokenizer {
    let text = agent
        .targets
        .first()
        .map_or(Tokenizer::APPROXIMATE, |target| {
            Tokenizer::resolve(
                catalog
                    .facts(&target.provider, &target.model)
                    .tokenizer
                    .as_deref(),
                &target.model,
            )
        });
    let billings = agent.targets.iter().map(|target| {
        catalog
            .provider_kind(&target.provider)
            .map_or(ImageBilling::AnyVendor, ImageBilling::of)
    });
    text.billing_images(ImageBilling::shared(billings))
}

fn system_prompt(request: &SessionRequest, instructions: &[(String, String)]) -> String {
    let mut prompt = request.agent.system_prompt.clone();
    if let (Some(user), true) = (request.user(), request.agent.user_scoped) {
        prompt.push_str(&format!(
            "\n\nYou act for user `{user}` only. Every tool call runs with `user_id` = `{user}`, set by the system; \
             you cannot read or change another user's data."
        ));
    }
    for (server, text) in instructions
        .iter()
        .filter(|(_, text)| !text.trim().is_empty())
    {
        prompt.push_str(&format!("\n\n#### MCP Server: {server}\n\n{}", text.trim()));
    }
    prompt
}

/// The XML transport applies to sessions that end with a final report.
fn xml_state(transport: &Transport, finalization: Finalization) -> Option<XmlState> {
    match (transport, finalization) {
        (_, Finalization::Text) | (Transport::Native, _) => None,
        (Transport::XmlFinal, Finalization::Report) => Some(XmlState::new(XmlMode::FinalOnly)),
        (Transport::Xml, Finalization::Report) => Some(XmlState::new(XmlMode::Full)),
    }
}
