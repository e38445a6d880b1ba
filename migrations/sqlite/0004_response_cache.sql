-- The response cache (agent hash + prompt + output format → AgentResult). `last_used_at` orders
-- LRU eviction past cache.maxEntries; `expires_at` is checked on every read.
CREATE TABLE response_cache (
    key          TEXT PRIMARY KEY NOT NULL,
    agent        TEXT NOT NULL,
    value        TEXT NOT NULL,
    created_at   TEXT NOT NULL,
    expires_at   TEXT NOT NULL,
    last_used_at TEXT NOT NULL
);
CREATE INDEX response_cache_expires ON response_cache (expires_at);
CREATE INDEX response_cache_last_used ON response_cache (last_used_at, key);
