//! Races on PostgreSQL between two real replicas (`agentd serve` binaries on one fresh database,
//! one mock upstream, one MCP server over HTTP that both use), each tried on many runs at once so
//! a lost race shows: two decisions on one waiting call (exactly one wins, the other is a 409),
//! a decision and a cancel (one wins and the store says which), a `requestId` submitted to both
//! replicas while the key is at its limit (both refused, never a 202 for a run that does not
//! exist), and runs resumed after approvals (they take their key's run slots and their whole
//! usage counts against its budget).

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::{Value, json};

use crate::store::backends::Backend;
use crate::support::binary::{self, Served};
use crate::support::mcp_server::{HttpTestServer, serve_http};
use crate::support::mock_llm::{MockLlm, Reply, ToolCall};
use crate::support::numbered_frames;

/// Runs raced at once in each test: enough that a race lost without the fix shows every time.
const PAIRS: usize = 24;
/// The key every request presents (an admin, so every caller may act on every run).
const CLUSTER_KEY: &str = "race-cluster-key";
/// A second admin key without limits, for what the limited key may no longer do.
const SPARE_KEY: &str = "race-spare-key";
/// Generous: two debug replicas and PostgreSQL share two cores with other tests.
const SETTLE: Duration = Duration::from_secs(60);

const APPROVER: &str = "---\ndescription: Echoes once a person approves\nmodels: llm/upstream-model\nfinalization: text\ntools: [test]\napprove: [test__echo]\napprovalTimeout: 10m\n---\nYou echo.\n";
const SLEEPER: &str = "---\ndescription: Sleeps once a person approves\nmodels: llm/upstream-model\nfinalization: text\ntools: [test]\napprove: [test__sleep]\napprovalTimeout: 10m\n---\nYou sleep.\n";
const COUNTER: &str = "---\ndescription: Reads the test server's counters\nmodels: llm/upstream-model\nfinalization: text\ntools: [test]\n---\nYou count.\n";

/// Two replicas on one PostgreSQL database, one mock upstream and one MCP server.
struct Cluster {
    a: Served,
    b: Served,
    llm: MockLlm,
    client: reqwest::Client,
    database: Backend,
    _mcp: HttpTestServer,
    _dir: tempfile::TempDir,
}

impl Cluster {
    /// Both replicas, with `limits` (if any) on the key every request presents.
    async fn start(limits: Option<Value>) -> Self {
        let database = Backend::postgres().await;
        let llm = MockLlm::start().await;
        let mcp = serve_http().await.expect("the MCP test server");
        let mut cluster_key = json!({"key": CLUSTER_KEY, "id": "cluster", "admin": true});
        if let Some(limits) = limits {
            cluster_key["limits"] = limits;
        }
        let dir = binary::project(&json!({
            "providers": {"llm": {"type": "openai-compatible", "baseUrl": llm.base_url()}},
            "agents": ["agents"],
            "mcpServers": {"test": {"type": "http", "url": mcp.url}},
            "server": {
                "listen": "127.0.0.1:0",
                "heartbeatSeconds": 1,
                "ownerTimeoutSeconds": 3,
                "drainSeconds": 2,
            },
            "store": {"url": database.url},
            "auth": {"keys": [cluster_key, {"key": SPARE_KEY, "admin": true}]},
        }));
        for (file, text) in [
            ("approver.ai", APPROVER),
            ("sleeper.ai", SLEEPER),
            ("counter.ai", COUNTER),
        ] {
            std::fs::write(dir.path().join("agents").join(file), text).expect("agent file");
        }
        let replica = || {
            let mut command = binary::command(dir.path());
            command.args(["serve", "--config", "agentd.json"]);
            binary::serve(command, |_| {})
        };
        let a = replica().await;
        let b = replica().await;
        let mut headers = reqwest::header::HeaderMap::new();
        let bearer = format!("Bearer {CLUSTER_KEY}");
        headers.insert(
            reqwest::header::AUTHORIZATION,
            bearer.parse().expect("header value"),
        );
        let client = reqwest::Client::builder()
            .default_headers(headers)
            .build()
            .expect("client");
        Self {
            a,
            b,
            llm,
            client,
            database,
            _mcp: mcp,
            _dir: dir,
        }
    }

    /// Replica A for even `n`, B for odd.
    fn replica(&self, n: usize) -> &Served {
        if n.is_multiple_of(2) {
            &self.a
        } else {
            &self.b
        }
    }

    async fn post(&self, on: &Served, path: &str, body: &Value) -> (u16, Value) {
        let response = self
            .client
            .post(format!("http://{}{path}", on.address))
            .json(body)
            .send()
            .await
            .expect("sent");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn run(&self, on: &Served, run_id: &str) -> Value {
        self.client
            .get(format!("http://{}/v1/runs/{run_id}", on.address))
            .send()
            .await
            .expect("sent")
            .json()
            .await
            .unwrap_or(Value::Null)
    }

    /// Starts a background run of `agent` on `on`, retrying while the key's run slots are
    /// all held (a parked run gives its slot back a moment after it parks); its id.
    async fn start_run(&self, on: &Served, agent: &str) -> String {
        let deadline = Instant::now() + SETTLE;
        loop {
            let (status, body) = self
                .post(
                    on,
                    &format!("/v1/agents/{agent}/runs"),
                    &json!({"prompt": "go", "background": true}),
                )
                .await;
            if status == 202 {
                return body["run_id"].as_str().expect("run id").to_string();
            }
            assert!(
                status == 429 && Instant::now() < deadline,
                "{status}: {body}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The run once its status is one of `statuses`.
    async fn run_when(&self, run_id: &str, statuses: &[&str]) -> Value {
        let deadline = Instant::now() + SETTLE;
        loop {
            let run = self.run(&self.a, run_id).await;
            if statuses.iter().any(|s| run["status"] == *s) {
                return run;
            }
            assert!(
                Instant::now() < deadline,
                "run {run_id} is not {statuses:?}: {run}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `PAIRS` runs of `agent`, started on both replicas, each waiting for the approval of
    /// its call `call-1`.
    async fn waiting_runs(&self, agent: &str) -> Vec<String> {
        let started = join_all((0..PAIRS).map(|n| self.start_run(self.replica(n), agent))).await;
        for run_id in &started {
            self.run_when(run_id, &["waiting_approval"]).await;
        }
        started
    }

    async fn decide(&self, on: &Served, run_id: &str, decision: &str) -> (u16, Value) {
        self.post(
            on,
            &format!("/v1/runs/{run_id}/approvals/call-1"),
            &json!({"decision": decision}),
        )
        .await
    }

    async fn abort(&self, on: &Served, run_id: &str) -> (u16, Value) {
        self.post(
            on,
            &format!("/v1/runs/{run_id}/cancel"),
            &json!({"mode": "abort"}),
        )
        .await
    }

    /// The decision stored for the run's call `call-1`.
    async fn stored_decision(&self, run_id: &str) -> Option<String> {
        use sqlx::Connection;
        let mut connection = sqlx::PgConnection::connect(&self.database.url)
            .await
            .expect("connect");
        let decision: Option<String> = sqlx::query_scalar(
            "SELECT decision FROM run_approvals WHERE run_id = $1 AND call_id = 'call-1'",
        )
        .bind(run_id)
        .fetch_one(&mut connection)
        .await
        .expect("the call is stored");
        let _ = connection.close().await;
        decision
    }

    /// The `decision` of every `tool.approval_decided` event of the ended run.
    async fn decided_events(&self, run_id: &str) -> Vec<Value> {
        let body = self
            .client
            .get(format!("http://{}/v1/runs/{run_id}/events", self.b.address))
            .send()
            .await
            .expect("sent")
            .text()
            .await
            .expect("body");
        numbered_frames(&body)
            .into_iter()
            .filter(|(_, event, _)| event == "tool.approval_decided")
            .map(|(_, _, data)| data["decision"].clone())
            .collect()
    }
}

fn call(id: &str, tool: &str, arguments: Value) -> ToolCall {
    ToolCall::new(id, tool, arguments.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_decisions_at_once_on_two_replicas_one_wins_and_the_other_gets_409() {
    let cluster = Cluster::start(None).await;
    for _ in 0..PAIRS {
        cluster.llm.push(Reply::tool_calls(vec![call(
            "call-1",
            "test__echo",
            json!({"text": "hi"}),
        )]));
    }
    let runs = cluster.waiting_runs("approver").await;
    for _ in 0..PAIRS {
        cluster.llm.push(Reply::text("done"));
    }

    let cluster = &cluster;
    let answers = join_all(runs.iter().enumerate().map(|(n, run_id)| async move {
        // Approved on one replica and denied on the other at the same moment.
        let (approve, deny) = tokio::join!(
            cluster.decide(cluster.replica(n), run_id, "approve"),
            cluster.decide(cluster.replica(n + 1), run_id, "deny"),
        );
        (run_id, approve, deny)
    }))
    .await;

    let mut approved = 0;
    for (run_id, (approve, approve_body), (deny, deny_body)) in answers {
        let (winner, loser_body) = match (approve, deny) {
            (200, 409) => ("approve", &deny_body),
            (409, 200) => ("deny", &approve_body),
            _ => panic!(
                "run {run_id}: approve {approve} {approve_body}, deny {deny} {deny_body}: \
                 exactly one decision wins"
            ),
        };
        approved += usize::from(winner == "approve");
        let message = loser_body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(&format!("already decided ({winner})")),
            "the 409 names the decision that won: {loser_body}"
        );
        let run = cluster.run_when(run_id, &["completed"]).await;
        assert_eq!(run["status"], "completed", "{run}");
        assert_eq!(
            cluster.stored_decision(run_id).await.as_deref(),
            Some(winner),
            "run {run_id}: the stored decision is the one answered 200"
        );
        assert_eq!(
            cluster.decided_events(run_id).await,
            [json!(winner)],
            "run {run_id}: the run went on with that decision, once"
        );
    }
    eprintln!("{approved} of {PAIRS} approvals won, the denials won the rest");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_and_an_approval_at_once_on_two_replicas_end_the_run_and_store_who_won() {
    let cluster = Cluster::start(None).await;
    for _ in 0..PAIRS {
        cluster.llm.push(Reply::tool_calls(vec![call(
            "call-1",
            "test__echo",
            json!({"text": "hi"}),
        )]));
    }
    let runs = cluster.waiting_runs("approver").await;
    // An approved run is still answering when the cancel reaches it.
    for _ in 0..PAIRS {
        cluster
            .llm
            .push(Reply::text("too late").with_first_byte_delay(Duration::from_secs(3)));
    }

    let cluster = &cluster;
    let answers = join_all(runs.iter().enumerate().map(|(n, run_id)| async move {
        // Across replicas both ways, and on one replica.
        let (approve_on, cancel_on) = match n % 3 {
            0 => (&cluster.a, &cluster.b),
            1 => (&cluster.b, &cluster.a),
            _ => (&cluster.a, &cluster.a),
        };
        let (approve, cancel) = tokio::join!(
            cluster.decide(approve_on, run_id, "approve"),
            cluster.abort(cancel_on, run_id),
        );
        (run_id, approve, cancel)
    }))
    .await;

    let mut approvals_won = 0;
    for (run_id, (approve, approve_body), (cancel, cancel_body)) in answers {
        assert_eq!(
            cancel, 202,
            "run {run_id}: the cancel of a waiting or running run is taken: {cancel_body} \
             (approve {approve} {approve_body})"
        );
        let run = cluster
            .run_when(run_id, &["completed", "failed", "cancelled"])
            .await;
        assert_eq!(
            run["status"], "cancelled",
            "run {run_id}: the cancel answered 202 ended it (approve {approve}): {run}"
        );
        let stored = cluster.stored_decision(run_id).await;
        match approve {
            200 => {
                approvals_won += 1;
                assert_eq!(
                    stored.as_deref(),
                    Some("approve"),
                    "run {run_id}: an approval answered 200 is the stored decision"
                );
            }
            409 => assert_eq!(
                stored.as_deref(),
                Some("cancelled"),
                "run {run_id}: an approval refused lost to the cancel: {approve_body}"
            ),
            other => panic!("run {run_id}: approve {other} {approve_body}"),
        }
    }
    eprintln!("{approvals_won} of {PAIRS} approvals came first, the cancels the rest");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_id_refused_at_its_keys_limit_is_refused_on_both_replicas_at_once() {
    let cluster = Cluster::start(Some(json!({"concurrentRuns": 1}))).await;
    // The key's only run slot stays held while the pairs are submitted.
    cluster
        .llm
        .push(Reply::text("held").with_first_byte_delay(Duration::from_secs(30)));
    let holder = cluster.start_run(&cluster.a, "chat").await;
    cluster.run_when(&holder, &["running"]).await;

    let answers = join_all((0..PAIRS).map(|n| {
        let cluster = &cluster;
        async move {
            let submission = json!({"prompt": "once", "requestId": format!("race-{n}")});
            let (on_a, on_b) = tokio::join!(
                cluster.post(&cluster.a, "/v1/agents/chat/runs", &submission),
                cluster.post(&cluster.b, "/v1/agents/chat/runs", &submission),
            );
            (n, on_a, on_b)
        }
    }))
    .await;
    for (n, (a, a_body), (b, b_body)) in answers {
        assert_eq!(
            (a, b),
            (429, 429),
            "race-{n}: both submissions are refused, none answered for a run that never \
             exists: A {a_body}, B {b_body}"
        );
    }

    // Once the slot is free, the refused id starts its run.
    assert_eq!(cluster.abort(&cluster.b, &holder).await.0, 202);
    cluster.llm.push(Reply::text("the retried answer"));
    let deadline = Instant::now() + SETTLE;
    let retried = loop {
        let (status, body) = cluster
            .post(
                &cluster.b,
                "/v1/agents/chat/runs",
                &json!({"prompt": "once", "requestId": "race-0"}),
            )
            .await;
        if status != 429 || Instant::now() > deadline {
            break (status, body);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(retried.0, 200, "{}", retried.1);
    assert_eq!(retried.1["final_report"]["content"], "the retried answer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_resumed_after_approval_take_their_keys_slots_and_count_their_whole_usage() {
    // Before its wait each run uses 400 tokens, after it 100: only the whole runs' 3,000
    // tokens pass the budget of 2,500.
    const RUNS: usize = 6;
    // Six runs of 400 + 100 tokens spend the day's 3,000 exactly: each completes (a run stops
    // only once the day is used up before its next call), and the next run is refused.
    let cluster = Cluster::start(Some(json!({"concurrentRuns": 2, "tokensPerDay": 3000}))).await;
    let mut runs = Vec::new();
    for n in 0..RUNS {
        cluster.llm.push(
            Reply::tool_calls(vec![call("call-1", "test__sleep", json!({"ms": 800}))])
                .with_usage(390, 10, 0, 0),
        );
        let run_id = cluster.start_run(cluster.replica(n), "sleeper").await;
        cluster.run_when(&run_id, &["waiting_approval"]).await;
        runs.push(run_id);
    }
    for _ in 0..RUNS {
        cluster
            .llm
            .push(Reply::text("slept").with_usage(90, 10, 0, 0));
    }

    // Every run approved at once, half of them on the replica that did not start them.
    let decisions = join_all(
        runs.iter()
            .enumerate()
            .map(|(n, run_id)| cluster.decide(cluster.replica(n + 1), run_id, "approve")),
    )
    .await;
    for (status, body) in decisions {
        assert_eq!(status, 200, "{body}");
    }
    for run_id in &runs {
        let run = cluster.run_when(run_id, &["completed", "failed"]).await;
        assert_eq!(run["status"], "completed", "{run}");
    }

    // How many approved sleeps overlapped, from the MCP server both replicas call.
    cluster.llm.push(Reply::tool_calls(vec![call(
        "stats-1",
        "test__stats",
        json!({}),
    )]));
    cluster.llm.push(Reply::text("counted"));
    let counted = cluster
        .client
        .post(format!(
            "http://{}/v1/agents/counter/runs",
            cluster.a.address
        ))
        .bearer_auth(SPARE_KEY)
        .json(&json!({"prompt": "count"}))
        .send()
        .await
        .expect("sent");
    assert_eq!(counted.status(), 200);
    let stats = crate::approvals::tool_reply(&cluster.llm, "stats-1");
    let stats: Value = serde_json::from_str(&stats).expect("stats JSON");
    let overlapping = stats["max_in_flight"].as_u64().expect("max_in_flight");
    assert!(
        (1..=2).contains(&overlapping),
        "the key's two run slots bound the resumed runs: {overlapping} sleeps overlapped"
    );
    assert_eq!(stats["completed_sleeps"], RUNS, "{stats}");

    let (status, body) = cluster
        .post(
            &cluster.b,
            "/v1/agents/chat/runs",
            &json!({"prompt": "one more"}),
        )
        .await;
    assert_eq!(
        (status, &body["error"]["code"]),
        (429, &json!("budget_exceeded")),
        "the resumed runs' whole usage counts against the key's budget: {body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_reaches_a_resumed_run_while_it_waits_for_its_keys_slot() {
    let cluster = Cluster::start(Some(json!({"concurrentRuns": 1}))).await;
    cluster.llm.push(Reply::tool_calls(vec![call(
        "call-1",
        "test__echo",
        json!({"text": "hi"}),
    )]));
    let waiting = cluster.start_run(&cluster.a, "approver").await;
    cluster.run_when(&waiting, &["waiting_approval"]).await;
    // While it waits, another run takes the key's only slot and keeps it.
    cluster
        .llm
        .push(Reply::text("held").with_first_byte_delay(Duration::from_secs(20)));
    let holder = cluster.start_run(&cluster.a, "chat").await;
    cluster.run_when(&holder, &["running"]).await;

    let (status, body) = cluster.decide(&cluster.b, &waiting, "approve").await;
    assert_eq!(status, 200, "{body}");
    // Taken by a replica, which waits for the key's slot before the session starts.
    cluster.run_when(&waiting, &["running"]).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let asked = Instant::now();
    let (status, body) = cluster.abort(&cluster.b, &waiting).await;
    assert_eq!(status, 202, "{body}");
    let ended = cluster
        .run_when(&waiting, &["completed", "failed", "cancelled"])
        .await;
    assert_eq!(ended["status"], "cancelled", "{ended}");
    assert_eq!(
        cluster.run(&cluster.a, &holder).await["status"],
        "running",
        "the cancel did not wait for the key's slot ({:?})",
        asked.elapsed()
    );
}
