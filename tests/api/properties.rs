//! Property tests of the parsers that read what others wrote: the SSE decoder (upstream
//! streams), tool-argument parsing and repair (model output), the agent-file frontmatter, and
//! the XML tag scanner (model output). None panics on any input, and each gives back what was
//! written where a round trip applies — whatever the chunk boundaries.

use std::time::Duration;

use agentd::agent::tool_args::parse_tool_arguments;
use agentd::agent::xml::scan::{ScanRules, scan};
use agentd::config::agent_file::parse_agent_file;
use agentd::llm::sse::SseReader;
use agentd::llm::stream::{FrameRead, idle_guarded};
use bytes::Bytes;
use proptest::prelude::*;
use serde_json::{Map, Value};

const NONCE: &str = "0a1b2c3d";

/// One SSE event: an optional name and its data lines.
#[derive(Debug, Clone)]
struct Event {
    name: Option<String>,
    lines: Vec<String>,
}

fn event() -> impl Strategy<Value = Event> {
    (
        proptest::option::of("[a-z][a-z._]{0,11}"),
        proptest::collection::vec("[^\r\n\u{0}]{0,40}", 1..4),
    )
        .prop_map(|(name, lines)| Event { name, lines })
}

fn encode(events: &[Event]) -> Vec<u8> {
    let mut text = String::new();
    for event in events {
        if let Some(name) = &event.name {
            text.push_str(&format!("event: {name}\n"));
        }
        for line in &event.lines {
            text.push_str(&format!("data: {line}\n"));
        }
        text.push('\n');
    }
    text.into_bytes()
}

/// `bytes` cut at `cuts` (positions, any order, maybe repeated).
fn chunks(bytes: &[u8], cuts: &[usize]) -> Vec<Bytes> {
    let mut at: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    at.sort_unstable();
    at.dedup();
    let mut out = Vec::new();
    let mut start = 0;
    for cut in at.into_iter().chain([bytes.len()]) {
        out.push(Bytes::copy_from_slice(&bytes[start..cut]));
        start = cut;
    }
    out
}

/// Every frame the decoder reads from these chunks, and how the body ended.
fn decode(chunks: Vec<Bytes>) -> (Vec<(Option<String>, String)>, String) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let body = futures_util::stream::iter(chunks.into_iter().map(Ok::<_, String>));
        let mut reader = SseReader::new(idle_guarded(body, Duration::from_secs(5)));
        let mut frames = Vec::new();
        loop {
            match reader.next().await {
                FrameRead::Frame(frame) => frames.push((frame.event, frame.data)),
                FrameRead::End => return (frames, "end".into()),
                other => return (frames, format!("{other:?}")),
            }
        }
    })
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        "[^\u{0}]{0,20}".prop_map(Value::String),
    ]
}

fn json_object() -> impl Strategy<Value = Map<String, Value>> {
    let value = json_leaf().prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    proptest::collection::btree_map("[a-zA-Z_]{1,10}", value, 0..6)
        .prop_map(|m| m.into_iter().collect())
}

fn rules(tool_slots: bool) -> ScanRules<'static> {
    ScanRules {
        nonce: NONCE,
        tool_slots,
        slots: 1..=3,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn sse_events_read_back_whatever_the_chunk_boundaries(
        events in proptest::collection::vec(event(), 0..6),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
    ) {
        let bytes = encode(&events);
        let (frames, ended) = decode(chunks(&bytes, &cuts));
        let expected: Vec<(Option<String>, String)> = events
            .iter()
            .map(|e| (e.name.clone(), e.lines.join("\n")))
            .collect();
        prop_assert_eq!(ended, "end");
        prop_assert_eq!(frames, expected);
    }

    #[test]
    fn the_sse_decoder_never_panics_on_any_bytes(
        raw in proptest::collection::vec(any::<u8>(), 0..400),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let _ = decode(chunks(&raw, &cuts));
    }

    #[test]
    fn tool_arguments_never_panic(raw in "\\PC{0,200}") {
        let _ = parse_tool_arguments(&raw);
    }

    #[test]
    fn well_formed_tool_arguments_come_back_unrepaired(object in json_object()) {
        let raw = Value::Object(object.clone()).to_string();
        let parsed = parse_tool_arguments(&raw).expect("valid JSON parses");
        prop_assert!(!parsed.is_repaired());
        prop_assert_eq!(parsed.arguments(), &object);
    }

    #[test]
    fn agent_files_never_panic(text in "\\PC{0,300}", fenced in any::<bool>()) {
        let text = if fenced { format!("---\n{text}") } else { text };
        let _ = parse_agent_file(&text);
    }

    #[test]
    fn frontmatter_values_and_the_prompt_read_back(
        description in "[A-Za-z][A-Za-z0-9 ,.]{0,40}",
        max_turns in 1u32..1000,
        prompt in "[A-Za-z0-9 .,!?\n]{0,200}",
    ) {
        let text = format!(
            "---\ndescription: \"{description}\"\nmaxTurns: {max_turns}\n---\n{prompt}"
        );
        let file = parse_agent_file(&text).expect("parses");
        prop_assert_eq!(file.frontmatter.description.as_deref(), Some(description.as_str()));
        prop_assert_eq!(file.frontmatter.max_turns, Some(max_turns));
        prop_assert_eq!(file.prompt, prompt.trim());
    }

    #[test]
    fn the_tag_scanner_never_panics(text in "\\PC{0,300}", tool_slots in any::<bool>()) {
        let _ = scan(&text, &rules(tool_slots));
        let tagged = format!("<ai-agent-{NONCE}-{text}");
        let _ = scan(&tagged, &rules(tool_slots));
    }

    #[test]
    fn a_final_tags_payload_reads_back(
        before in "[^<]{0,60}",
        payload in "[A-Za-z0-9 .,!?\n<>/\"']{0,200}",
        closed in any::<bool>(),
    ) {
        prop_assume!(!payload.trim().is_empty() && !payload.contains("</ai-agent"));
        let close = if closed { format!("</ai-agent-{NONCE}-FINAL>") } else { String::new() };
        let text = format!("{before}<ai-agent-{NONCE}-FINAL format=\"markdown\">{payload}{close}");
        let found = scan(&text, &rules(false)).final_tag.expect("a final tag");
        prop_assert_eq!(found.payload, payload.trim());
        prop_assert_eq!(found.closed, closed);
        prop_assert_eq!(found.format.as_deref(), Some("markdown"));
    }
}
