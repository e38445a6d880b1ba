//! Statements of `conversation_turns`; see [`TurnStore`](crate::store::TurnStore). A ticket is
//! the conversation's highest plus one, computed in the INSERT: two replicas that compute the
//! same one collide on the primary key, and the loser takes the next.

/// `$8`: take a ticket even when the conversation has rows (`false`: only when it has none).
pub const TAKE_TURN: &str = "INSERT INTO conversation_turns \
     (user_id, conversation_id, ticket, run_id, agent, message, busy, state, created_at, attachments) \
     SELECT $1, $2, t.next_ticket, $3, $4, $5, $6, 'queued', $7, $9 FROM \
     (SELECT COALESCE(MAX(ticket), 0) + 1 AS next_ticket, COUNT(*) AS rows_now \
      FROM conversation_turns WHERE user_id = $1 AND conversation_id = $2) t \
     WHERE $8 OR t.rows_now = 0 RETURNING ticket";

pub const LIST_TURNS: &str = "SELECT ticket, run_id, agent, message, busy, state, created_at, \
     attachments, joined_to \
     FROM conversation_turns WHERE user_id = $1 AND conversation_id = $2 ORDER BY ticket";

pub const START_TURN: &str =
    "UPDATE conversation_turns SET state = 'answering' WHERE run_id = $1 AND state = 'queued'";

pub const END_TURN: &str = "DELETE FROM conversation_turns WHERE run_id = $1";

/// Touches the run's row while it holds the turn: in a transaction this locks the row (on
/// PostgreSQL; SQLite's writer is one), so the turn cannot be passed on before the commit.
pub const HOLD_TURN: &str = "UPDATE conversation_turns SET state = 'answering' \
     WHERE user_id = $1 AND conversation_id = $2 AND run_id = $3 AND state = 'answering'";

/// A queued `steer` message joins the answer of `$4` (it is not withdrawn meanwhile).
pub const JOIN_TURN: &str = "UPDATE conversation_turns SET state = 'joined', joined_to = $4 \
     WHERE user_id = $1 AND conversation_id = $2 AND run_id = $3 AND state = 'queued'";

pub const WITHDRAW_TURN: &str = "DELETE FROM conversation_turns \
     WHERE user_id = $1 AND conversation_id = $2 AND run_id = $3 AND state = 'queued'";

/// How often a ticket is taken again after colliding with another replica's.
pub const TICKET_ATTEMPTS: usize = 8;

#[derive(sqlx::FromRow)]
pub struct TurnRow {
    ticket: i64,
    run_id: String,
    agent: String,
    message: String,
    busy: String,
    state: String,
    created_at: chrono::DateTime<chrono::Utc>,
    attachments: Option<sqlx::types::Json<serde_json::Value>>,
    joined_to: Option<String>,
}

impl From<TurnRow> for crate::store::Turn {
    fn from(row: TurnRow) -> Self {
        Self {
            ticket: row.ticket,
            run_id: row.run_id,
            agent: row.agent,
            message: row.message,
            busy: row.busy,
            state: crate::store::TurnState::parse(&row.state),
            attachments: row.attachments.map(|json| json.0),
            joined_to: row.joined_to,
            created_at: row.created_at,
        }
    }
}

/// Implements [`TurnStore`](crate::store::TurnStore) for a backend.
macro_rules! impl_turn_store {
    ($store:ty, $db:ty) => {
        #[async_trait::async_trait]
        impl $crate::store::TurnStore for $store {
            async fn take_turn(
                &self,
                turn: &$crate::store::NewTurn,
                only_when_free: bool,
            ) -> Result<Option<i64>, $crate::store::StoreError> {
                use $crate::store::sql::{at, turns as sql};
                let mut last = None;
                for _ in 0..sql::TICKET_ATTEMPTS {
                    let taken = sqlx::query_scalar::<_, i64>(sql::TAKE_TURN)
                        .bind(&turn.user_id)
                        .bind(&turn.conversation_id)
                        .bind(&turn.run_id)
                        .bind(&turn.agent)
                        .bind(&turn.message)
                        .bind(&turn.busy)
                        .bind(at(turn.created_at))
                        .bind(!only_when_free)
                        .bind(turn.attachments.as_ref().map(sqlx::types::Json))
                        .fetch_optional(&self.writer)
                        .await;
                    match taken {
                        Ok(ticket) => return Ok(ticket),
                        Err(error)
                            if error
                                .as_database_error()
                                .is_some_and(|db| db.is_unique_violation()) =>
                        {
                            // Another message took this ticket at the same time.
                            if only_when_free {
                                return Ok(None);
                            }
                            last = Some(error);
                        }
                        Err(error) => return Err(error.into()),
                    }
                }
                Err(last.map_or(
                    $crate::store::StoreError::Conflict {
                        what: "conversation turn",
                        id: turn.run_id.clone(),
                    },
                    Into::into,
                ))
            }

            async fn conversation_turns(
                &self,
                user_id: &str,
                conversation_id: &str,
            ) -> Result<Vec<$crate::store::Turn>, $crate::store::StoreError> {
                use $crate::store::sql::turns as sql;
                let rows = sqlx::query_as::<_, sql::TurnRow>(sql::LIST_TURNS)
                    .bind(user_id)
                    .bind(conversation_id)
                    .fetch_all(&self.writer)
                    .await?;
                Ok(rows.into_iter().map(Into::into).collect())
            }

            async fn start_turn(&self, run_id: &str) -> Result<bool, $crate::store::StoreError> {
                use $crate::store::sql::turns as sql;
                let done = sqlx::query(sql::START_TURN)
                    .bind(run_id)
                    .execute(&self.writer)
                    .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn end_turn(&self, run_id: &str) -> Result<bool, $crate::store::StoreError> {
                use $crate::store::sql::turns as sql;
                let done = sqlx::query(sql::END_TURN)
                    .bind(run_id)
                    .execute(&self.writer)
                    .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn append_answer_holding_turn(
                &self,
                user_id: &str,
                conversation_id: &str,
                run_id: &str,
                messages: &[$crate::store::NewMessage],
            ) -> Result<bool, $crate::store::StoreError> {
                use $crate::store::sql::turns as sql;
                let mut tx = self.begin_write().await?;
                let held = sqlx::query(sql::HOLD_TURN)
                    .bind(user_id)
                    .bind(conversation_id)
                    .bind(run_id)
                    .execute(&mut *tx)
                    .await?;
                if held.rows_affected() == 0 {
                    return Ok(false);
                }
                Self::append_messages_in(&mut tx, user_id, conversation_id, messages).await?;
                tx.commit().await?;
                Ok(true)
            }

            async fn join_steering_turns(
                &self,
                user_id: &str,
                conversation_id: &str,
                head: &str,
                joined_at: chrono::DateTime<chrono::Utc>,
            ) -> Result<Vec<$crate::store::Turn>, $crate::store::StoreError> {
                use $crate::store::sql::turns as sql;
                let mut tx = self.begin_write().await?;
                let held = sqlx::query(sql::HOLD_TURN)
                    .bind(user_id)
                    .bind(conversation_id)
                    .bind(head)
                    .execute(&mut *tx)
                    .await?;
                if held.rows_affected() == 0 {
                    return Ok(Vec::new());
                }
                let turns: Vec<$crate::store::Turn> =
                    sqlx::query_as::<_, sql::TurnRow>(sql::LIST_TURNS)
                        .bind(user_id)
                        .bind(conversation_id)
                        .fetch_all(&mut *tx)
                        .await?
                        .into_iter()
                        .map(Into::into)
                        .collect();
                let mut joined = Vec::new();
                for turn in $crate::store::Turn::steering_behind(&turns, head) {
                    let done = sqlx::query(sql::JOIN_TURN)
                        .bind(user_id)
                        .bind(conversation_id)
                        .bind(&turn.run_id)
                        .bind(head)
                        .execute(&mut *tx)
                        .await?;
                    if done.rows_affected() == 0 {
                        // Withdrawn meanwhile: the ones after it wait for their own turn.
                        break;
                    }
                    let mut turn = turn.clone();
                    turn.state = $crate::store::TurnState::Joined;
                    turn.joined_to = Some(head.to_string());
                    joined.push(turn);
                }
                if joined.is_empty() {
                    return Ok(joined);
                }
                let messages: Vec<$crate::store::NewMessage> = joined
                    .iter()
                    .map(|turn| turn.as_user_message(joined_at))
                    .collect();
                Self::append_messages_in(&mut tx, user_id, conversation_id, &messages).await?;
                tx.commit().await?;
                Ok(joined)
            }

            async fn withdraw_turn(
                &self,
                user_id: &str,
                conversation_id: &str,
                run_id: &str,
            ) -> Result<bool, $crate::store::StoreError> {
                use $crate::store::sql::turns as sql;
                let done = sqlx::query(sql::WITHDRAW_TURN)
                    .bind(user_id)
                    .bind(conversation_id)
                    .bind(run_id)
                    .execute(&self.writer)
                    .await?;
                Ok(done.rows_affected() > 0)
            }
        }
    };
}
pub(crate) use impl_turn_store;
