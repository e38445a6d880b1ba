//! Schedules (SPEC §13, issue 41): the API refuses a bad cron, an unknown zone or agent with a
//! 400 naming the field; a schedule fires at its due time (measured: the delay after the due
//! second), once, owned by its creator; run now, disable, delete; every change is an audit row.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::mock_llm::Reply;
use crate::support::{TestApp, spawn_app};

async fn post(app: &TestApp, path: &str, body: Value) -> (u16, Value) {
    let response = app.post_json(path, &body).await;
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

async fn get(app: &TestApp, path: &str) -> Value {
    app.get(path).await.json().await.expect("json")
}

#[tokio::test]
async fn bad_schedules_are_refused_naming_the_field() {
    let app = spawn_app().await;
    for (body, field) in [
        (
            json!({"agent": "chat", "prompt": "x", "cron": "61 * * * *"}),
            "cron",
        ),
        (
            json!({"agent": "chat", "prompt": "x", "cron": "0 0 * * * *"}),
            "cron",
        ),
        (
            json!({"agent": "chat", "prompt": "x", "cron": "@daily", "timezone": "Mars/Olympus"}),
            "timezone",
        ),
        (
            json!({"agent": "nobody", "prompt": "x", "cron": "@daily"}),
            "agent",
        ),
        (json!({"agent": "chat", "cron": "@daily"}), "prompt"),
        (
            json!({"agent": "chat", "prompt": "x", "cron": "@daily", "overlap": "maybe"}),
            "overlap",
        ),
    ] {
        let (status, error) = post(&app, "/v1/schedules", body.clone()).await;
        assert_eq!(status, 400, "{body}: {error}");
        assert!(error.to_string().contains(field), "{field}: {error}");
    }
}

#[tokio::test]
async fn a_schedule_fires_once_at_its_due_time_and_is_run_now_disabled_and_deleted() {
    let app = spawn_app().await;
    for _ in 0..4 {
        app.llm.push(Reply::text("scheduled answer"));
    }
    let (status, created) = post(
        &app,
        "/v1/schedules",
        json!({"agent": "chat", "prompt": "summarise", "cron": "* * * * *", "timezone": "Europe/Paris", "missed": "skip"}),
    )
    .await;
    assert_eq!(status, 201, "{created}");
    let id = created["id"].as_str().expect("id").to_string();
    let due: chrono::DateTime<chrono::Utc> = created["next_due_at"]
        .as_str()
        .expect("due")
        .parse()
        .expect("time");
    assert_eq!(
        get(&app, "/v1/schedules").await["data"][0]["id"],
        id.as_str()
    );

    // Wait past the due time: one fire, with a run.
    let deadline = std::time::Instant::now() + Duration::from_secs(75);
    let fired = loop {
        let runs = get(&app, &format!("/v1/schedules/{id}/runs")).await;
        let list = runs["data"].as_array().cloned().unwrap_or_default();
        if let Some(fire) = list.iter().find(|f| f["status"] == "fired") {
            break fire.clone();
        }
        assert!(std::time::Instant::now() < deadline, "never fired: {runs}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let fired_at: chrono::DateTime<chrono::Utc> = fired["fired_at"]
        .as_str()
        .expect("fired")
        .parse()
        .expect("time");
    let delay = fired_at - due;
    eprintln!("fired {} ms after the due second", delay.num_milliseconds());
    assert_eq!(
        fired["due_at"]
            .as_str()
            .map(|d| d.parse::<chrono::DateTime<chrono::Utc>>().ok()),
        Some(Some(due))
    );
    assert!(delay.num_milliseconds() < 1000, "{delay}");
    let run_id = fired["run_id"].as_str().expect("run").to_string();
    let run = app.ended_run(&run_id, Duration::from_secs(10)).await;
    assert_eq!(run["status"], "completed", "{run}");

    // Run now, then disable: no due time; delete: gone.
    let (status, now) = post(&app, &format!("/v1/schedules/{id}/run"), json!({})).await;
    assert_eq!(status, 202, "{now}");
    let patched = app
        .client
        .patch(app.url(&format!("/v1/schedules/{id}")))
        .json(&json!({"enabled": false}))
        .send()
        .await
        .expect("sent");
    let patched: Value = patched.json().await.expect("json");
    assert_eq!(patched["enabled"], false);
    assert_eq!(patched["next_due_at"], Value::Null);
    let deleted = app
        .client
        .delete(app.url(&format!("/v1/schedules/{id}")))
        .send()
        .await
        .expect("sent");
    assert_eq!(deleted.status(), 204);
    assert_eq!(app.get(&format!("/v1/schedules/{id}")).await.status(), 404);
    let audit = app
        .get("/v1/audit?action=schedule.changed")
        .await
        .text()
        .await
        .expect("audit");
    let rows = audit
        .lines()
        .filter(|l| l.contains("schedule.changed"))
        .count();
    assert_eq!(rows, 3, "created, updated, deleted: {audit}");
}

/// `schedules` in the config are in the API at start, and a bad one names its field.
#[tokio::test]
async fn configured_schedules_are_listed_and_bad_ones_name_the_field() {
    let app = crate::support::spawn_app_with(|config| {
        config["schedules"] = json!([{"id": "inbox", "agent": "chat", "prompt": "Summarise my inbox",
            "cron": "0 8 * * 1-5", "timezone": "Europe/Paris", "user": "ada"}]);
    })
    .await;
    let schedule = get(&app, "/v1/schedules/inbox").await;
    assert_eq!(schedule["cron"], "0 8 * * 1-5", "{schedule}");
    assert_eq!(schedule["user"], "ada");
    assert!(schedule["next_due_at"].is_string(), "{schedule}");
    let bad = agentd::config::parse_config(
        json!({"schedules": [{"id": "x", "agent": "chat", "prompt": "p", "cron": "0 8 * *"}]}),
        "test",
    )
    .expect_err("bad cron");
    assert!(bad.to_string().contains("schedules[0].cron"), "{bad}");
}
