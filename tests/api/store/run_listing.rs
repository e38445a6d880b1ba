//! `RunStore::list_runs` on every backend: newest first, each filter, and the keyset cursor
//! across runs created at the same instant.

use agentd::store::{NewRun, RunBatch, RunCursor, RunFilter, RunOwnerFilter, RunWrite};

use super::Backend;
use super::conformance::{at, outcome};

fn run(id: &str, user: Option<&str>, agent: &str, created: i64, finished: bool) -> RunWrite {
    RunWrite {
        run: NewRun {
            id: id.into(),
            agent: agent.into(),
            user_id: user.map(Into::into),
            conversation_id: Some(format!("conv-{}", user.unwrap_or("none"))),
            created_at: at(created),
            owner: None,
            acted_by: None,
            key_id: None,
        },
        outcome: finished.then(outcome),
    }
}

fn everyone(limit: u32) -> RunFilter {
    RunFilter {
        owner: RunOwnerFilter::Everyone,
        agent: None,
        agents_allowed: None,
        statuses: Vec::new(),
        conversation_id: None,
        after: None,
        limit,
    }
}

fn ids(runs: &[agentd::store::RunRecord]) -> Vec<&str> {
    runs.iter().map(|r| r.id.as_str()).collect()
}

pub async fn runs_are_listed_newest_first_by_filter_and_page(backend: &Backend) {
    let store = backend.open().await;
    let runs = vec![
        run("r-a1", Some("alice"), "chat", 1, true),
        run("r-b1", Some("bob"), "chat", 2, true),
        run("r-a2", Some("alice"), "research", 3, false),
        // Two runs at the same instant: the id breaks the tie.
        run("r-a3", Some("alice"), "chat", 4, false),
        run("r-a4", Some("alice"), "chat", 4, true),
        run("r-n1", None, "chat", 5, true),
    ];
    let batch = RunBatch {
        runs,
        events: Vec::new(),
    };
    store.write_run_batch(&batch).await.expect("write");

    let all = store.list_runs(&everyone(100)).await.expect("list");
    assert_eq!(
        ids(&all),
        ["r-n1", "r-a4", "r-a3", "r-a2", "r-b1", "r-a1"],
        "newest first, the id breaking ties"
    );
    assert!(all.iter().all(|r| r.result.is_none()), "no whole results");
    assert_eq!(all[1].input_tokens, 10, "usage is listed");

    let alice = RunFilter {
        owner: RunOwnerFilter::User(Some("alice".into())),
        ..everyone(100)
    };
    let listed = store.list_runs(&alice).await.expect("alice");
    assert_eq!(ids(&listed), ["r-a4", "r-a3", "r-a2", "r-a1"]);
    let nobody = RunFilter {
        owner: RunOwnerFilter::User(None),
        ..everyone(100)
    };
    assert_eq!(
        ids(&store.list_runs(&nobody).await.expect("none")),
        ["r-n1"]
    );

    let running_chat = RunFilter {
        agent: Some("chat".into()),
        statuses: vec!["running".into()],
        ..alice.clone()
    };
    assert_eq!(
        ids(&store.list_runs(&running_chat).await.expect("running")),
        ["r-a3"]
    );
    let two_statuses = RunFilter {
        statuses: vec!["running".into(), "completed".into()],
        conversation_id: Some("conv-alice".into()),
        ..alice.clone()
    };
    assert_eq!(store.list_runs(&two_statuses).await.expect("both").len(), 4);

    // Page by page with the cursor, through the tie, with nothing skipped or repeated.
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .list_runs(&RunFilter {
                after: after.clone(),
                ..everyone(2)
            })
            .await
            .expect("page");
        seen.extend(page.iter().map(|r| r.id.clone()));
        if page.len() < 2 {
            break;
        }
        after = page.last().map(|r| RunCursor {
            created_at: r.created_at,
            id: r.id.clone(),
        });
    }
    assert_eq!(seen, ids(&all));
}
