-- A run without a conversation (every stateless chat completion, Messages or Responses call)
-- or without a key (a server without keys) no longer adds a row to these two indexes: each
-- index a run's insert touches is one more page its commit writes. Lookups are by equality
-- (`conversation_id = ?`, `key_id = ?`), which implies the index's condition.
DROP INDEX runs_conversation;
CREATE INDEX runs_conversation ON runs (conversation_id, created_at DESC)
    WHERE conversation_id IS NOT NULL;
DROP INDEX runs_key_created;
CREATE INDEX runs_key_created ON runs (key_id, created_at) WHERE key_id IS NOT NULL;
