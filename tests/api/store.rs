//! The store: one conformance suite run against SQLite (a temp file) and the local PostgreSQL
//! service (a fresh database per test, dropped after), the response cache on the store and on
//! the local Redis, the counters of per-key limits on both, and what the running server records.

mod api_key_conformance;
mod approval_conformance;
pub(crate) mod backends;
pub(crate) mod cache_conformance;
mod conformance;
mod conversation_checks;
mod file_conformance;
mod governance_conformance;
mod key_limit_conformance;
mod nul_checks;
pub(crate) mod outage;
mod outbox_conformance;
mod push_config_conformance;
mod response_checks;
mod run_listing;
mod secret_conformance;
mod server;

use backends::Backend;

/// One test per check and backend, so a failure names both: the checks of `$suite`, as
/// modules `$sqlite` and `$postgres`.
macro_rules! on_both_backends {
    ($suite:ident => $sqlite:ident, $postgres:ident: $($check:ident),* $(,)?) => {
        mod $sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let backend = super::Backend::sqlite();
                    super::$suite::$check(&backend).await;
                }
            )*
        }
        mod $postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let backend = super::Backend::postgres().await;
                    super::$suite::$check(&backend).await;
                }
            )*
        }
    };
}

on_both_backends!(
    nul_checks => nul_sqlite, nul_postgres:
    nul_from_a_client_is_refused_naming_the_field,
    nul_from_a_model_is_streamed_and_stored_as_the_replacement_character,
    a_row_the_store_refuses_never_holds_back_other_runs,
);

on_both_backends!(
    outbox_conformance => outbox_sqlite, outbox_postgres:
    a_runs_end_is_stored_with_its_notices_and_no_secret,
    erasing_a_user_leaves_everything_while_a_run_has_not_ended,
    the_outbox_says_when_its_next_message_is_due,
    the_schedule_loop_reads_its_next_work_in_one_look,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outbox_postgres_a_run_being_inserted_holds_off_the_users_erasure() {
    let backend = Backend::postgres().await;
    outbox_conformance::a_run_being_inserted_holds_off_the_users_erasure(&backend).await;
}

on_both_backends!(
    response_checks => responses_sqlite, responses_postgres:
    responses_are_kept_per_user_and_deleted_once,
);

on_both_backends!(
    api_key_conformance => api_keys_sqlite, api_keys_postgres:
    api_keys_are_found_by_digest_listed_per_user_rotated_and_revoked_once,
);

on_both_backends!(
    file_conformance => files_sqlite, files_postgres:
    blobs_are_stored_once_read_back_whole_and_go_with_their_last_file,
    chunks_of_abandoned_uploads_are_swept_and_nothing_else,
    erasing_a_user_takes_their_files_and_content_no_one_else_has,
);

on_both_backends!(
    secret_conformance => secrets_sqlite, secrets_postgres:
    secrets_are_kept_per_user_replaced_listed_and_deleted_once,
);

on_both_backends!(
    approval_conformance => approvals_sqlite, approvals_postgres:
    a_parked_run_waits_is_decided_once_and_is_taken_once,
    expired_waits_are_found_refused_to_people_and_cancel_takes_what_waits,
    decisions_made_at_once_record_exactly_one,
    a_run_parked_for_its_budget_is_left_to_a_raise_and_taken_once,
);

on_both_backends!(
    governance_conformance => governance_sqlite, governance_postgres:
    the_audit_chain_verifies_and_names_an_edited_or_missing_row,
    appends_from_two_replicas_at_once_never_fork_the_chain,
    usage_is_summed_per_group_and_scoped_to_a_user,
    retention_sweeps_expired_rows_in_batches_under_one_lease,
);

on_both_backends!(
    push_config_conformance => push_configs_sqlite, push_configs_postgres:
    push_configs_are_kept_per_owner_replaced_and_deleted_once,
    configs_stored_before_or_after_a_store_opens_are_listed,
);

on_both_backends!(
    run_listing => listing_sqlite, listing_postgres:
    runs_are_listed_newest_first_by_filter_and_page,
);

on_both_backends!(
    conformance => sqlite_backend, postgres_backend:
    runs_are_recorded_with_their_outcome_and_accounting,
    run_batches_insert_finish_and_never_undo_a_finished_run,
    a_run_batch_larger_than_one_statement_is_written_whole,
    conversations_are_listed_newest_first_page_by_page,
    conversations_are_renamed_searched_and_truncated,
    no_query_returns_another_users_rows,
    messages_keep_their_order_and_fields,
    concurrent_appenders_get_unique_ordered_seqs,
    run_events_are_listed_in_seq_order_after_a_seq,
    events_sharing_rows_replay_event_for_event_from_any_seq,
    the_last_stored_event_seq_is_found_past_packed_and_retried_rows,
    concurrent_sessions_append_events_without_losing_any,
    data_survives_close_and_reopen,
    page_sizes_are_checked_at_and_past_the_limit,
    cache_entries_expire_and_are_removed,
    cache_evicts_least_recently_used_past_max_entries,
    key_run_slots_are_held_until_released_or_their_lease_runs_out,
    key_run_slots_claimed_by_two_replicas_at_once_stay_within_the_limit,
    key_requests_are_counted_once_each_per_window,
    key_usage_adds_up_per_key_and_day,
);

#[tokio::test]
async fn unsupported_store_urls_are_named() {
    let error = agentd::store::open("mysql://x")
        .await
        .err()
        .expect("rejected")
        .to_string();
    assert!(
        error.contains("mysql://x") && error.contains("sqlite://"),
        "{error}"
    );
}

/// `cargo test` on a machine whose services are installed but stopped: the support starts them.
/// Shown on a private port so the shared Redis is untouched.
#[tokio::test]
async fn the_test_support_starts_an_installed_service_that_is_not_running() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let address = format!("127.0.0.1:{port}");
    assert!(std::net::TcpStream::connect(&address).is_err(), "free");
    tokio::task::spawn_blocking(move || crate::support::services::ensure_local_redis(port))
        .await
        .expect("started");
    let client = redis::Client::open(format!("redis://{address}")).expect("url");
    let mut connection = client
        .get_multiplexed_async_connection()
        .await
        .expect("the started Redis answers");
    let pong: String = redis::cmd("PING")
        .query_async(&mut connection)
        .await
        .expect("ping");
    assert_eq!(pong, "PONG");
    let _: Result<(), _> = redis::cmd("SHUTDOWN")
        .arg("NOSAVE")
        .query_async(&mut connection)
        .await;
}
