//! `agent__tool_output` in `ask` mode (the reference's sub-agent extraction): a question about
//! a kept output is answered by child sessions of the agent's own models without tools — one per
//! part of the output (map), then one combining their answers (reduce) when there were several.
//! Their accounting is rolled into the run's like a sub-agent's.

use std::sync::Arc;

use super::run::RunFacts;
use super::session::RunControl;
use super::sub_agents::ChildRunner;
use super::{AgentResult, SessionRequest};
use crate::config::AgentSpec;
use crate::config::agent_file::{Finalization, ToolOutputMode};
use crate::config::registry::Orchestration;
use crate::vocabulary::result::AccountingEntry;

/// The most parts one question may be asked of (the reference's `maxChunks`).
pub const MAX_ASK_PARTS: usize = 10;
/// A part is this many times `toolResponseMaxBytes`.
const PART_FACTOR: usize = 4;

const EXTRACTOR_PROMPT: &str = "You answer a question about a document from the part of it you \
    are given, precisely and briefly, quoting what matters. If the part has nothing relevant, \
    answer exactly: nothing relevant.";

/// What answering took: the answer (or why there is none) and the children's accounting.
pub(super) struct Answered {
    pub reply: Result<String, String>,
    pub accounting: Vec<AccountingEntry>,
}

/// Answers `question` about `text` with child sessions run by `runner`.
pub(super) async fn ask_about(
    runner: &Arc<dyn ChildRunner>,
    control: &RunControl,
    facts: &RunFacts,
    text: &str,
    question: &str,
) -> Answered {
    let part_bytes = usize::try_from(facts.request.agent.limits.tool_response_max_bytes)
        .unwrap_or(usize::MAX)
        .saturating_mul(PART_FACTOR)
        .max(1024);
    let parts = split_within(text, part_bytes);
    if parts.len() > MAX_ASK_PARTS {
        return Answered {
            reply: Err(format!(
                "the output has {} parts of {part_bytes} bytes, more than the {MAX_ASK_PARTS} \
                 `ask` reads: narrow it down with grep or lines first",
                parts.len()
            )),
            accounting: Vec::new(),
        };
    }
    let extractor = extractor_of(&facts.request.agent);
    let mut accounting = Vec::new();
    let mut answers = Vec::new();
    for (number, part) in parts.iter().enumerate() {
        let prompt = format!(
            "<question>\n{question}\n</question>\n<document part=\"{} of {}\">\n{part}\n</document>",
            number + 1,
            parts.len()
        );
        let result = ask(runner, control, facts, &extractor, prompt).await;
        accounting.extend(result.accounting.iter().cloned());
        if !result.success {
            return Answered {
                reply: Err(format!(
                    "reading part {} failed: {}",
                    number + 1,
                    result
                        .error
                        .as_deref()
                        .unwrap_or(result.exit_reason.as_str())
                )),
                accounting,
            };
        }
        answers.push(result.answer_text());
    }
    if answers.len() == 1 {
        return Answered {
            reply: Ok(answers.remove(0)),
            accounting,
        };
    }
    let partials: String = answers
        .iter()
        .enumerate()
        .map(|(n, a)| format!("<answer part=\"{}\">\n{a}\n</answer>\n", n + 1))
        .collect();
    let prompt = format!(
        "<question>\n{question}\n</question>\n<partial_answers>\n{partials}</partial_answers>\n\
         Combine the partial answers into one answer to the question."
    );
    let result = ask(runner, control, facts, &extractor, prompt).await;
    accounting.extend(result.accounting.iter().cloned());
    let reply = if result.success {
        Ok(result.answer_text())
    } else {
        Err(format!(
            "combining the parts failed: {}",
            result
                .error
                .as_deref()
                .unwrap_or(result.exit_reason.as_str())
        ))
    };
    Answered { reply, accounting }
}

/// One child session of the extractor, linked to the run.
async fn ask(
    runner: &Arc<dyn ChildRunner>,
    control: &RunControl,
    facts: &RunFacts,
    extractor: &Arc<AgentSpec>,
    prompt: String,
) -> AgentResult {
    let request = SessionRequest {
        format: Some("text".into()),
        ..facts
            .request
            .child(&facts.call_path, Arc::clone(extractor), prompt)
    };
    runner.run_child(request, control.for_child()).await
}

/// The agent's models, without tools, sub-agents or anything around them, told to extract.
fn extractor_of(agent: &AgentSpec) -> Arc<AgentSpec> {
    let mut extractor = agent.clone();
    extractor.name = format!("{}.tool_output", agent.name);
    extractor.system_prompt = EXTRACTOR_PROMPT.into();
    extractor.finalization = Finalization::Text;
    extractor.tools = Vec::new();
    extractor.sub_agents = Vec::new();
    extractor.agent_refs = Vec::new();
    extractor.orchestration = Orchestration::default();
    extractor.orchestration_refs = Orchestration::default();
    extractor.tool_output = ToolOutputMode::Truncate;
    extractor.cache_ttl = None;
    extractor.user_scoped = false;
    Arc::new(extractor)
}

/// `text` in parts of at most `max` bytes, cut at line ends where one is near, else at a
/// character boundary.
fn split_within(text: &str, max: usize) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut rest = text;
    while rest.len() > max {
        let mut cut = max;
        while !rest.is_char_boundary(cut) {
            cut -= 1;
        }
        if let Some(newline) = rest[..cut].rfind('\n').filter(|at| *at > max / 2) {
            cut = newline + 1;
        }
        parts.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    if !rest.is_empty() || parts.is_empty() {
        parts.push(rest);
    }
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_stay_within_the_size_and_prefer_line_ends() {
        let text = (1..=100)
            .map(|n| format!("line {n:03}"))
            .collect::<Vec<_>>()
            .join("\n");
        let parts = split_within(&text, 100);
        assert!(parts.iter().all(|p| p.len() <= 100));
        assert_eq!(parts.concat(), text);
        assert!(parts[0].ends_with('\n'));
        assert_eq!(split_within("", 10), [""]);
        assert_eq!(split_within("ééé", 3), ["é", "é", "é"]);
    }
}
