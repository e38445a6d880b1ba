//! Clients that hold connections without using them, over real TCP sockets: a streaming client
//! that never reads gives its session slot back after `server.writeTimeoutSeconds` (its run
//! cancelled, or run on with `onDisconnect: continue`); idle and half-sent connections are
//! closed after `headerReadTimeoutSeconds` / `idleTimeoutSeconds`; past `maxConnections` a
//! connection is answered 503 `overloaded` and closed; and SIGTERM ends the real binary within
//! `drainSeconds` and a short grace whatever such clients do.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::support::binary::{Served, command, project, serve};
use crate::support::mock_llm::{MockLlm, Reply};
use crate::support::{TestApp, spawn_app_with};

/// A request head that never ends.
const HALF_HEAD: &[u8] = b"GET /health HTTP/1.1\r\nhost: agentd\r\n";

/// Pieces of [`huge_answer`].
const PIECES: usize = 6 * 1024;

/// An answer larger than every buffer between the session and a client that never reads (the
/// socket's send buffer, up to 4 MiB; hyper's, 400 KiB; the run's two channels, 512 events): 6
/// MiB of words in 1 KiB pieces. Only a client that reads can see its end.
fn huge_answer() -> Reply {
    Reply::text("lorem ipsum dolor ".repeat(6 * 1024 * 1024 / 18)).with_chunks(PIECES)
}

/// Held by the tests that stream [`huge_answer`]: each costs agentd seconds of CPU (a debug
/// build), so they take turns rather than starve each other on a shared 2-core machine.
static HUGE_ANSWERS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `host:port` of a test app.
fn host(app: &TestApp) -> &str {
    app.address.trim_start_matches("http://")
}

/// A connection with a small receive buffer, so a client that stops reading fills it quickly.
async fn connect(address: &str) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket.set_recv_buffer_size(4096).expect("receive buffer");
    socket
        .connect(address.parse().expect("address"))
        .await
        .expect("connects")
}

/// Sends `POST path` with a JSON body on a fresh connection and reads only the response head:
/// from then on the client reads nothing. Returns the socket and the head.
async fn post_and_stop_reading(address: &str, path: &str, body: &Value) -> (TcpStream, String) {
    let mut stream = connect(address).await;
    let body = body.to_string();
    let request = format!(
        "POST {path} HTTP/1.1\r\nhost: agentd\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("sent");
    let head = read_head(&mut stream).await;
    (stream, head)
}

/// Reads byte by byte up to the blank line that ends a response head.
async fn read_head(stream: &mut TcpStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    tokio::time::timeout(Duration::from_secs(60), async {
        while !head.ends_with(b"\r\n\r\n") {
            let n = stream.read(&mut byte).await.expect("reads the head");
            assert_eq!(n, 1, "the connection closed mid-head: {head:?}");
            head.push(byte[0]);
        }
    })
    .await
    .expect("a response head within 60 s");
    String::from_utf8_lossy(&head).into_owned()
}

/// One whole response with a `content-length` body: its head and body.
async fn read_response(stream: &mut TcpStream) -> (String, String) {
    let head = read_head(stream).await;
    let length = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .expect("a content-length");
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.expect("the body");
    (head, String::from_utf8_lossy(&body).into_owned())
}

/// `GET /health` on `stream`; the response's head and body.
async fn health(stream: &mut TcpStream) -> (String, String) {
    stream
        .write_all(b"GET /health HTTP/1.1\r\nhost: agentd\r\n\r\n")
        .await
        .expect("sent");
    read_response(stream).await
}

/// A fresh connection that has sent `bytes` (and nothing more, ever).
async fn connect_and_send(address: &str, bytes: &[u8]) -> TcpStream {
    let mut stream = connect(address).await;
    stream.write_all(bytes).await.expect("sent");
    stream
}

fn run_id_in(head: &str) -> String {
    head.lines()
        .find_map(|line| line.strip_prefix("x-agentd-run-id: "))
        .expect("a run id header")
        .trim()
        .to_string()
}

/// Reads until the server closes the connection (end of file or a reset) and returns what was
/// read and how long that took; fails if it stays open for `within`.
async fn read_until_closed(stream: &mut TcpStream, within: Duration) -> (String, Duration) {
    let started = Instant::now();
    let mut read = Vec::new();
    let mut chunk = vec![0u8; 64 * 1024];
    tokio::time::timeout(within, async {
        loop {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => read.extend_from_slice(&chunk[..n]),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("the server closed the connection within {within:?}"));
    (
        String::from_utf8_lossy(&read).into_owned(),
        started.elapsed(),
    )
}

/// The test app with `server` as its `server` config.
async fn app_with_server(server: Value) -> TestApp {
    spawn_app_with(|config| config["server"] = server).await
}

/// One session slot and no queue, so a held slot refuses the next run.
async fn one_slot_app(write_timeout_seconds: u64) -> TestApp {
    app_with_server(json!({
        "maxConcurrentSessions": 1,
        "maxQueuedSessions": 0,
        "writeTimeoutSeconds": write_timeout_seconds,
    }))
    .await
}

fn chat_body(stream: bool) -> Value {
    json!({"model": "chat", "stream": stream, "messages": [{"role": "user", "content": "hi"}]})
}

#[tokio::test]
async fn a_stream_nobody_reads_is_cancelled_after_the_write_timeout_and_frees_its_slot() {
    let _turn = HUGE_ANSWERS.lock().await;
    let app = one_slot_app(2).await;
    // Stalls before its end: only the client's departure can end this run early.
    app.llm.push(huge_answer());
    app.llm.push(Reply::text("the next one"));
    let (mut stream, head) =
        post_and_stop_reading(host(&app), "/v1/chat/completions", &chat_body(true)).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let run_id = run_id_in(&head);

    // At the limit: the one slot is the stalled run's.
    let refused = app
        .post_json("/v1/chat/completions", &chat_body(false))
        .await;
    assert_eq!(refused.status(), 503);

    // Generous, like the sibling test: filling the socket buffers with the 6 MiB answer takes
    // a while when the whole suite shares two cores (30 s was once too short).
    let run = app.ended_run(&run_id, Duration::from_secs(90)).await;
    assert_eq!(run["status"], "cancelled", "{run}");
    // The slot came back: the next run is admitted.
    let next = app
        .post_json("/v1/chat/completions", &chat_body(false))
        .await;
    assert_eq!(next.status(), 200);
    let answer: Value = next.json().await.expect("json");
    assert_eq!(answer["choices"][0]["message"]["content"], "the next one");
    // And agentd closed the stalled connection: what the client finally reads just stops.
    let (rest, _) = read_until_closed(&mut stream, Duration::from_secs(30)).await;
    assert!(!rest.contains("[DONE]"), "the stream was cut, not finished");
}

#[tokio::test]
async fn a_continue_run_nobody_reads_runs_on_and_its_connection_is_closed() {
    let _turn = HUGE_ANSWERS.lock().await;
    let app = one_slot_app(2).await;
    app.llm.push(huge_answer());
    let body = json!({"prompt": "hi", "stream": true, "onDisconnect": "continue"});
    let (mut stream, head) = post_and_stop_reading(host(&app), "/v1/agents/chat/runs", &body).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    // The whole 6 MiB answer is streamed through a debug build: 134 s alone on a 2-core box of
    // 2026-11-29 (the 90 s this waited before were too short there).
    let run = app
        .ended_run(&run_id_in(&head), Duration::from_secs(300))
        .await;
    assert_eq!(run["status"], "completed", "{run}");
    let (rest, _) = read_until_closed(&mut stream, Duration::from_secs(30)).await;
    assert!(
        !rest.contains("event: run.finished"),
        "the client was cut off, not fed the whole run"
    );
}

#[tokio::test]
async fn idle_and_half_sent_connections_are_closed_after_their_timeouts() {
    let app =
        app_with_server(json!({"headerReadTimeoutSeconds": 1, "idleTimeoutSeconds": 4})).await;
    let address = host(&app);

    // Never a byte.
    let mut silent = connect(address).await;
    // Half a request head.
    let mut half_head = connect_and_send(address, HALF_HEAD).await;
    // A whole head, then a body that stops after 10 of its 1000 bytes.
    let mut half_body = connect_and_send(address, b"POST /v1/chat/completions HTTP/1.1\r\nhost: agentd\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{\"model\": ").await;
    for (name, stream) in [
        ("silent", &mut silent),
        ("half head", &mut half_head),
        ("half body", &mut half_body),
    ] {
        let (_, took) = read_until_closed(stream, Duration::from_secs(15)).await;
        assert!(took < Duration::from_secs(15), "{name}: {took:?}");
    }

    // At the limits: a keep-alive connection waits past the header-read timeout, within the
    // idle one, and is still served; idle past the idle timeout, it is closed.
    let mut kept = connect(address).await;
    let (head, _) = health(&mut kept).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (head, _) = health(&mut kept).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (_, idle) = read_until_closed(&mut kept, Duration::from_secs(20)).await;
    assert!(idle >= Duration::from_secs(3), "idle for {idle:?} only");
}

#[tokio::test]
async fn past_max_connections_a_connection_gets_503_overloaded_and_is_closed() {
    let app = app_with_server(json!({"maxConnections": 2, "headerReadTimeoutSeconds": 60})).await;
    let address = host(&app);
    // At the limit: both connections are served, and stay open.
    let mut first = connect(address).await;
    let mut second = connect(address).await;
    for stream in [&mut first, &mut second] {
        let (head, _) = health(stream).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    }
    // Past it.
    let mut third = connect(address).await;
    let (head, body) = health(&mut third).await;
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    assert!(head.to_lowercase().contains("retry-after: 1"), "{head}");
    let error: Value = serde_json::from_str(&body).expect("a JSON error");
    assert_eq!(error["error"]["code"], "overloaded", "{body}");
    read_until_closed(&mut third, Duration::from_secs(10)).await;

    // A closed connection gives its place back.
    drop(first);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (head, _) = health(&mut connect(address).await).await;
        if head.starts_with("HTTP/1.1 200") {
            break;
        }
        assert!(Instant::now() < deadline, "still refused: {head}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn sigterm_exits_within_the_drain_time_whatever_clients_do() {
    let _turn = HUGE_ANSWERS.lock().await;
    let llm = MockLlm::start().await;
    llm.push(huge_answer());
    let drain_seconds = 1;
    let dir = project(&json!({
        "providers": {"llm": {"type": "openai-compatible", "baseUrl": llm.base_url()}},
        "agents": ["agents"],
        // Timeouts far beyond the test: only the shutdown may close these clients.
        "server": {"listen": "127.0.0.1:0", "drainSeconds": drain_seconds,
                   "writeTimeoutSeconds": 600, "headerReadTimeoutSeconds": 600,
                   "idleTimeoutSeconds": 600},
        "store": {"url": "sqlite://agentd.db"},
    }));
    let mut command = command(dir.path());
    command.args(["serve", "--config", "agentd.json"]);
    let Served {
        mut child, address, ..
    } = serve(command, |_| {}).await;

    let (_never_reads, head) =
        post_and_stop_reading(&address, "/v1/chat/completions", &chat_body(true)).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let _silent = connect(&address).await;
    let _half_head = connect_and_send(&address, HALF_HEAD).await;
    let mut kept_alive = connect(&address).await;
    health(&mut kept_alive).await;
    // Let the stream fill every buffer up to the client.
    tokio::time::sleep(Duration::from_secs(1)).await;

    let signalled = Instant::now();
    let pid = child.id().expect("pid").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-s", "TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let exit = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .expect("agentd exits")
        .expect("status");
    let took = signalled.elapsed();
    assert_eq!(exit.code(), Some(0));
    // The drain, the grace of the cancelled session and of the connections, with room for a
    // busy machine: far below the 600 s any of these clients could otherwise hold it.
    assert!(
        took < Duration::from_secs(drain_seconds + 15),
        "took {took:?} after SIGTERM"
    );
}
