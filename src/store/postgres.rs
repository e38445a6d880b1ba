//! The PostgreSQL backend: the same statements as SQLite over a `PgPool`, with native types
//! (TIMESTAMPTZ, JSONB, BOOLEAN) declared in `migrations/postgres`.

use std::time::Duration;

use sqlx::postgres::{PgPool, PgPoolOptions};

use super::StoreError;

pub struct PostgresStore {
    pool: PgPool,
}

impl PostgresStore {
    pub async fn open(url: &str) -> Result<Self, StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url)
            .await
            .map_err(|source| StoreError::Open {
                url: redact_password(url),
                source,
            })?;
        sqlx::migrate!("./migrations/postgres").run(&pool).await?;
        Ok(Self { pool })
    }
}

/// `postgres://user:secret@host/db` → `postgres://user:***@host/db`, for error messages.
fn redact_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let Some((credentials, host)) = rest.split_once('@') else {
        return url.to_string();
    };
    match credentials.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***@{host}"),
        None => url.to_string(),
    }
}

super::sql::shared_store_impl!(PostgresStore);

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_are_redacted_from_urls() {
        assert_eq!(
            super::redact_password("postgres://u:pw@h/db"),
            "postgres://u:***@h/db"
        );
        assert_eq!(super::redact_password("postgres://h/db"), "postgres://h/db");
    }
}
