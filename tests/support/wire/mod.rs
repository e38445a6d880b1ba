//! A byte-level mock LLM upstream for provider tests: an axum server that answers any POST with
//! the next queued [`WireReply`] and records what it was sent ([`Received`]).
//!
//! Replies are raw bytes cut into small chunks that are flushed one by one, so the code under
//! test meets real chunk boundaries inside JSON and inside multi-byte UTF-8. The submodules
//! script complete responses in each vendor's wire format from one [`Script`]:
//! [`openai`] (Chat Completions SSE and its dialects), [`anthropic`] (Messages SSE events),
//! [`gemini`] (`streamGenerateContent?alt=sse`) and [`ollama`] (`/api/chat` NDJSON).

#![allow(dead_code)] // each test uses part of it

pub mod anthropic;
pub mod gemini;
pub mod ollama;
pub mod openai;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{OriginalUri, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use serde_json::Value;
use tokio::task::JoinHandle;

/// One tool call a scripted response makes.
#[derive(Debug, Clone)]
pub struct Call {
    pub id: String,
    pub name: String,
    /// JSON text of the arguments.
    pub arguments: String,
}

impl Call {
    pub fn new(id: &str, name: &str, arguments: &str) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }
}

/// A vendor-neutral description of one model response; the format modules render it.
#[derive(Debug, Clone, Default)]
pub struct Script {
    pub reasoning: Option<String>,
    /// Anthropic thinking `signature` / Gemini `thoughtSignature`.
    pub signature: Option<String>,
    pub text: Option<String>,
    pub calls: Vec<Call>,
    /// (input, output, cache read, cache write) in the vendor's own terms.
    pub usage: (u64, u64, u64, u64),
}

impl Script {
    pub fn text(text: &str) -> Self {
        Self {
            text: Some(text.into()),
            usage: (11, 7, 0, 0),
            ..Self::default()
        }
    }

    pub fn calls(calls: Vec<Call>) -> Self {
        Self {
            calls,
            usage: (11, 7, 0, 0),
            ..Self::default()
        }
    }

    pub fn with_reasoning(mut self, reasoning: &str, signature: Option<&str>) -> Self {
        self.reasoning = Some(reasoning.into());
        self.signature = signature.map(str::to_string);
        self
    }

    pub fn with_text(mut self, text: &str) -> Self {
        self.text = Some(text.into());
        self
    }

    pub fn with_usage(mut self, input: u64, output: u64, read: u64, write: u64) -> Self {
        self.usage = (input, output, read, write);
        self
    }

    /// `text` in `n` pieces of near-equal char count (so pieces never split a char).
    pub fn text_pieces(&self, n: usize) -> Vec<String> {
        pieces(self.text.as_deref().unwrap_or_default(), n)
    }

    pub fn reasoning_pieces(&self, n: usize) -> Vec<String> {
        pieces(self.reasoning.as_deref().unwrap_or_default(), n)
    }
}

/// Splits into `n` near-equal pieces by chars (none for empty text).
pub fn pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let size = chars.len().div_ceil(n.max(1));
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// A scripted HTTP reply.
#[derive(Debug, Clone)]
pub struct WireReply {
    status: u16,
    content_type: String,
    headers: Vec<(String, String)>,
    chunks: Vec<Bytes>,
    /// Drop the connection after the chunks instead of ending the body.
    cut: bool,
    gap: Duration,
    /// Sleep this long before chunk number `.0`.
    stall: Option<(usize, Duration)>,
}

/// Default chunk size: small and odd, so boundaries land inside JSON tokens and characters.
pub const SPLIT: usize = 7;

impl WireReply {
    /// `body` as `content_type`, cut every `split` bytes.
    pub fn raw(content_type: &str, body: &str, split: usize) -> Self {
        Self {
            status: 200,
            content_type: content_type.into(),
            headers: Vec::new(),
            chunks: split_bytes(body.as_bytes(), split),
            cut: false,
            gap: Duration::ZERO,
            stall: None,
        }
    }

    pub fn sse(body: &str) -> Self {
        Self::raw("text/event-stream", body, SPLIT)
    }

    pub fn ndjson(body: &str) -> Self {
        Self::raw("application/x-ndjson", body, SPLIT)
    }

    pub fn json(body: &Value) -> Self {
        Self::raw("application/json", &body.to_string(), SPLIT)
    }

    /// An error reply with this status and body.
    pub fn status(status: u16, body: &Value) -> Self {
        Self {
            status,
            ..Self::json(body)
        }
    }

    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Re-cuts the body every `split` bytes.
    pub fn split_every(mut self, split: usize) -> Self {
        let body: Vec<u8> = self.chunks.concat();
        self.chunks = split_bytes(&body, split);
        self
    }

    /// Sends only the first `fraction` of the body, then drops the connection.
    pub fn cut_after(mut self, fraction: f64) -> Self {
        let keep = ((self.chunks.len() as f64) * fraction).ceil() as usize;
        self.chunks.truncate(keep.max(1));
        self.cut = true;
        self
    }

    /// Waits `gap` between chunks, so each one reaches the client as its own read.
    pub fn with_gap(mut self, gap: Duration) -> Self {
        self.gap = gap;
        self
    }

    /// Goes silent for `pause` before chunk `at` (for inactivity-timeout tests).
    pub fn stall_before(mut self, at: usize, pause: Duration) -> Self {
        self.stall = Some((at, pause));
        self
    }

    /// Whether some chunk boundary falls inside a multi-byte UTF-8 character.
    pub fn splits_inside_utf8(&self) -> bool {
        self.chunks.iter().skip(1).any(|chunk| {
            chunk
                .first()
                .is_some_and(|b| (b & 0b1100_0000) == 0b1000_0000)
        })
    }

    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
    }
}

fn split_bytes(body: &[u8], split: usize) -> Vec<Bytes> {
    body.chunks(split.max(1))
        .map(Bytes::copy_from_slice)
        .collect()
}

/// One request the mock received.
#[derive(Debug, Clone)]
pub struct Received {
    pub path: String,
    /// The raw query string (`alt=sse`), empty when none.
    pub query: String,
    /// Lower-case header name → value.
    pub headers: HashMap<String, String>,
    pub body: Value,
}

#[derive(Default)]
struct MockState {
    queue: VecDeque<WireReply>,
    received: Vec<Received>,
}

type Shared = Arc<Mutex<MockState>>;

fn lock(state: &Shared) -> MutexGuard<'_, MockState> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A running mock; stops when dropped. An empty queue answers 500.
pub struct WireMock {
    pub base_url: String,
    state: Shared,
    server: JoinHandle<()>,
}

impl WireMock {
    pub async fn start() -> Self {
        let state = Shared::default();
        let app = Router::new().fallback(answer).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("wire mock: bind");
        let address = listener.local_addr().expect("wire mock: address");
        let server = tokio::spawn(async move {
            axum::serve(listener, app)
                .await
                .expect("wire mock: server error");
        });
        Self {
            base_url: format!("http://{address}"),
            state,
            server,
        }
    }

    pub fn push(&self, reply: WireReply) {
        lock(&self.state).queue.push_back(reply);
    }

    pub fn received(&self) -> Vec<Received> {
        lock(&self.state).received.clone()
    }

    /// The body of request `n` (0-based).
    pub fn body(&self, n: usize) -> Value {
        self.received()
            .get(n)
            .map(|r| r.body.clone())
            .unwrap_or_else(|| panic!("wire mock: no request {n}"))
    }
}

impl Drop for WireMock {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn answer(
    State(state): State<Shared>,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let reply = {
        let mut st = lock(&state);
        st.received.push(Received {
            path: uri.path().to_string(),
            query: uri.query().unwrap_or_default().to_string(),
            headers: headers
                .iter()
                .map(|(k, v)| {
                    (
                        k.as_str().to_string(),
                        String::from_utf8_lossy(v.as_bytes()).into_owned(),
                    )
                })
                .collect(),
            body: serde_json::from_slice(&body)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned())),
        });
        st.queue.pop_front()
    };
    let Some(reply) = reply else {
        return Response::builder()
            .status(StatusCode::INTERNAL_SERVER_ERROR)
            .body(Body::from("wire mock: no reply queued"))
            .expect("wire mock: response");
    };
    let mut builder = Response::builder()
        .status(reply.status)
        .header("content-type", reply.content_type.as_str());
    for (name, value) in &reply.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    builder
        .body(paced_body(reply))
        .expect("wire mock: response")
}

/// Yields each chunk as its own body frame; the executor yield between frames makes hyper flush
/// each one separately. A cut reply ends with an error, so hyper drops the connection.
fn paced_body(reply: WireReply) -> Body {
    let WireReply {
        chunks,
        cut,
        gap,
        stall,
        ..
    } = reply;
    let stream = async_stream::stream! {
        for (n, chunk) in chunks.into_iter().enumerate() {
            if let Some((at, pause)) = stall && at == n {
                tokio::time::sleep(pause).await;
            }
            if gap.is_zero() {
                tokio::task::yield_now().await;
            } else {
                tokio::time::sleep(gap).await;
            }
            yield Ok::<Bytes, std::io::Error>(chunk);
        }
        if cut {
            // Let hyper write what was sent before the connection goes.
            tokio::time::sleep(Duration::from_millis(20)).await;
            yield Err(std::io::Error::other("wire mock: connection cut on purpose"));
        }
    };
    Body::from_stream(stream)
}
