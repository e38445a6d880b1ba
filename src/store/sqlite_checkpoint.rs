//! SQLite's WAL checkpoints, off the writer connection. SQLite checkpoints on the connection
//! whose commit crosses `wal_autocheckpoint` pages, and with `synchronous=NORMAL` a checkpoint
//! is where the `fsync`s are: two per checkpoint, ~11 ms each on a virtual disk, during which
//! that connection (agentd's one writer) commits nothing, and every response waiting for its
//! run's end to be stored waits too (at 1,000 requests/s a checkpoint came every ~90 runs: p90
//! 21 ms instead of 3). So the writer's automatic checkpoints are off and a task of its own
//! runs `PRAGMA wal_checkpoint(PASSIVE)` on a connection of its own: a passive checkpoint waits
//! for no writer and no writer waits for it.
//!
//! A passive checkpoint alone never lets the WAL start over while runs keep coming: SQLite
//! writes from the WAL's beginning again only when a write transaction finds every frame
//! copied into the database, and commits land while each checkpoint syncs. Under steady load
//! the WAL grew by every commit (80 MB/s at 1,000 runs/s) and every write extended the file.
//! So once the WAL holds [`CheckpointPolicy::restart_frames`], the task checkpoints once more
//! holding the writer connection (the few frames since its last pass and two `fsync`s, while
//! commits wait), and the next commit starts the WAL over, within the file it already has
//! (`journal_size_limit` trims it to that size). When a look finds nothing written since the
//! last one and the WAL file larger than [`CheckpointPolicy::idle_wal_bytes`], the WAL is
//! truncated to nothing, holding the writer connection too. (Idle means between two looks:
//! the replica's heartbeat writes every few seconds even with no run.)
//!
//! Holding the writer connection (taken from its pool) keeps commits waiting on the pool
//! rather than sleeping in SQLite's busy handler; the checkpoints themselves run on the task's
//! connection, whose busy timeout is zero: a truncation that would have to wait for a reader
//! (a long export, say) gives up at once and is tried at the next quiet look, instead of
//! holding the writer, and every response waiting on it, for the busy timeout.
//!
//! The task ends when the store drops its [`Checkpoints`].

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqlitePool};
use sqlx::{Connection, SqliteExecutor};
use tokio_util::sync::{CancellationToken, DropGuard};

/// When and how far the task checkpoints.
#[derive(Debug, Clone, Copy)]
pub struct CheckpointPolicy {
    /// How often the WAL is checkpointed while the database is written.
    pub every: Duration,
    /// WAL frames (pages) past which the writer stops for one checkpoint so the WAL starts over.
    pub restart_frames: i64,
    /// A WAL file larger than this is truncated at a look that finds nothing written since.
    pub idle_wal_bytes: u64,
}

impl CheckpointPolicy {
    /// Every 200 ms; the WAL starts over past 8,192 frames (32 MiB with 4 KiB pages: at 1,000
    /// runs/s and ~16 pages per run every ~0.5 s, at 100 runs/s every ~5 s); truncated once
    /// quiet past 4 MiB (SQLite's own default checkpoint size).
    pub const SERVER: Self = Self {
        every: Duration::from_millis(200),
        restart_frames: 8_192,
        idle_wal_bytes: 4 * 1024 * 1024,
    };

    /// `options` with the writer's settings: no checkpoints of its own, and a WAL that starts
    /// over is trimmed to about the size it reaches before it does (`journal_size_limit`, in
    /// bytes).
    pub fn writer_options(&self, options: SqliteConnectOptions) -> SqliteConnectOptions {
        const FRAME_BYTES: i64 = 4_096 + 24;
        let journal_limit = self
            .restart_frames
            .saturating_add(1_024)
            .saturating_mul(FRAME_BYTES);
        options
            .pragma("wal_autocheckpoint", "0")
            .pragma("journal_size_limit", journal_limit.to_string())
    }
}

/// What `PRAGMA wal_checkpoint` answers: whether it was blocked, the WAL's frames, and how
/// many of them are in the database file now.
#[derive(Debug, Clone, Copy, sqlx::FromRow)]
struct CheckpointStatus {
    busy: i64,
    log: i64,
    checkpointed: i64,
}

/// The running checkpoint task; stops when dropped.
pub struct Checkpoints {
    _stop: DropGuard,
}

impl Checkpoints {
    /// Opens the checkpointing connection with `options` (the store's, read-write) and starts
    /// its task, which checkpoints when `written` was marked ([`Self::mark_written`]) since
    /// its last look, and borrows a connection of `writer` (the one-connection writer pool)
    /// to start the WAL over or truncate it.
    pub async fn start(
        options: SqliteConnectOptions,
        writer: SqlitePool,
        written: Arc<AtomicBool>,
        policy: CheckpointPolicy,
    ) -> Result<Self, sqlx::Error> {
        let wal_file = options.get_filename().with_extension("db-wal");
        let connection =
            SqliteConnection::connect_with(&options.busy_timeout(Duration::ZERO)).await?;
        let stop = CancellationToken::new();
        let task = CheckpointTask {
            connection,
            writer,
            written,
            policy,
            wal_file,
            warned: false,
        };
        tokio::spawn(task.run(stop.clone()));
        Ok(Self {
            _stop: stop.drop_guard(),
        })
    }

    /// Marks the WAL as possibly grown since the last checkpoint.
    pub fn mark_written(flag: &AtomicBool) {
        flag.store(true, Ordering::Relaxed);
    }
}

struct CheckpointTask {
    connection: SqliteConnection,
    writer: SqlitePool,
    written: Arc<AtomicBool>,
    policy: CheckpointPolicy,
    wal_file: std::path::PathBuf,
    warned: bool,
}

impl CheckpointTask {
    async fn run(mut self, stop: CancellationToken) {
        loop {
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(self.policy.every) => {}
            }
            let outcome = self.tick().await;
            self.report(outcome);
        }
        let _ = self.connection.close().await;
    }

    /// One look: a passive checkpoint after writes (and a restart on the writer past the
    /// policy's frames), a truncation of a large WAL when nothing was written since the last.
    async fn tick(&mut self) -> Result<(), sqlx::Error> {
        if self.written.swap(false, Ordering::Relaxed) {
            let status = checkpoint(&mut self.connection, Mode::Passive).await?;
            if status.log >= self.policy.restart_frames {
                self.restart_on_writer().await?;
            }
            return Ok(());
        }
        let wal_bytes = tokio::fs::metadata(&self.wal_file)
            .await
            .map_or(0, |metadata| metadata.len());
        if wal_bytes > self.policy.idle_wal_bytes {
            let writer = self.writer.acquire().await?;
            let truncated = checkpoint(&mut self.connection, Mode::Truncate).await;
            drop(writer);
            // The borrowed writer marked the database written on its way back.
            self.written.store(false, Ordering::Relaxed);
            if let Err(error) = truncated
                && !is_busy(&error)
            {
                return Err(error);
            }
        }
        Ok(())
    }

    /// Checkpoints holding the writer: no commit lands meanwhile, so every frame reaches the
    /// database file (unless a reader still reads an older snapshot: then next time) and the
    /// next commit writes the WAL from its beginning.
    async fn restart_on_writer(&mut self) -> Result<(), sqlx::Error> {
        let started = std::time::Instant::now();
        let writer = self.writer.acquire().await?;
        let status = checkpoint(&mut self.connection, Mode::Passive).await;
        drop(writer);
        let status = status?;
        let held_ms = started.elapsed().as_secs_f64() * 1e3;
        if status.busy != 0 || status.checkpointed < status.log {
            // A reader still reads an older snapshot: the next look tries again.
            tracing::debug!(
                frames = status.log,
                copied = status.checkpointed,
                held_ms,
                "the SQLite WAL cannot start over yet"
            );
        } else {
            tracing::debug!(frames = status.log, held_ms, "the SQLite WAL starts over");
        }
        Ok(())
    }

    fn report(&mut self, outcome: Result<(), sqlx::Error>) {
        match outcome {
            Ok(()) => self.warned = false,
            Err(error) if !self.warned => {
                self.warned = true;
                tracing::warn!(%error, "the SQLite WAL could not be checkpointed; retrying");
            }
            Err(_) => {}
        }
    }
}

/// Whether SQLite answered `SQLITE_BUSY` (a reader or writer the checkpoint would wait for).
fn is_busy(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|db| db.code())
        .is_some_and(|code| code == "5")
}

/// SQLite's checkpoint modes used here.
#[derive(Debug, Clone, Copy)]
enum Mode {
    /// Copies what no reader still needs; waits for nobody.
    Passive,
    /// Copies everything, then empties the WAL file (waits for readers and the writer).
    Truncate,
}

async fn checkpoint<'c>(
    connection: impl SqliteExecutor<'c>,
    mode: Mode,
) -> Result<CheckpointStatus, sqlx::Error> {
    let pragma = match mode {
        Mode::Passive => "PRAGMA wal_checkpoint(PASSIVE)",
        Mode::Truncate => "PRAGMA wal_checkpoint(TRUNCATE)",
    };
    sqlx::query_as::<_, CheckpointStatus>(pragma)
        .fetch_one(connection)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::sqlite::SqlitePoolOptions;
    use std::path::{Path, PathBuf};
    use std::str::FromStr;

    /// A database in `dir` and a one-connection writer pool set up as the store sets its own.
    async fn writer_pool(
        dir: &Path,
        policy: CheckpointPolicy,
    ) -> (PathBuf, SqliteConnectOptions, SqlitePool, Arc<AtomicBool>) {
        let path = dir.join("c.db");
        let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))
            .expect("url")
            .create_if_missing(true)
            .journal_mode(sqlx::sqlite::SqliteJournalMode::Wal);
        let written = Arc::new(AtomicBool::new(false));
        let marked = written.clone();
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .after_release(move |_, _| {
                Checkpoints::mark_written(&marked);
                Box::pin(async { Ok(true) })
            })
            .connect_with(policy.writer_options(options.clone()))
            .await
            .expect("writer");
        sqlx::query("CREATE TABLE t (v BLOB)")
            .execute(&writer)
            .await
            .expect("table");
        (path, options, writer, written)
    }

    async fn insert_pages(writer: &SqlitePool, rows: usize) {
        for _ in 0..rows {
            sqlx::query("INSERT INTO t VALUES (zeroblob(4096))")
                .execute(writer)
                .await
                .expect("insert");
        }
    }

    fn size(path: &Path) -> u64 {
        std::fs::metadata(path).map_or(0, |m| m.len())
    }

    /// Polls `condition` for up to 5 s; fails with `what` if it never holds.
    async fn eventually(what: &str, condition: impl Fn() -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !condition() {
            assert!(tokio::time::Instant::now() < deadline, "{what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Looks every 10 ms, truncates a quiet WAL past 100 KiB.
    const TRUNCATING: CheckpointPolicy = CheckpointPolicy {
        every: Duration::from_millis(10),
        restart_frames: 8_192,
        idle_wal_bytes: 100 * 1024,
    };

    #[tokio::test]
    async fn writes_reach_the_database_file_without_the_writer_checkpointing() {
        let dir = tempfile::tempdir().expect("dir");
        let policy = CheckpointPolicy {
            idle_wal_bytes: u64::MAX,
            ..CheckpointPolicy::SERVER
        };
        let (path, options, writer, written) = writer_pool(dir.path(), policy).await;
        insert_pages(&writer, 200).await;
        let wal = path.with_extension("db-wal");
        assert!(size(&path) < 100 * 4096, "the writer did not checkpoint");
        assert!(size(&wal) > 200 * 4096);
        written.store(true, Ordering::Relaxed);
        let _checkpoints = Checkpoints::start(options, writer, written.clone(), policy)
            .await
            .expect("start");
        eventually("no checkpoint", || size(&path) >= 200 * 4096).await;
        tokio::time::sleep(policy.every * 2).await;
        // Nothing written since: the task runs no statement.
        assert!(!written.load(Ordering::Relaxed));
    }

    #[tokio::test]
    async fn the_wal_starts_over_while_writes_keep_coming() {
        let dir = tempfile::tempdir().expect("dir");
        let policy = CheckpointPolicy {
            every: Duration::from_millis(10),
            restart_frames: 64,
            idle_wal_bytes: u64::MAX,
        };
        let (path, options, writer, written) = writer_pool(dir.path(), policy).await;
        let _checkpoints = Checkpoints::start(options, writer.clone(), written, policy)
            .await
            .expect("start");
        // ~4,500 frames written back to back: without the restart the WAL holds them all
        // (19 MB); with it, it starts over whenever the task finds it past 64 frames.
        for _ in 0..1_500 {
            insert_pages(&writer, 1).await;
        }
        let wal = size(&path.with_extension("db-wal"));
        assert!(wal < 2 * 1024 * 1024, "the WAL grew to {wal} bytes");
        let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM t")
            .fetch_one(&writer)
            .await
            .expect("count");
        assert_eq!(rows, 1_500);
    }

    #[tokio::test]
    async fn a_quiet_database_gets_a_large_wal_truncated() {
        let dir = tempfile::tempdir().expect("dir");
        let policy = TRUNCATING;
        let (path, options, writer, written) = writer_pool(dir.path(), policy).await;
        let _checkpoints = Checkpoints::start(options, writer.clone(), written, policy)
            .await
            .expect("start");
        insert_pages(&writer, 50).await;
        let wal = path.with_extension("db-wal");
        eventually("the WAL was not truncated", || size(&wal) == 0).await;
        assert!(
            size(&path) >= 50 * 4096,
            "the rows are in the database file"
        );
        // A WAL smaller than the policy's size stays as it is.
        insert_pages(&writer, 1).await;
        tokio::time::sleep(policy.every * 10).await;
        assert!(size(&wal) > 0, "a small WAL was truncated");
    }

    /// A truncation that would have to wait for a reader gives up at once: the writer, held
    /// meanwhile, is never held for the busy timeout (5 s) behind a long read.
    #[tokio::test]
    async fn a_truncation_never_holds_the_writer_waiting_for_a_reader() {
        let dir = tempfile::tempdir().expect("dir");
        let policy = TRUNCATING;
        let (path, options, writer, written) = writer_pool(dir.path(), policy).await;
        let mut reader = SqliteConnection::connect_with(&options)
            .await
            .expect("reader");
        let _checkpoints = Checkpoints::start(options, writer.clone(), written, policy)
            .await
            .expect("start");
        insert_pages(&writer, 50).await;
        // A long read: its snapshot needs the WAL's frames, so the WAL cannot be truncated.
        sqlx::query("BEGIN")
            .execute(&mut reader)
            .await
            .expect("begin");
        let _: i64 = sqlx::query_scalar("SELECT count(*) FROM t")
            .fetch_one(&mut reader)
            .await
            .expect("read");
        insert_pages(&writer, 50).await;
        // Quiet looks try to truncate meanwhile.
        tokio::time::sleep(policy.every * 20).await;
        for _ in 0..5 {
            let started = std::time::Instant::now();
            insert_pages(&writer, 1).await;
            assert!(
                started.elapsed() < Duration::from_secs(1),
                "a commit waited {:?} behind the truncation",
                started.elapsed()
            );
            tokio::time::sleep(policy.every * 5).await;
        }
        sqlx::query("COMMIT")
            .execute(&mut reader)
            .await
            .expect("end");
        let wal = path.with_extension("db-wal");
        eventually("the WAL was not truncated once the read ended", || {
            size(&wal) == 0
        })
        .await;
    }
}
