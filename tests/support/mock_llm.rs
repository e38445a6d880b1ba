//! The scripted mock LLM: one [`Reply`] type that describes what the model says (text,
//! reasoning, tool calls, usage, errors, cuts, malformed frames, timing) and one HTTP server,
//! [`MockLlm`], that renders it in the wire format the request's path asks for:
//! OpenAI Chat Completions (`…/chat/completions`), Anthropic Messages (`…/messages`), Gemini
//! (`…:generateContent`, `…:streamGenerateContent`) and Ollama (`/api/chat`), streaming or not.
//! The in-process provider in `scripted.rs` plays the same [`Reply`]s without a network.
//!
//! Queue replies with [`MockLlm::push`] (FIFO, one per request; an empty queue answers
//! `Reply::text("mock answer")`), then read what was sent with [`MockLlm::received`].
//!
//! Delivery: the body is cut every [`SPLIT`] bytes (see [`Reply::split_every`],
//! [`Reply::whole_frames`]) and the pieces are flushed one by one, so the code under test meets
//! chunk boundaries inside JSON and inside multi-byte characters. The first-byte delay comes
//! before the response for whole bodies and before the first piece of a stream (whose headers go
//! out at once); the chunk gap is slept before each piece that starts a new frame.
//!
//! `examples/mock_upstream.rs` includes this file on its own, so it uses nothing else of the
//! test support.

#![allow(
    dead_code,
    reason = "each crate including this file uses a different part of it"
)]

#[path = "mock_llm/anthropic.rs"]
pub mod anthropic;
#[path = "mock_llm/gemini.rs"]
pub mod gemini;
#[path = "mock_llm/ollama.rs"]
pub mod ollama;
#[path = "mock_llm/openai.rs"]
pub mod openai;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Body;
use axum::extract::{OriginalUri, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// Model id reported by `GET /v1/models` and used when a request names none.
pub const MOCK_MODEL: &str = "mock-model";
/// Default piece size: small and odd, so cuts land inside JSON tokens and characters.
pub const SPLIT: usize = 7;

/// One tool call of an assistant reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// The JSON arguments, as a string (as on the OpenAI wire).
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

    /// The arguments as JSON (`{}` when they do not parse), for the formats that send objects.
    pub fn arguments_json(&self) -> Value {
        serde_json::from_str(&self.arguments).unwrap_or(json!({}))
    }
}

/// Token counts in the vendor-neutral sense; each format reports them in its own terms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
}

/// What kind of answer a reply is.
#[derive(Clone, Debug)]
pub enum Kind {
    /// The model answers (text, reasoning, tool calls, or nothing).
    Answer,
    /// An error reply: this HTTP status with this JSON body.
    Status { status: u16, body: Value },
    /// A frame (or whole body) that is not JSON.
    Malformed,
    /// Never answers (for abort tests).
    Hang,
    /// The in-process provider panics (the HTTP mock drops the connection).
    Panic,
    /// Text that does not end: a stream of text frames, or a whole body whose answer never
    /// closes, each piece [`ENDLESS_PIECE`] bytes of text, until [`ENDLESS_BYTES`] are sent;
    /// then the connection drops.
    Endless,
}

/// The bytes of text in each piece of an endless reply.
pub const ENDLESS_PIECE: usize = 16 * 1024;
/// Where an endless reply gives up: far past any bound a client should accept (agentd's
/// default is 8 MiB), yet small enough that a client without a bound fails a test instead of
/// exhausting the machine's memory.
pub const ENDLESS_BYTES: usize = 64 * 1024 * 1024;

/// Where a reply stops before its end, dropping the connection.
#[derive(Clone, Copy, Debug)]
pub enum Cut {
    /// Streams everything up to and including this many text pieces; a whole body is cut in half.
    AfterTextPieces(usize),
    /// Sends this fraction of the body's pieces (at least one).
    AfterFraction(f64),
}

/// A scripted model reply, built with the constructors and `with_*` builders.
#[derive(Clone, Debug)]
pub struct Reply {
    kind: Kind,
    text: Option<String>,
    /// Explicit text pieces (else one per word, or `chunks` near-equal pieces).
    pieces: Option<Vec<String>>,
    chunks: Option<usize>,
    reasoning: Option<String>,
    /// Anthropic thinking `signature` / Gemini `thoughtSignature`.
    signature: Option<String>,
    tool_calls: Vec<ToolCall>,
    usage: Option<Usage>,
    finish_reason: Option<String>,
    /// `(type, message)` of an error the stream reports after its text instead of finishing.
    stream_error: Option<(String, String)>,
    dialect: openai::Dialect,
    headers: Vec<(String, String)>,
    cut: Option<Cut>,
    /// How the body is cut into pieces; `None`: as the mock's default.
    split: Option<Split>,
    first_byte_delay: Duration,
    chunk_gap: Duration,
    /// Silence of `.1` before piece number `.0`.
    stall: Option<(usize, Duration)>,
}

impl Reply {
    fn new(kind: Kind) -> Self {
        Self {
            kind,
            text: None,
            pieces: None,
            chunks: None,
            reasoning: None,
            signature: None,
            tool_calls: Vec::new(),
            usage: None,
            finish_reason: None,
            stream_error: None,
            dialect: openai::Dialect::default(),
            headers: Vec::new(),
            cut: None,
            split: None,
            first_byte_delay: Duration::ZERO,
            chunk_gap: Duration::ZERO,
            stall: None,
        }
    }

    /// An assistant message with this text.
    pub fn text(text: impl Into<String>) -> Self {
        Self::new(Kind::Answer).with_text(text)
    }

    /// Text streamed in exactly these pieces.
    pub fn text_in_pieces(pieces: &[&str]) -> Self {
        let mut reply = Self::text(pieces.concat());
        reply.pieces = Some(pieces.iter().map(|p| (*p).to_string()).collect());
        reply
    }

    /// An assistant message with these tool calls and no text.
    pub fn tool_calls(calls: Vec<ToolCall>) -> Self {
        Self::new(Kind::Answer).with_tool_calls(calls)
    }

    /// A valid answer with no text, no tool calls and no reasoning.
    pub fn empty() -> Self {
        Self::new(Kind::Answer)
    }

    /// An error reply: HTTP `status` with `body` as its JSON body (streaming or not).
    pub fn status(status: u16, body: Value) -> Self {
        Self::new(Kind::Status { status, body })
    }

    /// Text `"part1 part2 … part{k+1} "`, cut after `k` pieces (see [`Cut::AfterTextPieces`]).
    pub fn cut_after(k: usize) -> Self {
        let text: String = (1..=k + 1).map(|i| format!("part{i} ")).collect();
        Self {
            cut: Some(Cut::AfterTextPieces(k)),
            ..Self::text(text)
        }
    }

    /// A stream with a frame that is not JSON; a whole body that is not JSON.
    pub fn malformed() -> Self {
        Self::new(Kind::Malformed)
    }

    /// Never answers.
    pub fn hang() -> Self {
        Self::new(Kind::Hang)
    }

    /// The provider itself panics.
    pub fn panic() -> Self {
        Self::new(Kind::Panic)
    }

    /// A model that never stops talking (see [`Kind::Endless`]).
    pub fn endless() -> Self {
        Self::new(Kind::Endless)
    }

    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    /// Reasoning, streamed one piece per word before the text.
    pub fn with_reasoning(mut self, reasoning: impl Into<String>) -> Self {
        self.reasoning = Some(reasoning.into());
        self
    }

    /// The reasoning's signature (Anthropic `signature`, Gemini `thoughtSignature`).
    pub fn with_signature(mut self, signature: impl Into<String>) -> Self {
        self.signature = Some(signature.into());
        self
    }

    pub fn with_tool_calls(mut self, calls: Vec<ToolCall>) -> Self {
        self.tool_calls.extend(calls);
        self
    }

    /// Streams the text in `n` pieces of near-equal length (in chars) instead of one per word.
    pub fn with_chunks(mut self, n: usize) -> Self {
        self.chunks = Some(n);
        self
    }

    /// Reported usage. Default: input 10, output = number of streamed pieces, no cache.
    pub fn with_usage(
        mut self,
        input: u64,
        output: u64,
        cache_read: u64,
        cache_write: u64,
    ) -> Self {
        self.usage = Some(Usage {
            input,
            output,
            cache_read,
            cache_write,
        });
        self
    }

    /// Overrides the finish reason, sent as given (default: the format's own for a stop or for
    /// tool calls).
    pub fn with_finish_reason(mut self, reason: impl Into<String>) -> Self {
        self.finish_reason = Some(reason.into());
        self
    }

    /// After its text the stream reports this error (`type`, message) instead of finishing.
    pub fn with_stream_error(mut self, kind: &str, message: &str) -> Self {
        self.stream_error = Some((kind.into(), message.into()));
        self
    }

    /// How an OpenAI-compatible server words the reply (see [`openai::Dialect`]).
    pub fn with_dialect(mut self, dialect: openai::Dialect) -> Self {
        self.dialect = dialect;
        self
    }

    /// Adds a response header.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Cuts the body every `split` bytes.
    pub fn split_every(mut self, split: usize) -> Self {
        self.split = Some(Split::Every(split.max(1)));
        self
    }

    /// Sends each frame (SSE event, NDJSON line) as one piece.
    pub fn whole_frames(mut self) -> Self {
        self.split = Some(Split::WholeFrames);
        self
    }

    /// Sends only the first `fraction` of the body's pieces, then drops the connection.
    /// This reply's stream dropped after `k` text pieces.
    pub fn cut_after_pieces(mut self, k: usize) -> Self {
        self.cut = Some(Cut::AfterTextPieces(k));
        self
    }

    pub fn cut_after_fraction(mut self, fraction: f64) -> Self {
        self.cut = Some(Cut::AfterFraction(fraction));
        self
    }

    /// Delay before the first byte of the body (see the module docs).
    pub fn with_first_byte_delay(mut self, delay: Duration) -> Self {
        self.first_byte_delay = delay;
        self
    }

    /// Delay before each frame after the first (slept before the piece that holds the frame's
    /// start, once for every frame starting in it).
    pub fn with_chunk_gap(mut self, gap: Duration) -> Self {
        self.chunk_gap = gap;
        self
    }

    /// Goes silent for `pause` before piece number `at` (for inactivity-timeout tests).
    pub fn stall_before(mut self, at: usize, pause: Duration) -> Self {
        self.stall = Some((at, pause));
        self
    }

    pub fn kind(&self) -> &Kind {
        &self.kind
    }

    pub fn text_content(&self) -> Option<&str> {
        self.text.as_deref()
    }

    pub fn reasoning(&self) -> Option<&str> {
        self.reasoning.as_deref()
    }

    pub fn signature(&self) -> Option<&str> {
        self.signature.as_deref()
    }

    pub fn calls(&self) -> &[ToolCall] {
        &self.tool_calls
    }

    pub fn dialect(&self) -> &openai::Dialect {
        &self.dialect
    }

    pub fn cut(&self) -> Option<Cut> {
        self.cut
    }

    pub fn stream_error(&self) -> Option<(&str, &str)> {
        self.stream_error
            .as_ref()
            .map(|(kind, message)| (kind.as_str(), message.as_str()))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The text as streamed: explicit pieces, `chunks` near-equal pieces, or one per word.
    pub fn text_pieces(&self) -> Vec<String> {
        if let Some(pieces) = &self.pieces {
            return pieces.clone();
        }
        let text = self.text.as_deref().unwrap_or("");
        match self.chunks {
            Some(n) => split_n(text, n),
            None => split_words(text),
        }
    }

    pub fn reasoning_pieces(&self) -> Vec<String> {
        split_words(self.reasoning.as_deref().unwrap_or(""))
    }

    /// The finish reason, or `stop` / `tool_calls` in the format's own words.
    pub fn finish_reason_or(&self, stop: &str, tool_calls: &str) -> String {
        match &self.finish_reason {
            Some(reason) => reason.clone(),
            None if self.tool_calls.is_empty() => stop.to_owned(),
            None => tool_calls.to_owned(),
        }
    }

    /// The finish reason in OpenAI's words.
    pub fn finish_reason(&self) -> String {
        self.finish_reason_or("stop", "tool_calls")
    }

    pub fn usage(&self) -> Usage {
        self.usage.unwrap_or_else(|| {
            let fragments: usize = self
                .tool_calls
                .iter()
                .map(|c| 1 + argument_pieces(&c.arguments).len())
                .sum();
            let pieces = self.text_pieces().len() + self.reasoning_pieces().len() + fragments;
            Usage {
                input: 10,
                output: pieces as u64,
                ..Usage::default()
            }
        })
    }
}

/// Splits into one piece per whitespace-separated word, each word keeping the whitespace that
/// follows it (leading whitespace stays with the first word), so the pieces concatenate to `text`.
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

/// Splits into `n` pieces of near-equal char count (fewer if `text` has fewer chars; none if it
/// is empty).
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
pub fn argument_pieces(arguments: &str) -> Vec<String> {
    split_n(arguments, 3)
}

/// How a body is cut into the pieces it is sent in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// Every this many bytes, across frame boundaries.
    Every(usize),
    /// One piece per frame.
    WholeFrames,
}

/// One frame of a stream (an SSE event, an NDJSON line); `text` marks a frame carrying a text
/// piece, which is where [`Cut::AfterTextPieces`] counts.
pub struct Frame {
    pub bytes: String,
    pub text: bool,
}

impl Frame {
    pub fn new(bytes: String) -> Self {
        Self { bytes, text: false }
    }

    pub fn text(bytes: String) -> Self {
        Self { bytes, text: true }
    }
}

/// What the request asked for, as the renderers need it.
pub struct Exchange {
    pub id: String,
    pub created: u64,
    pub model: String,
    /// OpenAI: `stream_options.include_usage` or OpenRouter's `usage.include`.
    pub include_usage: bool,
}

/// The wire format a request's path names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    OpenAi,
    Anthropic,
    Gemini,
    Ollama,
}

impl Wire {
    fn from_path(path: &str) -> Option<Self> {
        if path.ends_with("/chat/completions") {
            Some(Self::OpenAi)
        } else if path.ends_with("/messages") {
            Some(Self::Anthropic)
        } else if path.ends_with(":generateContent") || path.ends_with(":streamGenerateContent") {
            Some(Self::Gemini)
        } else if path.ends_with("/api/chat") {
            Some(Self::Ollama)
        } else {
            None
        }
    }

    fn streaming(self, path: &str, request: &Value) -> bool {
        let stream = request.get("stream").and_then(Value::as_bool);
        match self {
            Self::OpenAi | Self::Anthropic => stream == Some(true),
            Self::Gemini => path.ends_with(":streamGenerateContent"),
            Self::Ollama => stream != Some(false),
        }
    }

    fn stream_content_type(self) -> &'static str {
        match self {
            Self::Ollama => "application/x-ndjson",
            _ => "text/event-stream",
        }
    }

    fn stream(self, reply: &Reply, exchange: &Exchange) -> Vec<Frame> {
        match (self, reply.kind()) {
            (Self::OpenAi, Kind::Malformed) => openai::malformed_stream(exchange),
            (Self::Anthropic, Kind::Malformed) => anthropic::malformed_stream(exchange),
            (Self::Gemini, Kind::Malformed) => gemini::malformed_stream(),
            (Self::Ollama, Kind::Malformed) => ollama::malformed_stream(),
            (Self::OpenAi, _) => openai::stream(reply, exchange),
            (Self::Anthropic, _) => anthropic::stream(reply, exchange),
            (Self::Gemini, _) => gemini::stream(reply),
            (Self::Ollama, _) => ollama::stream(reply),
        }
    }

    fn whole(self, reply: &Reply, exchange: &Exchange) -> Value {
        match self {
            Self::OpenAi => openai::whole(reply, exchange),
            Self::Anthropic => anthropic::whole(reply, exchange),
            Self::Gemini => gemini::whole(reply),
            Self::Ollama => ollama::whole(reply),
        }
    }
}

/// One request the mock received.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    /// The raw query string (`alt=sse`), empty when none.
    pub query: String,
    /// Lower-case header name → value; repeated headers joined with `", "`.
    pub headers: HashMap<String, String>,
    /// The JSON body (a body that is not JSON is kept as a JSON string and answered with 400).
    pub body: Value,
    /// The pieces the response body was sent in.
    pub response_pieces: Vec<Bytes>,
}

impl Received {
    /// Whether some cut of the response fell inside a multi-byte UTF-8 character.
    pub fn response_split_inside_utf8(&self) -> bool {
        self.response_pieces.iter().skip(1).any(|piece| {
            piece
                .first()
                .is_some_and(|b| (b & 0b1100_0000) == 0b1000_0000)
        })
    }
}

struct MockState {
    queue: VecDeque<Reply>,
    received: Vec<Received>,
    /// Answered when the queue is empty.
    default_reply: Reply,
    /// Keep requests (off for load runs, where they would pile up).
    record: bool,
    /// Requests answered so far.
    answered: usize,
    /// How replies that do not say are cut.
    split: Split,
    /// When each streamed response was dropped before its last piece (the client went away).
    abandoned: Vec<std::time::Instant>,
}

type Shared = Arc<Mutex<MockState>>;

fn lock(state: &Shared) -> MutexGuard<'_, MockState> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A running mock upstream; the server stops when this is dropped.
pub struct MockLlm {
    origin: String,
    state: Shared,
    server: JoinHandle<()>,
}

impl MockLlm {
    /// Binds 127.0.0.1:0; answers every wire format and `GET /v1/models` (`"mock-model"`);
    /// cuts bodies every [`SPLIT`] bytes.
    pub async fn start() -> MockLlm {
        Self::serve(
            "127.0.0.1:0",
            Reply::text("mock answer"),
            true,
            Split::Every(SPLIT),
        )
        .await
    }

    /// Binds `address`, answers `default_reply` whenever the queue is empty, records requests
    /// only when `record` is set, and sends whole frames: the benchmark's upstream.
    pub async fn start_with(address: &str, default_reply: Reply, record: bool) -> MockLlm {
        Self::serve(address, default_reply, record, Split::WholeFrames).await
    }

    async fn serve(address: &str, default_reply: Reply, record: bool, split: Split) -> MockLlm {
        let state = Shared::new(Mutex::new(MockState {
            queue: VecDeque::new(),
            received: Vec::new(),
            default_reply,
            record,
            answered: 0,
            split,
            abandoned: Vec::new(),
        }));
        let app = Router::new().fallback(answer).with_state(state.clone());
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
            origin: format!("http://{addr}"),
            state,
            server,
        }
    }

    /// e.g. `"http://127.0.0.1:PORT/v1"`, for OpenAI-compatible clients.
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.origin)
    }

    /// e.g. `"http://127.0.0.1:PORT"`, for providers that add their own path.
    pub fn origin(&self) -> String {
        self.origin.clone()
    }

    /// Queues a reply; replies are consumed FIFO, one per request.
    pub fn push(&self, reply: Reply) {
        lock(&self.state).queue.push_back(reply);
    }

    /// Every request received so far, in order.
    pub fn received(&self) -> Vec<Received> {
        lock(&self.state).received.clone()
    }

    /// Bodies of every request received so far, in order.
    pub fn requests(&self) -> Vec<Value> {
        lock(&self.state)
            .received
            .iter()
            .map(|r| r.body.clone())
            .collect()
    }

    /// The body of request `n` (0-based).
    pub fn body(&self, n: usize) -> Value {
        self.requests()
            .get(n)
            .cloned()
            .unwrap_or_else(|| panic!("mock LLM: no request {n}"))
    }

    /// Headers of every request, in order.
    pub fn request_headers(&self) -> Vec<HashMap<String, String>> {
        lock(&self.state)
            .received
            .iter()
            .map(|r| r.headers.clone())
            .collect()
    }

    /// Number of requests received so far.
    pub fn request_count(&self) -> usize {
        lock(&self.state).received.len()
    }

    /// When each streamed response was abandoned by the client before it ended.
    pub fn abandoned(&self) -> Vec<std::time::Instant> {
        lock(&self.state).abandoned.clone()
    }
}

impl Drop for MockLlm {
    fn drop(&mut self) {
        self.server.abort();
    }
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

async fn answer(
    State(state): State<Shared>,
    method: Method,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    if method == Method::GET && path.ends_with("/models") {
        return axum::Json(json!({
            "object": "list",
            "data": [{"id": MOCK_MODEL, "object": "model", "created": 0, "owned_by": "mock"}],
        }))
        .into_response();
    }
    let Some(wire) = Wire::from_path(&path) else {
        return (
            StatusCode::NOT_FOUND,
            "mock LLM: no wire format at this path",
        )
            .into_response();
    };
    let parsed = serde_json::from_slice::<Value>(&body);
    let (number, reply, request, index, split) = {
        let mut st = lock(&state);
        let index = st.record.then_some(st.received.len());
        if st.record {
            st.received.push(Received {
                path: path.clone(),
                query: uri.query().unwrap_or_default().to_string(),
                headers: header_map(&headers),
                body: parsed
                    .as_ref()
                    .cloned()
                    .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned())),
                response_pieces: Vec::new(),
            });
        }
        let Ok(request) = parsed else {
            let error = json!({"error": {
                "message": "mock LLM: request body is not JSON",
                "type": "invalid_request_error",
            }});
            return (StatusCode::BAD_REQUEST, axum::Json(error)).into_response();
        };
        st.answered += 1;
        let reply = st
            .queue
            .pop_front()
            .unwrap_or_else(|| st.default_reply.clone());
        let split = reply.split.unwrap_or(st.split);
        (st.answered, reply, request, index, split)
    };
    let exchange = Exchange {
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
        include_usage: request.pointer("/stream_options/include_usage") == Some(&json!(true))
            || request.pointer("/usage/include") == Some(&json!(true)),
    };
    let streaming = wire.streaming(&path, &request);
    if matches!(reply.kind(), Kind::Endless) {
        return endless(wire, streaming, &exchange);
    }
    // `dropped`: the connection goes after the last piece instead of the body ending.
    let (status, content_type, frames, mut dropped) = match reply.kind() {
        Kind::Hang => std::future::pending().await,
        Kind::Panic => panic!("mock LLM: the scripted reply panics"),
        Kind::Status { status, body } => {
            (*status, "application/json", vec![body.to_string()], false)
        }
        Kind::Malformed if !streaming => (200, "application/json", vec!["{not json".into()], false),
        _ if streaming => {
            let mut frames = wire.stream(&reply, &exchange);
            let cut = reply.cut();
            if let Some(Cut::AfterTextPieces(k)) = cut {
                frames = cut_after_text_pieces(frames, k);
            }
            let frames = frames.into_iter().map(|f| f.bytes).collect();
            let dropped = matches!(cut, Some(Cut::AfterTextPieces(_)));
            (200, wire.stream_content_type(), frames, dropped)
        }
        _ => {
            let mut whole = wire.whole(&reply, &exchange).to_string();
            let dropped = matches!(reply.cut(), Some(Cut::AfterTextPieces(_)));
            if dropped {
                let mut half = whole.len() / 2;
                while !whole.is_char_boundary(half) {
                    half -= 1;
                }
                whole.truncate(half);
            }
            (200, "application/json", vec![whole], dropped)
        }
    };
    let streamed = streaming && status == 200;
    let mut pieces = cut_into_pieces(&frames, split);
    if let Some(Cut::AfterFraction(fraction)) = reply.cut() {
        let keep = ((pieces.len() as f64) * fraction).ceil() as usize;
        pieces.truncate(keep.max(1));
        dropped = true;
    }
    if let Some(index) = index {
        lock(&state).received[index].response_pieces =
            pieces.iter().map(|p| p.bytes.clone()).collect();
    }
    if !streamed {
        sleep(reply.first_byte_delay).await;
    }
    let mut builder = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, content_type);
    if content_type == "text/event-stream" {
        builder = builder.header(header::CACHE_CONTROL, "no-cache");
    }
    for (name, value) in &reply.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    let pacing = Pacing {
        first: if streamed {
            reply.first_byte_delay
        } else {
            Duration::ZERO
        },
        gap: reply.chunk_gap,
        stall: reply.stall,
        dropped,
        watch: streamed.then(|| state.clone()),
    };
    builder
        .body(paced(pieces, pacing))
        .expect("mock LLM: invalid response header in Reply::with_header")
}

/// A response that never ends: the wire's stream with its first text frame repeated forever,
/// or its whole body cut where the answer's text starts and followed by text forever.
fn endless(wire: Wire, streaming: bool, exchange: &Exchange) -> Response {
    let piece = "x".repeat(ENDLESS_PIECE);
    let (head, repeated, content_type) = if streaming {
        let frames = wire.stream(&Reply::text(piece.clone()).with_chunks(1), exchange);
        let first_text = frames.iter().position(|f| f.text).unwrap_or(0);
        let head: String = frames[..first_text]
            .iter()
            .map(|f| f.bytes.as_str())
            .collect();
        (
            head,
            frames[first_text].bytes.clone(),
            wire.stream_content_type(),
        )
    } else {
        const MARK: &str = "@@endless@@";
        let whole = wire.whole(&Reply::text(MARK), exchange).to_string();
        let head = whole.split(MARK).next().unwrap_or_default().to_string();
        (head, piece, "application/json")
    };
    let (head, repeated) = (Bytes::from(head), Bytes::from(repeated));
    let body = async_stream::stream! {
        yield Ok::<Bytes, std::io::Error>(head);
        for _ in 0..ENDLESS_BYTES / ENDLESS_PIECE {
            tokio::task::yield_now().await;
            yield Ok(repeated.clone());
        }
        yield Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            "mock LLM: an endless reply gives up",
        ));
    };
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, content_type)
        .body(Body::from_stream(body))
        .expect("mock LLM: endless response")
}

/// Keeps the frames up to and including the `k`-th text frame (none of them when `k` is 0).
fn cut_after_text_pieces(frames: Vec<Frame>, k: usize) -> Vec<Frame> {
    let mut seen = 0;
    frames
        .into_iter()
        .take_while(|frame| {
            if frame.text {
                seen += 1;
            }
            !frame.text || seen <= k
        })
        .collect()
}

struct Piece {
    bytes: Bytes,
    /// How many frames after the first start in this piece.
    frame_starts: u32,
}

/// Cuts the concatenated frames as `split` says.
fn cut_into_pieces(frames: &[String], split: Split) -> Vec<Piece> {
    let Split::Every(split) = split else {
        return frames
            .iter()
            .enumerate()
            .map(|(n, frame)| Piece {
                bytes: Bytes::from(frame.clone()),
                frame_starts: u32::from(n > 0),
            })
            .collect();
    };
    let mut starts = Vec::new();
    let mut body = Vec::new();
    for frame in frames {
        starts.push(body.len());
        body.extend_from_slice(frame.as_bytes());
    }
    // Frame starts are in order: one pass over them for all the pieces.
    let mut next_start = starts.iter().filter(|&&s| s > 0).peekable();
    body.chunks(split)
        .enumerate()
        .map(|(n, bytes)| {
            let to = n * split + bytes.len();
            let mut frame_starts = 0;
            while next_start.next_if(|&&s| s < to).is_some() {
                frame_starts += 1;
            }
            Piece {
                bytes: Bytes::copy_from_slice(bytes),
                frame_starts,
            }
        })
        .collect()
}

async fn sleep(delay: Duration) {
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
}

struct Pacing {
    first: Duration,
    gap: Duration,
    stall: Option<(usize, Duration)>,
    /// Drop the connection after the last piece instead of ending the body.
    dropped: bool,
    /// Where to record a stream the client abandons.
    watch: Option<Shared>,
}

/// Records the moment a streamed response is dropped before its last piece.
struct Unfinished(Option<Shared>);

impl Drop for Unfinished {
    fn drop(&mut self) {
        if let Some(state) = &self.0 {
            lock(state).abandoned.push(std::time::Instant::now());
        }
    }
}

/// Yields each piece as its own body frame; the executor yield between pieces makes hyper flush
/// each one separately. A dropped reply ends with an error, so hyper drops the connection.
fn paced(pieces: Vec<Piece>, pacing: Pacing) -> Body {
    let stream = async_stream::stream! {
        let mut unfinished = Unfinished(pacing.watch);
        for (n, piece) in pieces.into_iter().enumerate() {
            if n == 0 {
                sleep(pacing.first).await;
            }
            sleep(pacing.gap * piece.frame_starts).await;
            if let Some((at, pause)) = pacing.stall && at == n {
                tokio::time::sleep(pause).await;
            }
            tokio::task::yield_now().await;
            yield Ok::<Bytes, std::io::Error>(piece.bytes);
        }
        if pacing.dropped {
            // Let hyper write what was sent before the connection goes.
            tokio::time::sleep(Duration::from_millis(50)).await;
            yield Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionAborted,
                "mock LLM: scripted cut",
            ));
        }
        unfinished.0 = None;
    };
    Body::from_stream(stream)
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
            .with_usage(100, 7, 40, 0)
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
        mock.push(
            Reply::text("a b c d")
                .with_chunk_gap(Duration::from_millis(100))
                .whole_frames(),
        );
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
        assert_eq!(argument_pieces(r#"{"a":1}"#).len(), 3);
    }
}
