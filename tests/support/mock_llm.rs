//! Scripted mock LLM upstream for tests: a small axum server that speaks the
//! OpenAI Chat Completions wire format, streaming (SSE) and non-streaming.
//!
//! Start it with [`MockLlm::start`], point the code under test at
//! [`MockLlm::base_url`], queue [`Reply`]s with [`MockLlm::push`] (consumed FIFO,
//! one per `POST /v1/chat/completions`; when the queue is empty the default
//! reply is `Reply::text("mock answer")`), then inspect what was received with
//! [`MockLlm::requests`] and [`MockLlm::request_headers`].
//!
//! Timing: the first-byte delay is applied before the response for
//! non-streaming and error replies; for streaming replies the response headers
//! go out at once and the delay is applied before the first SSE frame. The
//! chunk gap is slept between every two consecutive SSE frames.

#![allow(dead_code)] // each test binary that includes this uses only part of it

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use futures_util::stream;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// Model id reported by `GET /v1/models` and used when a request names none.
pub const MOCK_MODEL: &str = "mock-model";

/// One tool call of an assistant reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The JSON arguments, as a string (as on the wire).
    pub arguments: String,
}

impl ToolCall {
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

#[derive(Clone, Debug)]
enum Kind {
    /// A normal completion (text, reasoning, tool calls, or nothing).
    Completion,
    /// An error reply: this HTTP status with this JSON body.
    Status { status: u16, body: Value },
    /// Send this many content chunks, then drop the connection.
    CutAfter(usize),
    /// Invalid JSON (body or SSE frame).
    Malformed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Usage {
    prompt: u64,
    completion: u64,
    cached: u64,
}

/// A scripted reply, built with the constructors and `with_*` builders.
#[derive(Clone, Debug)]
pub struct Reply {
    kind: Kind,
    content: Option<String>,
    reasoning: Option<String>,
    tool_calls: Vec<ToolCall>,
    chunks: Option<usize>,
    first_byte_delay: Duration,
    chunk_gap: Duration,
    usage: Option<Usage>,
    finish_reason: Option<String>,
    headers: Vec<(String, String)>,
}

impl Reply {
    fn new(kind: Kind) -> Self {
        Self {
            kind,
            content: None,
            reasoning: None,
            tool_calls: Vec::new(),
            chunks: None,
            first_byte_delay: Duration::ZERO,
            chunk_gap: Duration::ZERO,
            usage: None,
            finish_reason: None,
            headers: Vec::new(),
        }
    }

    /// An assistant message with this content, `finish_reason: "stop"`.
    pub fn text(content: impl Into<String>) -> Self {
        Self {
            content: Some(content.into()),
            ..Self::new(Kind::Completion)
        }
    }

    /// An assistant message with these tool calls and no content,
    /// `finish_reason: "tool_calls"`.
    pub fn tool_calls(calls: Vec<ToolCall>) -> Self {
        Self {
            tool_calls: calls,
            ..Self::new(Kind::Completion)
        }
    }

    /// A valid completion with no content, no tool calls and no reasoning.
    pub fn empty() -> Self {
        Self::new(Kind::Completion)
    }

    /// An error reply: HTTP `status` with `body` as its JSON body (streaming
    /// or not).
    pub fn status(status: u16, body: Value) -> Self {
        Self::new(Kind::Status { status, body })
    }

    /// Streaming: the role chunk, then `k` content chunks (`"part1 "`,
    /// `"part2 "`, ...), then the connection is dropped with no finish chunk
    /// and no `[DONE]`. Non-streaming: 200 with the first half of the JSON
    /// body, then the connection is dropped.
    pub fn cut_after(k: usize) -> Self {
        let text: String = (1..=k + 1).map(|i| format!("part{i} ")).collect();
        Self {
            content: Some(text),
            ..Self::new(Kind::CutAfter(k))
        }
    }

    /// Streaming: the role chunk, then a `data: {not json` frame, then
    /// `data: [DONE]`. Non-streaming: 200 `application/json` with an invalid
    /// JSON body.
    pub fn malformed() -> Self {
        Self::new(Kind::Malformed)
    }

    /// Adds `reasoning_content` (streamed, one chunk per word, before the
    /// content).
    pub fn with_reasoning(mut self, reasoning: impl Into<String>) -> Self {
        self.reasoning = Some(reasoning.into());
        self
    }

    /// Adds tool calls to a reply (e.g. to a text reply); the default finish
    /// reason becomes `"tool_calls"`.
    pub fn with_tool_calls(mut self, calls: Vec<ToolCall>) -> Self {
        self.tool_calls.extend(calls);
        self
    }

    /// Streams the content in `n` pieces of near-equal length (in chars)
    /// instead of one piece per word.
    pub fn with_chunks(mut self, n: usize) -> Self {
        self.chunks = Some(n);
        self
    }

    /// Delay before the first byte of the body (see the module docs).
    pub fn with_first_byte_delay(mut self, delay: Duration) -> Self {
        self.first_byte_delay = delay;
        self
    }

    /// Delay between consecutive SSE frames.
    pub fn with_chunk_gap(mut self, gap: Duration) -> Self {
        self.chunk_gap = gap;
        self
    }

    /// Reported usage. Default: prompt 10, completion = number of streamed
    /// delta pieces (reasoning + content + tool-call fragments), cached 0.
    pub fn with_usage(mut self, prompt: u64, completion: u64, cached: u64) -> Self {
        self.usage = Some(Usage {
            prompt,
            completion,
            cached,
        });
        self
    }

    /// Overrides the finish reason (default `"stop"`, or `"tool_calls"` when
    /// the reply has tool calls).
    pub fn with_finish_reason(mut self, reason: impl Into<String>) -> Self {
        self.finish_reason = Some(reason.into());
        self
    }

    /// Adds a response header (any kind of reply).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    fn content_pieces(&self) -> Vec<String> {
        let text = self.content.as_deref().unwrap_or("");
        match self.chunks {
            Some(n) => split_n(text, n),
            None => split_words(text),
        }
    }

    fn reasoning_pieces(&self) -> Vec<String> {
        split_words(self.reasoning.as_deref().unwrap_or(""))
    }

    fn finish_reason(&self) -> String {
        match &self.finish_reason {
            Some(reason) => reason.clone(),
            None if self.tool_calls.is_empty() => "stop".to_owned(),
            None => "tool_calls".to_owned(),
        }
    }

    fn usage(&self) -> Usage {
        self.usage.unwrap_or_else(|| {
            let fragments: usize = self
                .tool_calls
                .iter()
                .map(|c| 1 + split_arguments(&c.arguments).len())
                .sum();
            let pieces = self.content_pieces().len() + self.reasoning_pieces().len() + fragments;
            Usage {
                prompt: 10,
                completion: pieces as u64,
                cached: 0,
            }
        })
    }
}

/// Splits into one piece per whitespace-separated word, each word keeping the
/// whitespace that follows it (leading whitespace stays with the first word),
/// so the pieces concatenate to `text`.
fn split_words(text: &str) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut current = String::new();
    let mut has_word = false;
    let mut after_word_space = false;
    for c in text.chars() {
        if c.is_whitespace() {
            after_word_space |= has_word;
        } else if after_word_space {
            pieces.push(std::mem::take(&mut current));
            after_word_space = false;
        } else {
            has_word = true;
        }
        current.push(c);
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces
}

/// Splits into `n` pieces of near-equal char count (fewer if `text` has fewer
/// chars; none if it is empty).
fn split_n(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let n = n.clamp(1, chars.len());
    let (base, extra) = (chars.len() / n, chars.len() % n);
    let mut pieces = Vec::with_capacity(n);
    let mut start = 0;
    for i in 0..n {
        let len = base + usize::from(i < extra);
        pieces.push(chars[start..start + len].iter().collect());
        start += len;
    }
    pieces
}

/// Tool-call arguments are streamed in 3 pieces (fewer if shorter than 3 chars).
fn split_arguments(arguments: &str) -> Vec<String> {
    split_n(arguments, 3)
}

struct MockState {
    queue: VecDeque<Reply>,
    requests: Vec<Value>,
    headers: Vec<HashMap<String, String>>,
    /// Answered when the queue is empty.
    default_reply: Reply,
    /// Keep request bodies and headers (off for load runs, where they would pile up).
    record: bool,
    /// Requests answered so far.
    answered: usize,
    /// When each streamed response was dropped before its last frame (the client went away).
    abandoned: Vec<std::time::Instant>,
}

impl Default for MockState {
    fn default() -> Self {
        Self {
            queue: VecDeque::new(),
            requests: Vec::new(),
            headers: Vec::new(),
            default_reply: Reply::text("mock answer"),
            record: true,
            answered: 0,
            abandoned: Vec::new(),
        }
    }
}

type Shared = Arc<Mutex<MockState>>;

fn lock(state: &Shared) -> MutexGuard<'_, MockState> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A running mock upstream; the server stops when this is dropped.
pub struct MockLlm {
    base_url: String,
    state: Shared,
    server: JoinHandle<()>,
}

impl MockLlm {
    /// Binds 127.0.0.1:0, serves `POST /v1/chat/completions` and
    /// `GET /v1/models` (one model, `"mock-model"`).
    pub async fn start() -> MockLlm {
        Self::start_with("127.0.0.1:0", Reply::text("mock answer"), true).await
    }

    /// Binds `address`, answers `default_reply` whenever the queue is empty, and records
    /// requests only when `record` is set (the benchmark's upstream runs without).
    pub async fn start_with(address: &str, default_reply: Reply, record: bool) -> MockLlm {
        let state = Shared::new(Mutex::new(MockState {
            default_reply,
            record,
            ..MockState::default()
        }));
        let app = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .route("/v1/models", get(models))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .expect("mock LLM: bind its address");
        let addr = listener.local_addr().expect("mock LLM: listener address");
        let server = tokio::spawn(async move {
            axum::serve(listener, app)
                .await
                .expect("mock LLM: server error");
        });
        MockLlm {
            base_url: format!("http://{addr}/v1"),
            state,
            server,
        }
    }

    /// e.g. `"http://127.0.0.1:PORT/v1"`.
    pub fn base_url(&self) -> String {
        self.base_url.clone()
    }

    /// Queues a reply; replies are consumed FIFO, one per chat request.
    pub fn push(&self, reply: Reply) {
        lock(&self.state).queue.push_back(reply);
    }

    /// Bodies of every chat request received so far, in order (a body that is
    /// not JSON is recorded as a JSON string and answered with 400).
    pub fn requests(&self) -> Vec<Value> {
        lock(&self.state).requests.clone()
    }

    /// Headers of every chat request (lower-case name → value; repeated
    /// headers joined with `", "`), in order.
    pub fn request_headers(&self) -> Vec<HashMap<String, String>> {
        lock(&self.state).headers.clone()
    }

    /// When each streamed response was abandoned by the client before it ended.
    pub fn abandoned(&self) -> Vec<std::time::Instant> {
        lock(&self.state).abandoned.clone()
    }

    /// Number of chat requests received so far.
    pub fn request_count(&self) -> usize {
        lock(&self.state).requests.len()
    }
}

impl Drop for MockLlm {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn models() -> Response {
    axum::Json(json!({
        "object": "list",
        "data": [{"id": MOCK_MODEL, "object": "model", "created": 0, "owned_by": "mock"}],
    }))
    .into_response()
}

fn header_map(headers: &HeaderMap) -> HashMap<String, String> {
    let mut map: HashMap<String, String> = HashMap::new();
    for (name, value) in headers {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        map.entry(name.as_str().to_owned())
            .and_modify(|v| {
                v.push_str(", ");
                v.push_str(&value);
            })
            .or_insert(value);
    }
    map
}

async fn chat_completions(
    State(state): State<Shared>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let parsed = serde_json::from_slice::<Value>(&body);
    let (number, reply, request) = {
        let mut st = lock(&state);
        if st.record {
            st.headers.push(header_map(&headers));
        }
        match parsed {
            Ok(request) => {
                if st.record {
                    st.requests.push(request.clone());
                }
                st.answered += 1;
                let reply = match st.queue.pop_front() {
                    Some(reply) => reply,
                    None => st.default_reply.clone(),
                };
                (st.answered, reply, request)
            }
            Err(err) => {
                st.requests
                    .push(Value::String(String::from_utf8_lossy(&body).into_owned()));
                let error = json!({"error": {
                    "message": format!("mock LLM: request body is not JSON: {err}"),
                    "type": "invalid_request_error",
                }});
                return (StatusCode::BAD_REQUEST, axum::Json(error)).into_response();
            }
        }
    };
    let ctx = Ctx {
        id: format!("chatcmpl-mock-{number}"),
        created: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        model: request
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or(MOCK_MODEL)
            .to_owned(),
    };
    let streaming = request.get("stream").and_then(Value::as_bool) == Some(true);
    let include_usage = request
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        == Some(true);

    if let Kind::Status { status, body } = &reply.kind {
        sleep(reply.first_byte_delay).await;
        let status = StatusCode::from_u16(*status).expect("mock LLM: invalid status code");
        return respond(
            &reply,
            status,
            "application/json",
            Body::from(body.to_string()),
        );
    }
    if streaming {
        let steps = stream_steps(&reply, &ctx, include_usage);
        let body = paced(
            steps,
            reply.first_byte_delay,
            reply.chunk_gap,
            Some(state.clone()),
        );
        return respond(&reply, StatusCode::OK, "text/event-stream", body);
    }

    sleep(reply.first_byte_delay).await;
    let body = match reply.kind {
        Kind::Malformed => Body::from("{not json"),
        Kind::CutAfter(_) => {
            let full = completion_json(&reply, &ctx).to_string();
            let half = Bytes::from(full.as_bytes()[..full.len() / 2].to_vec());
            paced(
                vec![Step::Frame(half), Step::Abort],
                Duration::ZERO,
                Duration::ZERO,
                None,
            )
        }
        _ => Body::from(completion_json(&reply, &ctx).to_string()),
    };
    respond(&reply, StatusCode::OK, "application/json", body)
}

struct Ctx {
    id: String,
    created: u64,
    model: String,
}

fn respond(reply: &Reply, status: StatusCode, content_type: &str, body: Body) -> Response {
    let mut builder = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, content_type);
    if content_type == "text/event-stream" {
        builder = builder.header(header::CACHE_CONTROL, "no-cache");
    }
    for (name, value) in &reply.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    builder
        .body(body)
        .expect("mock LLM: invalid response header in Reply::with_header")
}

async fn sleep(delay: Duration) {
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
}

fn usage_json(usage: Usage) -> Value {
    json!({
        "prompt_tokens": usage.prompt,
        "completion_tokens": usage.completion,
        "total_tokens": usage.prompt + usage.completion,
        "prompt_tokens_details": {"cached_tokens": usage.cached},
    })
}

fn completion_json(reply: &Reply, ctx: &Ctx) -> Value {
    let mut message = json!({"role": "assistant", "content": reply.content});
    if let Some(reasoning) = &reply.reasoning {
        message["reasoning_content"] = json!(reasoning);
    }
    if !reply.tool_calls.is_empty() {
        let calls: Vec<Value> = reply
            .tool_calls
            .iter()
            .map(|c| {
                json!({
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                })
            })
            .collect();
        message["tool_calls"] = Value::Array(calls);
    }
    json!({
        "id": ctx.id,
        "object": "chat.completion",
        "created": ctx.created,
        "model": ctx.model,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason()}],
        "usage": usage_json(reply.usage()),
    })
}

enum Step {
    Frame(Bytes),
    Abort,
}

fn sse(data: impl std::fmt::Display) -> Step {
    Step::Frame(Bytes::from(format!("data: {data}\n\n")))
}

fn chunk(ctx: &Ctx, delta: Value, finish_reason: Option<String>) -> Step {
    sse(json!({
        "id": ctx.id,
        "object": "chat.completion.chunk",
        "created": ctx.created,
        "model": ctx.model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }))
}

fn stream_steps(reply: &Reply, ctx: &Ctx, include_usage: bool) -> Vec<Step> {
    let mut steps = vec![chunk(
        ctx,
        json!({"role": "assistant", "content": ""}),
        None,
    )];
    match reply.kind {
        Kind::Malformed => {
            steps.push(sse("{not json"));
            steps.push(sse("[DONE]"));
            return steps;
        }
        Kind::CutAfter(k) => {
            for piece in reply.content_pieces().into_iter().take(k) {
                steps.push(chunk(ctx, json!({"content": piece}), None));
            }
            steps.push(Step::Abort);
            return steps;
        }
        Kind::Completion | Kind::Status { .. } => {}
    }
    for piece in reply.reasoning_pieces() {
        steps.push(chunk(ctx, json!({"reasoning_content": piece}), None));
    }
    for piece in reply.content_pieces() {
        steps.push(chunk(ctx, json!({"content": piece}), None));
    }
    for (index, call) in reply.tool_calls.iter().enumerate() {
        let head = json!({"tool_calls": [{
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }]});
        steps.push(chunk(ctx, head, None));
        for piece in split_arguments(&call.arguments) {
            let fragment =
                json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]});
            steps.push(chunk(ctx, fragment, None));
        }
    }
    steps.push(chunk(ctx, json!({}), Some(reply.finish_reason())));
    if include_usage {
        steps.push(sse(json!({
            "id": ctx.id,
            "object": "chat.completion.chunk",
            "created": ctx.created,
            "model": ctx.model,
            "choices": [],
            "usage": usage_json(reply.usage()),
        })));
    }
    steps.push(sse("[DONE]"));
    steps
}

/// Records the moment a streamed response is dropped before its last frame.
struct Unfinished(Option<Shared>);

impl Unfinished {
    /// The last frame went out: dropping is no longer abandoning.
    fn completed(mut self) {
        self.0 = None;
    }
}

impl Drop for Unfinished {
    fn drop(&mut self) {
        if let Some(state) = &self.0 {
            lock(state).abandoned.push(std::time::Instant::now());
        }
    }
}

/// A streaming body yielding each step as its own body chunk: `first` is slept
/// before the first step, `gap` before each later one. `Step::Abort` makes the
/// body fail, so the connection is dropped mid-response.
fn paced(steps: Vec<Step>, first: Duration, gap: Duration, watch: Option<Shared>) -> Body {
    let frames = stream::unfold(
        (steps.into_iter(), true, Unfinished(watch)),
        move |(mut steps, is_first, unfinished)| async move {
            let Some(step) = steps.next() else {
                unfinished.completed();
                return None;
            };
            sleep(if is_first { first } else { gap }).await;
            let item = match step {
                Step::Frame(bytes) => Ok(bytes),
                Step::Abort => {
                    // Let hyper flush what was sent so far before the cut.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Err(std::io::Error::new(
                        std::io::ErrorKind::ConnectionAborted,
                        "mock LLM: scripted cut",
                    ))
                }
            };
            Some((item, (steps, false, unfinished)))
        },
    );
    Body::from_stream(frames)
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;
    use std::time::Instant;

    async fn post(mock: &MockLlm, body: Value) -> reqwest::Response {
        reqwest::Client::new()
            .post(format!("{}/chat/completions", mock.base_url()))
            .bearer_auth("sk-test")
            .json(&body)
            .send()
            .await
            .expect("request to mock LLM")
    }

    fn chat(stream: bool) -> Value {
        json!({"model": "gpt-test", "stream": stream, "messages": [{"role": "user", "content": "hi"}]})
    }

    fn chat_with_usage() -> Value {
        json!({
            "model": "gpt-test", "stream": true, "stream_options": {"include_usage": true},
            "messages": [{"role": "user", "content": "hi"}],
        })
    }

    /// Reads an SSE body: the parsed frames (`[DONE]` as a JSON string), the
    /// raw body chunks, and whether the body ended with an error.
    async fn read_sse(resp: reqwest::Response) -> (Vec<Value>, Vec<Bytes>, bool) {
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "text/event-stream");
        let mut body = resp.bytes_stream();
        let (mut raw, mut failed) = (Vec::new(), false);
        while let Some(item) = body.next().await {
            match item {
                Ok(bytes) => raw.push(bytes),
                Err(_) => {
                    failed = true;
                    break;
                }
            }
        }
        let text = String::from_utf8(raw.concat()).expect("SSE body is UTF-8");
        let frames = text
            .split_terminator("\n\n")
            .map(|frame| {
                let data = frame
                    .strip_prefix("data: ")
                    .expect("frame starts with data: ");
                if data == "[DONE]" {
                    json!("[DONE]")
                } else {
                    serde_json::from_str(data).unwrap_or_else(|_| json!({"unparsable": data}))
                }
            })
            .collect();
        (frames, raw, failed)
    }

    fn delta(frame: &Value) -> &Value {
        &frame["choices"][0]["delta"]
    }

    fn content_of(frames: &[Value]) -> String {
        frames
            .iter()
            .filter_map(|f| delta(f)["content"].as_str())
            .collect()
    }

    #[tokio::test]
    async fn non_streaming_text() {
        let mock = MockLlm::start().await;
        mock.push(Reply::text("hello world"));
        let resp = post(&mock, chat(false)).await;
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["content-type"], "application/json");
        let body: Value = resp.json().await.expect("JSON body");
        assert_eq!(body["id"], "chatcmpl-mock-1");
        assert_eq!(body["object"], "chat.completion");
        assert!(body["created"].as_u64().expect("created") > 1_600_000_000);
        assert_eq!(body["model"], "gpt-test");
        assert_eq!(
            body["choices"],
            json!([{"index": 0, "message": {"role": "assistant", "content": "hello world"}, "finish_reason": "stop"}])
        );
        assert_eq!(
            body["usage"],
            json!({"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12, "prompt_tokens_details": {"cached_tokens": 0}})
        );
    }

    #[tokio::test]
    async fn streaming_text_exact_frames() {
        let mock = MockLlm::start().await;
        mock.push(Reply::text("hello big  world"));
        mock.push(Reply::text("hello big  world"));

        let (frames, _, failed) = read_sse(post(&mock, chat_with_usage()).await).await;
        assert!(!failed);
        assert_eq!(frames.len(), 7, "{frames:#?}");
        for frame in &frames[..6] {
            assert_eq!(frame["id"], "chatcmpl-mock-1");
            assert_eq!(frame["object"], "chat.completion.chunk");
            assert_eq!(frame["model"], "gpt-test");
        }
        assert_eq!(
            delta(&frames[0]),
            &json!({"role": "assistant", "content": ""})
        );
        assert_eq!(frames[0]["choices"][0]["finish_reason"], Value::Null);
        let pieces: Vec<&Value> = frames[1..4].iter().map(delta).collect();
        assert_eq!(
            pieces,
            [
                &json!({"content": "hello "}),
                &json!({"content": "big  "}),
                &json!({"content": "world"})
            ]
        );
        assert_eq!(content_of(&frames), "hello big  world");
        assert_eq!(
            frames[4]["choices"],
            json!([{"index": 0, "delta": {}, "finish_reason": "stop"}])
        );
        assert_eq!(frames[5]["choices"], json!([]));
        assert_eq!(frames[5]["usage"]["completion_tokens"], 3);
        assert_eq!(frames[5]["usage"]["total_tokens"], 13);
        assert_eq!(frames[6], "[DONE]");

        // Without include_usage: no usage chunk.
        let (frames, _, _) = read_sse(post(&mock, chat(true)).await).await;
        assert_eq!(frames.len(), 6);
        assert_eq!(frames[4]["choices"][0]["finish_reason"], "stop");
        assert_eq!(frames[5], "[DONE]");
        assert!(frames.iter().all(|f| f.get("usage").is_none()));
    }

    #[tokio::test]
    async fn chunks_usage_and_finish_reason_overrides() {
        let mock = MockLlm::start().await;
        let reply = Reply::text("abcdefgh")
            .with_chunks(3)
            .with_usage(100, 7, 40)
            .with_finish_reason("length");
        mock.push(reply.clone());
        mock.push(reply);
        let (frames, _, _) = read_sse(post(&mock, chat_with_usage()).await).await;
        let pieces: Vec<&str> = frames[1..4]
            .iter()
            .map(|f| delta(f)["content"].as_str().expect("content piece"))
            .collect();
        assert_eq!(pieces, ["abc", "def", "gh"]);
        assert_eq!(frames[4]["choices"][0]["finish_reason"], "length");
        assert_eq!(
            frames[5]["usage"],
            json!({"prompt_tokens": 100, "completion_tokens": 7, "total_tokens": 107, "prompt_tokens_details": {"cached_tokens": 40}})
        );
        let body: Value = post(&mock, chat(false)).await.json().await.expect("JSON");
        assert_eq!(body["choices"][0]["finish_reason"], "length");
        assert_eq!(body["usage"]["prompt_tokens_details"]["cached_tokens"], 40);
    }

    #[tokio::test]
    async fn reasoning_streamed_before_content() {
        let mock = MockLlm::start().await;
        mock.push(Reply::text("the answer").with_reasoning("let me think"));
        mock.push(Reply::text("the answer").with_reasoning("let me think"));
        let (frames, _, _) = read_sse(post(&mock, chat(true)).await).await;
        let kinds: Vec<&str> = frames[1..frames.len() - 2]
            .iter()
            .map(|f| {
                if delta(f).get("reasoning_content").is_some() {
                    "r"
                } else {
                    "c"
                }
            })
            .collect();
        assert_eq!(kinds, ["r", "r", "r", "c", "c"]);
        let reasoning: String = frames
            .iter()
            .filter_map(|f| delta(f)["reasoning_content"].as_str())
            .collect();
        assert_eq!(reasoning, "let me think");
        assert_eq!(content_of(&frames), "the answer");

        let body: Value = post(&mock, chat(false)).await.json().await.expect("JSON");
        let message = &body["choices"][0]["message"];
        assert_eq!(message["reasoning_content"], "let me think");
        assert_eq!(message["content"], "the answer");
    }

    #[tokio::test]
    async fn tool_calls_assembled_from_fragments() {
        let mock = MockLlm::start().await;
        let calls = vec![
            ToolCall::new("call_1", "server__tool", r#"{"a":1}"#),
            ToolCall::new("call_2", "other__tool", r#"{"query":"weather in Paris"}"#),
        ];
        mock.push(Reply::tool_calls(calls.clone()));
        mock.push(Reply::tool_calls(calls.clone()));

        let (frames, _, _) = read_sse(post(&mock, chat(true)).await).await;
        let mut assembled: Vec<ToolCall> = Vec::new();
        let mut fragments = vec![0; 2];
        for frame in &frames {
            let Some(parts) = delta(frame)["tool_calls"].as_array() else {
                continue;
            };
            assert_eq!(parts.len(), 1);
            let part = &parts[0];
            let index = part["index"].as_u64().expect("index") as usize;
            if let Some(id) = part["id"].as_str() {
                assert_eq!(index, assembled.len(), "calls arrive in index order");
                assert_eq!(part["type"], "function");
                assert_eq!(part["function"]["arguments"], "");
                let name = part["function"]["name"].as_str().expect("name");
                assembled.push(ToolCall::new(id, name, ""));
            } else {
                assert_eq!(part.as_object().expect("object").len(), 2, "{part}");
                let args = part["function"]["arguments"].as_str().expect("arguments");
                assembled[index].arguments.push_str(args);
                fragments[index] += 1;
            }
        }
        assert_eq!(assembled, calls);
        assert!(
            fragments.iter().all(|n| (2..=3).contains(n)),
            "{fragments:?}"
        );
        let finish = &frames[frames.len() - 2];
        assert_eq!(finish["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(content_of(&frames), "");

        let body: Value = post(&mock, chat(false)).await.json().await.expect("JSON");
        assert_eq!(body["choices"][0]["finish_reason"], "tool_calls");
        assert_eq!(
            body["choices"][0]["message"],
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "server__tool", "arguments": r#"{"a":1}"#}},
                {"id": "call_2", "type": "function", "function": {"name": "other__tool", "arguments": r#"{"query":"weather in Paris"}"#}},
            ]})
        );
    }

    #[tokio::test]
    async fn status_reply_with_header() {
        let mock = MockLlm::start().await;
        let error = json!({"error": {"message": "slow down", "type": "rate_limit_error"}});
        for stream in [false, true] {
            mock.push(Reply::status(429, error.clone()).with_header("retry-after", "2"));
            let resp = post(&mock, chat(stream)).await;
            assert_eq!(resp.status(), 429);
            assert_eq!(resp.headers()["retry-after"], "2");
            assert_eq!(resp.headers()["content-type"], "application/json");
            assert_eq!(resp.json::<Value>().await.expect("JSON"), error);
        }
    }

    #[tokio::test]
    async fn cut_after_drops_connection_without_done() {
        let mock = MockLlm::start().await;
        mock.push(Reply::cut_after(2));
        let (frames, _, failed) = read_sse(post(&mock, chat_with_usage()).await).await;
        assert!(failed, "body should end with an error");
        assert_eq!(frames.len(), 3, "{frames:#?}");
        assert_eq!(content_of(&frames), "part1 part2 ");
        assert!(!frames.contains(&json!("[DONE]")));

        mock.push(Reply::cut_after(2));
        let resp = post(&mock, chat(false)).await;
        assert_eq!(resp.status(), 200);
        assert!(resp.bytes().await.is_err());
    }

    #[tokio::test]
    async fn malformed_and_empty() {
        let mock = MockLlm::start().await;
        mock.push(Reply::malformed());
        let (frames, _, failed) = read_sse(post(&mock, chat(true)).await).await;
        assert!(!failed);
        assert_eq!(frames[1], json!({"unparsable": "{not json"}));
        assert_eq!(frames[2], "[DONE]");

        mock.push(Reply::malformed());
        let resp = post(&mock, chat(false)).await;
        assert_eq!(resp.status(), 200);
        assert!(resp.json::<Value>().await.is_err());

        mock.push(Reply::empty());
        let (frames, _, _) = read_sse(post(&mock, chat_with_usage()).await).await;
        assert_eq!(frames.len(), 4, "{frames:#?}");
        assert_eq!(frames[1]["choices"][0]["finish_reason"], "stop");
        assert_eq!(frames[2]["usage"]["completion_tokens"], 0);

        mock.push(Reply::empty());
        let body: Value = post(&mock, chat(false)).await.json().await.expect("JSON");
        assert_eq!(
            body["choices"][0]["message"],
            json!({"role": "assistant", "content": null})
        );
    }

    #[tokio::test]
    async fn records_requests_and_headers() {
        let mock = MockLlm::start().await;
        assert_eq!(mock.request_count(), 0);
        post(&mock, chat(false)).await;
        post(&mock, chat_with_usage()).await;
        assert_eq!(mock.request_count(), 2);
        assert_eq!(mock.requests(), vec![chat(false), chat_with_usage()]);
        let headers = mock.request_headers();
        assert_eq!(headers.len(), 2);
        assert_eq!(headers[0]["authorization"], "Bearer sk-test");
        assert_eq!(headers[0]["content-type"], "application/json");

        let models: Value = reqwest::get(format!("{}/models", mock.base_url()))
            .await
            .expect("GET /models")
            .json()
            .await
            .expect("JSON");
        assert_eq!(models["data"][0]["id"], "mock-model");
        assert_eq!(mock.request_count(), 2, "GET /models is not recorded");
    }

    #[tokio::test]
    async fn fifo_then_default_reply() {
        let mock = MockLlm::start().await;
        mock.push(Reply::text("first"));
        mock.push(Reply::text("second"));
        let mut answers = Vec::new();
        for n in 1..=3 {
            let body: Value = post(&mock, chat(false)).await.json().await.expect("JSON");
            assert_eq!(body["id"], format!("chatcmpl-mock-{n}"));
            answers.push(body["choices"][0]["message"]["content"].clone());
        }
        assert_eq!(
            answers,
            [json!("first"), json!("second"), json!("mock answer")]
        );
    }

    #[tokio::test]
    async fn chunk_gap_delays_each_frame() {
        let mock = MockLlm::start().await;
        mock.push(Reply::text("a b c d").with_chunk_gap(Duration::from_millis(100)));
        let start = Instant::now();
        let (frames, raw, _) = read_sse(post(&mock, chat(true)).await).await;
        let elapsed = start.elapsed();
        // role + 4 content + finish + [DONE] = 7 frames, 6 gaps.
        assert_eq!(frames.len(), 7);
        assert!(elapsed >= Duration::from_millis(550), "{elapsed:?}");
        assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
        assert_eq!(raw.len(), 7, "each frame is its own body chunk");
        assert!(
            raw.iter()
                .all(|c| c.starts_with(b"data: ") && c.ends_with(b"\n\n"))
        );
    }

    #[tokio::test]
    async fn first_byte_delay() {
        let mock = MockLlm::start().await;
        let delay = Duration::from_millis(300);
        mock.push(Reply::text("hi").with_first_byte_delay(delay));
        let start = Instant::now();
        let resp = post(&mock, chat(true)).await;
        let headers_at = start.elapsed();
        let (frames, _, _) = read_sse(resp).await;
        assert!(
            headers_at < delay,
            "SSE headers come at once: {headers_at:?}"
        );
        assert!(start.elapsed() >= delay);
        assert_eq!(content_of(&frames), "hi");

        mock.push(Reply::text("hi").with_first_byte_delay(delay));
        let start = Instant::now();
        let body: Value = post(&mock, chat(false)).await.json().await.expect("JSON");
        assert!(start.elapsed() >= delay);
        assert_eq!(body["choices"][0]["message"]["content"], "hi");
    }

    #[test]
    fn split_helpers() {
        assert_eq!(
            split_words(" hello  big world "),
            [" hello  ", "big ", "world "]
        );
        assert_eq!(split_words(""), Vec::<String>::new());
        assert_eq!(split_n("abcdefgh", 3), ["abc", "def", "gh"]);
        assert_eq!(split_n("ab", 5), ["a", "b"]);
        assert_eq!(split_arguments(r#"{"a":1}"#).len(), 3);
    }
}
