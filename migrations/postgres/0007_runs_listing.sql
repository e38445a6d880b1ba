-- GET /v1/runs lists runs newest first, for everyone (admins) or one user, optionally by status;
-- the keyset cursor compares (created_at, id).
CREATE INDEX runs_created_id ON runs (created_at DESC, id DESC);
CREATE INDEX runs_user_created_id ON runs (user_id, created_at DESC, id DESC);
CREATE INDEX runs_status_created ON runs (status, created_at DESC);
CREATE INDEX runs_conversation ON runs (conversation_id, created_at DESC);
DROP INDEX runs_user_created;
