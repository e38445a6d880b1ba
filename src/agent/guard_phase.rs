//! Where the session applies the context guard: `turn_preflight` before each turn (forcing the
//! final turn, shrinking the tools to the final report, re-evaluating, warning when still over)
//! and `tool_preflight` when a tool output is about to be committed.

use tracing::warn;

use super::context_guard::{BUDGET_EXCEEDED_STUB, Budget, Projection};
use super::observer::GuardEvent;
use super::session::{ForcedFinal, Run, Session};
use crate::config::Target;
use crate::llm::ToolDefinition;

/// Reply space reserved when neither the agent nor the request sets `maxOutputTokens`.
pub const DEFAULT_OUTPUT_RESERVE: u64 = 4_096;

/// A tool output refused by the guard, with what accounting must record.
pub(super) struct Refusal {
    pub projection: Projection,
    pub original_tokens: u64,
    pub replacement_tokens: u64,
}

impl Session {
    /// The capacity of one target for this run.
    pub(super) fn budget_for(&self, run: &Run, target: &Target) -> Budget {
        let facts = self.catalog.facts(&target.provider, &target.model);
        let max_output = run
            .request
            .agent
            .sampling
            .overridden_by(&run.request.overrides)
            .max_output_tokens;
        Budget {
            context_window: run
                .request
                .agent
                .context_window
                .unwrap_or(facts.context_window),
            buffer_tokens: facts.buffer_tokens,
            max_output_tokens: max_output.map_or(DEFAULT_OUTPUT_RESERVE, u64::from),
        }
    }

    /// The target with the smallest limit: a request that fits it fits every attempt's target.
    pub(super) fn tightest_target(&self, run: &Run) -> (Target, u64) {
        run.request
            .agent
            .targets
            .iter()
            .map(|target| (target.clone(), self.budget_for(run, target).limit()))
            .min_by_key(|(_, limit)| *limit)
            .unwrap_or_else(|| {
                (
                    Target {
                        provider: String::new(),
                        model: String::new(),
                    },
                    0,
                )
            })
    }

    /// `turn_preflight`: returns the tools to offer this turn. When the next request would not
    /// fit, the turn becomes the final one (tools shrink to the final report) and the guard is
    /// evaluated again; still over, the request goes out best-effort with a warning.
    pub(super) fn prepare_turn(
        &self,
        run: &mut Run,
        turn: u32,
        is_final: &mut bool,
        tools: Vec<ToolDefinition>,
    ) -> Vec<ToolDefinition> {
        let (target, limit) = self.tightest_target(run);
        let projection = self.project(run, turn, &tools, *is_final, limit);
        if projection.fits() {
            return tools;
        }
        if *is_final {
            self.report_guard(
                run,
                &target,
                "turn_preflight",
                "over_after_shrink",
                projection,
            );
            warn!(run_id = %run.request.run_id, projected = projection.projected, limit, "context limit exceeded on the final turn; sending best-effort");
            return tools;
        }
        self.report_guard(run, &target, "turn_preflight", "forced_final", projection);
        run.forced_final = Some(ForcedFinal::Context);
        run.max_turns = turn;
        *is_final = true;
        let shrunk = self.final_turn_tools(run);
        let after = self.project(run, turn, &shrunk, true, limit);
        if !after.fits() {
            self.report_guard(run, &target, "turn_preflight", "over_after_shrink", after);
            warn!(run_id = %run.request.run_id, projected = after.projected, limit, "Context limit exceeded; forcing final turn.");
        }
        shrunk
    }

    fn project(
        &self,
        run: &mut Run,
        turn: u32,
        tools: &[ToolDefinition],
        is_final: bool,
        limit: u64,
    ) -> Projection {
        let schema = run.tokenizer.tools(tools);
        run.guard.set_schema(schema);
        let step = super::xml_phase::Step {
            turn,
            attempt: 1,
            is_final,
        };
        let ephemeral: u64 = self
            .attempt_messages(run, step, tools, None)
            .iter()
            .map(|m| run.tokenizer.message(m))
            .sum();
        run.guard.turn_preflight(limit, ephemeral)
    }

    /// `tool_preflight` for one tool message about to enter the conversation.
    pub(super) fn admit_tool_output(&self, run: &mut Run, content: &str) -> Result<(), Refusal> {
        let (target, limit) = self.tightest_target(run);
        let tokens = run.tokenizer.message(&crate::llm::ChatMessage::new(
            crate::llm::Role::Tool,
            content,
        ));
        match run.guard.reserve_tool_output(tokens, limit) {
            Ok(_) => Ok(()),
            Err(projection) => {
                self.report_guard(run, &target, "tool_preflight", "forced_final", projection);
                warn!(run_id = %run.request.run_id, projected = projection.projected, limit, tokens, "tool output dropped: context window budget exceeded");
                let replacement_tokens = run.tokenizer.count(BUDGET_EXCEEDED_STUB);
                run.guard.add_new(replacement_tokens);
                Err(Refusal {
                    projection,
                    original_tokens: tokens,
                    replacement_tokens,
                })
            }
        }
    }

    fn report_guard(
        &self,
        run: &Run,
        target: &Target,
        trigger: &'static str,
        outcome: &'static str,
        projection: Projection,
    ) {
        if let Some(observer) = &self.observer {
            observer.context_guard(&GuardEvent {
                agent: run.request.agent.name.clone(),
                provider: target.provider.clone(),
                model: target.model.clone(),
                trigger,
                outcome,
                projected_tokens: projection.projected,
                limit_tokens: projection.limit,
                remaining_tokens: projection.remaining(),
            });
        }
    }
}
