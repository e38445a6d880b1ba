//! The run's context account: the [`ContextGuard`]'s token arithmetic applied with this run's
//! tokenizer and target limits. `prepare_turn` is the guard's `turn_preflight` (forcing the
//! final turn, shrinking the tools to the final report, re-evaluating, warning when still over);
//! [`ContextAccount::admit_tool_output`] is its `tool_preflight` for each tool output.
//!
//! Owns only token accounting and the observer's guard events: it never edits the conversation
//! or emits session events.

use std::sync::Arc;

use tracing::warn;

use super::context_guard::{BUDGET_EXCEEDED_STUB, Budget, ContextGuard, Projection};
use super::observer::{GuardEvent, SessionObserver};
use super::run::{ForcedFinal, RunFacts, TurnPlan};
use crate::config::Target;
use crate::config::models::ModelCatalog;
use crate::llm::tokens::Tokenizer;
use crate::llm::{ChatMessage, LlmResponse, Role, ToolDefinition};

/// Reply space reserved when neither the agent nor the request sets `maxOutputTokens`.
pub const DEFAULT_OUTPUT_RESERVE: u64 = 4_096;

/// A tool output refused by the guard, with what accounting must record.
pub(super) struct Refusal {
    pub projection: Projection,
    pub original_tokens: u64,
    pub replacement_tokens: u64,
}

/// The capacities of the run's targets, fixed for the run (the catalog does not change).
pub(super) struct TargetLimits {
    /// The target with the smallest limit: a request that fits it fits every attempt's target.
    tightest: Target,
    limit: u64,
    /// The first target's context window, for the context percentage XML-NEXT shows.
    first_window: u64,
}

impl TargetLimits {
    pub fn new(catalog: &ModelCatalog, facts: &RunFacts) -> Self {
        let targets = &facts.request.agent.targets;
        let (tightest, limit) = targets
            .iter()
            .map(|target| (target.clone(), budget_for(catalog, facts, target).limit()))
            .min_by_key(|(_, limit)| *limit)
            .unwrap_or_else(|| {
                (
                    Target {
                        provider: String::new(),
                        model: String::new(),
                    },
                    0,
                )
            });
        let first_window = targets.first().map_or(1, |target| {
            budget_for(catalog, facts, target).context_window.max(1)
        });
        Self {
            tightest,
            limit,
            first_window,
        }
    }
}

/// The capacity of one target for this run.
fn budget_for(catalog: &ModelCatalog, facts: &RunFacts, target: &Target) -> Budget {
    let model = catalog.facts(&target.provider, &target.model);
    Budget {
        context_window: facts
            .request
            .agent
            .context_window
            .unwrap_or(model.context_window),
        buffer_tokens: model.buffer_tokens,
        max_output_tokens: facts
            .sampling
            .max_output_tokens
            .map_or(DEFAULT_OUTPUT_RESERVE, u64::from),
    }
}

/// The guard with what it needs to count and report: the tokenizer of the first target, the
/// limits of all targets, and who watches its trips.
pub(super) struct ContextAccount {
    pub guard: ContextGuard,
    /// Counts tokens for the first target (the guard's estimates).
    pub tokenizer: Tokenizer,
    limits: TargetLimits,
    observer: Option<Arc<dyn SessionObserver>>,
    /// For the observer's events and the warnings' fields.
    agent: String,
    run_id: String,
}

impl ContextAccount {
    pub fn new(
        guard: ContextGuard,
        tokenizer: Tokenizer,
        limits: TargetLimits,
        observer: Option<Arc<dyn SessionObserver>>,
        facts: &RunFacts,
    ) -> Self {
        Self {
            guard,
            tokenizer,
            limits,
            observer,
            agent: facts.request.agent.name.clone(),
            run_id: facts.request.run_id.clone(),
        }
    }

    /// How full the first target's window is, in percent (shown in XML-NEXT).
    pub fn context_percent(&self) -> u64 {
        (self.guard.current() + self.guard.pending() + self.guard.schema()) * 100
            / self.limits.first_window
    }

    /// The provider's token count of the exchange replaces the guard's estimates; when it
    /// reported nothing, the conversation is estimated instead.
    pub fn commit_response(&mut self, conversation: &[ChatMessage], response: &LlmResponse) {
        let reported = response
            .usage
            .filter(|u| u.input_tokens > 0)
            .map(|u| u.input_tokens + u.output_tokens);
        let estimated = if reported.is_some() {
            0
        } else {
            let reply = ChatMessage {
                role: Role::Assistant,
                content: Some(response.text.clone()),
                tool_calls: response.tool_calls.clone(),
                tool_call_id: None,
                reasoning: None,
                reasoning_signature: None,
                redacted_reasoning: Vec::new(),
                attachments: Vec::new(),
            };
            self.tokenizer.messages(conversation) + self.tokenizer.message(&reply)
        };
        self.guard.commit_response(reported, estimated);
    }

    /// `tool_preflight` for one tool message about to enter the conversation.
    pub fn admit_tool_output(&mut self, content: &str) -> Result<(), Refusal> {
        self.admit_tool_reply(content, &[])
    }

    /// [`Self::admit_tool_output`] for a reply with the files the tool's result carried
    /// (counted as the vendors count images and pages): all are admitted, or none.
    pub fn admit_tool_reply(
        &mut self,
        content: &str,
        attachments: &[crate::vocabulary::Attachment],
    ) -> Result<(), Refusal> {
        let mut reply = ChatMessage::new(Role::Tool, content);
        reply.attachments = attachments.to_vec();
        let tokens = self.tokenizer.message(&reply);
        let limit = self.limits.limit;
        match self.guard.reserve_tool_output(tokens, limit) {
            Ok(_) => Ok(()),
            Err(projection) => {
                self.report("tool_preflight", "forced_final", projection);
                warn!(run_id = %self.run_id, projected = projection.projected, limit, tokens, "tool output dropped: context window budget exceeded");
                let replacement_tokens = self.tokenizer.count(BUDGET_EXCEEDED_STUB);
                self.guard.add_new(replacement_tokens);
                Err(Refusal {
                    projection,
                    original_tokens: tokens,
                    replacement_tokens,
                })
            }
        }
    }

    /// Counts a tool reply that did not pass `tool_preflight` (notices, refusals) as new.
    pub fn add_unchecked_tool_reply(&mut self, content: &str) {
        let tokens = self.tool_message_tokens(content);
        self.guard.add_new(tokens);
    }

    fn tool_message_tokens(&self, content: &str) -> u64 {
        self.tokenizer
            .message(&ChatMessage::new(Role::Tool, content))
    }

    /// The next request with `tools` and the attempt's messages (rendered once the tools'
    /// schema is counted, since XML-NEXT shows the context percentage).
    fn project(
        &mut self,
        tools: &[ToolDefinition],
        ephemeral: impl FnOnce(&Self) -> Vec<ChatMessage>,
    ) -> Projection {
        let schema = self.tokenizer.tools(tools);
        self.guard.set_schema(schema);
        let ephemeral: u64 = ephemeral(self)
            .iter()
            .map(|m| self.tokenizer.message(m))
            .sum();
        self.guard.turn_preflight(self.limits.limit, ephemeral)
    }

    fn report(&self, trigger: &'static str, outcome: &'static str, projection: Projection) {
        if let Some(observer) = &self.observer {
            observer.context_guard(&GuardEvent {
                agent: self.agent.clone(),
                provider: self.limits.tightest.provider.clone(),
                model: self.limits.tightest.model.clone(),
                trigger,
                outcome,
                projected_tokens: projection.projected,
                limit_tokens: projection.limit,
                remaining_tokens: projection.remaining(),
            });
        }
    }
}

/// What a turn about to start offers, after `turn_preflight`.
pub(super) struct PreparedTurn {
    pub tools: Vec<ToolDefinition>,
    pub is_final: bool,
}

/// `turn_preflight`: when the next request would not fit, the turn becomes the final one
/// (tools shrink to `final_tools`) and the guard is evaluated again; still over, the request
/// goes out best-effort with a warning. `ephemeral` renders the attempt's extra messages for the
/// plan, tools and finality being measured.
pub(super) fn prepare_turn(
    context: &mut ContextAccount,
    plan: &mut TurnPlan,
    turn: u32,
    offer: PreparedTurn,
    final_tools: Vec<ToolDefinition>,
    ephemeral: impl Fn(&ContextAccount, &TurnPlan, &[ToolDefinition], bool) -> Vec<ChatMessage>,
) -> PreparedTurn {
    let limit = context.limits.limit;
    let projection = context.project(&offer.tools, |context| {
        ephemeral(context, plan, &offer.tools, offer.is_final)
    });
    if projection.fits() {
        return offer;
    }
    if offer.is_final {
        context.report("turn_preflight", "over_after_shrink", projection);
        warn!(run_id = %context.run_id, projected = projection.projected, limit, "context limit exceeded on the final turn; sending best-effort");
        return offer;
    }
    context.report("turn_preflight", "forced_final", projection);
    plan.forced_final = Some(ForcedFinal::Context);
    plan.max_turns = turn;
    let after = context.project(&final_tools, |context| {
        ephemeral(context, plan, &final_tools, true)
    });
    if !after.fits() {
        context.report("turn_preflight", "over_after_shrink", after);
        warn!(run_id = %context.run_id, projected = after.projected, limit, "Context limit exceeded; forcing final turn.");
    }
    PreparedTurn {
        tools: final_tools,
        is_final: true,
    }
}
