//! Statements of `a2a_push_configs`; see [`PushConfigStore`](crate::store::PushConfigStore).

macro_rules! push_config_columns {
    () => {
        "task_id, owner, id, url, token, auth_scheme, auth_credentials, dialect, created_at"
    };
}

pub const UPSERT: &str = concat!(
    "INSERT INTO a2a_push_configs (",
    push_config_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (task_id, owner, id) DO UPDATE \
     SET url = excluded.url, token = excluded.token, auth_scheme = excluded.auth_scheme, \
     auth_credentials = excluded.auth_credentials, dialect = excluded.dialect"
);
pub const SELECT_ONE: &str = concat!(
    "SELECT ",
    push_config_columns!(),
    " FROM a2a_push_configs WHERE task_id = $1 AND owner = $2 AND id = $3"
);
pub const LIST_OWNERS: &str = concat!(
    "SELECT ",
    push_config_columns!(),
    " FROM a2a_push_configs WHERE task_id = $1 AND owner = $2 ORDER BY created_at, id"
);
pub const LIST_ALL: &str = concat!(
    "SELECT ",
    push_config_columns!(),
    " FROM a2a_push_configs WHERE task_id = $1 ORDER BY created_at, id"
);
pub const DELETE: &str =
    "DELETE FROM a2a_push_configs WHERE task_id = $1 AND owner = $2 AND id = $3";

#[derive(sqlx::FromRow)]
pub struct PushConfigRow {
    task_id: String,
    owner: String,
    id: String,
    url: String,
    token: Option<String>,
    auth_scheme: Option<String>,
    auth_credentials: Option<String>,
    dialect: String,
    created_at: chrono::DateTime<chrono::Utc>,
}

impl From<PushConfigRow> for crate::store::PushConfig {
    fn from(row: PushConfigRow) -> Self {
        Self {
            task_id: row.task_id,
            owner: row.owner,
            id: row.id,
            url: row.url,
            token: row.token,
            auth_scheme: row.auth_scheme,
            auth_credentials: row.auth_credentials,
            dialect: row.dialect,
            created_at: row.created_at,
        }
    }
}

/// Implements [`PushConfigStore`](crate::store::PushConfigStore) for a backend.
macro_rules! impl_push_config_store {
    ($store:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::PushConfigStore for $store {
            async fn put_push_config(
                &self,
                config: &$crate::store::PushConfig,
            ) -> Result<(), $crate::store::StoreError> {
                use $crate::store::sql::{at, push_configs as sql};
                self.push_config_stored();
                sqlx::query(sql::UPSERT)
                    .bind(&config.task_id)
                    .bind(&config.owner)
                    .bind(&config.id)
                    .bind(&config.url)
                    .bind(&config.token)
                    .bind(&config.auth_scheme)
                    .bind(&config.auth_credentials)
                    .bind(&config.dialect)
                    .bind(at(config.created_at))
                    .execute(&self.writer)
                    .await?;
                Ok(())
            }

            async fn push_config(
                &self,
                task_id: &str,
                owner: &str,
                id: &str,
            ) -> Result<Option<$crate::store::PushConfig>, $crate::store::StoreError> {
                use $crate::store::sql::push_configs as sql;
                let row = sqlx::query_as::<_, sql::PushConfigRow>(sql::SELECT_ONE)
                    .bind(task_id)
                    .bind(owner)
                    .bind(id)
                    .fetch_optional(&self.writer)
                    .await?;
                Ok(row.map(Into::into))
            }

            async fn list_push_configs(
                &self,
                task_id: &str,
                owner: Option<&str>,
            ) -> Result<Vec<$crate::store::PushConfig>, $crate::store::StoreError> {
                use $crate::store::sql::push_configs as sql;
                if !self.may_hold_push_configs() {
                    return Ok(Vec::new());
                }
                let query = match owner {
                    Some(owner) => sqlx::query_as::<_, sql::PushConfigRow>(sql::LIST_OWNERS)
                        .bind(task_id)
                        .bind(owner),
                    None => sqlx::query_as::<_, sql::PushConfigRow>(sql::LIST_ALL).bind(task_id),
                };
                let rows = query.fetch_all(&self.writer).await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }

            async fn delete_push_config(
                &self,
                task_id: &str,
                owner: &str,
                id: &str,
            ) -> Result<bool, $crate::store::StoreError> {
                use $crate::store::sql::push_configs as sql;
                let done = sqlx::query(sql::DELETE)
                    .bind(task_id)
                    .bind(owner)
                    .bind(id)
                    .execute(&self.writer)
                    .await?;
                Ok(done.rows_affected() > 0)
            }
        }
    };
}
pub(crate) use impl_push_config_store;
