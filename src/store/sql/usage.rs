//! The usage report's statement; see [`UsageStore`](crate::store::UsageStore). Only the day of
//! a run differs between the backends (SQLite keeps RFC 3339 text, PostgreSQL a timestamp).

use crate::store::UsageGroup;

/// The report for `group`; `day` is the backend's expression for a run's UTC day.
pub fn statement(group: UsageGroup, day: &str) -> String {
    let (key, join) = match group {
        UsageGroup::User => ("r.user_id", ""),
        UsageGroup::Agent => ("r.agent", ""),
        UsageGroup::Key => ("r.key_id", ""),
        UsageGroup::Day => (day, ""),
        UsageGroup::Model => ("a.model", " AND a.type = 'llm'"),
    };
    format!(
        "SELECT {key} AS \"group\", COUNT(DISTINCT r.id) AS runs, \
         CAST(COALESCE(SUM(a.input_tokens), 0) AS BIGINT) AS input_tokens, \
         CAST(COALESCE(SUM(a.output_tokens), 0) AS BIGINT) AS output_tokens, \
         CAST(COALESCE(SUM(a.cached_tokens), 0) AS BIGINT) AS cached_tokens, \
         CAST(COALESCE(SUM(a.reasoning_tokens), 0) AS BIGINT) AS reasoning_tokens, \
         CAST(COALESCE(SUM(a.cost_usd), 0) AS DOUBLE PRECISION) AS cost_usd, \
         CAST(COALESCE(SUM(CASE WHEN a.type = 'tool' THEN 1 ELSE 0 END), 0) AS BIGINT) AS tool_calls \
         FROM runs r LEFT JOIN run_accounting a ON a.run_id = r.id{join} \
         WHERE r.created_at >= $1 AND r.created_at < $2 AND ($3 IS NULL OR r.user_id = $3) \
         GROUP BY {key} ORDER BY {key} LIMIT $4"
    )
}

/// Implements [`UsageStore`](crate::store::UsageStore) for a backend whose UTC day of
/// `r.created_at` is `$day`.
macro_rules! impl_usage_store {
    ($store:ty, $db:ty, $day:literal) => {
        #[async_trait::async_trait]
        impl $crate::store::UsageStore for $store {
            async fn usage(
                &self,
                query: &$crate::store::UsageQuery,
            ) -> Result<Vec<$crate::store::UsageRow>, $crate::store::StoreError> {
                use $crate::store::sql::at;
                let statement = $crate::store::sql::usage::statement(query.group, $day);
                let rows =
                    sqlx::query_as::<_, $crate::store::UsageRow>(sqlx::AssertSqlSafe(statement))
                        .bind(at(query.from))
                        .bind(at(query.to))
                        .bind(&query.user)
                        .bind($crate::store::MAX_USAGE_GROUPS)
                        .fetch_all(&self.reader)
                        .await?;
                Ok(rows)
            }
        }
    };
}
pub(crate) use impl_usage_store;
