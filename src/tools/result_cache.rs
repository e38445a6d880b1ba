//! The tool result cache (reference §7.1 "tool cache"): a tool's successful, non-empty output,
//! kept for the tool's `cache` TTL and given back for an identical call without calling the
//! tool. Identical means the same `namespace__tool` and the same arguments once canonical (object
//! keys sorted, no whitespace), and for `userScoped` agents the same user. Entries live in the
//! response cache's backend (the store's table or Redis), so replicas share them. A cache that
//! fails never fails a call: the failure is logged and the tool is called.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tracing::warn;

use crate::cache::{CacheKey, EntryCache};

/// Marks tool entries apart from run results in the shared backend's key space.
const TOOL_KEY_KIND: &[u8] = b"tool-result/v1";

/// A cached output and how old it is.
#[derive(Debug, Clone, PartialEq)]
pub struct CachedOutput {
    pub output: String,
    pub age_ms: i64,
}

/// Where tool results are cached: the backend the response cache uses.
#[derive(Clone)]
pub struct ToolResultCache {
    backend: Arc<dyn EntryCache>,
}

impl ToolResultCache {
    pub fn new(backend: Arc<dyn EntryCache>) -> Self {
        Self { backend }
    }

    /// The key of a call of `tool` (`namespace__tool`) with `arguments`, for `user` when the
    /// agent is `userScoped` (one user never sees another's cached result).
    pub fn key(tool: &str, arguments: &Value, user: Option<&str>) -> CacheKey {
        let mut canonical = String::new();
        write_canonical(arguments, &mut canonical);
        CacheKey::of_fields(&[
            TOOL_KEY_KIND,
            tool.as_bytes(),
            canonical.as_bytes(),
            user.unwrap_or_default().as_bytes(),
        ])
    }

    /// The live output under `key`, if any.
    pub async fn get(&self, key: &CacheKey) -> Option<CachedOutput> {
        let now = chrono::Utc::now();
        let entry = match self.backend.get_entry(key, now).await {
            Ok(entry) => entry?,
            Err(error) => {
                if !error.is_skipped() {
                    warn!(%error, "tool result cache lookup failed; calling the tool");
                }
                return None;
            }
        };
        let output = entry.value.get("output")?.as_str()?.to_string();
        Some(CachedOutput {
            output,
            age_ms: (now - entry.stored_at).num_milliseconds(),
        })
    }

    /// Keeps `output` of `tool` under `key` for `ttl`; empty outputs are not kept.
    pub async fn put(&self, key: &CacheKey, tool: &str, output: &str, ttl: Duration) {
        if output.trim().is_empty() {
            return;
        }
        let value = json!({ "output": output });
        let owner = format!("tool:{tool}");
        if let Err(error) = self
            .backend
            .put_entry(key, &owner, &value, ttl, chrono::Utc::now())
            .await
            && !error.is_skipped()
        {
            warn!(%error, tool, "could not store the tool result in the cache");
        }
    }
}

/// `value` as JSON with object keys in sorted order and no whitespace, whatever order or
/// spacing the model wrote.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (position, (key, item)) in entries.into_iter().enumerate() {
                if position > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (position, item) in items.iter().enumerate() {
                if position > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        leaf => out.push_str(&leaf.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_and_whitespace_do_not_change_the_key() {
        let written: Value =
            serde_json::from_str(r#"{ "b": [1, {"y": 2, "x": 1}], "a": "q" }"#).expect("json");
        let reordered: Value =
            serde_json::from_str(r#"{"a":"q","b":[1,{"x":1,"y":2}]}"#).expect("json");
        assert_eq!(
            ToolResultCache::key("s__t", &written, None),
            ToolResultCache::key("s__t", &reordered, None)
        );
        let mut canonical = String::new();
        write_canonical(&written, &mut canonical);
        assert_eq!(canonical, r#"{"a":"q","b":[1,{"x":1,"y":2}]}"#);
    }

    #[test]
    fn tool_arguments_and_user_each_change_the_key() {
        let arguments = json!({"q": "rust"});
        let base = ToolResultCache::key("s__t", &arguments, None);
        assert_ne!(base, ToolResultCache::key("s__u", &arguments, None));
        assert_ne!(base, ToolResultCache::key("r__t", &arguments, None));
        assert_ne!(
            base,
            ToolResultCache::key("s__t", &json!({"q": "rust "}), None)
        );
        assert_ne!(
            base,
            ToolResultCache::key("s__t", &arguments, Some("alice"))
        );
        assert_ne!(
            ToolResultCache::key("s__t", &arguments, Some("alice")),
            ToolResultCache::key("s__t", &arguments, Some("bob"))
        );
        // Array order is meaningful.
        assert_ne!(
            ToolResultCache::key("s__t", &json!([1, 2]), None),
            ToolResultCache::key("s__t", &json!([2, 1]), None)
        );
    }
}
