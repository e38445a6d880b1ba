//! Statements and rows of `responses`.

use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::types::Json;

use crate::store::StoredResponse;

pub const INSERT: &str = "INSERT INTO responses \
     (id, run_id, user_key, previous_response_id, request, input_items, created_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7)";

pub const SELECT: &str = "SELECT id, run_id, user_key, previous_response_id, request, input_items, created_at \
     FROM responses WHERE user_key = $1 AND id = $2";

pub const DELETE: &str = "DELETE FROM responses WHERE user_key = $1 AND id = $2";

#[derive(sqlx::FromRow)]
pub struct ResponseRow {
    id: String,
    run_id: String,
    user_key: String,
    previous_response_id: Option<String>,
    request: Json<Value>,
    input_items: Json<Value>,
    created_at: DateTime<Utc>,
}

impl From<ResponseRow> for StoredResponse {
    fn from(row: ResponseRow) -> Self {
        Self {
            id: row.id,
            run_id: row.run_id,
            user_key: row.user_key,
            previous_response_id: row.previous_response_id,
            request: row.request.0,
            input_items: row.input_items.0,
            created_at: row.created_at,
        }
    }
}

/// Implements [`ResponseStore`](crate::store::ResponseStore) for a backend.
macro_rules! impl_response_store {
    ($store:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::ResponseStore for $store {
            async fn put_response(
                &self,
                response: &$crate::store::StoredResponse,
            ) -> Result<(), $crate::store::StoreError> {
                use $crate::store::sql::{at, conflict_or_query, responses as sql};
                sqlx::query(sql::INSERT)
                    .bind(&response.id)
                    .bind(&response.run_id)
                    .bind(&response.user_key)
                    .bind(&response.previous_response_id)
                    .bind(sqlx::types::Json(&response.request))
                    .bind(sqlx::types::Json(&response.input_items))
                    .bind(at(response.created_at))
                    .execute(&self.writer)
                    .await
                    .map_err(|error| conflict_or_query(error, "response", &response.id))?;
                Ok(())
            }

            async fn get_response(
                &self,
                user_key: &str,
                id: &str,
            ) -> Result<Option<$crate::store::StoredResponse>, $crate::store::StoreError> {
                use $crate::store::sql::responses as sql;
                let row = sqlx::query_as::<_, sql::ResponseRow>(sql::SELECT)
                    .bind(user_key)
                    .bind(id)
                    .fetch_optional(&self.reader)
                    .await?;
                Ok(row.map(Into::into))
            }

            async fn delete_response(
                &self,
                user_key: &str,
                id: &str,
            ) -> Result<bool, $crate::store::StoreError> {
                use $crate::store::sql::responses as sql;
                let done = sqlx::query(sql::DELETE)
                    .bind(user_key)
                    .bind(id)
                    .execute(&self.writer)
                    .await?;
                Ok(done.rows_affected() > 0)
            }
        }
    };
}
pub(crate) use impl_response_store;
