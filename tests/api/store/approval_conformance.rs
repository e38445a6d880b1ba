//! `ApprovalStore` on every backend: parking a run keeps its checkpoint and waiting calls and
//! turns it `waiting_approval` without an owner; decisions are recorded once (409-worthy
//! answers for a second one and for one past the timeout); the checkpoint is taken exactly once
//! and only when nothing waits (or with `cancel`), which makes the taker the run's owner; expired
//! waits are found.

use agentd::store::{
    ApprovalDecision, DecisionWritten, JsonText, NewApproval, NewRun, ParkedRun, RunBatch, RunWrite,
};
use agentd::vocabulary::RunStatus;
use chrono::{Duration, Utc};
use serde_json::json;

use super::Backend;
use super::conformance::at;

async fn running_run(store: &dyn agentd::store::Store, id: &str) {
    let batch = RunBatch {
        runs: vec![RunWrite {
            run: NewRun {
                id: id.into(),
                agent: "approver".into(),
                user_id: Some("alice".into()),
                conversation_id: None,
                created_at: at(1),
                owner: Some("replica-a".into()),
                acted_by: None,
                key_id: None,
            },
            outcome: None,
        }],
        events: Vec::new(),
    };
    store.write_run_batch(&batch).await.expect("write");
}

fn parked(run_id: &str, calls: &[(&str, i64)]) -> ParkedRun {
    let now = Utc::now();
    ParkedRun {
        run_id: run_id.into(),
        user_id: Some("alice".into()),
        agent: "approver".into(),
        checkpoint: JsonText::of(&json!({"conversation": ["…"], "turns": 1})),
        last_seq: 7,
        approvals: calls
            .iter()
            .map(|(call, expires_in)| NewApproval {
                call_id: (*call).into(),
                tool: "test__echo".into(),
                server: "test".into(),
                arguments: JsonText::of(&json!({"text": "hi"})),
                expires_at: now + Duration::seconds(*expires_in),
            })
            .collect(),
        status: RunStatus::WaitingApproval,
        at: now,
        notices: Vec::new(),
    }
}

fn decision(run_id: &str, call: &str, kind: &str) -> ApprovalDecision {
    ApprovalDecision {
        run_id: run_id.into(),
        call_id: call.into(),
        decision: kind.into(),
        decided_by: "alice".into(),
        reason: None,
        edited_arguments: Some(JsonText::of(&json!({"text": "edited"}))),
        at: Utc::now(),
    }
}

pub async fn a_parked_run_waits_is_decided_once_and_is_taken_once(backend: &Backend) {
    let store = backend.open().await;
    running_run(store.as_ref(), "r1").await;
    store
        .park_run(&parked("r1", &[("c1", 600), ("c2", 600)]))
        .await
        .expect("park");
    let run = store.get_run("r1").await.expect("get").expect("run");
    assert_eq!(run.status.as_str(), "waiting_approval");
    assert_eq!(run.owner, None, "a waiting run holds no process");
    let waiting = store
        .waiting_approvals(Some("alice"), 10)
        .await
        .expect("list");
    assert_eq!(waiting.len(), 2);
    assert_eq!(waiting[0].arguments, json!({"text": "hi"}));
    assert!(
        store
            .waiting_approvals(Some("bob"), 10)
            .await
            .expect("list")
            .is_empty()
    );

    assert_eq!(
        store
            .decide_approval(&decision("r1", "c1", "approve"))
            .await
            .expect("decide"),
        DecisionWritten::Recorded
    );
    assert_eq!(
        store
            .decide_approval(&decision("r1", "c1", "deny"))
            .await
            .expect("decide"),
        DecisionWritten::AlreadyDecided("approve".into())
    );
    assert_eq!(
        store
            .decide_approval(&decision("r1", "nope", "deny"))
            .await
            .expect("decide"),
        DecisionWritten::NotFound
    );
    assert_eq!(
        store
            .take_checkpoint("r1", "replica-b", false)
            .await
            .expect("take"),
        None,
        "c2 still waits"
    );
    assert!(
        store
            .decided_checkpoints(10)
            .await
            .expect("decided")
            .is_empty(),
        "c2 still waits"
    );
    store
        .decide_approval(&decision("r1", "c2", "deny"))
        .await
        .expect("decide");
    assert_eq!(
        store.decided_checkpoints(10).await.expect("decided"),
        vec!["r1".to_string()]
    );
    let taken = store
        .take_checkpoint("r1", "replica-b", false)
        .await
        .expect("take")
        .expect("the checkpoint");
    assert_eq!(taken.last_seq, 7);
    assert_eq!(taken.checkpoint.to_value()["turns"], 1);
    assert_eq!(
        store
            .take_checkpoint("r1", "replica-c", false)
            .await
            .expect("take"),
        None,
        "taken once"
    );
    assert!(
        store
            .decided_checkpoints(10)
            .await
            .expect("decided")
            .is_empty()
    );
    let run = store.get_run("r1").await.expect("get").expect("run");
    assert_eq!(run.status.as_str(), "running");
    assert_eq!(run.owner.as_deref(), Some("replica-b"));
    let approvals = store.run_approvals("r1").await.expect("approvals");
    assert_eq!(
        approvals[0].edited_arguments,
        Some(json!({"text": "edited"}))
    );
    assert_eq!(approvals[1].decision.as_deref(), Some("deny"));
}

pub async fn expired_waits_are_found_refused_to_people_and_cancel_takes_what_waits(
    backend: &Backend,
) {
    let store = backend.open().await;
    running_run(store.as_ref(), "r2").await;
    store
        .park_run(&parked("r2", &[("late", -1), ("open", 600)]))
        .await
        .expect("park");
    let expired = store
        .expired_approvals(Utc::now(), 10)
        .await
        .expect("expired");
    assert_eq!(expired, vec![("r2".to_string(), "late".to_string())]);
    assert_eq!(
        store
            .decide_approval(&decision("r2", "late", "approve"))
            .await
            .expect("decide"),
        DecisionWritten::Expired,
        "too late for a person"
    );
    assert_eq!(
        store
            .decide_approval(&decision("r2", "late", "expired"))
            .await
            .expect("decide"),
        DecisionWritten::Recorded,
        "the sweeper may still end it"
    );
    let taken = store
        .take_checkpoint("r2", "replica-b", true)
        .await
        .expect("take");
    assert!(
        taken.is_some(),
        "cancel takes a run with calls still waiting"
    );
    let approvals = store.run_approvals("r2").await.expect("approvals");
    assert_eq!(approvals[1].decision.as_deref(), Some("cancelled"));
    assert!(
        store
            .waiting_approvals(None, 10)
            .await
            .expect("list")
            .is_empty()
    );
}

/// Two stores on one database, as two replicas have: many calls, each decided twice at once
/// (approve on one, deny on the other) and each run cancelled at once with its decision. Exactly
/// one decision of a call is recorded, the other names it; a cancel and a decision agree.
pub async fn decisions_made_at_once_record_exactly_one(backend: &Backend) {
    const CALLS: usize = 20;
    let (one, other) = (backend.open().await, backend.open().await);
    running_run(one.as_ref(), "twice").await;
    let calls: Vec<(String, i64)> = (0..CALLS).map(|n| (format!("c{n}"), 600)).collect();
    let named: Vec<(&str, i64)> = calls.iter().map(|(c, e)| (c.as_str(), *e)).collect();
    one.park_run(&parked("twice", &named)).await.expect("park");
    let raced = futures_util::future::join_all(calls.iter().map(|(call, _)| {
        let (one, other) = (&one, &other);
        async move {
            let approve = decision("twice", call, "approve");
            let deny = decision("twice", call, "deny");
            let (approved, denied) =
                tokio::join!(one.decide_approval(&approve), other.decide_approval(&deny));
            (approved.expect("decide"), denied.expect("decide"))
        }
    }))
    .await;
    let stored = one.run_approvals("twice").await.expect("approvals");
    for ((call, _), (approved, denied)) in calls.iter().zip(raced) {
        let approval = stored.iter().find(|a| &a.call_id == call).expect("stored");
        let winner = approval.decision.clone().expect("decided");
        let expected = match winner.as_str() {
            "approve" => (
                DecisionWritten::Recorded,
                DecisionWritten::AlreadyDecided(winner.clone()),
            ),
            _ => (
                DecisionWritten::AlreadyDecided(winner.clone()),
                DecisionWritten::Recorded,
            ),
        };
        assert_eq!((approved, denied), expected, "{}", approval.call_id);
    }

    for n in 0..CALLS {
        let run_id = format!("cancelled-{n}");
        running_run(one.as_ref(), &run_id).await;
        one.park_run(&parked(&run_id, &[("c1", 600)]))
            .await
            .expect("park");
        let approve = decision(&run_id, "c1", "approve");
        let (approved, taken) = tokio::join!(
            one.decide_approval(&approve),
            other.take_checkpoint(&run_id, "replica-b", true)
        );
        assert!(taken.expect("take").is_some(), "a cancel takes the run");
        let stored = one.run_approvals(&run_id).await.expect("approvals");
        let expected = match stored[0].decision.as_deref() {
            Some("approve") => DecisionWritten::Recorded,
            _ => DecisionWritten::AlreadyDecided("cancelled".into()),
        };
        assert_eq!(approved.expect("decide"), expected, "{run_id}: {stored:?}");
    }
}

/// A run parked for its budget waits with its own status, is never resumed by the sweep of
/// decided runs, and is taken once (by a raise).
pub async fn a_run_parked_for_its_budget_is_left_to_a_raise_and_taken_once(backend: &Backend) {
    let store = backend.open().await;
    running_run(store.as_ref(), "b1").await;
    let mut budget_wait = parked("b1", &[]);
    budget_wait.status = RunStatus::WaitingBudget;
    store.park_run(&budget_wait).await.expect("park");
    let run = store.get_run("b1").await.expect("get").expect("run");
    assert_eq!(run.status, RunStatus::WaitingBudget);
    assert_eq!(run.owner, None, "a waiting run holds no process");
    assert!(
        !store
            .decided_checkpoints(10)
            .await
            .expect("decided")
            .contains(&"b1".to_string()),
        "a budget wait is not a decided approval wait"
    );
    let taken = store
        .take_checkpoint("b1", "replica-a", false)
        .await
        .expect("take");
    assert_eq!(taken.map(|t| t.last_seq), Some(7));
    assert!(
        store
            .take_checkpoint("b1", "replica-b", false)
            .await
            .expect("take again")
            .is_none(),
        "taken once"
    );
    let run = store.get_run("b1").await.expect("get").expect("run");
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!(run.owner.as_deref(), Some("replica-a"));
}
