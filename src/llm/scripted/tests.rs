//! The scripted model as the session meets it: each model name, every way an answer ends
//! (text, the report tool, the XML FINAL tag, `xml` slot tags built with the session's own
//! renderers), schema-valid JSON, tool choice and argument filling, and its limits.

use std::time::Duration;

use futures_util::StreamExt;
use serde_json::{Map, Value, json};

use super::*;
use crate::agent::final_report::{FinalReportSpec, final_report_parameters};
use crate::agent::internal_tools::task_status_definition;
use crate::agent::xml::XmlMode;
use crate::agent::xml::next::{NextNotice, render};
use crate::agent::xml::scan::{ScanRules, scan};
use crate::llm::{
    ChatMessage, LlmResponse, ResponseAssembler, SamplingParams, ToolCall, ToolChoice,
    ToolDefinition,
};

const NONCE: &str = "0a1b2c3d";

fn request(model: &str, messages: Vec<ChatMessage>, tools: Vec<ToolDefinition>) -> LlmRequest {
    LlmRequest {
        model: model.into(),
        messages,
        tools,
        sampling: SamplingParams::default(),
        tool_choice: None,
        timeout: Duration::from_secs(5),
        max_response_bytes: usize::MAX,
    }
}

fn conversation(prompt: &str) -> Vec<ChatMessage> {
    vec![
        ChatMessage::system("You are a test agent."),
        ChatMessage::user(prompt),
    ]
}

fn tool(name: &str, parameters: Value) -> ToolDefinition {
    ToolDefinition {
        name: name.into(),
        description: format!("the {name} tool"),
        parameters,
    }
}

fn final_report_tool(format: &str, schema: Option<&Value>) -> ToolDefinition {
    tool(
        "agent__final_report",
        final_report_parameters(format, schema),
    )
}

/// The deltas of one response and the response they assemble into.
async fn respond(request: LlmRequest) -> (Vec<LlmDelta>, LlmResponse) {
    let stream = ScriptedProvider::new("scripted")
        .stream(request)
        .await
        .expect("the scripted model answers");
    let deltas: Vec<LlmDelta> = stream
        .map(|delta| delta.expect("no error mid-stream"))
        .collect()
        .await;
    let mut assembler = ResponseAssembler::default();
    for delta in &deltas {
        assembler.push(delta).expect("within bounds");
    }
    (deltas, assembler.finish())
}

fn text_pieces(deltas: &[LlmDelta]) -> usize {
    deltas
        .iter()
        .filter(|d| matches!(d, LlmDelta::Text(_)))
        .count()
}

/// The one tool call of a response, its arguments parsed.
fn only_call(response: &LlmResponse) -> (String, Map<String, Value>) {
    assert_eq!(response.tool_calls.len(), 1, "{response:?}");
    let call = &response.tool_calls[0];
    let arguments = serde_json::from_str(&call.arguments).expect("arguments are JSON");
    (call.name.clone(), arguments)
}

/// An XML-NEXT notice as the session renders it.
fn notice(mode: XmlMode, tools: &[ToolDefinition], format: &str, schema: Option<&Value>) -> String {
    render(&NextNotice {
        turn: 1,
        max_turns: 10,
        attempt: 1,
        max_attempts: 3,
        context_percent: 1,
        nonce: NONCE,
        mode,
        tools,
        first_slot: 1,
        slot_count: 4,
        is_final: tools.is_empty(),
        final_slot: true,
        format,
        schema,
        feedback: &[],
    })
}

fn with_result(prompt: &str, tool_name: &str, result: &str) -> Vec<ChatMessage> {
    let mut messages = conversation(prompt);
    let mut call = ChatMessage::assistant("");
    call.content = None;
    call.tool_calls = vec![ToolCall {
        id: "call_1".into(),
        name: tool_name.into(),
        arguments: "{}".into(),
    }];
    messages.push(call);
    let mut answer = ChatMessage::new(crate::llm::Role::Tool, result);
    answer.tool_call_id = Some("call_1".into());
    messages.push(answer);
    messages
}

#[test]
fn model_names_parse_and_unknown_ones_list_the_known() {
    for model in ScriptedModel::ALL {
        assert_eq!(ScriptedModel::parse(model.name()), Ok(model));
    }
    let error = ScriptedModel::parse("gpt-4o").unwrap_err().to_string();
    assert!(error.contains("no model `gpt-4o`"), "{error}");
    assert!(error.contains("echo, think, tools and json"), "{error}");
    assert!(ScriptedModel::parse("Echo").is_err(), "names are exact");
}

#[tokio::test]
async fn an_unknown_model_is_a_model_error_before_any_output() {
    let result = ScriptedProvider::new("scripted")
        .stream(request("nope", conversation("hi"), vec![]))
        .await;
    match result {
        Err(LlmError::Model(message)) => assert!(message.contains("`nope`"), "{message}"),
        Err(other) => panic!("wrong error {other:?}"),
        Ok(_) => panic!("an unknown model must not answer"),
    }
}

#[tokio::test]
async fn echo_repeats_the_last_user_message_in_pieces_with_usage() {
    let mut messages = conversation("an earlier question");
    messages.push(ChatMessage::assistant("an earlier answer"));
    messages.push(ChatMessage::user("hello there, scripted model"));
    let (deltas, response) = respond(request("echo", messages, vec![])).await;
    assert_eq!(
        response.text,
        "Hi! I'm agentd's scripted model, so I repeat what you send: hello there, scripted model"
    );
    assert!(text_pieces(&deltas) > 1, "streams in pieces: {deltas:?}");
    let usage = response.usage.expect("usage reported");
    assert!(
        usage.input_tokens > 10 && usage.output_tokens > 10,
        "{usage:?}"
    );
    assert_eq!(response.stop_reason, Some(StopReason::Stop));
    assert!(response.reasoning.is_empty() && response.tool_calls.is_empty());
}

#[tokio::test]
async fn echo_skips_session_notices_and_greets_an_empty_message() {
    let mut messages = conversation("the real question");
    messages.push(ChatMessage::user(
        "System notice: the previous response was empty. Answer the user's request now.",
    ));
    let (_, response) = respond(request("echo", messages, vec![])).await;
    assert!(
        response.text.ends_with("the real question"),
        "{}",
        response.text
    );
    let (_, response) = respond(request("echo", conversation("  "), vec![])).await;
    assert!(
        response.text.contains("Send me a message"),
        "{}",
        response.text
    );
}

#[tokio::test]
async fn echo_repeats_at_most_its_limit() {
    let at = "a".repeat(ECHO_MAX_CHARS);
    let (_, response) = respond(request("echo", conversation(&at), vec![])).await;
    assert!(
        response.text.ends_with(&format!(": {at}")),
        "whole at the limit"
    );
    let past = "é".repeat(ECHO_MAX_CHARS + 1);
    let (_, response) = respond(request("echo", conversation(&past), vec![])).await;
    let expected = format!(": {}…", "é".repeat(ECHO_MAX_CHARS));
    assert!(response.text.ends_with(&expected), "cut past the limit");
}

#[tokio::test]
async fn think_streams_reasoning_before_the_answer() {
    let (deltas, response) = respond(request(
        "think",
        conversation("why is the sky blue"),
        vec![],
    ))
    .await;
    let first_text = deltas.iter().position(|d| matches!(d, LlmDelta::Text(_)));
    let last_reasoning = deltas
        .iter()
        .rposition(|d| matches!(d, LlmDelta::Reasoning(_)));
    assert!(
        last_reasoning < first_text && last_reasoning.is_some(),
        "{deltas:?}"
    );
    assert!(
        response.reasoning.contains("5 words"),
        "{}",
        response.reasoning
    );
    assert!(response.text.ends_with("why is the sky blue"));
}

#[tokio::test]
async fn tools_calls_the_first_offered_tool_with_arguments_from_its_schema() {
    let tools = vec![
        tool(
            "time__get_current_time",
            json!({"type": "object", "required": ["timezone"], "properties": {"timezone": {"type": "string"}}}),
        ),
        tool("rest__agentd_health", json!({"type": "object"})),
        task_status_definition(),
    ];
    let (deltas, response) =
        respond(request("tools", conversation("what time is it?"), tools)).await;
    let (name, arguments) = only_call(&response);
    assert_eq!(name, "time__get_current_time");
    assert_eq!(Value::Object(arguments), json!({"timezone": "UTC"}));
    assert_eq!(response.stop_reason, Some(StopReason::ToolCalls));
    assert!(response.text.is_empty(), "no text beside the call");
    let fragments = deltas
        .iter()
        .filter(|d| matches!(d, LlmDelta::ToolCallFragment { .. }))
        .count();
    assert!(fragments > 1, "the call streams in fragments");
}

#[tokio::test]
async fn tools_calls_the_tool_the_user_names_or_the_one_tool_choice_forces() {
    let tools = vec![
        tool("rest__agentd_health", json!({"type": "object"})),
        tool("rest__agentd_ready", json!({"type": "object"})),
        tool(
            "agent__researcher",
            json!({"type": "object", "required": ["prompt"], "properties": {"prompt": {"type": "string"}}}),
        ),
    ];
    let asked = |prompt: &str| request("tools", conversation(prompt), tools.clone());
    let (_, response) = respond(asked("please use agentd_ready now")).await;
    assert_eq!(only_call(&response).0, "rest__agentd_ready");
    let (_, response) = respond(asked("ask agent__researcher about cats")).await;
    let (name, arguments) = only_call(&response);
    assert_eq!(name, "agent__researcher");
    assert_eq!(arguments["prompt"], "ask agent__researcher about cats");
    let (_, response) = respond(asked("not_agentd_ready is no mention")).await;
    assert_eq!(only_call(&response).0, "rest__agentd_health");
    let mut forced = asked("anything");
    forced.tool_choice = Some(ToolChoice::Function("rest__agentd_ready".into()));
    let (_, response) = respond(forced).await;
    assert_eq!(only_call(&response).0, "rest__agentd_ready");
}

#[tokio::test]
async fn tools_sums_up_the_results_once_they_are_there() {
    let tools = vec![tool("rest__agentd_health", json!({"type": "object"}))];
    let messages = with_result("is it up?", "rest__agentd_health", "{\"status\":\"ok\"}");
    let (_, response) = respond(request("tools", messages, tools.clone())).await;
    assert!(response.tool_calls.is_empty());
    assert_eq!(
        response.text,
        "I called `rest__agentd_health` and it answered: {\"status\":\"ok\"}"
    );
    let denied = with_result("is it up?", "rest__agentd_health", "denied: by the user");
    let (_, response) = respond(request("tools", denied, tools.clone())).await;
    assert!(
        response.text.ends_with("denied: by the user"),
        "{}",
        response.text
    );
    // A result before the latest user message belongs to an earlier question.
    let mut later = with_result("is it up?", "rest__agentd_health", "ok");
    later.push(ChatMessage::user("and now?"));
    let (_, response) = respond(request("tools", later, tools)).await;
    assert_eq!(only_call(&response).0, "rest__agentd_health");
}

#[tokio::test]
async fn tool_results_are_quoted_up_to_their_limit() {
    let tools = vec![tool("t__x", json!({"type": "object"}))];
    let at = "r".repeat(RESULT_MAX_CHARS);
    let (_, response) = respond(request(
        "tools",
        with_result("go", "t__x", &at),
        tools.clone(),
    ))
    .await;
    assert!(response.text.ends_with(&format!(": {at}")));
    let past = "r".repeat(RESULT_MAX_CHARS + 1);
    let (_, response) = respond(request("tools", with_result("go", "t__x", &past), tools)).await;
    assert!(response.text.ends_with(&format!(": {at}…")));
}

#[tokio::test]
async fn tools_without_tools_answers_like_echo_and_others_never_call() {
    let (_, response) = respond(request("tools", conversation("hi"), vec![])).await;
    assert!(response.text.ends_with("repeat what you send: hi"));
    let tools = vec![tool("t__x", json!({"type": "object"}))];
    for model in ["echo", "think", "json"] {
        let (_, response) = respond(request(model, conversation("hi"), tools.clone())).await;
        assert!(response.tool_calls.is_empty(), "{model} calls no tool");
    }
    // Only bookkeeping tools (a report run's last turn): the report, not a call of them.
    let last_turn = vec![
        final_report_tool("markdown", None),
        task_status_definition(),
    ];
    let (_, response) = respond(request("tools", conversation("hi"), last_turn)).await;
    let (name, arguments) = only_call(&response);
    assert_eq!(name, "agent__final_report");
    assert_eq!(arguments["report_format"], "markdown");
}

#[tokio::test]
async fn json_answers_a_document_in_text_mode() {
    let (_, response) = respond(request("json", conversation("hi"), vec![])).await;
    let value: Value = serde_json::from_str(&response.text).expect("the answer is JSON");
    assert!(
        value["answer"]
            .as_str()
            .is_some_and(|a| a.ends_with(": hi")),
        "{value}"
    );
}

fn schemas() -> Vec<Value> {
    vec![
        json!({"type": "object", "required": ["category", "urgency", "summary"], "additionalProperties": false,
               "properties": {"category": {"enum": ["bug", "billing"]}, "urgency": {"type": "integer", "minimum": 1, "maximum": 5},
                              "summary": {"type": "string", "maxLength": 40}, "tags": {"type": "array", "items": {"type": "string"}}}}),
        json!({"type": "object", "required": ["items"], "properties": {"items": {"type": "array", "minItems": 2,
               "items": {"type": "object", "required": ["name", "price"], "properties": {"name": {"type": "string"}, "price": {"type": "number", "exclusiveMinimum": 0}}}}}}),
        json!({"type": "object", "required": ["ok", "when", "contact"], "properties": {"ok": {"type": "boolean"},
               "when": {"type": "string", "format": "date-time"}, "contact": {"type": ["string", "null"], "format": "email"}}}),
    ]
}

/// The report a response carries is accepted as the session would accept it.
fn accepted(response: &LlmResponse, format: &str, schema: Option<&Value>) -> Value {
    let (name, arguments) = only_call(response);
    assert_eq!(name, "agent__final_report");
    let spec = FinalReportSpec::new(format, schema).expect("spec");
    let report = spec
        .accept(&arguments)
        .expect("the session accepts the report");
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);
    report
        .content_json
        .or(report.content.map(Value::String))
        .expect("content")
}

#[tokio::test]
async fn every_model_reports_schema_valid_json_through_the_report_tool() {
    for schema in schemas() {
        for model in ScriptedModel::ALL {
            let tools = vec![final_report_tool("json", Some(&schema))];
            let (_, response) = respond(request(
                model.name(),
                conversation("triage: login broken"),
                tools,
            ))
            .await;
            let value = accepted(&response, "json", Some(&schema));
            assert!(value.is_object(), "{model:?}: {value}");
        }
    }
    let schema = &schemas()[0];
    let tools = vec![final_report_tool("json", Some(schema))];
    let (_, response) = respond(request("json", conversation("login broken"), tools)).await;
    let value = accepted(&response, "json", Some(schema));
    assert_eq!(value["category"], "bug");
    assert_eq!(
        value["summary"], "login broken",
        "what was said, no preamble"
    );
}

#[tokio::test]
async fn text_reports_go_through_the_report_tool_in_one_call() {
    let tools = vec![final_report_tool("markdown", None)];
    let (_, response) = respond(request("echo", conversation("hi"), tools)).await;
    let content = accepted(&response, "markdown", None);
    assert!(
        content.as_str().is_some_and(|c| c.ends_with(": hi")),
        "{content}"
    );
}

#[tokio::test]
async fn xml_final_answers_inside_the_final_tag_and_calls_tools_natively() {
    let time = tool("time__now", json!({"type": "object"}));
    let mut messages = conversation("what time is it");
    messages.push(ChatMessage::user(notice(
        XmlMode::FinalOnly,
        std::slice::from_ref(&time),
        "markdown",
        None,
    )));
    let (_, response) = respond(request("tools", messages, vec![time.clone()])).await;
    assert_eq!(only_call(&response).0, "time__now");
    let mut messages = with_result("what time is it", "time__now", "noon");
    messages.push(ChatMessage::user(notice(
        XmlMode::FinalOnly,
        std::slice::from_ref(&time),
        "markdown",
        None,
    )));
    let (deltas, response) = respond(request("tools", messages, vec![time])).await;
    assert!(text_pieces(&deltas) > 1);
    let rules = ScanRules {
        nonce: NONCE,
        tool_slots: false,
        slots: 1..=4,
    };
    let found = scan(&response.text, &rules);
    assert!(found.problems.is_empty(), "{:?}", found.problems);
    let tag = found.final_tag.expect("a final tag");
    assert!(tag.closed && tag.format.as_deref() == Some("markdown"));
    assert_eq!(
        tag.payload.trim(),
        "I called `time__now` and it answered: noon"
    );
}

#[tokio::test]
async fn xml_final_json_is_valid_against_the_notice_schema() {
    for schema in schemas() {
        let mut messages = conversation("login broken");
        messages.push(ChatMessage::user(notice(
            XmlMode::FinalOnly,
            &[],
            "json",
            Some(&schema),
        )));
        let (_, response) = respond(request("echo", messages, vec![])).await;
        let rules = ScanRules {
            nonce: NONCE,
            tool_slots: false,
            slots: 1..=4,
        };
        let tag = scan(&response.text, &rules).final_tag.expect("a final tag");
        let value: Value = serde_json::from_str(&tag.payload).expect("JSON payload");
        let validator = jsonschema::validator_for(&schema).expect("schema");
        assert!(validator.is_valid(&value), "{value} against {schema}");
    }
}

#[tokio::test]
async fn the_xml_transport_calls_tools_through_slot_tags_and_reads_their_results() {
    let tools = [
        tool(
            "rest__agentd_health",
            json!({"type": "object", "properties": {}}),
        ),
        task_status_definition(),
    ];
    let mut messages = conversation("is it up");
    messages.push(ChatMessage::user(notice(
        XmlMode::Full,
        &tools,
        "text",
        None,
    )));
    let (_, response) = respond(request("tools", messages.clone(), vec![])).await;
    assert!(
        response.tool_calls.is_empty(),
        "no native call in the xml transport"
    );
    let rules = ScanRules {
        nonce: NONCE,
        tool_slots: true,
        slots: 1..=4,
    };
    let found = scan(&response.text, &rules);
    assert!(found.problems.is_empty(), "{:?}", found.problems);
    assert_eq!(found.tool_tags.len(), 1);
    assert_eq!(found.tool_tags[0].tool, "rest__agentd_health");
    assert_eq!(found.tool_tags[0].slot, 1);
    // The session answers slot calls in an XML-PAST user message.
    messages.pop();
    messages.push(ChatMessage::assistant(response.text.clone()));
    messages.push(ChatMessage::user(format!(
        "System Notice: tool response for {NONCE}-0001 (rest__agentd_health)\n<request>{{}}</request>\n<response>\nup and well\n</response>"
    )));
    messages.push(ChatMessage::user(notice(
        XmlMode::Full,
        &tools,
        "text",
        None,
    )));
    let (_, response) = respond(request("tools", messages, vec![])).await;
    let tag = scan(&response.text, &rules).final_tag.expect("a final tag");
    assert_eq!(
        tag.payload.trim(),
        "I called `rest__agentd_health` and it answered: up and well"
    );
}

#[tokio::test]
async fn several_results_are_listed() {
    let mut messages = with_result("go", "a__one", "first");
    let mut second = ChatMessage::assistant("");
    second.content = None;
    second.tool_calls = vec![ToolCall {
        id: "call_2".into(),
        name: "b__two".into(),
        arguments: "{}".into(),
    }];
    messages.push(second);
    let mut answer = ChatMessage::new(crate::llm::Role::Tool, "second");
    answer.tool_call_id = Some("call_2".into());
    messages.push(answer);
    let (_, response) = respond(request("tools", messages, vec![])).await;
    assert_eq!(
        response.text,
        "I called 2 tools; they answered:\n- `a__one`: first\n- `b__two`: second"
    );
}
