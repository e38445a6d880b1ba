//! Statements of the webhook outbox; see [`WebhookStore`](crate::store::WebhookStore). A lease
//! is taken with one UPDATE that re-checks the lease on each row it changes, so two replicas
//! taking due rows at once never both get the same one.

/// The columns every delivery row is read with.
macro_rules! delivery_columns {
    () => {
        "id, url, secret, signer, event, payload, user_id, run_id, headers, status, attempts, \
         next_attempt_at, last_status, last_error, created_at, delivered_at"
    };
}

/// The outbox keeps no secret (`secret` is empty): `signer` names the one looked up when the
/// message is sent.
pub const INSERT_DELIVERY: &str = "INSERT INTO webhook_deliveries \
     (id, url, secret, signer, event, payload, user_id, run_id, headers, status, attempts, \
     next_attempt_at, created_at) VALUES ($1, $2, '', $3, $4, $5, $6, $7, $9, 'pending', 0, $8, $8) \
     ON CONFLICT (id) DO NOTHING";

pub const LEASE_DUE: &str = concat!(
    "UPDATE webhook_deliveries SET lease_holder = $1, lease_until = $2 \
     WHERE id IN (SELECT id FROM webhook_deliveries WHERE status = 'pending' \
       AND next_attempt_at <= $3 AND (lease_until IS NULL OR lease_until < $3) \
       ORDER BY next_attempt_at LIMIT $4) \
     AND status = 'pending' AND (lease_until IS NULL OR lease_until < $3) RETURNING ",
    delivery_columns!()
);

/// When the next pending message is due: its next attempt, or the end of the lease another
/// holder has on it when that is later. No bound parameter, so SQLite keeps one plan for it
/// (the lease above, re-prepared whenever its bound times change, cost an idle replica more
/// than anything else).
pub const NEXT_DUE: &str = "SELECT MIN(CASE WHEN lease_until > next_attempt_at \
     THEN lease_until ELSE next_attempt_at END) FROM webhook_deliveries WHERE status = 'pending'";

pub const RECORD_ATTEMPT: &str = "UPDATE webhook_deliveries SET status = $3, \
     attempts = attempts + 1, next_attempt_at = $4, last_status = $5, last_error = $6, \
     delivered_at = CASE WHEN $3 = 'delivered' THEN $7 ELSE delivered_at END, \
     lease_holder = NULL, lease_until = NULL WHERE id = $1 AND lease_holder = $2";

pub const LIST_ALL: &str = concat!(
    "SELECT ",
    delivery_columns!(),
    " FROM webhook_deliveries ORDER BY created_at DESC, id DESC LIMIT $1"
);

pub const LIST_BY_USER: &str = concat!(
    "SELECT ",
    delivery_columns!(),
    " FROM webhook_deliveries WHERE user_id = $2 ORDER BY created_at DESC, id DESC LIMIT $1"
);

#[derive(sqlx::FromRow)]
pub struct DeliveryRow {
    id: String,
    url: String,
    secret: String,
    signer: Option<String>,
    event: String,
    payload: String,
    user_id: Option<String>,
    run_id: Option<String>,
    headers: Option<String>,
    status: String,
    attempts: i64,
    next_attempt_at: chrono::DateTime<chrono::Utc>,
    last_status: Option<i64>,
    last_error: Option<String>,
    created_at: chrono::DateTime<chrono::Utc>,
    delivered_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl From<DeliveryRow> for crate::store::Delivery {
    fn from(row: DeliveryRow) -> Self {
        Self {
            id: row.id,
            url: row.url,
            signer: row.signer.as_deref().and_then(crate::store::Signer::parse),
            legacy_secret: row.secret,
            event: row.event,
            payload: row.payload,
            user_id: row.user_id,
            run_id: row.run_id,
            headers: row.headers,
            status: crate::store::DeliveryStatus::parse(&row.status),
            attempts: row.attempts,
            next_attempt_at: row.next_attempt_at,
            last_status: row.last_status,
            last_error: row.last_error,
            created_at: row.created_at,
            delivered_at: row.delivered_at,
        }
    }
}

/// Implements [`WebhookStore`](crate::store::WebhookStore) for a backend.
macro_rules! impl_webhook_store {
    ($store:ty, $db:ty) => {
        impl $store {
            /// Wakes this replica's delivery loop once `deliveries` are committed.
            fn deliveries_added(&self, deliveries: &[$crate::store::NewDelivery]) {
                if !deliveries.is_empty() {
                    self.signals.deliveries_added.notify_one();
                }
            }

            /// Inserts messages in `tx` (one already there, by id, is left as it is).
            async fn insert_delivery_rows(
                tx: &mut sqlx::Transaction<'static, $db>,
                deliveries: &[$crate::store::NewDelivery],
            ) -> Result<(), sqlx::Error> {
                use $crate::store::sql::{at, webhooks as sql};
                for delivery in deliveries {
                    sqlx::query(sql::INSERT_DELIVERY)
                        .bind(&delivery.id)
                        .bind(&delivery.url)
                        .bind(delivery.signer.as_str())
                        .bind(&delivery.event)
                        .bind(&delivery.payload)
                        .bind(&delivery.user_id)
                        .bind(&delivery.run_id)
                        .bind(at(delivery.created_at))
                        .bind(&delivery.headers)
                        .execute(&mut **tx)
                        .await?;
                }
                Ok(())
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::WebhookStore for $store {
            async fn enqueue_deliveries(
                &self,
                deliveries: &[$crate::store::NewDelivery],
            ) -> Result<(), $crate::store::StoreError> {
                let mut tx = self.begin_write().await?;
                Self::insert_delivery_rows(&mut tx, deliveries).await?;
                tx.commit().await?;
                self.deliveries_added(deliveries);
                Ok(())
            }

            async fn next_delivery_due(
                &self,
            ) -> Result<Option<chrono::DateTime<chrono::Utc>>, $crate::store::StoreError> {
                use $crate::store::sql::webhooks as sql;
                Ok(sqlx::query_scalar(sql::NEXT_DUE)
                    .fetch_one(&self.reader)
                    .await?)
            }

            fn delivery_wakeup(&self) -> &tokio::sync::Notify {
                &self.signals.deliveries_added
            }

            async fn lease_due_deliveries(
                &self,
                holder: &str,
                now: chrono::DateTime<chrono::Utc>,
                until: chrono::DateTime<chrono::Utc>,
                limit: u32,
            ) -> Result<Vec<$crate::store::Delivery>, $crate::store::StoreError> {
                use $crate::store::sql::{at, webhooks as sql};
                let limit = $crate::store::check_page_size(limit)?;
                let rows = sqlx::query_as::<_, sql::DeliveryRow>(sql::LEASE_DUE)
                    .bind(holder)
                    .bind(at(until))
                    .bind(at(now))
                    .bind(limit)
                    .fetch_all(&self.writer)
                    .await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }

            async fn record_attempt(
                &self,
                id: &str,
                holder: &str,
                outcome: &$crate::store::AttemptOutcome,
            ) -> Result<(), $crate::store::StoreError> {
                use $crate::store::sql::{at, webhooks as sql};
                sqlx::query(sql::RECORD_ATTEMPT)
                    .bind(id)
                    .bind(holder)
                    .bind(outcome.status.as_str())
                    .bind(at(outcome.next_attempt_at))
                    .bind(outcome.http_status)
                    .bind(&outcome.error)
                    .bind(at(outcome.at))
                    .execute(&self.writer)
                    .await?;
                Ok(())
            }

            async fn list_deliveries(
                &self,
                user_id: Option<&str>,
                limit: u32,
            ) -> Result<Vec<$crate::store::Delivery>, $crate::store::StoreError> {
                use $crate::store::sql::webhooks as sql;
                let limit = $crate::store::check_page_size(limit)?;
                let statement = match user_id {
                    Some(_) => sql::LIST_BY_USER,
                    None => sql::LIST_ALL,
                };
                let mut query = sqlx::query_as::<_, sql::DeliveryRow>(statement).bind(limit);
                if let Some(user_id) = user_id {
                    query = query.bind(user_id);
                }
                let rows = query.fetch_all(&self.reader).await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }
        }
    };
}
pub(crate) use impl_webhook_store;
