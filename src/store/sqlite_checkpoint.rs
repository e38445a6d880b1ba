//! SQLite's WAL checkpoints, off the writer connection. SQLite checkpoints on the connection
//! whose commit crosses `wal_autocheckpoint` pages, and with `synchronous=NORMAL` a checkpoint
//! is where the `fsync`s are: two per checkpoint, ~11 ms each on a virtual disk, during which
//! that connection (agentd's one writer) commits nothing, and every response waiting for its
//! run's end to be stored waits too (at 1,000 requests/s a checkpoint came every ~90 runs: p90
//! 21 ms instead of 3). So the writer's automatic checkpoints are off and a task of its own
//! runs `PRAGMA wal_checkpoint(PASSIVE)` on a connection of its own: a passive checkpoint waits
//! for no writer and no writer waits for it.
//!
//! The task checkpoints every [`CHECKPOINT_EVERY`] when the writer was used since the last one
//! (an idle server runs no statement), and ends when the store drops its [`Checkpoints`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::Connection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use tokio_util::sync::{CancellationToken, DropGuard};

/// How often the WAL is checkpointed while the database is written. At 1,000 runs/s the WAL
/// then holds at most a few thousand pages (~10 MB) between checkpoints.
pub const CHECKPOINT_EVERY: Duration = Duration::from_millis(200);

/// The writer's setting that turns its own checkpoints off.
pub const WRITER_AUTOCHECKPOINT: (&str, &str) = ("wal_autocheckpoint", "0");

/// The running checkpoint task; stops when dropped.
pub struct Checkpoints {
    _stop: DropGuard,
}

impl Checkpoints {
    /// Opens the checkpointing connection with `options` (the store's, read-write) and starts
    /// its task, which checkpoints when `written` was marked ([`Self::mark_written`]) since
    /// its last look.
    pub async fn start(
        options: SqliteConnectOptions,
        written: Arc<AtomicBool>,
    ) -> Result<Self, sqlx::Error> {
        let connection = SqliteConnection::connect_with(&options).await?;
        let stop = CancellationToken::new();
        tokio::spawn(run(connection, written, stop.clone()));
        Ok(Self {
            _stop: stop.drop_guard(),
        })
    }

    /// Marks the WAL as possibly grown since the last checkpoint.
    pub fn mark_written(flag: &AtomicBool) {
        flag.store(true, Ordering::Relaxed);
    }
}

async fn run(mut connection: SqliteConnection, written: Arc<AtomicBool>, stop: CancellationToken) {
    let mut warned = false;
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(CHECKPOINT_EVERY) => {}
        }
        if !written.swap(false, Ordering::Relaxed) {
            continue;
        }
        match sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .execute(&mut connection)
            .await
        {
            Ok(_) => warned = false,
            Err(error) if !warned => {
                warned = true;
                tracing::warn!(%error, "the SQLite WAL could not be checkpointed; retrying");
            }
            Err(_) => {}
        }
    }
    let _ = connection.close().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    #[tokio::test]
    async fn writes_reach_the_database_file_without_the_writer_checkpointing() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("c.db");
        let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))
            .expect("url")
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
            .pragma(WRITER_AUTOCHECKPOINT.0, WRITER_AUTOCHECKPOINT.1);
        let mut writer = SqliteConnection::connect_with(&options)
            .await
            .expect("writer");
        sqlx::query("CREATE TABLE t (v BLOB)")
            .execute(&mut writer)
            .await
            .expect("table");
        for _ in 0..200 {
            sqlx::query("INSERT INTO t VALUES (zeroblob(4096))")
                .execute(&mut writer)
                .await
                .expect("insert");
        }
        let wal = path.with_extension("db-wal");
        let db_size = || std::fs::metadata(&path).map_or(0, |m| m.len());
        assert!(db_size() < 100 * 4096, "the writer did not checkpoint");
        assert!(std::fs::metadata(&wal).map_or(0, |m| m.len()) > 200 * 4096);
        let written = Arc::new(AtomicBool::new(true));
        let _checkpoints = Checkpoints::start(options, written.clone())
            .await
            .expect("start");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while db_size() < 200 * 4096 {
            assert!(tokio::time::Instant::now() < deadline, "no checkpoint");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // Nothing written since: the task runs no statement.
        assert!(!written.load(Ordering::Relaxed));
    }
}
