//! What the store does in one transaction for SPEC §13 and §14: a run's end is stored with the
//! webhook messages announcing it (a replica that dies after the end has announced it too), the
//! outbox keeps no secret (the message names which configured one signs it), and erasing a user
//! leaves everything while one of the user's runs has not ended, however recently it started.

use agentd::store::{
    AttemptOutcome, DeliveryStatus, Erasure, NewConversation, NewDelivery, NewRun, RunBatch,
    RunOutcome, RunWrite, ScheduleFire, ScheduleRecord, ScheduleWork, Signer,
};
use chrono::Utc;

use super::Backend;
use super::conformance::{new_run, outcome};

fn notice(id: &str, run_id: &str, signer: Signer) -> NewDelivery {
    NewDelivery {
        id: id.into(),
        url: "https://example.com/hook".into(),
        signer,
        event: "run.finished".into(),
        payload: "{}".into(),
        user_id: Some("erin".into()),
        run_id: Some(run_id.into()),
        headers: None,
        created_at: Utc::now(),
    }
}

fn write(run: NewRun, end: Option<RunOutcome>) -> RunBatch {
    RunBatch {
        runs: vec![RunWrite { run, outcome: end }],
        events: Vec::new(),
    }
}

pub async fn a_runs_end_is_stored_with_its_notices_and_no_secret(backend: &Backend) {
    let store = backend.open().await;
    let run = new_run("run-n", Some("erin"));
    store
        .write_run_batch(&write(run.clone(), None))
        .await
        .expect("started");
    let end = RunOutcome {
        notices: vec![
            notice("msg_a", "run-n", Signer::Receiver),
            notice("msg_b", "run-n", Signer::Server),
        ],
        ..outcome()
    };
    let batch = write(run, Some(end));
    store.write_run_batch(&batch).await.expect("ended");
    // Written again (a batch retried after an unclear failure): still one message each.
    store.write_run_batch(&batch).await.expect("again");
    let stored = store.get_run("run-n").await.expect("read").expect("stored");
    assert_eq!(stored.status.as_str(), "completed");
    let mut listed = store.list_deliveries(None, 10).await.expect("listed");
    listed.sort_by(|a, b| a.id.cmp(&b.id));
    let kept: Vec<(&str, Option<Signer>, &str)> = listed
        .iter()
        .map(|d| (d.id.as_str(), d.signer, d.legacy_secret.as_str()))
        .collect();
    assert_eq!(
        kept,
        [
            ("msg_a", Some(Signer::Receiver), ""),
            ("msg_b", Some(Signer::Server), "")
        ],
        "one message per notice, naming its signer, keeping no secret"
    );
}

pub async fn erasing_a_user_leaves_everything_while_a_run_has_not_ended(backend: &Backend) {
    let store = backend.open().await;
    erins_conversation(&*store).await;
    // Started on another replica after the runtime looked for unfinished runs: the store's
    // own erasure must find it.
    let run = new_run("run-e", Some("erin"));
    store
        .write_run_batch(&write(run.clone(), None))
        .await
        .expect("started");
    let erasure = store.erase_user("erin").await.expect("erase");
    assert_eq!(erasure, Erasure::RunsInProgress(vec!["run-e".into()]));
    assert!(
        store.get_run("run-e").await.expect("read").is_some(),
        "the running run is not erased under it"
    );
    assert!(
        store
            .get_conversation("erin", "c1")
            .await
            .expect("read")
            .is_some(),
        "nothing of the user is erased"
    );
    store
        .write_run_batch(&write(run, Some(outcome())))
        .await
        .expect("ended");
    match store.erase_user("erin").await.expect("erase") {
        Erasure::Erased(erased) => {
            assert_eq!((erased.runs, erased.conversations), (1, 1), "{erased:?}")
        }
        other => panic!("erased once the run ended: {other:?}"),
    }
    assert!(store.get_run("run-e").await.expect("read").is_none());
}

/// The delivery loop sleeps until the outbox's next due time and is woken when messages are
/// added: the store says when that is (a message's attempt, or the end of a lease on it) and
/// signals each commit that adds messages.
pub async fn the_outbox_says_when_its_next_message_is_due(backend: &Backend) {
    let store = backend.open().await;
    assert_eq!(
        store.next_delivery_due().await.expect("read"),
        None,
        "empty"
    );
    let message = notice("msg_due", "run-due", Signer::Server);
    let added = store.delivery_wakeup().notified();
    store
        .enqueue_deliveries(std::slice::from_ref(&message))
        .await
        .expect("enqueued");
    tokio::time::timeout(std::time::Duration::from_secs(1), added)
        .await
        .expect("the commit woke the delivery loop");
    let due = store.next_delivery_due().await.expect("read").expect("due");
    assert!(
        (due - message.created_at).num_milliseconds().abs() < 5,
        "{due}"
    );

    let now = Utc::now();
    let lease_end = now + chrono::Duration::seconds(120);
    let leased = store
        .lease_due_deliveries("replica-a", now, lease_end, 10)
        .await
        .expect("leased");
    assert_eq!(leased.len(), 1);
    let due = store.next_delivery_due().await.expect("read").expect("due");
    assert!(
        (due - lease_end).num_milliseconds().abs() < 5,
        "the lease's end: {due}"
    );

    let retry_at = now + chrono::Duration::seconds(5);
    let failed = AttemptOutcome {
        status: DeliveryStatus::Pending,
        next_attempt_at: retry_at,
        http_status: Some(500),
        error: Some("refused".into()),
        at: now,
    };
    store
        .record_attempt("msg_due", "replica-a", &failed)
        .await
        .expect("recorded");
    let due = store.next_delivery_due().await.expect("read").expect("due");
    assert!(
        (due - retry_at).num_milliseconds().abs() < 5,
        "the retry: {due}"
    );

    let delivered = AttemptOutcome {
        status: DeliveryStatus::Delivered,
        ..failed
    };
    let leased = store
        .lease_due_deliveries(
            "replica-a",
            retry_at,
            retry_at + chrono::Duration::seconds(60),
            10,
        )
        .await
        .expect("leased again");
    assert_eq!(leased.len(), 1);
    store
        .record_attempt("msg_due", "replica-a", &delivered)
        .await
        .expect("recorded");
    assert_eq!(
        store.next_delivery_due().await.expect("read"),
        None,
        "all sent"
    );
}

fn schedule(id: &str, enabled: bool, next_due_at: chrono::DateTime<Utc>) -> ScheduleRecord {
    ScheduleRecord {
        id: id.into(),
        owner: Some("erin".into()),
        key_id: None,
        agent: "chat".into(),
        prompt: "Summarise.".into(),
        cron: "0 8 * * *".into(),
        timezone: "UTC".into(),
        conversation_id: None,
        overlap: "queue".into(),
        missed: "skip".into(),
        webhook_url: None,
        enabled,
        next_due_at: Some(next_due_at),
        created_at: Utc::now(),
        updated_at: Utc::now(),
    }
}

/// The schedule loop sleeps until the earliest enabled schedule is due, shorter while a due
/// time waits queued, and is woken when this store commits a schedule.
pub async fn the_schedule_loop_reads_its_next_work_in_one_look(backend: &Backend) {
    let store = backend.open().await;
    assert_eq!(
        store.schedule_work().await.expect("read"),
        ScheduleWork::default(),
        "no schedule: nothing due, nothing queued"
    );
    let soon = Utc::now() + chrono::Duration::minutes(5);
    let later = soon + chrono::Duration::hours(1);
    let changed = store.schedule_wakeup().notified();
    store
        .put_schedule(&schedule("sch-later", true, later))
        .await
        .expect("stored");
    tokio::time::timeout(std::time::Duration::from_secs(1), changed)
        .await
        .expect("the commit woke the schedule loop");
    // A disabled schedule, however soon, is no work.
    store
        .put_schedule(&schedule(
            "sch-off",
            false,
            soon - chrono::Duration::minutes(1),
        ))
        .await
        .expect("stored");
    store
        .put_schedule(&schedule("sch-soon", true, soon))
        .await
        .expect("stored");
    let work = store.schedule_work().await.expect("read");
    assert!(!work.queued);
    let due = work.next_due_at.expect("due");
    assert!(
        (due - soon).num_milliseconds().abs() < 5,
        "the earliest enabled: {due}"
    );

    let fire = ScheduleFire {
        schedule_id: "sch-soon".into(),
        due_at: soon,
        replica: "replica-a".into(),
        status: "queued".into(),
        run_id: None,
        fired_at: Utc::now(),
    };
    assert!(store.claim_fire(&fire).await.expect("queued"));
    assert!(
        store.schedule_work().await.expect("read").queued,
        "a due time waits"
    );
    store
        .finish_fire("sch-soon", soon, "fired", Some("run-s"))
        .await
        .expect("fired");
    assert!(!store.schedule_work().await.expect("read").queued);
}

/// PostgreSQL: a run another replica is inserting while a user is erased (its transaction not
/// yet committed) holds the erasure off until it commits; the erasure then finds it running and
/// erases nothing. Without the lock the erasure could not see the run and erased the user under
/// it.
pub async fn a_run_being_inserted_holds_off_the_users_erasure(backend: &Backend) {
    use sqlx::Connection;
    let store = backend.open().await;
    erins_conversation(&*store).await;
    let mut replica = sqlx::PgConnection::connect(&backend.url)
        .await
        .expect("second connection");
    let mut inserting = replica.begin().await.expect("begin");
    sqlx::query(
        "INSERT INTO runs (id, agent, user_id, status, created_at) \
         VALUES ('run-race', 'chat', 'erin', 'running', now())",
    )
    .execute(&mut *inserting)
    .await
    .expect("insert");
    let erasing = tokio::spawn({
        let store = store.clone();
        async move { store.erase_user("erin").await }
    });
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert!(
        !erasing.is_finished(),
        "the erasure waits for the run being inserted"
    );
    inserting.commit().await.expect("commit");
    let erasure = erasing.await.expect("joined").expect("erase");
    assert_eq!(erasure, Erasure::RunsInProgress(vec!["run-race".into()]));
    assert!(
        store
            .get_conversation("erin", "c1")
            .await
            .expect("read")
            .is_some(),
        "nothing of the user is erased"
    );
}

/// Gives `erin` conversation `c1`, something of hers to erase.
async fn erins_conversation(store: &dyn agentd::store::Store) {
    store
        .create_conversation(&NewConversation {
            id: "c1".into(),
            user_id: "erin".into(),
            agent: "chat".into(),
            title: None,
            created_at: Utc::now(),
        })
        .await
        .expect("conversation");
}
