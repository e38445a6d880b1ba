//! The XML transports (contract §11, seeds/003): for `xml-final` and `xml`, a model that answers
//! correctly, one that makes each mistake (and is told exactly what was wrong), a final tag split
//! across chunks, unclosed tags under each stop reason, a json final that fails then succeeds,
//! and XML-NEXT never reaching the stored conversation.

use agentd::agent::{AgentEvent, ExitReason};
use agentd::llm::{LlmRequest, Role, StopReason};
use agentd::vocabulary::result::{AccountingEntry, EntryStatus};
use serde_json::json;

use crate::support::mock_llm::Reply;
use crate::support::scripted::{Harness, agent, calls, session_nonce};

const FINAL: &str =
    r#"<ai-agent-NONCE-FINAL format="markdown">The answer is 42.</ai-agent-NONCE-FINAL>"#;

fn xml_next(request: &LlmRequest) -> String {
    let last = request
        .messages
        .last()
        .and_then(|m| m.content.clone())
        .unwrap_or_default();
    assert!(
        last.starts_with("# System Notice"),
        "the last message of an XML request is XML-NEXT: {last}"
    );
    last
}

fn tool_names(request: &LlmRequest) -> Vec<String> {
    request.tools.iter().map(|t| t.name.clone()).collect()
}

fn output_text(events: &[AgentEvent]) -> String {
    events
        .iter()
        .filter_map(|e| {
            if let AgentEvent::Output(t) = e {
                Some(t.text.clone())
            } else {
                None
            }
        })
        .collect()
}

#[tokio::test]
async fn xml_final_keeps_native_tools_and_takes_the_final_report_from_the_tag() {
    let harness = Harness::new(vec![
        calls(&[("c1", "test__echo", r#"{"x":1}"#)]),
        Reply::text(format!("Done. {FINAL} bye")),
    ]);
    let (result, events) = harness
        .run(Harness::request(agent("transport: xml-final"), "go"))
        .await;
    assert!(result.success, "{:?}", result.error);
    assert_eq!(result.exit_reason, ExitReason::FinalAnswer);
    assert_eq!(
        result
            .final_report
            .as_ref()
            .and_then(|r| r.content.as_deref()),
        Some("The answer is 42.")
    );
    let requests = harness.llm.requests();
    let tools = tool_names(&requests[0]);
    assert!(
        tools.contains(&"test__echo".to_string())
            && !tools.contains(&"agent__final_report".to_string()),
        "{tools:?}"
    );
    let next = xml_next(&requests[0]);
    let nonce = session_nonce(&requests[0]).expect("nonce");
    assert!(
        next.contains(&format!("<ai-agent-{nonce}-FINAL format=\"markdown\">")),
        "{next}"
    );
    assert!(
        next.contains("native tool calls") && next.contains("`test__echo`"),
        "tools are listed: {next}"
    );
    assert_eq!(
        session_nonce(&requests[1]).as_deref(),
        Some(nonce.as_str()),
        "the nonce is fixed for the session"
    );
    assert_eq!(
        output_text(&events),
        "The answer is 42.",
        "only the tag's payload is shown"
    );
    assert!(
        result.conversation.iter().all(|m| !m
            .content
            .as_deref()
            .unwrap_or("")
            .contains("# System Notice")),
        "XML-NEXT is never stored"
    );
    let final_entry = result.accounting.iter().find_map(|e| match e {
        AccountingEntry::Tool(t) if t.command == "agent__final_report_xml" => Some(t.clone()),
        _ => None,
    });
    let final_entry = final_entry.expect("final report accounting");
    assert_eq!(
        (
            final_entry.status,
            final_entry.source.as_deref(),
            final_entry.mcp_server.as_str()
        ),
        (EntryStatus::Ok, Some("xml"), "agent")
    );
}

#[tokio::test]
async fn xml_mode_calls_tools_through_slots_and_answers_them_as_user_messages() {
    let harness = Harness::new(vec![
        Reply::text(
            r#"Let me check. <ai-agent-NONCE-0001 tool="test__echo">{"x": 1}</ai-agent-NONCE-0001>"#,
        ),
        Reply::text(r#"<ai-agent-NONCE-0002 tool="test__fail">{}</ai-agent-NONCE-0002>"#),
        Reply::text(FINAL),
    ]);
    let (result, _) = harness
        .run(Harness::request(agent("transport: xml"), "go"))
        .await;
    assert!(result.success, "{:?}", result.error);
    let requests = harness.llm.requests();
    assert!(
        requests.iter().all(|r| r.tools.is_empty()),
        "xml mode withholds tools from the provider"
    );
    let nonce = session_nonce(&requests[0]).expect("nonce");
    assert!(xml_next(&requests[0]).contains("free slot (0001 to 0010)"));
    assert!(
        xml_next(&requests[1]).contains("free slot (0002 to 0011)"),
        "slots continue across turns"
    );
    assert_eq!(
        harness.tools.calls()[0],
        ("echo".to_string(), json!({"x": 1}))
    );
    let past: Vec<&str> = result
        .conversation
        .iter()
        .filter(|m| m.role == Role::User)
        .filter_map(|m| m.content.as_deref())
        .collect();
    assert!(
        past[1].starts_with(&format!(
            "System Notice: tool response for {nonce}-0001 (test__echo)"
        )),
        "{past:?}"
    );
    assert!(
        past[1].contains("<response>\necho: {\"x\":1}\n</response>"),
        "{past:?}"
    );
    assert!(past[2].contains("(tool failed: it broke)"), "{past:?}");
    let sources: Vec<Option<String>> = result
        .accounting
        .iter()
        .filter_map(|e| match e {
            AccountingEntry::Tool(t) if t.command.starts_with("test__") => Some(t.source.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(
        sources,
        vec![Some("xml".to_string()), Some("xml".to_string())]
    );
}

/// Runs one mistake, then a correct answer; returns what the second XML-NEXT told the model.
async fn feedback_after(transport: &str, mistake: &str) -> String {
    let harness = Harness::new(vec![Reply::text(mistake), Reply::text(FINAL)]);
    let (result, _) = harness
        .run(Harness::request(
            agent(&format!("transport: {transport}\nmaxRetries: 3")),
            "go",
        ))
        .await;
    assert!(result.success, "{mistake}: {:?}", result.error);
    let requests = harness.llm.requests();
    assert_eq!(requests.len(), 2, "{mistake}");
    xml_next(&requests[1])
}

#[tokio::test]
async fn every_mistake_is_told_to_the_model_never_dropped_silently() {
    let cases = [
        (
            "xml-final",
            r#"<ai-agent-deadbeef-FINAL format="markdown">x</ai-agent-deadbeef-FINAL>"#,
            "uses the nonce `deadbeef`",
        ),
        (
            "xml-final",
            r#"<ai-agent-NONCE-FINAL format="markdown">   </ai-agent-NONCE-FINAL>"#,
            "is empty",
        ),
        (
            "xml-final",
            r#"<ai-agent-NONCE-0001 tool="test__echo">{}</ai-agent-NONCE-0001>"#,
            "called with native tool calls",
        ),
        (
            "xml-final",
            r#"<ai-agent-NONCE-FINAL format="markd"#,
            "never closed with `>`",
        ),
        (
            "xml-final",
            "I think the answer is 42.",
            "plain text outside the FINAL tag",
        ),
        (
            "xml",
            r#"<ai-agent-NONCE-0001 tool="test__echo">{"never": "closed"}"#,
            "has no closing",
        ),
        (
            "xml",
            r#"<ai-agent-NONCE-0042 tool="test__echo">{}</ai-agent-NONCE-0042>"#,
            "not one of this turn's slots",
        ),
        (
            "xml",
            r#"<ai-agent-NONCE-0001>{}</ai-agent-NONCE-0001>"#,
            "no `tool=\"…\"` attribute",
        ),
    ];
    for (transport, mistake, expected) in cases {
        let next = feedback_after(transport, mistake).await;
        assert!(
            next.contains("Your previous response could not be used"),
            "{mistake}: {next}"
        );
        assert!(
            next.contains(expected),
            "{mistake}: expected {expected:?} in {next}"
        );
    }
}

#[tokio::test]
async fn a_final_tag_split_across_chunks_is_reassembled_and_streamed() {
    let harness = Harness::new(vec![Reply::text_in_pieces(&[
        "thinking out loud <ai-ag",
        "ent-NONCE-FIN",
        "AL format=\"markdown\">Hel",
        "lo wor",
        "ld</ai-agent-NONCE-F",
        "INAL> done",
    ])]);
    let (result, events) = harness
        .run(Harness::request(agent("transport: xml-final"), "go"))
        .await;
    assert_eq!(
        result.final_report.and_then(|r| r.content).as_deref(),
        Some("Hello world")
    );
    assert_eq!(output_text(&events), "Hello world");
}

#[tokio::test]
async fn an_unclosed_final_tag_depends_on_the_stop_reason() {
    let unclosed = "<ai-agent-NONCE-FINAL format=\"markdown\">an answer without its closing tag";
    for stop in [StopReason::Stop, StopReason::Other("eos_token".into())] {
        let harness = Harness::new(vec![
            Reply::text_in_pieces(&[unclosed]).with_finish_reason(stop.as_str()),
        ]);
        let (result, _) = harness
            .run(Harness::request(agent("transport: xml-final"), "go"))
            .await;
        assert!(result.success, "{stop:?}");
        assert_eq!(
            result.final_report.and_then(|r| r.content).as_deref(),
            Some("an answer without its closing tag")
        );
    }
    let harness = Harness::new(vec![
        Reply::text_in_pieces(&[unclosed]).with_finish_reason("length"),
        Reply::text(FINAL),
    ]);
    let (result, _) = harness
        .run(Harness::request(agent("transport: xml-final"), "go"))
        .await;
    assert!(result.success);
    assert_eq!(
        result.final_report.and_then(|r| r.content).as_deref(),
        Some("The answer is 42."),
        "a cut answer is retried"
    );
    assert!(xml_next(&harness.llm.requests()[1]).contains("cut off by the output token limit"));
}

#[tokio::test]
async fn a_json_final_that_fails_its_schema_is_retried_with_the_reason() {
    let schema = "output:\n  format: json\n  schema: {type: object, required: [answer], properties: {answer: {type: integer}}}";
    let harness = Harness::new(vec![
        Reply::text(
            r#"<ai-agent-NONCE-FINAL format="json">{"answer": "forty-two"}</ai-agent-NONCE-FINAL>"#,
        ),
        Reply::text(r#"<ai-agent-NONCE-FINAL format="json">{"answer": 42}</ai-agent-NONCE-FINAL>"#),
    ]);
    let (result, events) = harness
        .run(Harness::request(
            agent(&format!("transport: xml-final\n{schema}")),
            "go",
        ))
        .await;
    assert!(result.success, "{:?}", result.error);
    assert_eq!(
        result
            .final_report
            .as_ref()
            .and_then(|r| r.content_json.clone()),
        Some(json!({"answer": 42}))
    );
    let first = xml_next(&harness.llm.requests()[0]);
    assert!(
        first.contains("valid against this schema") && first.contains("\"required\":[\"answer\"]"),
        "{first}"
    );
    let second = xml_next(&harness.llm.requests()[1]);
    assert!(
        second.contains("/answer"),
        "the schema error names the field: {second}"
    );
    assert_eq!(
        output_text(&events),
        r#"{"answer":42}"#,
        "json is shown once validated"
    );
}

#[tokio::test]
async fn a_native_final_report_call_in_xml_final_is_a_misuse_that_collapses_the_turns() {
    let arguments =
        json!({"report_format": "markdown", "report_content": "via the tool"}).to_string();
    let harness = Harness::new(vec![
        calls(&[("f", "agent__final_report", &arguments)]),
        Reply::text(FINAL),
    ]);
    let (result, events) = harness
        .run(Harness::request(
            agent("transport: xml-final\nmaxTurns: 10"),
            "go",
        ))
        .await;
    let reply = result
        .conversation
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("f"))
        .and_then(|m| m.content.clone());
    assert!(
        reply
            .as_deref()
            .is_some_and(|r| r.contains("not a tool in this session")),
        "{reply:?}"
    );
    let turns: Vec<(u32, bool)> = events
        .iter()
        .filter_map(|e| {
            if let AgentEvent::TurnStarted(t) = e {
                Some((t.turn, t.is_final_turn))
            } else {
                None
            }
        })
        .collect();
    assert_eq!(turns, vec![(1, false), (2, true)]);
    assert!(result.success);
}

#[tokio::test]
async fn a_leading_think_block_and_its_fake_tags_are_ignored() {
    let harness = Harness::new(vec![Reply::text(
        "<think>maybe <ai-agent-NONCE-FINAL>wrong</ai-agent-NONCE-FINAL></think><ai-agent-NONCE-FINAL format=\"markdown\">right</ai-agent-NONCE-FINAL>",
    )]);
    let (result, _) = harness
        .run(Harness::request(agent("transport: xml-final"), "go"))
        .await;
    assert_eq!(
        result.final_report.and_then(|r| r.content).as_deref(),
        Some("right")
    );
}

#[tokio::test]
async fn forced_final_turns_advertise_only_the_final_slot() {
    let harness = Harness::new(vec![
        Reply::text(r#"<ai-agent-NONCE-0001 tool="test__echo">{}</ai-agent-NONCE-0001>"#),
        Reply::text(FINAL),
    ]);
    let (result, _) = harness
        .run(Harness::request(agent("transport: xml\nmaxTurns: 2"), "go"))
        .await;
    assert!(result.success);
    let last = xml_next(&harness.llm.requests()[1]);
    assert!(
        last.contains("final turn") && last.contains("-FINAL"),
        "{last}"
    );
    assert!(
        !last.contains("test__echo") && !last.contains("free slot"),
        "{last}"
    );
}

#[tokio::test]
async fn xml_next_counts_toward_the_context_guard() {
    let probe = Harness::new(vec![Reply::text(FINAL)]);
    probe
        .run(Harness::request(
            agent("transport: xml-final\nmaxOutputTokens: 100"),
            "go",
        ))
        .await;
    let request = &probe.llm.requests()[0];
    let tokenizer = agentd::llm::tokens::Tokenizer::APPROXIMATE;
    let with_next = tokenizer.messages(&request.messages) + tokenizer.tools(&request.tools);
    let without_next = with_next - tokenizer.message(request.messages.last().expect("XML-NEXT"));
    assert!(with_next - without_next > 60, "XML-NEXT is substantial");
    // A window that holds the conversation and tools but not XML-NEXT as well.
    let window = without_next + 30 + 256 + 100;
    let harness = Harness::new(vec![Reply::text(FINAL)]);
    let (_, events) = harness
        .run(Harness::request(
            agent(&format!(
                "transport: xml-final\nmaxOutputTokens: 100\ncontextWindow: {window}"
            )),
            "go",
        ))
        .await;
    let first_turn = events.iter().find_map(|e| {
        if let AgentEvent::TurnStarted(t) = e {
            Some(t.forced_final_reason.clone())
        } else {
            None
        }
    });
    assert_eq!(first_turn, Some(Some("context".to_string())));
}
