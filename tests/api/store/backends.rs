//! The databases the store suite runs on: a SQLite file in a temp dir, or a fresh PostgreSQL
//! database on the local service, created for one test and dropped when it ends (even on panic).

use std::sync::Arc;

use agentd::store::Store;
use sqlx::Connection;

pub struct Backend {
    pub url: String,
    /// Kept alive for the test; dropping it deletes the files or the database.
    _sqlite_dir: Option<tempfile::TempDir>,
    _postgres_database: Option<PostgresDatabase>,
}

impl Backend {
    pub fn sqlite() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("store.db").display());
        Self {
            url,
            _sqlite_dir: Some(dir),
            _postgres_database: None,
        }
    }

    pub async fn postgres() -> Self {
        let database = PostgresDatabase::create().await;
        Self {
            url: database.url.clone(),
            _sqlite_dir: None,
            _postgres_database: Some(database),
        }
    }

    /// Opens (and migrates) the store; may be called again after `close` to reopen it.
    pub async fn open(&self) -> Arc<dyn Store> {
        agentd::store::open(&self.url)
            .await
            .unwrap_or_else(|e| panic!("store opens at {}: {e}", self.url))
    }
}

/// The local PostgreSQL service (CI has it); override with AGENTD_TEST_POSTGRES_URL.
/// Without the override, the Debian package's cluster is started when it is installed but down.
pub fn postgres_admin_url() -> String {
    std::env::var("AGENTD_TEST_POSTGRES_URL").unwrap_or_else(|_| {
        crate::support::services::ensure_local_postgres();
        "postgres://postgres@127.0.0.1:5432/test".into()
    })
}

struct PostgresDatabase {
    admin_url: String,
    name: String,
    url: String,
}

impl PostgresDatabase {
    async fn create() -> Self {
        let admin_url = postgres_admin_url();
        let mut admin = sqlx::PgConnection::connect(&admin_url)
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "PostgreSQL is not reachable at {admin_url} ({e}). Start it with \
                     `pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start`, \
                     or point AGENTD_TEST_POSTGRES_URL at a server where the user may create databases."
                )
            });
        let name = format!("agentd_test_{}", uuid::Uuid::new_v4().simple());
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut admin)
            .await
            .expect("create test database");
        let _ = admin.close().await;
        let (base, _) = admin_url.rsplit_once('/').expect("url has a database");
        let url = format!("{base}/{name}");
        Self {
            admin_url,
            name,
            url,
        }
    }
}

impl Drop for PostgresDatabase {
    /// Drop cannot await, and may run inside a runtime: drop the database from a thread of its own.
    fn drop(&mut self) {
        let admin_url = self.admin_url.clone();
        let sql = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name);
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async {
                let mut admin = sqlx::PgConnection::connect(&admin_url).await?;
                sqlx::query(sqlx::AssertSqlSafe(sql))
                    .execute(&mut admin)
                    .await?;
                admin.close().await
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop test database {}", self.name);
        }
    }
}
