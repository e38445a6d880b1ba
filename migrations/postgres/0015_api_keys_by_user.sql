-- `GET /v1/keys` lists one user's keys, newest first.
CREATE INDEX api_keys_by_user ON api_keys (user_id, created_at);
