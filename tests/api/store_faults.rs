//! Store faults (issue 35, items 10, 11 and 13), each against the real app:
//!
//! - a PostgreSQL outage longer than `ownerTimeoutSeconds` under two live replicas ends neither
//!   one's runs `owner_lost` (the first replica back used to end the other's), and a live owner's
//!   result replaces an `owner_lost` end another replica wrote while it could not beat;
//! - a full SQLite database (`max_page_count`) is a transient store error: `/ready` answers 503,
//!   the outage is logged at error level, and once there is room again every run answered
//!   meanwhile is stored (the writer used to stay inside a failed transaction for good);
//! - a run that ended during a store outage replays to its `final_report` and `run.finished`,
//!   and a stored log that lacks them anyway ends with them made from the stored result
//!   (replays used to end with no terminal frame).
//!
//! The PostgreSQL outages use a private cluster (`store::outage`), never the shared service.

use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use agentd::store::SqliteStore;
use serde_json::{Value, json};

use crate::store::backends::Backend;
use crate::store::outage::PrivateCluster;
use crate::support::mock_llm::Reply;
use crate::support::{TestApp, numbered_frames, spawn_app_with};

type Frames = Vec<(i64, String, Value)>;

/// A replica of a cluster on `store_url`, beating every `heartbeat` seconds and taking others
/// for dead after `owner_timeout` seconds.
async fn replica(store_url: &str, heartbeat: u64, owner_timeout: u64) -> TestApp {
    let url = store_url.to_string();
    spawn_app_with(|config| {
        config["store"]["url"] = json!(url);
        config["server"] = json!({
            "heartbeatSeconds": heartbeat,
            "ownerTimeoutSeconds": owner_timeout,
            "drainSeconds": 2,
        });
    })
    .await
}

/// A reply of `chunks` words, `gap` apart.
fn slow_answer(chunks: usize, gap: Duration) -> Reply {
    let words: Vec<String> = (1..=chunks).map(|n| format!("w{n}")).collect();
    Reply::text(words.join(" "))
        .with_chunks(chunks)
        .with_chunk_gap(gap)
}

/// Starts a background run of `reply` on `app`; its id, once the run is in the store.
async fn background_run(app: &TestApp, reply: Reply) -> String {
    app.llm.push(reply);
    let response = app
        .post_json(
            "/v1/agents/chat/runs",
            &json!({"prompt": "count slowly", "background": true}),
        )
        .await;
    assert_eq!(response.status(), 202, "a background run is accepted");
    let accepted: Value = response.json().await.expect("json");
    let run_id = accepted["run_id"].as_str().expect("run id").to_string();
    let deadline = Instant::now() + Duration::from_secs(10);
    while app
        .runtime
        .store()
        .get_run(&run_id)
        .await
        .ok()
        .flatten()
        .is_none()
    {
        assert!(Instant::now() < deadline, "run {run_id} is never stored");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    run_id
}

/// Every frame of the run's event stream on `app` (from the start), until it ends.
async fn followed(app: &TestApp, run_id: &str, within: Duration) -> Frames {
    let response = app.get(&format!("/v1/runs/{run_id}/events")).await;
    assert_eq!(response.status(), 200, "the run is followed");
    let body = tokio::time::timeout(within, response.text())
        .await
        .unwrap_or_else(|_| panic!("the stream of {run_id} ends within {within:?}"))
        .expect("body");
    numbered_frames(&body)
}

/// `GET /v1/runs/{id}` on `app`: its status and JSON.
async fn stored_run(app: &TestApp, run_id: &str) -> (u16, Value) {
    let response = app.get(&format!("/v1/runs/{run_id}")).await;
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// `/ready`'s status.
async fn readiness(app: &TestApp) -> u16 {
    app.get("/ready").await.status().as_u16()
}

/// Waits (up to `within`) until `/ready` answers `status`.
async fn ready_becomes(app: &TestApp, status: u16, within: Duration) {
    let deadline = Instant::now() + within;
    while readiness(app).await != status {
        assert!(
            Instant::now() < deadline,
            "/ready did not turn {status} within {within:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// How many runs `app` counted ended `owner_lost` (`agentd_sessions_total`).
async fn owner_lost_count(app: &TestApp) -> f64 {
    let text = app
        .get("/metrics")
        .await
        .text()
        .await
        .expect("metrics text");
    text.lines()
        .filter(|line| line.starts_with("agentd_sessions_total{") && line.contains("owner_lost"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

fn last_kind(frames: &Frames) -> Option<&str> {
    frames.last().map(|frame| frame.1.as_str())
}

// ---------------------------------------------------------------------------------------------
// Item 10: owner loss after an outage.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_outage_longer_than_the_owner_timeout_ends_no_live_replicas_runs() {
    const HEARTBEAT: u64 = 1;
    const OWNER_TIMEOUT: u64 = 3;
    let cluster = PrivateCluster::start();
    let url = cluster.url();
    let a = replica(&url, HEARTBEAT, OWNER_TIMEOUT).await;
    let b = replica(&url, HEARTBEAT, OWNER_TIMEOUT).await;
    // Each replica runs one: whichever comes back first would end the other's.
    let gap = Duration::from_millis(80);
    let on_a = background_run(&a, slow_answer(250, gap)).await;
    let on_b = background_run(&b, slow_answer(250, gap)).await;

    cluster.ctl("stop");
    tokio::time::sleep(Duration::from_secs(2 * OWNER_TIMEOUT)).await;
    cluster.ctl("start");
    ready_becomes(&a, 200, Duration::from_secs(20)).await;
    ready_becomes(&b, 200, Duration::from_secs(20)).await;

    // Each run is followed from the other replica to its end: its owner's, never owner_lost.
    let (from_b, from_a) = tokio::join!(
        followed(&b, &on_a, Duration::from_secs(60)),
        followed(&a, &on_b, Duration::from_secs(60)),
    );
    for (run_id, frames, owner) in [(&on_a, from_b, &a), (&on_b, from_a, &b)] {
        assert_eq!(
            last_kind(&frames),
            Some("run.finished"),
            "{run_id}: {frames:?}"
        );
        let finished = &frames.last().expect("an end").2;
        assert_eq!(finished["status"], "completed", "{run_id}: {finished}");
        assert!(
            !frames.iter().any(|f| f.2["code"] == "owner_lost"),
            "{run_id} was taken from its live owner: {frames:?}"
        );
        let (status, run) = stored_run(owner, run_id).await;
        assert_eq!(
            (status, &run["status"]),
            (200, &json!("completed")),
            "{run}"
        );
    }
    assert_eq!(owner_lost_count(&a).await, 0.0, "A ended no run owner_lost");
    assert_eq!(owner_lost_count(&b).await, 0.0, "B ended no run owner_lost");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_owners_result_replaces_the_owner_lost_end_another_replica_wrote() {
    let database = Backend::postgres().await;
    // B takes a replica for dead after 3 s without a beat; A beats only every 10 s, as a
    // replica cut off from the store (or stalled) would: B ends A's run while A still runs it.
    let b = replica(&database.url, 1, 3).await;
    let a = replica(&database.url, 10, 30).await;
    let run_id = background_run(&a, slow_answer(100, Duration::from_millis(100))).await;

    let taken = followed(&b, &run_id, Duration::from_secs(30)).await;
    assert_eq!(last_kind(&taken), Some("run.finished"), "{taken:?}");
    assert_eq!(
        taken.last().expect("an end").2["exit_reason"],
        "owner_lost",
        "B took A's run for lost while A ran it: {taken:?}"
    );
    let error = taken
        .iter()
        .rev()
        .find(|f| f.1 == "error")
        .expect("an error says why");
    assert_eq!(error.2["code"], "owner_lost");
    let ids: Vec<i64> = taken.iter().map(|f| f.0).collect();
    assert_eq!(
        ids,
        (1..=ids.len() as i64).collect::<Vec<_>>(),
        "the end is numbered on from the stored events"
    );

    // A ends the run itself: its result is the run's, on every replica.
    let deadline = Instant::now() + Duration::from_secs(30);
    let run = loop {
        let (_, run) = stored_run(&b, &run_id).await;
        if run["exit_reason"] != "owner_lost" {
            break run;
        }
        assert!(
            Instant::now() < deadline,
            "A's own end never replaced owner_lost: {run}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["exit_reason"], "final_answer", "{run}");
    let answer = run["result"]["final_report"]["content"]
        .as_str()
        .unwrap_or_default();
    assert!(answer.ends_with("w100"), "the whole answer: {run}");
    let replay = followed(&b, &run_id, Duration::from_secs(10)).await;
    assert_eq!(last_kind(&replay), Some("run.finished"), "{replay:?}");
    assert_eq!(replay.last().expect("an end").2["status"], "completed");
    assert!(
        !replay.iter().any(|f| f.1 == "error"),
        "no owner_lost frame is left before the owner's end: {replay:?}"
    );
    let from_owner = followed(&a, &run_id, Duration::from_secs(10)).await;
    assert_eq!(replay, from_owner, "both replicas replay the owner's log");
}

// ---------------------------------------------------------------------------------------------
// Item 11: a full SQLite database.

/// Error-level log lines of the store's run recorder, from every test of this process.
fn recorder_errors() -> &'static Arc<Mutex<Vec<u8>>> {
    static LINES: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();
    LINES.get_or_init(|| {
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(
                "agentd::store::recorder=error",
            ))
            .with_ansi(false)
            .with_writer(move || LogSink(sink.clone()))
            .finish();
        tracing::subscriber::set_global_default(subscriber)
            .expect("no other global subscriber in the test binary");
        lines
    })
}

struct LogSink(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogSink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logged_errors() -> String {
    let lines = recorder_errors()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    String::from_utf8_lossy(&lines).into_owned()
}

/// The app's SQLite store, to cap its size as a full disk would.
fn sqlite_of(app: &TestApp) -> &SqliteStore {
    app.runtime
        .store()
        .as_any()
        .downcast_ref::<SqliteStore>()
        .expect("the test app stores in SQLite")
}

/// A non-streamed run answering `text`: its id, once answered 200.
async fn answered_run(app: &TestApp, text: &str) -> String {
    app.llm.push(Reply::text(text));
    let (run_id, response) = app
        .start_run("/v1/agents/chat/runs", &json!({"prompt": text}))
        .await;
    assert_eq!(response.status(), 200, "run {run_id} is answered");
    run_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_sqlite_database_is_a_transient_outage_and_runs_are_stored_once_there_is_room() {
    recorder_errors();
    let app = spawn_app_with(|_| {}).await;
    let before = answered_run(&app, "before the disk fills").await;
    app.runtime.flush_recorder().await;
    assert_eq!(stored_run(&app, &before).await.0, 200);

    // The database may not grow past its present size: the next writes that need a page fail.
    sqlite_of(&app).limit_pages(Some(1)).await.expect("cap");
    let filler = "a long answer that needs room ".repeat(400);
    let mut answered_while_full = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while readiness(&app).await == 200 {
        assert!(
            Instant::now() < deadline,
            "/ready still 200 after {} runs into a full database",
            answered_while_full.len()
        );
        answered_while_full.push(answered_run(&app, &filler).await);
        app.runtime.flush_recorder().await;
    }
    // Runs go on meanwhile, answered as ever; /ready stays 503 while the database is full.
    for n in 0..3 {
        answered_while_full.push(answered_run(&app, &format!("while full {n}")).await);
    }
    app.runtime.flush_recorder().await;
    assert_eq!(readiness(&app).await, 503, "still full");
    let logged = logged_errors();
    assert!(
        logged.contains("ERROR") && logged.contains("the store is full"),
        "the outage is logged at error level: {logged}"
    );

    sqlite_of(&app).limit_pages(None).await.expect("cap lifted");
    ready_becomes(&app, 200, Duration::from_secs(10)).await;
    let after = answered_run(&app, "after there is room").await;
    app.runtime.flush_recorder().await;
    for run_id in answered_while_full.iter().chain([&before, &after]) {
        let (status, run) = stored_run(&app, run_id).await;
        assert_eq!(status, 200, "run {run_id} answered 200 is stored: {run}");
        assert_eq!(run["status"], "completed", "{run}");
        let replay = followed(&app, run_id, Duration::from_secs(10)).await;
        assert_eq!(last_kind(&replay), Some("run.finished"), "{replay:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Item 13: the end of a run's log.

/// One streamed run answering `reply` on `app`: its id and every frame its client saw.
async fn streamed_run(app: &TestApp, reply: Reply) -> (String, Frames) {
    app.llm.push(reply);
    let (run_id, response) = app
        .start_run(
            "/v1/agents/chat/runs",
            &json!({"prompt": "go", "stream": true}),
        )
        .await;
    assert_eq!(response.status(), 200);
    let body = tokio::time::timeout(Duration::from_secs(60), response.text())
        .await
        .expect("the stream ends")
        .expect("body");
    (run_id, numbered_frames(&body))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_ends_during_a_store_outage_replays_to_its_final_report_and_run_finished() {
    let cluster = PrivateCluster::start();
    let url = cluster.url();
    let app = spawn_app_with(|config| {
        config["store"]["url"] = json!(url);
        config["server"]["drainSeconds"] = json!(2);
    })
    .await;
    // The run is stored as running, then the store goes while it streams, and it ends there.
    app.llm.push(slow_answer(40, Duration::from_millis(100)));
    let (run_id, response) = app
        .start_run(
            "/v1/agents/chat/runs",
            &json!({"prompt": "go", "stream": true}),
        )
        .await;
    assert_eq!(response.status(), 200);
    app.runtime.flush_recorder().await;
    cluster.ctl("stop");
    let body = tokio::time::timeout(Duration::from_secs(60), response.text())
        .await
        .expect("the stream ends")
        .expect("body");
    let live = numbered_frames(&body);
    assert_eq!(last_kind(&live), Some("run.finished"), "{live:?}");

    cluster.ctl("start");
    ready_becomes(&app, 200, Duration::from_secs(20)).await;
    app.runtime.flush_recorder().await;
    let replay = followed(&app, &run_id, Duration::from_secs(10)).await;
    let closing: Vec<&(i64, String, Value)> = live
        .iter()
        .filter(|f| f.1 == "final_report" || f.1 == "run.finished")
        .collect();
    assert_eq!(closing.len(), 2, "the run reports and ends: {live:?}");
    let replayed_end: Vec<&(i64, String, Value)> = replay.iter().rev().take(2).rev().collect();
    assert_eq!(
        replayed_end, closing,
        "the replay ends with the run's own closing events"
    );
    assert!(
        replay.iter().all(|f| live.contains(f)),
        "every replayed event is one the client saw"
    );
    let (_, run) = stored_run(&app, &run_id).await;
    assert_eq!(run["status"], "completed", "{run}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_log_without_its_end_replays_to_the_end_made_from_the_stored_result() {
    let app = spawn_app_with(|_| {}).await;
    let (run_id, live) = streamed_run(&app, Reply::text("the stored answer")).await;
    app.runtime.flush_recorder().await;
    let live_end: Vec<(&str, &Value)> = live[live.len() - 2..]
        .iter()
        .map(|f| (f.1.as_str(), &f.2))
        .collect();
    assert_eq!(live_end[0].0, "final_report");
    assert_eq!(live_end[1].0, "run.finished");

    // The row holding the log's last events goes, as when they could not be stored.
    let url = app.runtime.config().store.url.clone();
    let mut connection = <sqlx::SqliteConnection as sqlx::Connection>::connect(&url)
        .await
        .expect("the store file");
    let deleted = sqlx::query(
        "DELETE FROM run_events WHERE run_id = $1 AND COALESCE(last_seq, seq) = \
         (SELECT MAX(COALESCE(last_seq, seq)) FROM run_events WHERE run_id = $1)",
    )
    .bind(&run_id)
    .execute(&mut connection)
    .await
    .expect("delete");
    assert_eq!(deleted.rows_affected(), 1);

    let replay = followed(&app, &run_id, Duration::from_secs(10)).await;
    assert!(replay.len() >= 2, "{replay:?}");
    let replay_end: Vec<(&str, &Value)> = replay[replay.len() - 2..]
        .iter()
        .map(|f| (f.1.as_str(), &f.2))
        .collect();
    assert_eq!(
        replay_end, live_end,
        "the replay ends as the run did, made from its stored result"
    );
    let ids: Vec<i64> = replay.iter().map(|f| f.0).collect();
    assert_eq!(
        ids,
        (1..=ids.len() as i64).collect::<Vec<_>>(),
        "numbered on"
    );
}
