//! The benchmark's mock upstream: a lean OpenAI Chat Completions server whose latency and shape
//! are chosen per request by the model name, so one process serves every scenario and agentd
//! and the direct calls see exactly the same upstream. It keeps no state and records nothing,
//! so its own cost stays flat at any rate (the `direct` rows measure it).
//!
//! Model names: `fb{ms}-c{chunks}-g{gap_ms}` answers text after `ms` milliseconds, streamed in
//! `chunks` pieces `gap_ms` apart (each frame waits `gap_ms` after the previous one was
//! written); with `-s` appended (`fb0-c250-g20-s`) the frames leave on a fixed schedule instead,
//! `ms + i × gap_ms` after the request, so the rate holds (50 frames/s at `g20`) and a late
//! frame is followed by the next one on time; `script{turns}` answers with a call of the
//! request's first tool until the conversation holds `turns - 1` tool results, then with text
//! (streamed, the call's arguments arrive in 4-byte deltas after its id and name).

use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::serve::ListenerExt;
use futures_util::stream;
use serde::Deserialize;
use serde_json::json;

/// The text of every answer (agentd's through-put and the direct calls carry the same bytes).
const ANSWER_WORD: &str = "token ";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub first_byte_ms: u64,
    pub chunks: usize,
    pub gap_ms: u64,
    /// `Some(turns)`: the scripted multi-turn mode.
    pub script_turns: Option<usize>,
    /// Frames on a fixed schedule from the request (`-s`), not each `gap_ms` after the last.
    pub scheduled: bool,
}

impl Shape {
    /// The model name that asks the mock for this shape.
    pub fn model(&self) -> String {
        match self.script_turns {
            Some(turns) => format!("script{turns}"),
            None => format!(
                "fb{}-c{}-g{}{}",
                self.first_byte_ms,
                self.chunks,
                self.gap_ms,
                if self.scheduled { "-s" } else { "" }
            ),
        }
    }

    fn parse(model: &str) -> Option<Self> {
        if let Some(turns) = model.strip_prefix("script") {
            return Some(Self {
                first_byte_ms: 0,
                chunks: 1,
                gap_ms: 0,
                script_turns: Some(turns.parse().ok()?),
                scheduled: false,
            });
        }
        let mut parts = model.split('-');
        let first_byte_ms = parts.next()?.strip_prefix("fb")?.parse().ok()?;
        let chunks = parts.next()?.strip_prefix('c')?.parse().ok()?;
        let gap_ms = parts.next()?.strip_prefix('g')?.parse().ok()?;
        let scheduled = match parts.next() {
            None => false,
            Some("s") => true,
            Some(_) => return None,
        };
        Some(Self {
            first_byte_ms,
            chunks,
            gap_ms,
            script_turns: None,
            scheduled,
        })
    }
}

#[derive(Deserialize)]
struct ChatRequest {
    model: String,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    messages: Vec<Message>,
    #[serde(default)]
    tools: Vec<Tool>,
}

#[derive(Deserialize)]
struct Message {
    role: String,
}

#[derive(Deserialize)]
struct Tool {
    function: Function,
}

#[derive(Deserialize)]
struct Function {
    name: String,
}

/// What one request is answered with.
enum Answer {
    Text(usize),
    ToolCall { name: String, turn: usize },
}

pub async fn serve(listen: &str) -> std::io::Result<()> {
    let app = Router::new().route("/v1/chat/completions", post(chat));
    let listener = tokio::net::TcpListener::bind(listen).await?;
    eprintln!("bench mock upstream listening on {listen}");
    // Without TCP_NODELAY a frame written while the previous one is unacknowledged waits for
    // the peer's delayed ACK (~40 ms on Linux), which would be the mock's latency, not agentd's.
    let listener = listener.tap_io(|tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app).await
}

async fn chat(body: Bytes) -> Response {
    let request: ChatRequest = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(error) => return bad_request(format!("invalid request body: {error}")),
    };
    let Some(shape) = Shape::parse(&request.model) else {
        return bad_request(format!("unknown model shape {:?}", request.model));
    };
    let answer = match shape.script_turns {
        Some(turns) => {
            let done = request.messages.iter().filter(|m| m.role == "tool").count();
            match request.tools.first() {
                Some(tool) if done + 1 < turns => Answer::ToolCall {
                    name: tool.function.name.clone(),
                    turn: done + 1,
                },
                _ => Answer::Text(1),
            }
        }
        None => Answer::Text(shape.chunks.max(1)),
    };
    if request.stream {
        streamed(shape, answer)
    } else {
        // A zero sleep still waits for the timer's next 1 ms tick.
        if shape.first_byte_ms > 0 {
            tokio::time::sleep(Duration::from_millis(shape.first_byte_ms)).await;
        }
        whole(&request.model, answer)
    }
}

fn bad_request(message: String) -> Response {
    (StatusCode::BAD_REQUEST, message).into_response()
}

fn whole(model: &str, answer: Answer) -> Response {
    let (message, finish) = match answer {
        Answer::Text(chunks) => (
            json!({"role": "assistant", "content": ANSWER_WORD.repeat(chunks)}),
            "stop",
        ),
        Answer::ToolCall { name, turn } => (
            json!({"role": "assistant", "content": null, "tool_calls": [tool_call(&name, turn)]}),
            "tool_calls",
        ),
    };
    let body = json!({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
    });
    (
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn tool_call(name: &str, turn: usize) -> serde_json::Value {
    json!({"id": format!("call_{turn}"), "type": "function",
           "function": {"name": name, "arguments": format!("{{\"text\":\"turn {turn}\"}}")}})
}

fn frame(delta: serde_json::Value, finish: Option<&str>) -> Bytes {
    let chunk = json!({
        "id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": "bench",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
    });
    Bytes::from(format!("data: {chunk}\n\n"))
}

/// The bytes of a streamed tool call's arguments per delta frame (ASCII arguments only).
const ARGUMENT_DELTA_BYTES: usize = 4;

fn streamed(shape: Shape, answer: Answer) -> Response {
    let mut frames = vec![frame(json!({"role": "assistant"}), None)];
    let finish = match answer {
        Answer::Text(chunks) => {
            // One shared frame per content piece: cloning `Bytes` does not copy.
            let piece = frame(json!({"content": ANSWER_WORD}), None);
            frames.extend(std::iter::repeat_n(piece, chunks));
            "stop"
        }
        Answer::ToolCall { name, turn } => {
            // As models stream a call: its id and name first, then its arguments in pieces
            // that the client reassembles.
            frames.push(frame(
                json!({"tool_calls": [{"index": 0, "id": format!("call_{turn}"),
                "type": "function", "function": {"name": name, "arguments": ""}}]}),
                None,
            ));
            let arguments = format!("{{\"text\":\"turn {turn}\"}}");
            let pieces = arguments.as_bytes().chunks(ARGUMENT_DELTA_BYTES);
            frames.extend(pieces.map(|piece| {
                let piece = String::from_utf8_lossy(piece);
                frame(
                    json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}),
                    None,
                )
            }));
            "tool_calls"
        }
    };
    frames.push(frame(json!({}), Some(finish)));
    let usage = json!({"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0,
        "model": "bench", "choices": [],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}});
    frames.push(Bytes::from(format!("data: {usage}\n\n")));
    frames.push(Bytes::from_static(b"data: [DONE]\n\n"));
    let first = Duration::from_millis(shape.first_byte_ms);
    let gap = Duration::from_millis(shape.gap_ms);
    let (scheduled, start) = (shape.scheduled, tokio::time::Instant::now());
    // The role frame goes out at once (as real providers do); content waits for the first byte.
    let body = stream::unfold(
        (frames.into_iter(), 0usize),
        move |(mut rest, index)| async move {
            let next = rest.next()?;
            if scheduled && index >= 1 {
                tokio::time::sleep_until(start + first + gap * (index as u32 - 1)).await;
            } else if index == 1 && !first.is_zero() {
                tokio::time::sleep(first).await;
            } else if index > 1 && !gap.is_zero() {
                tokio::time::sleep(gap).await;
            }
            Some((Ok::<_, std::convert::Infallible>(next), (rest, index + 1)))
        },
    );
    (
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(body),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_names_round_trip() {
        let shape = Shape {
            first_byte_ms: 5,
            chunks: 64,
            gap_ms: 1,
            script_turns: None,
            scheduled: false,
        };
        assert_eq!(Shape::parse(&shape.model()), Some(shape));
        let paced = Shape {
            first_byte_ms: 0,
            chunks: 250,
            gap_ms: 20,
            script_turns: None,
            scheduled: true,
        };
        assert_eq!(paced.model(), "fb0-c250-g20-s");
        assert_eq!(Shape::parse(&paced.model()), Some(paced));
        assert_eq!(Shape::parse("fb0-c1-g0-x"), None);
        assert_eq!(
            Shape::parse("script5").and_then(|s| s.script_turns),
            Some(5)
        );
        assert_eq!(Shape::parse("gpt-4o"), None);
    }
}
