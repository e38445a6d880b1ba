//! The context guard, tool-output limits, accounting totals and cost (contract §1, §2, §4): each
//! test drives a session through the scripted LLM and checks what the provider was sent.

use agentd::agent::context_guard::BUDGET_EXCEEDED_STUB;
use agentd::agent::{AgentEvent, ExitReason};
use agentd::llm::LlmRequest;
use agentd::llm::tokens::Tokenizer;
use agentd::vocabulary::result::{AccountingEntry, EntryStatus};
use serde_json::json;

use crate::support::mock_llm::openai::{Dialect, Route};
use crate::support::scripted::{Harness, agent, calls, final_report};

/// The guard's estimate of a request as the provider received it (model `m1` → approximate).
fn request_tokens(request: &LlmRequest) -> u64 {
    let tokenizer = Tokenizer::APPROXIMATE;
    tokenizer.messages(&request.messages) + tokenizer.tools(&request.tools)
}

fn tools_of(request: &LlmRequest) -> Vec<String> {
    request.tools.iter().map(|t| t.name.clone()).collect()
}

fn final_turn_reasons(events: &[AgentEvent]) -> Vec<(u32, bool, Option<String>)> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::TurnStarted(t) => {
                Some((t.turn, t.is_final_turn, t.forced_final_reason.clone()))
            }
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_tool_output_that_would_overflow_is_dropped_and_forces_the_final_turn() {
    // limit = 3000 - 256 (buffer) - 200 (maxOutputTokens) = 2544 tokens; the output is ~5000.
    let harness = Harness::new(vec![
        calls(&[
            ("big", "test__big", r#"{"bytes": 20000}"#),
            ("small", "test__echo", r#"{"x": 1}"#),
        ]),
        final_report("markdown", "answered with what I had"),
    ]);
    let (result, events) = harness
        .run(Harness::request(
            agent("contextWindow: 3000\nmaxOutputTokens: 200"),
            "go",
        ))
        .await;
    assert!(result.success, "{:?}", result.error);
    let dropped = result
        .conversation
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("big"))
        .expect("reply");
    assert_eq!(dropped.content.as_deref(), Some(BUDGET_EXCEEDED_STUB));
    let kept = result
        .conversation
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("small"))
        .expect("reply");
    assert!(
        kept.content
            .as_deref()
            .is_some_and(|c| c.starts_with("echo:")),
        "an output that fits is kept"
    );
    let entry = result
        .accounting
        .iter()
        .find_map(|e| match e {
            AccountingEntry::Tool(t) if t.command == "test__big" => Some(t.clone()),
            _ => None,
        })
        .expect("entry");
    assert_eq!(
        (entry.status, entry.error.as_deref()),
        (EntryStatus::Failed, Some("context_budget_exceeded"))
    );
    let details = entry.details.expect("details");
    assert_eq!(details["limit_tokens"], 2544);
    assert!(details["projected_tokens"].as_u64().expect("projected") > 2544);
    assert!(
        details.get("remaining_tokens").is_none(),
        "no remaining tokens when over"
    );
    assert_eq!(
        final_turn_reasons(&events)[1],
        (2, true, Some("context".into()))
    );
    let requests = harness.llm.requests();
    assert_eq!(tools_of(&requests[1]), vec!["agent__final_report"]);
    for request in &requests {
        assert!(
            request_tokens(request) <= 2544,
            "a request over the limit was sent: {}",
            request_tokens(request)
        );
    }
    let guard = harness.guard_events.events();
    assert_eq!(
        (guard[0].trigger, guard[0].outcome, guard[0].limit_tokens),
        ("tool_preflight", "forced_final", 2544)
    );
}

/// The projected size of turn 1 for `prompt`, measured from the request actually sent.
async fn turn_one_tokens(prompt: &str) -> u64 {
    let probe = Harness::new(vec![final_report("markdown", "ok")]);
    probe
        .run(Harness::request(agent("maxOutputTokens: 100"), prompt))
        .await;
    request_tokens(&probe.llm.requests()[0])
}

#[tokio::test]
async fn a_request_exactly_at_the_limit_goes_out_and_one_token_over_forces_the_final_turn() {
    let prompt = "word ".repeat(300);
    let needed = turn_one_tokens(&prompt).await;
    // window = needed + buffer (256) + maxOutputTokens (100): exactly at the limit.
    let at_limit = Harness::new(vec![final_report("markdown", "ok")]);
    let (_, events) = at_limit
        .run(Harness::request(
            agent(&format!(
                "contextWindow: {}\nmaxOutputTokens: 100",
                needed + 356
            )),
            &prompt,
        ))
        .await;
    assert_eq!(
        final_turn_reasons(&events)[0],
        (1, false, None),
        "at the limit: a normal turn"
    );
    assert!(at_limit.guard_events.events().is_empty());
    assert!(
        tools_of(&at_limit.llm.requests()[0]).len() > 1,
        "every tool offered"
    );

    let over = Harness::new(vec![final_report("markdown", "ok")]);
    let (result, events) = over
        .run(Harness::request(
            agent(&format!(
                "contextWindow: {}\nmaxOutputTokens: 100",
                needed + 355
            )),
            &prompt,
        ))
        .await;
    assert_eq!(
        final_turn_reasons(&events)[0],
        (1, true, Some("context".into())),
        "one over: the final turn"
    );
    let request = &over.llm.requests()[0];
    assert_eq!(
        tools_of(request),
        vec!["agent__final_report"],
        "tools shrink to the final report"
    );
    assert!(request_tokens(request) < needed, "the shrunk request fits");
    let guard = over.guard_events.events();
    assert_eq!(
        guard.len(),
        1,
        "the shrink fixed it: no post-shrink warning"
    );
    assert_eq!(
        (guard[0].trigger, guard[0].remaining_tokens),
        ("turn_preflight", -1)
    );
    assert!(result.success);
}

#[tokio::test]
async fn still_over_after_the_shrink_is_sent_best_effort_with_a_warning() {
    let harness = Harness::new(vec![final_report("markdown", "squeezed")]);
    let prompt = "word ".repeat(2000);
    let (result, events) = harness
        .run(Harness::request(
            agent("contextWindow: 1000\nmaxOutputTokens: 100"),
            &prompt,
        ))
        .await;
    let outcomes: Vec<&str> = harness
        .guard_events
        .events()
        .iter()
        .map(|e| e.outcome)
        .collect();
    assert_eq!(outcomes, vec!["forced_final", "over_after_shrink"]);
    assert_eq!(
        harness.llm.requests().len(),
        1,
        "best effort: the request still goes out"
    );
    assert_eq!(final_turn_reasons(&events)[0].2.as_deref(), Some("context"));
    assert!(result.success);
}

#[tokio::test]
async fn without_a_final_answer_a_context_trip_ends_with_context_limit() {
    let harness = Harness::new(vec![
        calls(&[("big", "test__big", r#"{"bytes": 20000}"#)]),
        calls(&[("again", "test__echo", "{}")]),
    ]);
    let (result, _) = harness
        .run(Harness::request(
            agent("contextWindow: 3000\nmaxOutputTokens: 200"),
            "go",
        ))
        .await;
    assert!(!result.success);
    assert_eq!(result.exit_reason, ExitReason::ContextLimit);
    let report = result.final_report.expect("synthetic report");
    assert_eq!(
        report.metadata,
        Some(json!({"reason": "context_window_exhausted"}))
    );
}

fn reply_to(result: &agentd::agent::AgentResult, id: &str) -> String {
    result
        .conversation
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some(id))
        .and_then(|m| m.content.clone())
        .expect("reply")
}

#[tokio::test]
async fn tool_responses_are_truncated_past_the_byte_limit_on_a_character_boundary() {
    let harness = Harness::new(vec![
        calls(&[
            ("at", "test__big", r#"{"bytes": 10}"#),
            ("past", "test__big", r#"{"bytes": 11}"#),
            ("utf8", "test__text", r#"{"text": "ééééé€"}"#),
        ]),
        final_report("markdown", "ok"),
    ]);
    let (result, _) = harness
        .run(Harness::request(agent("toolResponseMaxBytes: 10"), "go"))
        .await;
    assert_eq!(
        reply_to(&result, "at"),
        "x".repeat(10),
        "exactly at the limit: untouched"
    );
    assert_eq!(
        reply_to(&result, "past"),
        format!(
            "[TRUNCATED] Original size 11 bytes; truncated to 10 bytes.\n{}",
            "x".repeat(10)
        )
    );
    // 5 × "é" (2 bytes) + "€" (3 bytes) = 13 bytes; byte 10 ends the fifth "é".
    assert_eq!(
        reply_to(&result, "utf8"),
        "[TRUNCATED] Original size 13 bytes; truncated to 10 bytes.\nééééé"
    );
    let harness = Harness::new(vec![
        calls(&[("odd", "test__text", r#"{"text": "aéé"}"#)]),
        final_report("markdown", "ok"),
    ]);
    let (result, _) = harness
        .run(Harness::request(agent("toolResponseMaxBytes: 4"), "go"))
        .await;
    assert_eq!(
        reply_to(&result, "odd"),
        "[TRUNCATED] Original size 5 bytes; truncated to 3 bytes.\naé",
        "never inside a character"
    );
}

#[tokio::test]
async fn accounting_totals_equal_the_sum_of_entries_and_cost_follows_the_pricing_table() {
    let mut harness = Harness::new(vec![
        calls(&[("e", "test__echo", "{}")]),
        final_report("markdown", "done"),
    ]);
    harness.catalog_config = json!({"pricing": {"a": {"m1": {"unit": "per_1m", "prompt": 1000000.0, "completion": 2000000.0}}}});
    let (result, _) = harness.run(Harness::request(agent(""), "go")).await;
    let llm: Vec<_> = result
        .accounting
        .iter()
        .filter_map(|e| match e {
            AccountingEntry::Llm(l) => Some(l.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(llm.len(), 2);
    let input: u64 = llm.iter().map(|l| l.tokens.input_tokens).sum();
    let output: u64 = llm.iter().map(|l| l.tokens.output_tokens).sum();
    assert_eq!(
        (result.usage.input_tokens, result.usage.output_tokens),
        (input, output)
    );
    assert_eq!(result.usage.total_tokens, input + output);
    // 1 USD per prompt token, 2 per completion token (per_1m with 1e6 prices).
    for entry in &llm {
        let expected = entry.tokens.input_tokens as f64 + 2.0 * entry.tokens.output_tokens as f64;
        assert_eq!(entry.cost_usd, Some(expected));
    }
    let total: f64 = llm.iter().filter_map(|l| l.cost_usd).sum();
    assert!((result.cost_usd - total).abs() < 1e-9);
    assert!(result.cost_usd > 0.0);
    for entry in &result.accounting {
        let (call_path, origin) = match entry {
            AccountingEntry::Llm(l) => {
                (l.lineage.call_path.clone(), l.lineage.origin_txn_id.clone())
            }
            AccountingEntry::Tool(t) => {
                (t.lineage.call_path.clone(), t.lineage.origin_txn_id.clone())
            }
        };
        assert_eq!(call_path.as_deref(), Some("agent"));
        assert_eq!(origin.as_deref(), Some("run-1"));
    }
}

#[tokio::test]
async fn a_cost_the_provider_reports_beats_the_price_table() {
    let route = Route {
        provider: "Anthropic",
        model: "claude-x",
        cost: 0.25,
    };
    let arguments = json!({"report_format": "markdown", "report_content": "done"}).to_string();
    let step = calls(&[("f", "agent__final_report", &arguments)])
        .with_usage(1000, 100, 0, 0)
        .with_dialect(Dialect {
            route: Some(route),
            ..Dialect::default()
        });
    let mut harness = Harness::new(vec![step]);
    harness.catalog_config =
        json!({"pricing": {"a": {"m1": {"prompt": 1000.0, "completion": 1000.0}}}});
    let (result, _) = harness.run(Harness::request(agent(""), "go")).await;
    let entry = result
        .accounting
        .iter()
        .find_map(|e| match e {
            AccountingEntry::Llm(l) => Some(l.clone()),
            _ => None,
        })
        .expect("llm entry");
    assert_eq!(entry.cost_usd, Some(0.25));
    assert_eq!(
        (
            entry.actual_provider.as_deref(),
            entry.actual_model.as_deref()
        ),
        (Some("Anthropic"), Some("claude-x"))
    );
    assert!((result.cost_usd - 0.25).abs() < 1e-12);
}
