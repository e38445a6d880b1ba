//! Identity and access (SPEC §12) against a real OpenID provider the tests start (the npm
//! package `oidc-provider`, tests/oidc/provider.mjs): its RS256, ES256 and EdDSA access tokens
//! are accepted with the user and agents they name; tokens for another audience, of an unknown
//! issuer, unsigned or tampered get 401s naming what is wrong; `/mcp` points a client without a
//! token at the RFC 9728 metadata and the official MCP Python SDK works with a token; the page
//! signs in with authorization code + PKCE in headless Chromium. Keys made at run time are shown
//! once, listed without secrets, rotated, revoked (on another replica within 5 s, on one
//! PostgreSQL) and expire; no key or token is ever in a log line or an error. And the cost of
//! a token per request, measured against a key.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use crate::support::mock_llm::Reply;
use crate::support::{TestApp, binary, spawn_app_with};

const ADMIN: &str = "identity-admin-key";
const ALICE: &str = "identity-alice-key";
const AUDIENCE: &str = "https://agentd.test";

/// The OpenID provider, killed when dropped.
struct Provider {
    issuer: String,
    _child: tokio::process::Child,
}

impl Provider {
    async fn start() -> Self {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/oidc");
        assert!(
            dir.join("node_modules/oidc-provider").exists(),
            "oidc-provider is missing: run scripts/test --setup-only (or `npm ci --prefix tests/oidc`)"
        );
        let mut child = tokio::process::Command::new("node")
            .arg(dir.join("provider.mjs"))
            .env("AUDIENCE", AUDIENCE)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("node runs (install Node 20)");
        let stdout = child.stdout.take().expect("stdout");
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let issuer = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the provider starts within 30 s")
            .expect("reads")
            .and_then(|line| line.strip_prefix("ISSUER=").map(str::to_string))
            .expect("the provider prints its issuer");
        // Keep reading: a write to a closed pipe would end the provider.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self {
            issuer,
            _child: child,
        }
    }

    /// An access token of a service client (`svc-rs256`, `svc-es256`, `svc-eddsa`).
    async fn token(&self, client: &str, scope: &str, resource: &str) -> String {
        let answer: Value = reqwest::Client::new()
            .post(format!("{}/token", self.issuer))
            .basic_auth(client, Some("svc-secret"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(
                serde_urlencoded::to_string([
                    ("grant_type", "client_credentials"),
                    ("scope", scope),
                    ("resource", resource),
                ])
                .expect("form"),
            )
            .send()
            .await
            .expect("token request")
            .json()
            .await
            .expect("token JSON");
        answer["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("no token: {answer}"))
            .to_string()
    }

    fn config(&self, page_client: bool) -> Value {
        let mut issuer = json!({"issuer": self.issuer, "audience": AUDIENCE});
        if page_client {
            issuer["pageClientId"] = json!("page");
        }
        issuer
    }
}

async fn app_trusting(provider: &Provider, page_client: bool) -> TestApp {
    let issuer = provider.config(page_client);
    spawn_app_with(move |config| {
        config["auth"] = json!({
            "keys": [
                {"key": ADMIN, "admin": true, "id": "ops"},
                {"key": ALICE, "userId": "alice", "id": "alice"}
            ],
            "oidc": [issuer]
        });
    })
    .await
}

async fn get_as(app: &TestApp, bearer: &str, path: &str) -> reqwest::Response {
    app.client
        .get(app.url(path))
        .bearer_auth(bearer)
        .send()
        .await
        .expect("sent")
}

async fn post_as(app: &TestApp, bearer: &str, path: &str, body: &Value) -> reqwest::Response {
    app.client
        .post(app.url(path))
        .bearer_auth(bearer)
        .json(body)
        .send()
        .await
        .expect("sent")
}

async fn error_message(response: reqwest::Response) -> (u16, String) {
    let status = response.status().as_u16();
    let body: Value = response.json().await.expect("error JSON");
    (
        status,
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

#[tokio::test]
async fn tokens_of_a_real_openid_provider_name_the_user_and_the_agents_for_each_algorithm() {
    let provider = Provider::start().await;
    let app = app_trusting(&provider, false).await;
    for client in ["svc-rs256", "svc-es256", "svc-eddsa"] {
        let token = provider
            .token(client, "agents:chat:run runs:read", AUDIENCE)
            .await;
        let me: Value = get_as(&app, &token, "/v1/me")
            .await
            .json()
            .await
            .expect("me");
        assert_eq!(me["user_id"], client, "{me}");
        assert_eq!(me["credential"], "token");
        assert_eq!(me["issuer"], provider.issuer.as_str());
        assert_eq!(
            me["scopes"],
            json!(["agents:chat:run", "runs:read"]),
            "{me}"
        );
        assert_eq!(me["agents"], json!(["chat"]), "{me}");
        assert_eq!(me["admin"], false);
        // Only what the token may use is listed.
        let models: Value = get_as(&app, &token, "/v1/models")
            .await
            .json()
            .await
            .expect("models");
        let ids: Vec<&str> = models["data"]
            .as_array()
            .expect("data")
            .iter()
            .filter_map(|m| m["id"].as_str())
            .collect();
        assert_eq!(ids, ["chat"], "{models}");
        app.llm.push(Reply::text("hello"));
        let ask = json!({"model": "chat", "messages": [{"role": "user", "content": "hi"}]});
        let answered = post_as(&app, &token, "/v1/chat/completions", &ask).await;
        assert_eq!(answered.status(), 200, "{client}");
        let other = json!({"model": "tight", "messages": [{"role": "user", "content": "hi"}]});
        let (status, message) =
            error_message(post_as(&app, &token, "/v1/chat/completions", &other).await).await;
        assert_eq!(status, 403);
        assert!(message.contains("agents:tight:run"), "{message}");
    }
    // The run belongs to the token's user; runs:read lets it list them, its absence does not.
    let reader = provider
        .token("svc-rs256", "agents:*:run runs:read", AUDIENCE)
        .await;
    let runs: Value = get_as(&app, &reader, "/v1/runs")
        .await
        .json()
        .await
        .expect("runs");
    assert!(
        runs["data"]
            .as_array()
            .expect("runs")
            .iter()
            .all(|r| r["user_id"] == "svc-rs256"),
        "{runs}"
    );
    let runner = provider.token("svc-rs256", "agents:*:run", AUDIENCE).await;
    let (status, message) = error_message(get_as(&app, &runner, "/v1/runs").await).await;
    assert_eq!(
        (status, message.contains("`runs:read`")),
        (403, true),
        "{message}"
    );
    let admin = provider.token("svc-es256", "agentd:admin", AUDIENCE).await;
    let me: Value = get_as(&app, &admin, "/v1/me")
        .await
        .json()
        .await
        .expect("me");
    assert_eq!(me["admin"], true, "{me}");
}

#[tokio::test]
async fn bad_tokens_get_401s_naming_what_is_wrong_and_never_echo_the_token() {
    let provider = Provider::start().await;
    let stranger = Provider::start().await;
    let app = app_trusting(&provider, false).await;
    let good = provider
        .token("svc-rs256", "agents:chat:run", AUDIENCE)
        .await;
    let elsewhere = provider
        .token("svc-rs256", "agents:chat:run", "https://other.test")
        .await;
    let unknown = stranger
        .token("svc-rs256", "agents:chat:run", AUDIENCE)
        .await;
    let (header, rest) = good.split_once('.').expect("jwt");
    let (payload, _) = rest.split_once('.').expect("jwt");
    let tampered = format!("{header}.{payload}.{}", "A".repeat(342));
    let unsigned_header = base64_url(br#"{"alg":"none","typ":"JWT"}"#);
    let unsigned = format!("{unsigned_header}.{payload}.");
    let hmac_header = base64_url(br#"{"alg":"HS256","kid":"key-rs256"}"#);
    let hmac = format!("{hmac_header}.{payload}.c2lnbmF0dXJl");
    let cases = [
        (&elsewhere, "audience is not this server"),
        (&unknown, "issuer is not one this server trusts"),
        (&tampered, "signature does not verify"),
        (&unsigned, "signed with `none` are refused"),
        (&hmac, "signed with HS256"),
    ];
    for (token, expected) in cases {
        let response = get_as(&app, token, "/v1/me").await;
        let body = response.text().await.expect("body");
        let error: Value = serde_json::from_str(&body).expect("JSON");
        assert_eq!(error["error"]["code"], "unauthorized", "{body}");
        assert!(
            error["error"]["message"]
                .as_str()
                .expect("message")
                .contains(expected),
            "{expected}: {body}"
        );
        assert!(
            !body.contains(token.as_str()) && !body.contains(payload),
            "the token is echoed: {body}"
        );
    }
    assert_eq!(get_as(&app, &good, "/v1/me").await.status(), 200);
}

fn base64_url(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

#[tokio::test]
async fn mcp_clients_find_the_protected_resource_metadata_and_the_sdk_works_with_a_token() {
    let provider = Provider::start().await;
    let app = app_trusting(&provider, false).await;
    let refused = app
        .client
        .post(app.url("/mcp"))
        .header("accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .expect("sent");
    assert_eq!(refused.status(), 401);
    let challenge = refused.headers()["www-authenticate"]
        .to_str()
        .expect("text")
        .to_string();
    let metadata_url = format!("{}/.well-known/oauth-protected-resource", app.address);
    assert_eq!(
        challenge,
        format!("Bearer resource_metadata=\"{metadata_url}\"")
    );
    let metadata: Value = reqwest::get(&metadata_url)
        .await
        .expect("sent")
        .json()
        .await
        .expect("json");
    assert_eq!(metadata["resource"], AUDIENCE);
    assert_eq!(metadata["authorization_servers"], json!([provider.issuer]));
    assert!(
        metadata["scopes_supported"]
            .as_array()
            .expect("scopes")
            .contains(&json!("runs:read"))
    );
    // A bad token on /mcp: the challenge says the token is invalid.
    let bad = app
        .client
        .post(app.url("/mcp"))
        .bearer_auth("eyJhbGciOiJub25lIn0.e30.")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .expect("sent");
    assert!(
        bad.headers()["www-authenticate"]
            .to_str()
            .expect("text")
            .contains("error=\"invalid_token\"")
    );

    let token = provider
        .token("svc-eddsa", "agents:chat:run", AUDIENCE)
        .await;
    app.llm.push(Reply::text("Hello through a token"));
    let stdout = crate::mcp_headend::run_python(
        "mcp",
        "mcp==2.3.0",
        "mcp_bearer.py",
        &[app.address.clone(), token],
    )
    .await;
    assert!(
        stdout.lines().any(|l| l == "tools chat"),
        "only the token's agents: {stdout}"
    );
    assert!(stdout.lines().any(|l| l == "call ok"), "{stdout}");
}

#[tokio::test]
async fn the_page_signs_in_with_the_issuer_chats_as_the_user_and_signs_out() {
    let provider = Provider::start().await;
    let app = app_trusting(&provider, true).await;
    // The issuer's endpoints are discovered in the background.
    let deadline = Instant::now() + Duration::from_secs(10);
    let settings = loop {
        let response = app.get("/v1/signin").await;
        if response.status() == 200 {
            break response.json::<Value>().await.expect("json");
        }
        assert!(Instant::now() < deadline, "the issuer is never discovered");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(settings["client_id"], "page");
    assert_eq!(settings["resource"], AUDIENCE);
    let page = app.get("/").await;
    let policy = page.headers()["content-security-policy"]
        .to_str()
        .expect("text")
        .to_string();
    assert!(
        policy.contains(&format!("connect-src 'self' {}", provider.issuer)),
        "{policy}"
    );
    app.llm.push(Reply::text("Hi, signed-in user."));
    let shots = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/web-screenshots");
    std::fs::create_dir_all(&shots).expect("screenshot dir");
    let out = crate::web::run_python(
        "tests/web/signin.py",
        &[
            app.address.clone(),
            "ada".into(),
            shots.display().to_string(),
        ],
    )
    .await;
    for line in ["signed in ok", "chat ok", "signed out ok"] {
        assert!(out.lines().any(|l| l == line), "{line}: {out}");
    }
    // The conversation is the signed-in user's.
    let list: Value = get_as(&app, ADMIN, "/api/ada/conversations")
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(list["data"].as_array().map(Vec::len), Some(1), "{list}");
}

#[tokio::test]
async fn keys_are_created_once_listed_without_secrets_rotated_revoked_and_expire() {
    let app = spawn_app_with(|config| {
        config["auth"] = json!({"keys": [
            {"key": ADMIN, "admin": true, "id": "ops"},
            {"key": ALICE, "userId": "alice", "id": "alice"},
            {"key": "identity-ci-key", "id": "ci", "scopes": ["agents:*:run"]}
        ]});
    })
    .await;
    // An admin makes bob a key limited to `chat` with a daily token budget.
    let created = post_as(&app, ADMIN, "/v1/keys", &json!({"name": "bob's laptop", "user": "bob", "agents": ["ch*"], "limits": {"tokensPerDay": 1000}})).await;
    assert_eq!(created.status(), 201);
    let created: Value = created.json().await.expect("json");
    let secret = created["key"].as_str().expect("key").to_string();
    let id = created["id"].as_str().expect("id").to_string();
    assert!(secret.starts_with("agd_") && secret.len() > 40, "{created}");
    assert_eq!(created["scopes"], json!(["agents:ch*:run"]));
    let me: Value = get_as(&app, &secret, "/v1/me")
        .await
        .json()
        .await
        .expect("me");
    assert_eq!(
        (
            me["user_id"].as_str(),
            me["key_id"].as_str(),
            me["key_name"].as_str()
        ),
        (Some("bob"), Some(id.as_str()), Some("bob's laptop")),
        "{me}"
    );
    assert_eq!(me["agents"], json!(["chat"]), "{me}");
    assert_eq!(me["limits"]["tokens_left_today"], 1000, "{me}");
    let listed = get_as(&app, ADMIN, "/v1/keys")
        .await
        .text()
        .await
        .expect("list");
    assert!(
        listed.contains(&id) && !listed.contains(&secret) && !listed.contains(&secret[8..]),
        "{listed}"
    );
    assert!(
        listed.contains("\"read_only\":true"),
        "config keys are listed read-only: {listed}"
    );
    // Only the stored digest: the store never saw the key.
    let stored = app
        .runtime
        .store()
        .api_key(&id)
        .await
        .expect("read")
        .expect("stored");
    assert_ne!(stored.secret_hash, secret);
    assert!(!format!("{stored:?}").contains(&secret[4..]));

    // Rotation: the old secret stops at once on this replica, the new one works.
    let rotated: Value = post_as(&app, ADMIN, &format!("/v1/keys/{id}/rotate"), &json!({}))
        .await
        .json()
        .await
        .expect("json");
    let new_secret = rotated["key"].as_str().expect("key").to_string();
    assert_ne!(new_secret, secret);
    assert_eq!(get_as(&app, &secret, "/v1/me").await.status(), 401);
    assert_eq!(get_as(&app, &new_secret, "/v1/me").await.status(), 200);
    // Revocation.
    let revoked = app
        .client
        .delete(app.url(&format!("/v1/keys/{id}")))
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("sent");
    assert_eq!(revoked.status(), 204);
    let (status, message) = error_message(get_as(&app, &new_secret, "/v1/me").await).await;
    assert_eq!(
        (status, message.as_str()),
        (401, "This API key was revoked")
    );
    let again = app
        .client
        .delete(app.url(&format!("/v1/keys/{id}")))
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("sent");
    assert_eq!(again.status(), 404);

    // Expiry.
    let soon = (chrono::Utc::now() + chrono::TimeDelta::seconds(1)).to_rfc3339();
    let short: Value = post_as(
        &app,
        ADMIN,
        "/v1/keys",
        &json!({"name": "short", "expires_at": soon}),
    )
    .await
    .json()
    .await
    .expect("json");
    let short_key = short["key"].as_str().expect("key").to_string();
    assert_eq!(get_as(&app, &short_key, "/v1/me").await.status(), 200);
    tokio::time::sleep(Duration::from_millis(3200)).await;
    let (status, message) = error_message(get_as(&app, &short_key, "/v1/me").await).await;
    assert_eq!(
        (status, message.as_str()),
        (401, "This API key has expired")
    );
    let past = post_as(
        &app,
        ADMIN,
        "/v1/keys",
        &json!({"name": "past", "expires_at": "2020-01-01T00:00:00Z"}),
    )
    .await;
    let (status, message) = error_message(past).await;
    assert_eq!(status, 409);
    assert!(message.contains("`expires_at` is in the past"), "{message}");
}

#[tokio::test]
async fn a_user_manages_only_its_own_keys_and_never_more_than_it_holds() {
    let app = spawn_app_with(|config| {
        config["auth"] = json!({"keys": [
            {"key": ADMIN, "admin": true, "id": "ops"},
            {"key": ALICE, "userId": "alice", "id": "alice", "agents": ["chat"]},
            {"key": "identity-bob-key", "userId": "bob", "id": "bob"},
            {"key": "identity-ci-key", "id": "ci"},
            {"key": "identity-reader-key", "userId": "carol", "id": "reader", "scopes": ["runs:read"]}
        ]});
    })
    .await;
    let mine: Value = post_as(&app, ALICE, "/v1/keys", &json!({"name": "mine"}))
        .await
        .json()
        .await
        .expect("json");
    assert_eq!(mine["user_id"], "alice");
    assert_eq!(
        mine["scopes"],
        json!(["agents:chat:run", "runs:read"]),
        "the creator's agents by default: {mine}"
    );
    let bobs: Value = post_as(
        &app,
        "identity-bob-key",
        "/v1/keys",
        &json!({"name": "bob's"}),
    )
    .await
    .json()
    .await
    .expect("json");
    let bobs_id = bobs["id"].as_str().expect("id");
    let cases = [
        (
            json!({"name": "for bob", "user": "bob"}),
            403,
            "another user",
        ),
        (
            json!({"name": "all agents", "agents": ["*"]}),
            403,
            "more than its creator holds",
        ),
        (
            json!({"name": "admin", "scopes": ["admin"]}),
            403,
            "more than its creator holds",
        ),
        (
            json!({"name": "bad", "scopes": ["runs:write"]}),
            400,
            "`runs:write` is not a scope",
        ),
        (json!({"name": ""}), 400, "`name`"),
        (
            json!({"name": "x", "limits": {"tokensPerDay": 0}}),
            400,
            "tokensPerDay",
        ),
    ];
    for (body, status, expected) in cases {
        let (got, message) = error_message(post_as(&app, ALICE, "/v1/keys", &body).await).await;
        assert_eq!(got, status, "{body}: {message}");
        assert!(message.contains(expected), "{body}: {message}");
    }
    // Bob's key is not alice's to see, rotate or revoke; a config key is read-only.
    let listed = get_as(&app, ALICE, "/v1/keys")
        .await
        .text()
        .await
        .expect("list");
    assert!(
        !listed.contains(bobs_id) && !listed.contains("read_only\":true"),
        "{listed}"
    );
    let rotate = post_as(
        &app,
        ALICE,
        &format!("/v1/keys/{bobs_id}/rotate"),
        &json!({}),
    )
    .await;
    assert_eq!(rotate.status(), 404);
    let (status, message) =
        error_message(post_as(&app, ADMIN, "/v1/keys/alice/rotate", &json!({})).await).await;
    assert_eq!(status, 403);
    assert!(message.contains("config file"), "{message}");
    let others = get_as(&app, ALICE, "/v1/keys?user=bob").await;
    assert_eq!(others.status(), 403);
    // A key bound to no user manages no keys; a key without keys:manage neither.
    let (status, _) =
        error_message(post_as(&app, "identity-ci-key", "/v1/keys", &json!({"name": "x"})).await)
            .await;
    assert_eq!(status, 403);
    let (status, message) =
        error_message(get_as(&app, "identity-reader-key", "/v1/keys").await).await;
    assert_eq!(status, 403);
    assert!(message.contains("`keys:manage`"), "{message}");
    // An admin sees and revokes bob's key.
    let revoked = app
        .client
        .delete(app.url(&format!("/v1/keys/{bobs_id}")))
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("sent");
    assert_eq!(revoked.status(), 204);
}

#[tokio::test]
async fn a_key_revoked_on_one_replica_is_refused_by_the_other_within_5_s() {
    let database = crate::store::backends::Backend::postgres().await;
    let llm = crate::support::mock_llm::MockLlm::start().await;
    let dir = binary::project(&json!({
        "providers": {"llm": {"type": "openai-compatible", "baseUrl": llm.base_url()}},
        "agents": ["agents"],
        "server": {"listen": "127.0.0.1:0"},
        "store": {"url": database.url},
        "auth": {"keys": [{"key": ADMIN, "admin": true}]},
    }));
    let mut replicas = Vec::new();
    for _ in 0..2 {
        let mut command = binary::command(dir.path());
        command.args(["serve", "--config", "agentd.json"]);
        replicas.push(binary::serve(command, |_| {}).await);
    }
    let client = reqwest::Client::new();
    let url = |replica: usize, path: &str| format!("http://{}{path}", replicas[replica].address);
    let created: Value = client
        .post(url(0, "/v1/keys"))
        .bearer_auth(ADMIN)
        .json(&json!({"name": "shared", "user": "ann"}))
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("json");
    let key = created["key"].as_str().expect("key").to_string();
    let id = created["id"].as_str().expect("id").to_string();
    let status_on_b = || async {
        client
            .get(url(1, "/v1/me"))
            .bearer_auth(&key)
            .send()
            .await
            .expect("sent")
            .status()
            .as_u16()
    };
    assert_eq!(status_on_b().await, 200, "a key made on A works on B");
    let revoked = client
        .delete(url(0, &format!("/v1/keys/{id}")))
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("sent");
    assert_eq!(revoked.status(), 204);
    let started = Instant::now();
    while status_on_b().await != 401 {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "B still takes the revoked key"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let took = started.elapsed();
    eprintln!("a revoked key was refused on the other replica after {took:?}");
    assert_eq!(
        client
            .get(url(0, "/v1/me"))
            .bearer_auth(&key)
            .send()
            .await
            .expect("sent")
            .status(),
        401
    );
}

#[tokio::test]
async fn no_key_or_token_appears_in_the_log() {
    let provider = Provider::start().await;
    let llm = crate::support::mock_llm::MockLlm::start().await;
    let dir = binary::project(&json!({
        "providers": {"llm": {"type": "openai-compatible", "baseUrl": llm.base_url()}},
        "agents": ["agents"],
        "server": {"listen": "127.0.0.1:0"},
        "store": {"url": "sqlite://agentd.db"},
        "auth": {"keys": [{"key": ADMIN, "admin": true}], "oidc": [provider.config(false)]},
    }));
    let mut command = binary::command(dir.path());
    command
        .args(["serve", "--config", "agentd.json"])
        .env("RUST_LOG", "debug");
    let mut served = binary::serve(command, |_| {}).await;
    let client = reqwest::Client::new();
    let url = |path: &str| format!("http://{}{path}", served.address);
    let token = provider
        .token("svc-rs256", "agents:chat:run", AUDIENCE)
        .await;
    let elsewhere = provider
        .token("svc-rs256", "agents:chat:run", "https://other.test")
        .await;
    let created: Value = client
        .post(url("/v1/keys"))
        .bearer_auth(ADMIN)
        .json(&json!({"name": "logged?"}))
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("json");
    let key = created["key"].as_str().expect("key").to_string();
    let id = created["id"].as_str().expect("id").to_string();
    let rotated: Value = client
        .post(url(&format!("/v1/keys/{id}/rotate")))
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("json");
    let rotated_key = rotated["key"].as_str().expect("key").to_string();
    let secrets = [
        ADMIN,
        token.as_str(),
        elsewhere.as_str(),
        key.as_str(),
        rotated_key.as_str(),
    ];
    for bearer in secrets {
        for path in ["/v1/me", "/v1/runs", "/mcp"] {
            let _ = client
                .get(url(path))
                .bearer_auth(bearer)
                .send()
                .await
                .expect("sent");
        }
    }
    let _ = client
        .delete(url(&format!("/v1/keys/{id}")))
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("sent");
    let _ = client
        .get(url("/v1/me"))
        .bearer_auth(&rotated_key)
        .send()
        .await
        .expect("sent");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut log = String::new();
    while let Ok(line) = served.log.try_recv() {
        log.push_str(&line);
        log.push('\n');
    }
    // Each change is one row of the audit log, naming the key by id, never its secret.
    let audit = client
        .get(url("/v1/audit?action=key.created"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("sent")
        .text()
        .await
        .expect("body");
    let rotations = client
        .get(url("/v1/audit?action=key.rotated"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("sent")
        .text()
        .await
        .expect("body");
    for (rows, action) in [(&audit, "key.created"), (&rotations, "key.rotated")] {
        let rows: Vec<Value> = rows
            .lines()
            .map(|line| serde_json::from_str(line).expect("a JSON line"))
            .collect();
        assert_eq!(rows.len(), 1, "one {action} row: {rows:?}");
        assert_eq!(rows[0]["target"], format!("key:{id}"), "{rows:?}");
    }
    for secret in secrets {
        let tail = &secret[secret.len() - 12..];
        assert!(
            !audit.contains(tail) && !rotations.contains(tail),
            "a secret is in the audit log"
        );
    }
    for secret in secrets {
        let tail = &secret[secret.len() - 12..];
        assert!(!log.contains(tail), "a secret is in the log:\n{log}");
    }
}

/// The added cost of a token over a key per request, measured (a debug build: the ratio is
/// what counts, release builds are several times faster for both).
#[tokio::test]
async fn a_token_costs_little_more_than_a_key_per_request() {
    let provider = Provider::start().await;
    let app = app_trusting(&provider, false).await;
    let token = provider.token("svc-rs256", "agents:*:run", AUDIENCE).await;
    let es_token = provider.token("svc-es256", "agents:*:run", AUDIENCE).await;
    let ed_token = provider.token("svc-eddsa", "agents:*:run", AUDIENCE).await;
    const REQUESTS: u32 = 1000;
    let mut timings = Vec::new();
    for (what, bearer) in [
        ("key", ADMIN),
        ("RS256", &token),
        ("ES256", &es_token),
        ("EdDSA", &ed_token),
        ("key again", ADMIN),
    ] {
        assert_eq!(get_as(&app, bearer, "/v1/models").await.status(), 200);
        let started = Instant::now();
        // 1,000 requests, 8 at a time.
        futures_util::future::join_all((0..8).map(|_| async {
            for _ in 0..REQUESTS / 8 {
                let response = get_as(&app, bearer, "/v1/models").await;
                assert_eq!(response.status(), 200);
            }
        }))
        .await;
        let per_request = started.elapsed() / REQUESTS;
        eprintln!(
            "{what}: {per_request:?} per request ({REQUESTS} requests, 8 at a time, debug build)"
        );
        timings.push(per_request);
    }
    // The check alone, without HTTP: one verification of each token, from the cached keys.
    let issuers =
        agentd::identity::oidc::Issuers::new(&[
            serde_json::from_value(provider.config(false)).expect("issuer config")
        ]);
    for (what, bearer) in [
        ("RS256", &token),
        ("ES256", &es_token),
        ("EdDSA", &ed_token),
    ] {
        issuers.verify(bearer).await.expect("valid");
        let started = Instant::now();
        for _ in 0..REQUESTS {
            issuers.verify(bearer).await.expect("valid");
        }
        eprintln!(
            "{what}: {:?} per verification (debug build)",
            started.elapsed() / REQUESTS
        );
    }
    let key = (timings[0] + timings[4]) / 2;
    let worst_token = timings[1..4].iter().max().copied().unwrap_or_default();
    eprintln!(
        "token/key: {:.2}",
        worst_token.as_secs_f64() / key.as_secs_f64()
    );
    assert!(
        worst_token < key * 4 + Duration::from_millis(2),
        "a token costs {worst_token:?}, a key {key:?}"
    );
}
