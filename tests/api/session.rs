//! The agent contract, guarantee by guarantee: each test drives `agent::Session` through a
//! scripted LLM and observes only the `AgentResult`, the event stream and accounting.

use std::time::Duration;

use agentd::agent::{AgentEvent, EMPTY_RESPONSE_NOTICE, ExitReason, ReportStatus};
use agentd::llm::Role;
use agentd::vocabulary::result::{AccountingEntry, EntryStatus};
use serde_json::json;

use crate::support::mock_llm::{Reply, openai};
use crate::support::scripted::{Harness, agent, calls, final_report};

fn llm_entries(accounting: &[AccountingEntry]) -> Vec<(String, EntryStatus)> {
    accounting
        .iter()
        .filter_map(|e| match e {
            AccountingEntry::Llm(l) => Some((l.provider.clone(), l.status)),
            _ => None,
        })
        .collect()
}

fn tool_names(request: &agentd::llm::LlmRequest) -> Vec<String> {
    request.tools.iter().map(|t| t.name.clone()).collect()
}

fn turn_events(events: &[AgentEvent]) -> Vec<(u32, u32, bool, bool, Option<String>)> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::TurnStarted(t) => Some((
                t.turn,
                t.attempt,
                t.is_retry,
                t.is_final_turn,
                t.forced_final_reason.clone(),
            )),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn max_turns_is_never_exceeded_and_ends_with_a_synthetic_failure_report() {
    let echo = calls(&[("c", "test__echo", "{}")]);
    let harness = Harness::new(vec![echo.clone(), echo.clone(), echo.clone(), echo]);
    let (result, events) = harness
        .run(Harness::request(agent("maxTurns: 3"), "loop forever"))
        .await;
    assert_eq!(
        harness.llm.requests().len(),
        3,
        "one LLM request per turn, three turns"
    );
    let assistant_turns = result
        .conversation
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .count();
    assert_eq!(assistant_turns, 3);
    assert!(!result.success);
    assert_eq!(result.exit_reason, ExitReason::MaxTurns);
    let report = result.final_report.expect("synthetic report");
    assert_eq!(report.status, ReportStatus::Failure);
    assert_eq!(
        report.metadata,
        Some(json!({"reason": "max_turns_exhausted"}))
    );
    assert_eq!(
        harness.tools.calls().len(),
        2,
        "the final turn runs no tool"
    );
    assert_eq!(
        tool_names(&harness.llm.requests()[2]),
        vec!["agent__final_report"],
        "the final turn offers only the final report"
    );
    assert_eq!(turn_events(&events).last().map(|t| t.3), Some(true));
}

#[tokio::test]
async fn excess_tool_calls_are_dropped_and_the_model_is_told() {
    let three = calls(&[
        ("c1", "test__echo", r#"{"n":1}"#),
        ("c2", "test__echo", r#"{"n":2}"#),
        ("c3", "test__echo", r#"{"n":3}"#),
    ]);
    let harness = Harness::new(vec![three, final_report("markdown", "done")]);
    let (result, _) = harness
        .run(Harness::request(agent("maxToolCallsPerTurn: 2"), "go"))
        .await;
    assert_eq!(harness.tools.calls().len(), 2, "the third call never runs");
    let dropped = result
        .conversation
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("c3"))
        .expect("a reply to c3");
    let text = dropped.content.as_deref().expect("content");
    assert!(
        text.starts_with("(tool failed: dropped: at most 2 tool calls"),
        "{text}"
    );
    assert!(result.success);
}

#[tokio::test]
async fn attempts_cycle_through_targets_and_count_toward_max_retries() {
    let harness = Harness::new(vec![
        Reply::cut_after(0),
        Reply::status(500, openai::error("server_error", None, "internal error")),
        final_report("markdown", "third time lucky"),
    ]);
    let (result, events) = harness
        .run(Harness::request(
            agent("models: [a/m1, b/m2]\nmaxRetries: 3"),
            "go",
        ))
        .await;
    assert_eq!(harness.llm.models(), vec!["m1", "m2", "m1"]);
    assert_eq!(
        llm_entries(&result.accounting),
        vec![
            ("a".into(), EntryStatus::Failed),
            ("b".into(), EntryStatus::Failed),
            ("a".into(), EntryStatus::Ok)
        ]
    );
    assert!(result.success);
    assert_eq!(
        turn_events(&events)
            .iter()
            .map(|t| (t.1, t.2))
            .collect::<Vec<_>>(),
        vec![(1, false), (2, true), (3, true)]
    );
}

#[tokio::test]
async fn exhausted_retries_end_the_run_with_the_last_error() {
    let fail = Reply::status(503, openai::error("server_error", None, "overloaded"));
    let harness = Harness::new(vec![fail.clone(), fail.clone(), fail.clone(), fail]);
    let (result, _) = harness
        .run(Harness::request(agent("maxRetries: 3"), "go"))
        .await;
    assert_eq!(
        harness.llm.requests().len(),
        3,
        "maxRetries is the total number of attempts"
    );
    assert_eq!(result.exit_reason, ExitReason::LlmError);
    assert!(
        result
            .error
            .as_deref()
            .is_some_and(|e| e.contains("overloaded"))
    );
}

#[tokio::test(start_paused = true)]
async fn rate_limits_honour_retry_after() {
    let harness = Harness::new(vec![
        Reply::status(429, openai::error("rate_limit_error", None, "slow down"))
            .with_header("retry-after", "7"),
        final_report("markdown", "ok"),
    ]);
    let started = tokio::time::Instant::now();
    let (result, _) = harness
        .run(Harness::request(agent("maxRetries: 2"), "go"))
        .await;
    let waited = started.elapsed();
    assert!(result.success);
    assert!(
        waited >= Duration::from_secs(7) && waited < Duration::from_secs(8),
        "waited {waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn rate_limits_without_retry_after_back_off_exponentially() {
    let limited = Reply::status(429, openai::error("rate_limit_error", None, "429"));
    let harness = Harness::new(vec![
        limited.clone(),
        limited,
        final_report("markdown", "ok"),
    ]);
    let started = tokio::time::Instant::now();
    let (result, _) = harness
        .run(Harness::request(agent("maxRetries: 3"), "go"))
        .await;
    assert!(result.success);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(3) && waited < Duration::from_secs(4),
        "1 s then 2 s, waited {waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn when_every_target_is_rate_limited_the_loop_waits_the_longest_suggestion() {
    let limited = |secs: u64| {
        Reply::status(429, openai::error("rate_limit_error", None, "429"))
            .with_header("retry-after", secs.to_string())
    };
    let harness = Harness::new(vec![limited(3), limited(5), final_report("markdown", "ok")]);
    let started = tokio::time::Instant::now();
    let (result, _) = harness
        .run(Harness::request(
            agent("models: [a/m1, b/m2]\nmaxRetries: 3"),
            "go",
        ))
        .await;
    assert!(result.success);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(5) && waited < Duration::from_secs(6),
        "one wait of 5 s, waited {waited:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_rate_limit_on_one_target_moves_to_the_next_at_once() {
    let harness = Harness::new(vec![
        Reply::status(429, openai::error("rate_limit_error", None, "429"))
            .with_header("retry-after", "30"),
        final_report("markdown", "from b"),
    ]);
    let started = tokio::time::Instant::now();
    let (result, _) = harness
        .run(Harness::request(agent("models: [a/m1, b/m2]"), "go"))
        .await;
    assert!(result.success);
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "no wait while another target is untried"
    );
    assert_eq!(harness.llm.models(), vec!["m1", "m2"]);
}

#[tokio::test]
async fn auth_and_quota_errors_end_the_run_at_once() {
    for (failure, reason) in [
        (
            Reply::status(401, openai::error("invalid_request_error", None, "bad key")),
            ExitReason::AuthFailure,
        ),
        (
            Reply::status(
                429,
                openai::error(
                    "insufficient_quota",
                    Some("insufficient_quota"),
                    "no credit",
                ),
            ),
            ExitReason::QuotaExceeded,
        ),
    ] {
        let harness = Harness::new(vec![failure, final_report("markdown", "never")]);
        let (result, _) = harness
            .run(Harness::request(
                agent("models: [a/m1, b/m2]\nmaxRetries: 5"),
                "go",
            ))
            .await;
        assert_eq!(harness.llm.requests().len(), 1, "no retry after {reason:?}");
        assert!(!result.success);
        assert_eq!(result.exit_reason, reason);
        assert!(result.error.is_some());
    }
}

#[tokio::test]
async fn an_empty_response_is_retried_with_an_ephemeral_notice() {
    let harness = Harness::new(vec![Reply::empty(), final_report("markdown", "answer")]);
    let (result, _) = harness
        .run(Harness::request(agent("maxRetries: 3"), "go"))
        .await;
    assert!(result.success);
    let requests = harness.llm.requests();
    assert_eq!(requests.len(), 2);
    let notice = requests[1].messages.last().expect("notice");
    assert_eq!(notice.content.as_deref(), Some(EMPTY_RESPONSE_NOTICE));
    assert_eq!(
        EMPTY_RESPONSE_NOTICE,
        "System notice: plain text responses without tool calls are ignored. Use final_report to provide your answer."
    );
    assert!(
        result
            .conversation
            .iter()
            .all(|m| m.content.as_deref() != Some(EMPTY_RESPONSE_NOTICE)),
        "never persisted"
    );
    assert_eq!(
        result.conversation.len(),
        3,
        "system, user, the final assistant message: the empty one is not kept"
    );
    assert_eq!(
        llm_entries(&result.accounting).len(),
        2,
        "the empty response counted as an attempt"
    );
}

#[tokio::test]
async fn reasoning_only_responses_are_kept_and_the_turn_proceeds() {
    let harness = Harness::new(vec![
        Reply::empty().with_reasoning("I should think first"),
        final_report("markdown", "answer"),
    ]);
    let (result, events) = harness.run(Harness::request(agent(""), "go")).await;
    assert!(result.success);
    assert_eq!(result.turns, 2);
    let kept = result
        .conversation
        .iter()
        .find(|m| m.role == Role::Assistant)
        .expect("assistant");
    assert_eq!(kept.reasoning.as_deref(), Some("I should think first"));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::Thinking(t) if t.text == "I should think first"))
    );
}

#[tokio::test]
async fn tool_arguments_are_repaired_or_dropped_and_valid_calls_still_run() {
    let harness = Harness::new(vec![
        calls(&[
            ("c1", "test__echo", "{'word': 'repaired',}"),
            ("c2", "test__echo", "{{{ not json at all"),
            ("c3", "test__echo", r#"{"word":"fine"}"#),
        ]),
        final_report("markdown", "done"),
    ]);
    let (result, _) = harness.run(Harness::request(agent(""), "go")).await;
    let executed: Vec<serde_json::Value> = harness
        .tools
        .calls()
        .into_iter()
        .map(|(_, args)| args)
        .collect();
    assert_eq!(
        executed,
        vec![json!({"word": "repaired"}), json!({"word": "fine"})]
    );
    let dropped = result
        .conversation
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("c2"))
        .expect("reply to c2");
    assert!(dropped.content.as_deref().is_some_and(|c| {
        c.starts_with("(tool failed: the arguments of test__echo are not a valid JSON object")
    }));
    assert!(result.success);
}

#[tokio::test]
async fn a_markdown_final_report_ends_the_run_with_success() {
    let harness = Harness::new(vec![final_report("markdown", "# Done")]);
    let (result, events) = harness.run(Harness::request(agent(""), "go")).await;
    assert!(result.success);
    assert_eq!(result.exit_reason, ExitReason::FinalAnswer);
    let report = result.final_report.expect("report");
    assert_eq!(
        (
            report.status,
            report.format.as_str(),
            report.content.as_deref()
        ),
        (ReportStatus::Success, "markdown", Some("# Done"))
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, AgentEvent::Output(t) if t.text == "# Done")),
        "the answer is published as output"
    );
    let last = result.conversation.last().expect("last");
    assert_eq!(
        last.tool_calls[0].name, "agent__final_report",
        "the conversation ends with the final-report call"
    );
}

#[tokio::test]
async fn the_report_status_comes_from_its_source_not_the_model() {
    let arguments =
        json!({"report_format": "markdown", "report_content": "fine", "status": "failure"})
            .to_string();
    let harness = Harness::new(vec![calls(&[("f", "agent__final_report", &arguments)])]);
    let (result, _) = harness.run(Harness::request(agent(""), "go")).await;
    assert_eq!(
        result.final_report.expect("report").status,
        ReportStatus::Success
    );
}

#[tokio::test]
async fn json_reports_are_validated_repaired_and_base64_is_decoded() {
    let schema = "output:\n  format: json\n  schema:\n    type: object\n    required: [items]\n    properties:\n      items: {type: array, items: {type: string}}";
    let stringified =
        json!({"report_format": "json", "content_json": {"items": "[\"a\", \"b\"]"}}).to_string();
    let harness = Harness::new(vec![calls(&[("f", "agent__final_report", &stringified)])]);
    let (result, _) = harness.run(Harness::request(agent(schema), "go")).await;
    let report = result.final_report.expect("report");
    assert_eq!(report.format, "json");
    assert_eq!(report.content_json, Some(json!({"items": ["a", "b"]})));

    let encoded = json!({"report_format": "markdown", "report_content": "SGVsbG8sIHdvcmxk", "encoding": "base64"}).to_string();
    let harness = Harness::new(vec![calls(&[("f", "agent__final_report", &encoded)])]);
    let (result, _) = harness.run(Harness::request(agent(""), "go")).await;
    assert_eq!(
        result.final_report.expect("report").content.as_deref(),
        Some("Hello, world")
    );
}

#[tokio::test]
async fn a_failing_final_report_collapses_the_remaining_turns() {
    let invalid = json!({"report_format": "json", "content_json": {"items": 5}}).to_string();
    let schema = "maxTurns: 10\noutput:\n  format: json\n  schema: {type: object, required: [items], properties: {items: {type: array}}}";
    let harness = Harness::new(vec![
        calls(&[("f1", "agent__final_report", &invalid)]),
        calls(&[(
            "f2",
            "agent__final_report",
            &json!({"report_format": "json", "content_json": {"items": []}}).to_string(),
        )]),
    ]);
    let (result, events) = harness.run(Harness::request(agent(schema), "go")).await;
    assert!(result.success);
    let turns = turn_events(&events);
    assert_eq!(turns.len(), 2);
    assert!(
        turns[1].3,
        "the turn after a failed final report is the final turn"
    );
    let failure = result
        .conversation
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("f1"))
        .expect("reply");
    assert!(
        failure
            .content
            .as_deref()
            .is_some_and(|c| c.starts_with("(tool failed:") && c.contains("/items")),
        "{failure:?}"
    );
    let report_entries: Vec<EntryStatus> = result
        .accounting
        .iter()
        .filter_map(|e| match e {
            AccountingEntry::Tool(t) if t.command == "agent__final_report" => Some(t.status),
            _ => None,
        })
        .collect();
    assert_eq!(report_entries, vec![EntryStatus::Failed, EntryStatus::Ok]);
}

#[tokio::test]
async fn plain_text_is_retried_before_the_last_turn_and_accepted_on_it() {
    let harness = Harness::new(vec![
        Reply::text("just text"),
        Reply::text("still text"),
        Reply::text("last turn text"),
    ]);
    let (result, _) = harness
        .run(Harness::request(agent("maxTurns: 2\nmaxRetries: 2"), "go"))
        .await;
    assert_eq!(
        harness.llm.requests()[1]
            .messages
            .last()
            .and_then(|m| m.content.clone())
            .as_deref(),
        Some(EMPTY_RESPONSE_NOTICE)
    );
    assert!(result.success);
    assert_eq!(result.exit_reason, ExitReason::TextFallback);
    let report = result.final_report.expect("report");
    assert_eq!(
        (report.status, report.content.as_deref()),
        (ReportStatus::Success, Some("last turn text"))
    );
}

#[tokio::test]
async fn text_finalization_answers_with_the_first_message_without_tool_calls() {
    let harness = Harness::new(vec![
        calls(&[("c", "test__echo", "{}")]),
        Reply::text("the answer"),
    ]);
    let (result, events) = harness
        .run(Harness::request(agent("finalization: text"), "go"))
        .await;
    assert!(result.success);
    assert_eq!(result.exit_reason, ExitReason::FinalAnswer);
    assert_eq!(
        result.final_report.expect("report").content.as_deref(),
        Some("the answer")
    );
    assert!(
        harness.llm.requests()[0]
            .tools
            .iter()
            .all(|t| t.name != "agent__final_report")
    );
    let output: String = events
        .iter()
        .filter_map(|e| {
            if let AgentEvent::Output(t) = e {
                Some(t.text.clone())
            } else {
                None
            }
        })
        .collect();
    assert_eq!(output, "the answer", "text mode streams the answer once");
}

#[tokio::test]
async fn a_graceful_stop_forces_the_final_turn() {
    let harness = Harness::new(vec![final_report("markdown", "stopped early")]);
    harness.control.stop.cancel();
    let (result, events) = harness
        .run(Harness::request(agent("maxTurns: 5"), "go"))
        .await;
    assert_eq!(
        turn_events(&events),
        vec![(1, 1, false, true, Some("user_stop".into()))]
    );
    assert_eq!(
        tool_names(&harness.llm.requests()[0]),
        vec!["agent__final_report"]
    );
    assert!(result.success);
    assert_eq!(result.exit_reason, ExitReason::UserStop);
}

#[tokio::test]
async fn an_abort_during_an_llm_stream_returns_promptly() {
    let harness = Harness::new(vec![Reply::hang()]);
    let abort = harness.control.abort.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        abort.cancel();
    });
    let started = std::time::Instant::now();
    let (result, events) = harness.run(Harness::request(agent(""), "go")).await;
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(result.exit_reason, ExitReason::Cancelled);
    assert!(!result.success);
    assert!(
        matches!(events.last(), Some(AgentEvent::RunFinished(s)) if s.status == agentd::agent::RunStatus::Cancelled)
    );
}

#[tokio::test]
async fn an_abort_during_a_tool_call_returns_promptly() {
    let harness = Harness::new(vec![
        calls(&[("c", "test__slow", r#"{"ms": 60000}"#)]),
        final_report("markdown", "never"),
    ]);
    let abort = harness.control.abort.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        abort.cancel();
    });
    let started = std::time::Instant::now();
    let (result, _) = harness.run(Harness::request(agent(""), "go")).await;
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(result.exit_reason, ExitReason::Cancelled);
}

#[tokio::test]
async fn empty_input_ends_at_once_without_an_llm_call() {
    let harness = Harness::new(vec![final_report("markdown", "never")]);
    let (result, _) = harness.run(Harness::request(agent(""), " \n\t ")).await;
    assert_eq!(result.exit_reason, ExitReason::EmptyInput);
    assert!(!result.success);
    assert!(harness.llm.requests().is_empty());
}

#[tokio::test]
async fn a_panicking_tool_is_a_failed_tool_not_a_crash() {
    let harness = Harness::new(vec![
        calls(&[("p", "test__panic", "{}")]),
        final_report("markdown", "survived"),
    ]);
    let (result, _) = harness.run(Harness::request(agent(""), "go")).await;
    assert!(result.success);
    let reply = result
        .conversation
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("p"))
        .expect("reply");
    assert_eq!(
        reply.content.as_deref(),
        Some("(tool failed: the tool crashed)")
    );
}

#[tokio::test]
async fn a_slow_tool_times_out_and_is_accounted_as_failed() {
    let harness = Harness::new(vec![
        calls(&[("s", "test__slow", r#"{"ms": 5000}"#)]),
        final_report("markdown", "ok"),
    ]);
    let (result, _) = harness
        .run(Harness::request(agent("toolTimeout: 100ms"), "go"))
        .await;
    let reply = result
        .conversation
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("s"))
        .expect("reply");
    assert_eq!(reply.content.as_deref(), Some("(tool failed: timeout)"));
    let entry = result.accounting.iter().find_map(|e| match e {
        AccountingEntry::Tool(t) if t.command == "test__slow" => Some(t.clone()),
        _ => None,
    });
    let entry = entry.expect("tool entry");
    assert_eq!(entry.status, EntryStatus::Failed);
    assert_eq!(entry.error.as_deref(), Some("timeout"));
}

#[tokio::test]
async fn the_conversation_follows_the_contract_order() {
    let harness = Harness::new(vec![
        calls(&[("e", "test__echo", r#"{"x":1}"#), ("f", "test__fail", "{}")]),
        final_report("markdown", "done"),
    ]);
    let (result, _) = harness.run(Harness::request(agent(""), "the task")).await;
    let roles: Vec<Role> = result.conversation.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        vec![
            Role::System,
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Tool,
            Role::Assistant
        ]
    );
    assert_eq!(result.conversation[1].content.as_deref(), Some("the task"));
    assert_eq!(
        result.conversation[3].content.as_deref(),
        Some(r#"echo: {"x":1}"#)
    );
    assert_eq!(
        result.conversation[4].content.as_deref(),
        Some("(tool failed: it broke)")
    );
    assert_eq!(result.conversation[4].tool_call_id.as_deref(), Some("f"));
}

#[tokio::test]
async fn events_are_emitted_in_order_as_they_happen() {
    let harness = Harness::new(vec![
        calls(&[("e", "test__echo", "{}")]),
        final_report("markdown", "done"),
    ]);
    let (_, events) = harness.run(Harness::request(agent(""), "go")).await;
    let kinds: Vec<&str> = events.iter().map(AgentEvent::kind).collect();
    assert_eq!(
        kinds,
        vec![
            "run.started",
            "turn.started",
            "accounting",
            "tool.started",
            "tool.finished",
            "accounting",
            "turn.started",
            "accounting",
            "accounting",
            "output",
            "final_report",
            "run.finished",
        ]
    );
}

#[tokio::test]
async fn a_panicking_provider_still_yields_a_result_and_a_final_event() {
    let harness = Harness::new(vec![Reply::panic()]);
    let (result, events) = harness.run(Harness::request(agent(""), "go")).await;
    assert!(!result.success);
    assert_eq!(result.exit_reason, ExitReason::InternalError);
    assert!(matches!(events.last(), Some(AgentEvent::RunFinished(_))));
}

#[tokio::test]
async fn a_model_that_never_answers_usably_ends_with_no_llm_response() {
    let harness = Harness::new(vec![
        Reply::empty(),
        Reply::empty(),
        Reply::empty(),
        Reply::empty(),
    ]);
    let (result, _) = harness
        .run(Harness::request(agent("maxTurns: 10\nmaxRetries: 2"), "go"))
        .await;
    assert_eq!(
        harness.llm.requests().len(),
        4,
        "two attempts, then a forced final turn of two more"
    );
    assert_eq!(result.exit_reason, ExitReason::NoLlmResponse);
    assert!(!result.success);
    assert_eq!(
        result.final_report.and_then(|r| r.metadata),
        Some(json!({"reason": "no_llm_response"}))
    );
}
