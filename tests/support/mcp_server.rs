//! A small rmcp MCP server for tests, shared by the stdio binary
//! (`examples/mcp_test_server.rs`) and the in-process streamable HTTP server of the API tests.
//! Its tools echo, sleep (and count cancellations), fail with `isError`, crash the process,
//! return huge or image content, and spawn a grandchild process; `stats` reports what it saw.

use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
use rmcp::{ErrorData, ServerHandler, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;
use tokio_util::sync::CancellationToken;

/// The instructions the server sends at initialisation.
pub const INSTRUCTIONS: &str = "Test server: use echo to repeat text.";

/// Counters shared by every session of one server.
#[derive(Default)]
pub struct Stats {
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    cancelled: AtomicUsize,
    completed_sleeps: AtomicUsize,
}

#[derive(Clone)]
pub struct TestServer {
    stats: Arc<Stats>,
    /// `crash` and `spawn_grandchild` only make sense in a process of their own.
    own_process: bool,
    tool_router: ToolRouter<Self>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct EchoArgs {
    /// The text to send back.
    text: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct SleepArgs {
    /// How long to sleep, in milliseconds.
    ms: u64,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct FailArgs {
    message: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[schemars(crate = "rmcp::schemars")]
pub struct HugeArgs {
    /// How many bytes of text to return.
    bytes: usize,
}

/// Decrements the in-flight count however the sleep ends.
struct InFlight<'a>(&'a Stats);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

#[tool_router]
impl TestServer {
    pub fn new(stats: Arc<Stats>, own_process: bool) -> Self {
        Self {
            stats,
            own_process,
            tool_router: Self::tool_router(),
        }
    }

    #[tool(description = "Sends the text back.")]
    fn echo(&self, Parameters(EchoArgs { text }): Parameters<EchoArgs>) -> String {
        text
    }

    #[tool(description = "Sleeps, then answers; counts how many sleeps overlap and are cancelled.")]
    async fn sleep(
        &self,
        Parameters(SleepArgs { ms }): Parameters<SleepArgs>,
        cancelled: CancellationToken,
    ) -> String {
        let now = self.stats.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.stats.max_in_flight.fetch_max(now, Ordering::SeqCst);
        let _in_flight = InFlight(&self.stats);
        tokio::select! {
            _ = cancelled.cancelled() => {
                self.stats.cancelled.fetch_add(1, Ordering::SeqCst);
                "cancelled".into()
            }
            _ = tokio::time::sleep(Duration::from_millis(ms)) => {
                self.stats.completed_sleeps.fetch_add(1, Ordering::SeqCst);
                format!("slept {ms} ms")
            }
        }
    }

    #[tool(description = "Reports max_in_flight, cancelled and completed_sleeps as JSON.")]
    fn stats(&self) -> String {
        serde_json::json!({
            "max_in_flight": self.stats.max_in_flight.load(Ordering::SeqCst),
            "cancelled": self.stats.cancelled.load(Ordering::SeqCst),
            "completed_sleeps": self.stats.completed_sleeps.load(Ordering::SeqCst),
            "pid": std::process::id(),
        })
        .to_string()
    }

    #[tool(description = "Fails with isError and the given message.")]
    fn fail(&self, Parameters(FailArgs { message }): Parameters<FailArgs>) -> CallToolResult {
        CallToolResult::error(vec![ContentBlock::text(message)])
    }

    #[tool(description = "Exits the server process without answering.")]
    fn crash(&self) -> Result<String, ErrorData> {
        if self.own_process {
            std::process::exit(3);
        }
        Err(ErrorData::internal_error(
            "crash works only over stdio",
            None,
        ))
    }

    #[tool(description = "Returns that many bytes of text.")]
    fn huge(&self, Parameters(HugeArgs { bytes }): Parameters<HugeArgs>) -> String {
        "x".repeat(bytes)
    }

    #[tool(description = "Returns an image and a caption.")]
    fn image(&self) -> CallToolResult {
        CallToolResult::success(vec![
            ContentBlock::image("iVBORw0KGgo=", "image/png"),
            ContentBlock::text("a tiny picture"),
        ])
    }

    #[tool(
        name = "odd_schema",
        description = "Declares an input schema that does not compile.",
        input_schema = uncompilable_schema()
    )]
    fn odd_schema(&self) -> String {
        "called without validation".into()
    }

    #[tool(description = "Starts `sleep 300` as a child of the server and returns its pid.")]
    fn spawn_grandchild(&self) -> Result<String, ErrorData> {
        if !self.own_process {
            return Err(ErrorData::internal_error("stdio only", None));
        }
        let child = std::process::Command::new("sleep")
            .arg("300")
            .spawn()
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(child.id().to_string())
    }
}

/// A schema no validator accepts (`--validate` must report it).
fn uncompilable_schema() -> Arc<rmcp::model::JsonObject> {
    let schema =
        serde_json::json!({"type": "object", "properties": {"x": {"type": "no-such-type"}}});
    match schema {
        serde_json::Value::Object(map) => Arc::new(map),
        _ => Arc::default(),
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_instructions(INSTRUCTIONS)
    }
}

/// The in-process streamable HTTP server: its URL, the headers each request carried, and a
/// token that stops it.
pub struct HttpTestServer {
    pub url: String,
    pub seen_headers: Arc<Mutex<Vec<(String, String)>>>,
    pub stop: CancellationToken,
}

/// Serves [`TestServer`] over streamable HTTP on 127.0.0.1:0 at `/mcp`.
pub async fn serve_http() -> std::io::Result<HttpTestServer> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };

    let stop = CancellationToken::new();
    let stats = Arc::new(Stats::default());
    let service = StreamableHttpService::new(
        move || Ok(TestServer::new(Arc::clone(&stats), false)),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default().with_cancellation_token(stop.child_token()),
    );
    let seen_headers = Arc::new(Mutex::new(Vec::new()));
    let recorded = Arc::clone(&seen_headers);
    let router =
        axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn(
                move |request: axum::extract::Request, next: axum::middleware::Next| {
                    let recorded = Arc::clone(&recorded);
                    async move {
                        if let Ok(mut seen) = recorded.lock() {
                            for (name, value) in request.headers() {
                                let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
                                seen.push((name.as_str().to_string(), value));
                            }
                        }
                        next.run(request).await
                    }
                },
            ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/mcp", listener.local_addr()?);
    let shutdown = stop.clone();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router)
            .with_graceful_shutdown(async move { shutdown.cancelled_owned().await })
            .await;
    });
    Ok(HttpTestServer {
        url,
        seen_headers,
        stop,
    })
}
