//! Faults of what agentd depends on (issue 35, items 12, 14, 15, 16), each measured as a user
//! sees it: an upstream model that never stops talking or sends a huge body, a Redis that goes
//! away, hostile Markdown, and a stdio MCP server that floods its output.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::mock_llm::Reply;
use crate::support::{TestApp, spawn_app_with};

// ---------------------------------------------------------------------------------------------
// Item 12: a bound on what an upstream model sends.

/// A text agent whose frontmatter adds `extra` (e.g. `llmResponseMaxBytes: 1000`).
fn text_agent(extra: &str) -> String {
    format!(
        "---\ndescription: Answers\nmodels: llm/upstream-model\nmaxRetries: 3\nfinalization: text\n{extra}---\nYou answer.\n"
    )
}

/// The test app with agent `bounded` (`extra` in its frontmatter), its provider streaming or
/// asking for whole bodies.
async fn app_with_bounded_agent(extra: &str, streamed: bool) -> TestApp {
    let agent = text_agent(extra);
    spawn_app_with(move |config| {
        let agents = config["agents"][0]
            .as_str()
            .expect("agents dir")
            .to_string();
        std::fs::write(format!("{agents}/bounded.ai"), agent).expect("agent file");
        config["providers"]["llm"]["stream"] = json!(streamed);
    })
    .await
}

/// Runs agent `bounded` without streaming to the client; returns the HTTP status, the body and
/// the run as stored.
async fn bounded_run(app: &TestApp) -> (u16, Value, Value) {
    let (run_id, response) = app
        .start_run("/v1/agents/bounded/runs", &json!({"prompt": "go"}))
        .await;
    let status = response.status().as_u16();
    let body: Value = tokio::time::timeout(Duration::from_secs(60), response.json())
        .await
        .expect("the run answers")
        .expect("json");
    let stored = app.ended_run(&run_id, Duration::from_secs(10)).await;
    (status, body, stored)
}

fn assert_output_too_large(stored: &Value, limit: &str) {
    assert_eq!(stored["status"], "failed", "{stored}");
    assert_eq!(stored["exit_reason"], "output_too_large", "{stored}");
    let error = stored["result"]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("llmResponseMaxBytes") && error.contains(limit),
        "the error names the setting and its value: {error}"
    );
}

#[tokio::test]
async fn an_endless_stream_ends_its_run_output_too_large_at_the_default_bound_without_a_retry() {
    for streamed in [true, false] {
        let app = app_with_bounded_agent("", streamed).await;
        app.llm.push(Reply::endless());
        let started = Instant::now();
        let (status, body, stored) = bounded_run(&app).await;
        assert_output_too_large(&stored, &(8 * 1024 * 1024).to_string());
        assert_eq!(status, 200, "the runs API answers the AgentResult: {body}");
        assert_eq!(body["exit_reason"], "output_too_large", "{body}");
        assert_eq!(
            app.llm.request_count(),
            1,
            "streamed {streamed}: an upstream that sent too much is not asked again"
        );
        // The store holds at most the bound of output (as events), not what the upstream sent.
        let run_id = stored["run_id"].as_str().expect("run id");
        let events = app.get(&format!("/v1/runs/{run_id}/events")).await;
        let stored_bytes = events.text().await.expect("events").len();
        assert!(
            stored_bytes < 2 * 8 * 1024 * 1024,
            "streamed {streamed}: {stored_bytes} bytes of events stored"
        );
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{:?}",
            started.elapsed()
        );
    }
}

#[tokio::test]
async fn output_up_to_llm_response_max_bytes_is_answered_and_one_byte_more_fails() {
    for streamed in [true, false] {
        let app = app_with_bounded_agent("llmResponseMaxBytes: 1000\n", streamed).await;
        let at_limit = "a".repeat(1000);
        app.llm.push(Reply::text(at_limit.clone()));
        let (status, body, stored) = bounded_run(&app).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(
            stored["status"], "completed",
            "streamed {streamed}: {stored}"
        );
        assert_eq!(body["final_report"]["content"], json!(at_limit));

        app.llm.push(Reply::text("a".repeat(1001)));
        let (_, _, stored) = bounded_run(&app).await;
        assert_output_too_large(&stored, "1000");
    }
}

#[tokio::test]
async fn the_bound_comes_from_the_config_defaults_and_a_zero_bound_is_refused() {
    let agent = text_agent("");
    let app = spawn_app_with(move |config| {
        let agents = config["agents"][0]
            .as_str()
            .expect("agents dir")
            .to_string();
        std::fs::write(format!("{agents}/bounded.ai"), agent).expect("agent file");
        config["defaults"] = json!({"llmResponseMaxBytes": 10});
    })
    .await;
    app.llm.push(Reply::text("eleven char"));
    let (_, _, stored) = bounded_run(&app).await;
    assert_output_too_large(&stored, "10");

    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(
        dir.path().join("zero.ai"),
        text_agent("llmResponseMaxBytes: 0\n"),
    )
    .expect("agent file");
    let config = agentd::config::parse_config(
        json!({
            "providers": {"llm": {"type": "openai-compatible", "baseUrl": "http://127.0.0.1:9/v1"}},
            "agents": [dir.path().display().to_string()],
        }),
        "test config",
    )
    .expect("config");
    let error = agentd::config::registry::AgentRegistry::load(&config)
        .expect_err("a zero bound is refused")
        .to_string();
    assert!(
        error.contains("llmResponseMaxBytes") && error.contains("at least 1"),
        "{error}"
    );
}

/// A huge non-streamed body asked for through chat completions: the client is told the run
/// failed, as the store records it, never a 200 with the body.
#[tokio::test]
async fn a_huge_body_is_answered_as_the_failure_the_store_records() {
    for client_streams in [false, true] {
        let app = app_with_bounded_agent("llmResponseMaxBytes: 65536\n", false).await;
        app.llm.push(Reply::endless());
        let (run_id, response) = app
            .start_run(
                "/v1/chat/completions",
                &json!({"model": "bounded", "stream": client_streams,
                        "messages": [{"role": "user", "content": "go"}]}),
            )
            .await;
        let status = response.status().as_u16();
        let body = tokio::time::timeout(Duration::from_secs(60), response.text())
            .await
            .expect("answered")
            .expect("body");
        let stored = app.ended_run(&run_id, Duration::from_secs(10)).await;
        assert_output_too_large(&stored, "65536");
        if client_streams {
            assert!(
                body.contains("llmResponseMaxBytes")
                    && !body.contains("\"finish_reason\":\"stop\""),
                "the stream ends with the error, not a finished answer: {}",
                &body[body.len().saturating_sub(600)..]
            );
        } else {
            assert_eq!(status, 502, "{body}");
            assert!(body.contains("llmResponseMaxBytes"), "{body}");
        }
        assert!(body.len() < 4 * 65536, "{} bytes answered", body.len());
    }
}

// ---------------------------------------------------------------------------------------------
// Item 14: Redis down.

/// A redis-server of this test alone, on a port of its own; killed when dropped.
struct PrivateRedis {
    port: u16,
    server: std::process::Child,
}

impl PrivateRedis {
    fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        Self::start_on(port)
    }

    fn start_on(port: u16) -> Self {
        let server = std::process::Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server runs (apt-get install redis-server)");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Self { port, server }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    fn stop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }

    async fn keys(&self) -> Vec<String> {
        let client = redis::Client::open(self.url()).expect("url");
        let mut connection = client
            .get_multiplexed_async_connection()
            .await
            .expect("the private Redis answers");
        redis::cmd("KEYS")
            .arg("*")
            .query_async(&mut connection)
            .await
            .expect("keys")
    }
}

impl Drop for PrivateRedis {
    fn drop(&mut self) {
        self.stop();
    }
}

const REDIS_KEY: &str = "limited-key";

/// The app on `redis`: agent `cached` answers from the Redis cache, and the one key has every
/// limit counted in Redis.
async fn app_on_redis(redis: &PrivateRedis) -> TestApp {
    let url = redis.url();
    spawn_app_with(move |config| {
        let agents = config["agents"][0]
            .as_str()
            .expect("agents dir")
            .to_string();
        std::fs::write(format!("{agents}/cached.ai"), text_agent("cache: 1h\n")).expect("agent");
        config["cache"] = json!({"backend": "redis", "redis": {"url": url}});
        config["auth"] = json!({"keys": [{"key": REDIS_KEY, "id": "limited", "limits": {
            "requestsPerMinute": 1000, "concurrentRuns": 10, "tokensPerDay": 1_000_000,
        }}]});
    })
    .await
}

/// Asks agent `cached` (a new question each time, so the cache misses) as the limited key;
/// returns how long the answer took.
async fn timed_cached_request(app: &TestApp, n: usize) -> Duration {
    let started = Instant::now();
    let response = app
        .client
        .post(app.url("/v1/chat/completions"))
        .bearer_auth(REDIS_KEY)
        .json(&json!({"model": "cached", "messages": [{"role": "user", "content": format!("question {n}")}]}))
        .send()
        .await
        .expect("sent");
    let status = response.status();
    let body = response.text().await.expect("body");
    assert_eq!(status, 200, "Redis down never fails a request: {body}");
    started.elapsed()
}

/// Asserts that requests are answered fast while Redis does not answer: the first within 2 s
/// (it meets the failure: one bounded call per user of Redis), the next ones within 1 s each
/// (Redis is skipped). Returns the next request number.
async fn assert_fast_without_redis(app: &TestApp, mut n: usize, phase: &str) -> usize {
    let first = timed_cached_request(app, n).await;
    assert!(
        first < Duration::from_secs(2),
        "{phase}: first request: {first:?}"
    );
    for _ in 0..5 {
        n += 1;
        let next = timed_cached_request(app, n).await;
        assert!(
            next < Duration::from_secs(1),
            "{phase}: request {n}: {next:?}"
        );
    }
    n + 1
}

/// Asks until Redis holds the cache entry and the count of a request made now (it is used
/// again after the breaker's probe); returns the next request number.
async fn assert_redis_used_again(app: &TestApp, redis: &PrivateRedis, mut n: usize) -> usize {
    let entries_before = cache_entries(&redis.keys().await);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let took = timed_cached_request(app, n).await;
        assert!(took < Duration::from_secs(2), "request {n}: {took:?}");
        n += 1;
        if cache_entries(&redis.keys().await) > entries_before {
            return n;
        }
        assert!(Instant::now() < deadline, "Redis is not used again");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn cache_entries(keys: &[String]) -> usize {
    keys.iter().filter(|key| key.contains(":e:")).count()
}

fn signal(redis: &PrivateRedis, signal: nix::sys::signal::Signal) {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(redis.server.id()).expect("pid"));
    nix::sys::signal::kill(pid, signal).expect("signal redis-server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_redis_down_requests_are_answered_fast_and_redis_is_used_again_when_it_returns() {
    use nix::sys::signal::Signal;
    let mut redis = PrivateRedis::start();
    let app = app_on_redis(&redis).await;
    timed_cached_request(&app, 0).await;
    let keys = redis.keys().await;
    assert!(
        keys.iter().any(|k| k.contains("limits:rpm:")) && cache_entries(&keys) == 1,
        "Redis counts requests and caches answers while it is up: {keys:?}"
    );

    // A Redis that is stopped (SIGSTOP) accepts connections and never answers.
    signal(&redis, Signal::SIGSTOP);
    let n = assert_fast_without_redis(&app, 1, "stopped").await;
    signal(&redis, Signal::SIGCONT);
    let n = assert_redis_used_again(&app, &redis, n).await;

    // A Redis that is gone refuses connections.
    redis.stop();
    assert_fast_without_redis(&app, n, "gone").await;
}

// ---------------------------------------------------------------------------------------------
// Item 15: hostile Markdown.

/// The deepest nesting `POST /v1/markdown` renders.
const MARKDOWN_NESTING: usize = 32;

/// Nesting the parser pays for with the square of its depth: 20,000 `>` on one line took
/// 20 s of a debug build's worker before the bound.
fn deeply_nested_markdown() -> String {
    ">".repeat(20_000)
}

/// 32 levels (a quote and a list 16 times) on every line of 128 KiB: within the bound, and
/// seconds of rendering in a debug build.
fn heavy_markdown_at_the_bound() -> String {
    let line = format!("{}x\n", "> - ".repeat(MARKDOWN_NESTING / 2));
    line.repeat(128 * 1024 / line.len())
}

async fn post_markdown(client: &reqwest::Client, address: &str, text: String) -> (u16, Value) {
    let response = client
        .post(format!("{address}/v1/markdown"))
        .json(&json!({"text": text}))
        .send()
        .await
        .expect("sent");
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// How long `GET /health` takes on `address` (`host:port`), measured on a thread of its own
/// with a blocking socket, so a blocked async runtime cannot hide it; `None` past 10 s.
fn health_latency(address: &str) -> Option<Duration> {
    use std::io::{Read, Write};
    let started = Instant::now();
    let mut socket = std::net::TcpStream::connect(address).ok()?;
    socket
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    socket
        .write_all(b"GET /health HTTP/1.1\r\nHost: agentd\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut answer = String::new();
    socket.read_to_string(&mut answer).ok()?;
    answer
        .starts_with("HTTP/1.1 200")
        .then(|| started.elapsed())
}

#[tokio::test]
async fn markdown_nested_up_to_the_bound_renders_and_deeper_is_refused_naming_the_bound() {
    let app = spawn_app_with(|_| {}).await;
    let at_bound = format!("{}deep", "> ".repeat(MARKDOWN_NESTING - 1) + "- ");
    let (status, answer) = post_markdown(&app.client, &app.address, at_bound).await;
    assert_eq!(status, 200, "{answer}");
    let html = answer["html"].as_str().expect("html");
    assert_eq!(html.matches("<blockquote>").count(), MARKDOWN_NESTING - 1);
    assert!(html.contains("<li>deep</li>"), "{html}");

    let past = format!("{}deep", "> ".repeat(MARKDOWN_NESTING) + "- ");
    let (status, error) = post_markdown(&app.client, &app.address, past).await;
    assert_eq!(status, 400, "{error}");
    assert_eq!(error["error"]["param"], "text");
    let message = error["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("33 deep") && message.contains("at most 32"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_stays_fast_while_hostile_markdown_is_posted() {
    let app = spawn_app_with(|_| {}).await;
    let address = app.address.trim_start_matches("http://").to_string();
    let mut posts = tokio::task::JoinSet::new();
    for text in [
        deeply_nested_markdown(),
        deeply_nested_markdown(),
        heavy_markdown_at_the_bound(),
        heavy_markdown_at_the_bound(),
    ] {
        let (client, url) = (app.client.clone(), app.address.clone());
        posts.spawn(async move { post_markdown(&client, &url, text).await });
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let latencies = std::thread::spawn(move || {
        (0..10)
            .map(|_| {
                let latency = health_latency(&address);
                std::thread::sleep(Duration::from_millis(100));
                latency
            })
            .collect::<Vec<_>>()
    })
    .join()
    .expect("health checks");
    for latency in &latencies {
        assert!(
            latency.is_some_and(|took| took < Duration::from_millis(500)),
            "GET /health while Markdown renders: {latencies:?}"
        );
    }
    while let Some(answer) = posts.join_next().await {
        let (status, body) = answer.expect("post");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            status == 200
                || (status == 400 && message.contains("at most 32"))
                || (status == 503 && message.contains("not rendered within")),
            "{status} {body}"
        );
    }
}

/// The real binary, asked to render hostile Markdown, exits promptly on SIGTERM: nothing waits
/// for a render.
#[tokio::test]
async fn sigterm_does_not_wait_for_a_markdown_render() {
    use crate::support::binary::{Served, command, project, serve};
    let dir = project(&json!({
        "providers": {"llm": {"type": "openai-compatible", "baseUrl": "http://127.0.0.1:9/v1"}},
        "agents": ["agents"],
        "server": {"listen": "127.0.0.1:0", "drainSeconds": 1},
        "store": {"url": "sqlite://agentd.db"},
    }));
    let mut agentd = command(dir.path());
    agentd.args(["serve", "--config", "agentd.json"]);
    let Served {
        mut child, address, ..
    } = serve(agentd, |_| {}).await;
    let url = format!("http://{address}");
    let client = reqwest::Client::new();
    for text in [deeply_nested_markdown(), heavy_markdown_at_the_bound()] {
        let (client, url) = (client.clone(), url.clone());
        tokio::spawn(async move { post_markdown(&client, &url, text).await });
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let signalled = Instant::now();
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id().expect("pid")).expect("pid"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .expect("agentd exits within 10 s of SIGTERM")
        .expect("status");
    let took = signalled.elapsed();
    assert!(took < Duration::from_secs(10), "{took:?}");
}

// ---------------------------------------------------------------------------------------------
// Item 16: a stdio MCP server that floods its output or ignores cancellation.

/// A stdio MCP server in Python: `pid` answers its process id, `flood` writes stdout without a
/// newline forever, `hang` blocks the server (it reads nothing more, pings included).
const MISBEHAVING_MCP_SERVER: &str = r#"
import json, os, sys, time

def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()

TOOLS = [{"name": name, "description": name, "inputSchema": {"type": "object"}}
         for name in ("pid", "flood", "hang")]

for line in sys.stdin:
    request = json.loads(line)
    method, ident = request.get("method"), request.get("id")
    if ident is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": ident, "result": {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "misbehaving", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": ident, "result": {"tools": TOOLS}})
    elif method == "tools/call" and request["params"]["name"] == "pid":
        send({"jsonrpc": "2.0", "id": ident, "result": {
            "content": [{"type": "text", "text": str(os.getpid())}]}})
    elif method == "tools/call" and request["params"]["name"] == "flood":
        chunk = "x" * (1 << 20)
        while True:
            sys.stdout.write(chunk)
            sys.stdout.flush()
    elif method == "tools/call" and request["params"]["name"] == "hang":
        time.sleep(3600)
    else:
        send({"jsonrpc": "2.0", "id": ident, "result": {}})
"#;

/// The misbehaving server, started; keep the directory holding its script alive.
async fn misbehaving_mcp_server() -> (
    std::sync::Arc<agentd::tools::mcp::McpServer>,
    tempfile::TempDir,
) {
    let dir = tempfile::tempdir().expect("dir");
    let script = dir.path().join("server.py");
    std::fs::write(&script, MISBEHAVING_MCP_SERVER).expect("script");
    let config = agentd::config::parse_config(
        json!({"mcpServers": {"bad": {"command": "python3", "args": ["-u", script.display().to_string()]}}}),
        "test config",
    )
    .expect("config");
    let metrics = agentd::telemetry::Metrics::new().expect("metrics");
    let queues = agentd::tools::queue::ToolQueues::new(&config.queues, &metrics);
    let server = &config.mcp_servers["bad"];
    let queue = queues.get(server.queue_name()).expect("queue");
    let started = agentd::tools::mcp::McpServer::start("bad", server, queue)
        .await
        .expect("the server starts");
    (started, dir)
}

async fn server_pid(server: &agentd::tools::mcp::McpServer) -> Option<i32> {
    use agentd::tools::{ToolOutcome, ToolProvider};
    match server.call("pid", json!({}), Duration::from_secs(10)).await {
        ToolOutcome::Ok(text) => text.trim().parse().ok(),
        _ => None,
    }
}

/// Whether process `pid` still runs (a zombie counts as gone).
fn is_running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .next()?
                .to_string();
            Some(state != "Z" && state != "X")
        })
        .unwrap_or(false)
}

/// CPU time this thread has used (user and system), in clock ticks. The test runs on a
/// current-thread runtime, so the in-process MCP client's reading is counted here.
fn thread_cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").expect("thread stat");
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("comm")
        .1
        .split_whitespace()
        .collect();
    // After the command name: state is field 3, utime and stime are fields 14 and 15.
    fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime")
}

/// Clock ticks per second (`getconf CLK_TCK`, 100 on Linux).
fn clock_ticks_per_second() -> u64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|out| String::from_utf8_lossy(&out.stdout).trim().parse().ok())
        .unwrap_or(100)
}

/// Waits up to `within` for `pid` to be gone.
async fn assert_gone_within(pid: i32, within: Duration, what: &str) {
    let deadline = Instant::now() + within;
    while is_running(pid) {
        assert!(
            Instant::now() < deadline,
            "{what}: process {pid} still runs"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits for a fresh server process (another pid than `old`) to answer.
async fn fresh_pid_after(server: &agentd::tools::mcp::McpServer, old: i32) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(pid) = server_pid(server).await
            && pid != old
        {
            return pid;
        }
        assert!(Instant::now() < deadline, "no fresh server answers");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn an_mcp_server_flooding_past_the_line_limit_is_killed_and_replaced_and_agentd_idles() {
    use agentd::tools::ToolProvider;
    let (server, _dir) = misbehaving_mcp_server().await;
    let first = server_pid(&server)
        .await
        .expect("the server answers its pid");

    let flooded = server
        .call("flood", json!({}), Duration::from_secs(20))
        .await;
    assert!(flooded.failure().is_some(), "{flooded:?}");
    assert_gone_within(first, Duration::from_secs(10), "the flooding server").await;

    // Nothing keeps reading: this thread (the whole in-process client) idles.
    let ticks_per_second = clock_ticks_per_second();
    let before = thread_cpu_ticks();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let used = Duration::from_millis((thread_cpu_ticks() - before) * 1000 / ticks_per_second);
    assert!(used < Duration::from_millis(200), "{used:?} of CPU in 2 s");

    let second = fresh_pid_after(&server, first).await;
    assert!(is_running(second));
    server.shutdown().await;
}

#[tokio::test]
async fn an_mcp_server_that_ignores_a_cancelled_call_is_restarted() {
    use agentd::tools::ToolProvider;
    let (server, _dir) = misbehaving_mcp_server().await;
    let first = server_pid(&server)
        .await
        .expect("the server answers its pid");
    let hung = server
        .call("hang", json!({}), Duration::from_millis(500))
        .await;
    assert!(hung.failure().is_some(), "{hung:?}");
    // The ping after the cancellation goes unanswered: the server is stopped and replaced.
    assert_gone_within(first, Duration::from_secs(30), "the hung server").await;
    let second = fresh_pid_after(&server, first).await;
    assert_ne!(second, first);
    server.shutdown().await;
}
